#include "weft/common/dir_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

namespace weft {

Status LockDirectory(const std::filesystem::path& dir, const std::string& file, const std::string& program,
                     const std::string& what) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::Unavailable("cannot create " + what + " " + dir.string() + ": " + ec.message());
  const std::filesystem::path path = dir / file;
  // Deliberately never closed: the lock lives as long as the process.
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Status::Unavailable("cannot open " + path.string() + ": " + std::strerror(errno) +
                               "; check the permissions of " + dir.string());
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char buf[32] = {};
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    std::string pid = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    close(fd);
    return Status::Conflict("another " + program + " (pid " + (pid.empty() ? "unknown" : pid) +
                            ") is already using " + what + " " + dir.string());
  }
  // A failed write loses only the pid in another process's refusal: the lock holds.
  const std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(fd, 0) == 0) (void)!pwrite(fd, pid.data(), pid.size(), 0);
  return Status::Ok();
}

}  // namespace weft

#include "weft/common/file_trust.hpp"

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

namespace weft {
namespace {

std::string UserName(uid_t uid) {
  struct passwd pw {};
  struct passwd* found = nullptr;
  char buf[1024];
  const std::string id = "uid " + std::to_string(uid);
  if (getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found) return std::string(found->pw_name) + " (" + id + ")";
  return id;
}

std::string GroupName(gid_t gid) {
  struct group gr {};
  struct group* found = nullptr;
  char buf[1024];
  const std::string id = "gid " + std::to_string(gid);
  if (getgrgid_r(gid, &gr, buf, sizeof buf, &found) == 0 && found) return std::string(found->gr_name) + " (" + id + ")";
  return id;
}

// What lets someone else change `path` itself (not what it links to), or "".
std::string ComponentProblem(const std::filesystem::path& path) {
  struct stat st {};
  const std::string name = path.string();
  if (lstat(path.c_str(), &st) != 0) return "cannot check " + name + ": " + std::strerror(errno);
  if (st.st_uid != 0 && st.st_uid != geteuid())
    return name + " is owned by " + UserName(st.st_uid) + "; chown root " + name + " once you have checked it";
  if (S_ISLNK(st.st_mode)) return "";  // a link's own mode means nothing: its directory says who may replace it
  if (S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX)) return "";
  if (st.st_mode & S_IWOTH) return name + " is writable by every user; chmod o-w " + name;
  if ((st.st_mode & S_IWGRP) && st.st_gid != 0)
    return name + " is writable by group " + GroupName(st.st_gid) + "; chmod g-w " + name;
  return "";
}

// The first problem of `path` or of a directory above it.
std::string ChainProblem(const std::filesystem::path& path) {
  for (std::filesystem::path p = path;; p = p.parent_path()) {
    if (std::string problem = ComponentProblem(p); !problem.empty()) return problem;
    if (p.parent_path() == p) return "";
  }
}

}  // namespace

std::string OthersMayChange(const std::filesystem::path& path) {
  std::error_code ec;
  const std::filesystem::path given = std::filesystem::absolute(path, ec).lexically_normal();
  if (ec) return "cannot resolve " + path.string() + ": " + ec.message();
  if (std::string problem = ChainProblem(given); !problem.empty()) return problem;
  const std::filesystem::path real = std::filesystem::canonical(given, ec);
  if (ec) return "cannot resolve " + given.string() + ": " + ec.message();
  return real == given ? "" : ChainProblem(real);
}

}  // namespace weft

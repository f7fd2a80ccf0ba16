#include "bench_util.hpp"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <nlohmann/json.hpp>

namespace weft::bench {

bool ParseInt(const std::string& text, int min, int max, int* out) {
  int v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < min || v > max) return false;
  *out = v;
  return true;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double MsSince(SteadyClock::time_point t) {
  return std::chrono::duration<double, std::milli>(SteadyClock::now() - t).count();
}

std::string Tail(const fs::path& path, std::size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  return s.size() > max_bytes ? s.substr(s.size() - max_bytes) : s;
}

std::vector<pid_t> Children(pid_t pid) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream children(entry.path() / "children");
    pid_t child = 0;
    while (children >> child) out.push_back(child);
  }
  return out;
}

std::int64_t TreeCpuNs(pid_t pid) {
  std::int64_t total = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream stat(entry.path() / "schedstat");
    std::int64_t run_ns = 0;
    if (stat >> run_ns) total += run_ns;
  }
  for (pid_t child : Children(pid)) total += TreeCpuNs(child);
  return total;
}

ScratchDir::ScratchDir(const std::string& prefix, bool keep) : keep_(keep) {
  std::string tmpl = (fs::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("cannot create a temporary directory");
  path_ = tmpl;
}

ScratchDir::~ScratchDir() {
  if (keep_) {
    std::fprintf(stderr, "weft-bench: kept %s\n", path_.c_str());
    return;
  }
  std::error_code ec;
  fs::remove_all(path_, ec);
}

Status Child::Start(const fs::path& binary, const std::vector<std::string>& args, const fs::path& log) {
  log_ = log;
  std::vector<std::string> strings = {binary.string()};
  strings.insert(strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Internal("cannot create " + log.string());
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ < 0) {
    close(fd);
    return Status::Internal("fork failed");
  }
  if (pid_ == 0) {
    // Only async-signal-safe calls between fork and exec.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    int null_in = open("/dev/null", O_RDONLY);
    dup2(null_in, 0);
    dup2(fd, 1);
    dup2(fd, 2);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fd);
  return Status::Ok();
}

bool Child::Running() {
  if (pid_ <= 0) return false;
  int st = 0;
  if (waitpid(pid_, &st, WNOHANG) == pid_) {
    pid_ = -1;
    return false;
  }
  return true;
}

void Child::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  auto deadline = SteadyClock::now() + std::chrono::seconds(15);
  int st = 0;
  while (waitpid(pid_, &st, WNOHANG) == 0) {
    if (SteadyClock::now() > deadline) {
      std::fprintf(stderr, "weft-bench: pid %d did not stop within 15 s of SIGTERM; killing it\n", pid_);
      kill(pid_, SIGKILL);
      waitpid(pid_, &st, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  pid_ = -1;
}

Result<WeftdEndpoints> StartWeftd(Child& weftd, const fs::path& binary, const fs::path& dir,
                                  const std::string& server_extra) {
  const fs::path data = dir / "data";
  std::error_code ec;
  fs::create_directories(data, ec);
  if (ec) return Status::Internal("cannot create " + data.string() + ": " + ec.message());
  const fs::path config = dir / "weftd.toml";
  {
    std::ofstream out(config);
    out << "[server]\n"
        << "data_dir = " << nlohmann::json(data.string()).dump() << "\n"
        << "log_level = \"warn\"\n"
        << server_extra << "[endpoints]\n"
        << "api = \"tcp://127.0.0.1:*\"\n"
        << "provisioner = \"tcp://127.0.0.1:*\"\n"
        << "events = \"tcp://127.0.0.1:*\"\n"
        << "[security]\ncurve = false\n";
    if (!out) return Status::Internal("cannot write " + config.string());
  }
  WEFT_RETURN_IF_ERROR(weftd.Start(binary, {"--config", config.string()}, dir / "weftd.log"));
  const fs::path file = data / "endpoints.json";
  const auto deadline = SteadyClock::now() + std::chrono::seconds(15);
  while (SteadyClock::now() < deadline) {
    if (!weftd.Running()) return Status::Internal("weftd exited during start-up; its log ends:\n" + Tail(weftd.log()));
    std::ifstream in(file);
    nlohmann::json j = in ? nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false) : nlohmann::json();
    if (j.is_object() && j.value("pid", 0) == weftd.pid() && j.value("api", "") != "" &&
        j.value("provisioner", "") != "")
      return WeftdEndpoints{j["api"].get<std::string>(), j["provisioner"].get<std::string>(),
                            j.value("events", "")};
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Status::Timeout("weftd did not write " + file.string() + " within 15 s; its log ends:\n" + Tail(weftd.log()));
}

Result<Paths> FindPaths() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return Status::Internal("cannot read /proc/self/exe");
  fs::path bin = self.parent_path();
  fs::path build = bin.parent_path();
  Paths p{bin / "weftd", bin / "weft-host", build / "plugins" / "providers" / "fake_provider.so",
          build / "plugins" / "automators" / "fake_automator.so"};
  for (const auto& [path, target] : {std::pair{p.weftd, "weftd"}, std::pair{p.host, "weft-host"},
                                     std::pair{p.provider_so, "fake_provider"},
                                     std::pair{p.automator_so, "fake_automator"}}) {
    if (!fs::exists(path))
      return Status::NotFound(path.string() + " not found; build the " + std::string(target) + " target first");
  }
  return p;
}

}  // namespace weft::bench

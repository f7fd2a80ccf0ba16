#include "support/process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <stdexcept>
#include <thread>

#include "support/temp_dir.hpp"

extern char** environ;

namespace weft::testing {
namespace {

int OpenOut(const std::filesystem::path& p) {
  if (p.empty()) return open("/dev/null", O_WRONLY | O_CLOEXEC);
  return open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
}

}  // namespace

Process::Process(const std::filesystem::path& program, const std::vector<std::string>& args,
                 ProcessOptions options)
    : options_(std::move(options)) {
  std::vector<std::string> argv_s{program.string()};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s;
  for (char** e = environ; *e; ++e) env_s.emplace_back(*e);
  env_s.insert(env_s.end(), options_.env.begin(), options_.env.end());
  std::vector<char*> envp;
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);

  const bool one_file = !options_.stdout_path.empty() && options_.stdout_path == options_.stderr_path;
  int out = OpenOut(options_.stdout_path);
  int err = one_file ? fcntl(out, F_DUPFD_CLOEXEC, 0) : OpenOut(options_.stderr_path);
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    // Only async-signal-safe calls between fork and exec.
    if (options_.die_with_parent) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
    }
    if (options_.own_process_group) setpgid(0, 0);
    int in = open("/dev/null", O_RDONLY);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    if (!options_.cwd.empty() && chdir(options_.cwd.c_str()) != 0) _exit(126);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  close(out);
  close(err);
}

Process::~Process() {
  if (pid_ > 0 && !status_) {
    kill(pid_, SIGKILL);
    int st = 0;
    waitpid(pid_, &st, 0);
  }
}

Process::Process(Process&& other) noexcept { *this = std::move(other); }

Process& Process::operator=(Process&& other) noexcept {
  if (this != &other) {
    if (pid_ > 0 && !status_) {
      kill(pid_, SIGKILL);
      int st = 0;
      waitpid(pid_, &st, 0);
    }
    pid_ = other.pid_;
    status_ = other.status_;
    options_ = std::move(other.options_);
    other.pid_ = -1;
    other.status_.reset();
  }
  return *this;
}

bool Process::running() {
  if (pid_ <= 0 || status_) return false;
  int st = 0;
  pid_t r = waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    status_ = st;
    return false;
  }
  return true;
}

void Process::Signal(int sig) {
  if (running()) kill(options_.own_process_group ? -pid_ : pid_, sig);
}

std::optional<int> Process::Wait(std::chrono::milliseconds timeout) {
  if (status_) return status_;
  if (pid_ <= 0) return std::nullopt;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int st = 0;
    pid_t r = waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      status_ = st;
      return status_;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

int Process::Stop(std::chrono::milliseconds grace) {
  if (status_) return *status_;
  Signal(SIGTERM);
  auto st = Wait(grace);
  if (st) return *st;
  Signal(SIGKILL);
  return Wait(std::chrono::seconds(10)).value_or(-1);
}

std::string Process::Output() const {
  std::string s;
  if (!options_.stdout_path.empty() && options_.stdout_path == options_.stderr_path)
    return ReadFile(options_.stdout_path);
  if (!options_.stdout_path.empty()) s += "--- stdout ---\n" + ReadFile(options_.stdout_path);
  if (!options_.stderr_path.empty()) s += "--- stderr ---\n" + ReadFile(options_.stderr_path);
  return s;
}

RunResult Run(const std::filesystem::path& program, const std::vector<std::string>& args,
              std::chrono::milliseconds timeout) {
  TempDir dir("weft-run");
  ProcessOptions o;
  o.stdout_path = dir / "out";
  o.stderr_path = dir / "err";
  Process p(program, args, o);
  RunResult r;
  auto st = p.Wait(timeout);
  if (!st) {
    p.Signal(SIGKILL);
    p.Wait(std::chrono::seconds(5));
  } else if (WIFEXITED(*st)) {
    r.exit_code = WEXITSTATUS(*st);
  }
  r.out = ReadFile(dir / "out");
  r.err = ReadFile(dir / "err");
  return r;
}

bool WaitFor(const std::function<bool()>& ready, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (ready()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace weft::testing

// weft-bench fanout: one command on N real nodes, through a Weft job and through
// Ansible ad-hoc, on the same nodes in the same run.
//
// Setup (not measured): a real weftd and weft-host (found next to weft-bench,
// plugins in <build>/plugins/{providers,automators}), a catalog whose one service
// runs the command with the `shell` automator at START, and an N-node cluster of
// the `local` provider (a real sshd per node on 127.0.x.y). The plan of
// `cluster.start` for that service is checked to be exactly one START per node.
//
// Weft: the clock runs from sending `cluster.start` until weftd publishes that the
// job ended (an `events` SUB, with job.get as a fallback). Every task must have
// succeeded with the node's own address in its stdout; tasks that needed a retry
// are counted (`retries`) and their failed attempts printed. The phases of each
// task come from its progress reports (see WeftRun).
//
// Ansible: `ansible all -i INV -m shell -a CMD -f N` from the Debian package,
// against the same addresses, ports, user and private keys (read from the local
// provider's node directories, since cluster.get redacts keys), with the nodes'
// host keys pinned in a known_hosts file and StrictHostKeyChecking=yes. Every host
// must report rc=0 with its own address in the output. Without `ansible` on PATH
// the comparison is skipped and the summary says so.
//
// Both sides run R times, alternating (ABBA order), after W warm-up rounds that
// are not counted. --connections says what a timed run may reuse:
//  * cold (default), as for an occasional ad-hoc command: weft-host is restarted
//    before each Weft run, so its workers' SSH session pools are empty (as after
//    a quiet minute: the pool's idle timeout is 60 s), and each Ansible run gets a
//    ControlPath directory of its own (its ControlPersist masters are ended after
//    the run, outside the clock);
//  * warm: each timed run follows an untimed run of the same side and reuses its
//    pooled sessions / ControlPersist masters.
// One JSON line per timed run and a summary line with medians and the ratio go
// to stdout; progress to stderr. Besides wall time the lines carry CPU time:
// Weft's (weftd + weft-host), Ansible's (it and its reaped descendants), and the
// nodes' (each node sshd and everything below it: the nodes share this machine's
// cores, so on a small machine their work is what a fan-out waits for). The
// cluster is deleted at the end and the bench checks that no node sshd (or
// Ansible ssh master) is left.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "bench.hpp"
#include "bench_util.hpp"
#include "weft/localnode/local_node.hpp"
#include "weft/client/client.hpp"
#include "weft/common/status.hpp"
#include "weft/common/wire.hpp"

extern char** environ;

namespace weft::bench {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ojson = nlohmann::ordered_json;
using SteadyClock = std::chrono::steady_clock;

constexpr double kTargetRatio = 0.5;
constexpr const char* kClusterName = "fanout";
constexpr const char* kService = "fanout";
constexpr const char* kTenant = "default";  // weftd's tenant for requests that name none
constexpr auto kSetupDeadline = std::chrono::seconds(600);
constexpr auto kRunDeadline = std::chrono::seconds(300);
constexpr auto kHostTakeWait = std::chrono::milliseconds(5000);  // weft-host's take_wait_ms (its default)
// Prints the node's side of $SSH_CONNECTION ("... <address> <port>"), which both
// sides check, so a command that ran on the wrong node (or not at all) is caught.
constexpr const char* kDefaultCommand = "echo \"fanout $SSH_CONNECTION\"; sleep 0.2; uptime";

std::atomic<bool> g_interrupted{false};

void OnInterrupt(int) { g_interrupted = true; }

struct Options {
  int nodes = 50;
  int runs = 5;
  int warmup = 1;
  int capacity = 0;  // 0: one runner thread per node
  int workers = 2;
  int port = 2200;
  bool ansible_pipelining = false;
  bool warm = false;  // --connections warm: each timed run right after an untimed one of the same side
  std::string command = kDefaultCommand;
};

int Usage(const std::string& problem) {
  std::fprintf(stderr,
               "weft-bench fanout: %s\n"
               "usage: weft-bench fanout [--nodes N] [--runs R] [--warmup W] [--capacity C] [--workers K]\n"
               "                         [--port P] [--command CMD] [--connections cold|warm] [--ansible-pipelining]\n"
               "  --nodes N     local nodes (a real sshd each), 1 to 1000 (default 50)\n"
               "  --runs R      timed runs of each side, alternating; medians are reported (default 5)\n"
               "  --warmup W    untimed rounds of each side first (default 1)\n"
               "  --capacity C  weft-host capacity, tasks at once (default N)\n"
               "  --workers K   weft-host worker processes (default 2)\n"
               "  --port P      sshd port of every node (default 2200)\n"
               "  --command CMD the command both sides run (default: %s)\n"
               "  --connections cold: every timed run opens its SSH connections anew (weft-host restarted, so\n"
               "                its session pool is empty; Ansible with a fresh ControlPath directory) (default)\n"
               "                warm: every timed run follows an untimed run of the same side, whose pooled\n"
               "                sessions / ControlPersist masters it reuses\n"
               "  --ansible-pipelining  turn on Ansible's SSH pipelining (off in Debian's default config)\n"
               "Needs root (local nodes) and Ansible (`apt-get install ansible`) for the comparison.\n",
               problem.c_str(), kDefaultCommand);
  return 2;
}

double Seconds(SteadyClock::duration d) { return std::chrono::duration<double>(d).count(); }
double Round3(double v) { return std::round(v * 1000) / 1000; }

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Status WriteText(const fs::path& path, const std::string& text, mode_t mode = 0644) {
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out) return Status::Internal("cannot write " + path.string());
  }
  if (chmod(path.c_str(), mode) != 0) return Status::Internal("cannot chmod " + path.string());
  return Status::Ok();
}

// Single quotes for the shell and for Ansible's INI inventory values.
std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

// The first executable named `name` on PATH, or empty.
fs::path FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    fs::path candidate = fs::path(dir) / name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

// Ansible: a child process in a process group of its own (so a terminal's Ctrl-C reaches
// only weft-bench, which then cleans up in order), stdin from /dev/null, stdout
// and stderr into a log file, its resource use read when it ends (weftd and
// weft-host are started by tests/support). Stopped with SIGTERM to the group (SIGKILL after
// the grace) when destroyed.
class GroupChild {
 public:
  GroupChild() = default;
  ~GroupChild() { Stop(std::chrono::seconds(10)); }
  GroupChild(const GroupChild&) = delete;
  GroupChild& operator=(const GroupChild&) = delete;

  Status Start(const std::vector<std::string>& argv, const fs::path& log, const std::vector<std::string>& extra_env) {
    std::vector<std::string> env_strings;
    std::set<std::string> overridden;
    for (const std::string& e : extra_env) overridden.insert(e.substr(0, e.find('=')));
    for (char** e = environ; *e != nullptr; ++e) {
      std::string entry = *e;
      if (!overridden.count(entry.substr(0, entry.find('=')))) env_strings.push_back(std::move(entry));
    }
    env_strings.insert(env_strings.end(), extra_env.begin(), extra_env.end());
    std::vector<char*> envp;
    for (std::string& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<std::string> args = argv;
    std::vector<char*> argp;
    for (std::string& a : args) argp.push_back(a.data());
    argp.push_back(nullptr);

    posix_spawn_file_actions_t files;
    posix_spawnattr_t attr;
    if (posix_spawn_file_actions_init(&files) != 0) return Status::Internal("posix_spawn_file_actions_init failed");
    if (posix_spawnattr_init(&attr) != 0) {
      posix_spawn_file_actions_destroy(&files);
      return Status::Internal("posix_spawnattr_init failed");
    }
    int rc = posix_spawn_file_actions_addopen(&files, 0, "/dev/null", O_RDONLY, 0);
    if (rc == 0) rc = posix_spawn_file_actions_addopen(&files, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (rc == 0) rc = posix_spawn_file_actions_adddup2(&files, 1, 2);
    if (rc == 0) rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    if (rc == 0) rc = posix_spawnattr_setpgroup(&attr, 0);
    if (rc == 0) rc = posix_spawn(&pid_, argp[0], &files, &attr, argp.data(), envp.data());
    posix_spawn_file_actions_destroy(&files);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
      pid_ = -1;
      return Status::Internal("cannot start " + argv[0] + ": " + std::strerror(rc));
    }
    return Status::Ok();
  }

  // The exit status (as waitpid reports it) once the process ended, with the
  // resources it and its reaped descendants used; nullopt while it runs.
  std::optional<int> Poll(rusage* usage = nullptr) {
    if (pid_ <= 0) return exit_status_;
    int st = 0;
    rusage ru{};
    pid_t r = wait4(pid_, &st, WNOHANG, &ru);
    if (r != pid_) return std::nullopt;
    pid_ = -1;
    exit_status_ = st;
    if (usage) *usage = ru;
    return st;
  }

  void Stop(std::chrono::milliseconds grace) {
    if (pid_ <= 0) return;
    const pid_t group = pid_;
    kill(-group, SIGTERM);
    const auto deadline = SteadyClock::now() + grace;
    while (!Poll()) {
      if (SteadyClock::now() > deadline) {
        kill(-group, SIGKILL);
        int st = 0;
        waitpid(pid_, &st, 0);
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  std::optional<int> exit_status_;
};

std::string DescribeExit(int st) {
  if (WIFEXITED(st)) return "exited with status " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) return std::string("was killed by ") + strsignal(WTERMSIG(st));
  return "ended";
}

// /proc/<pid>/stat fields we need: parent pid and CPU time (user + system, in ns).
struct ProcStat {
  pid_t ppid = 0;
  std::int64_t cpu_ns = 0;           // the process itself
  std::int64_t children_cpu_ns = 0;  // its children that ended and were waited for
};

std::optional<ProcStat> ReadProcStat(pid_t pid) {
  std::string s = ReadAll("/proc/" + std::to_string(pid) + "/stat");
  std::size_t close = s.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos) return std::nullopt;
  std::istringstream in(s.substr(close + 2));
  std::string state;
  long long ppid = 0, skip = 0, utime = 0, stime = 0, cutime = 0, cstime = 0;
  in >> state >> ppid;
  for (int i = 0; i < 9; ++i) in >> skip;  // pgrp .. cmajflt
  in >> utime >> stime >> cutime >> cstime;
  if (!in) return std::nullopt;
  const long long ns_per_tick = 1'000'000'000LL / sysconf(_SC_CLK_TCK);
  ProcStat ps;
  ps.ppid = static_cast<pid_t>(ppid);
  ps.cpu_ns = (utime + stime) * ns_per_tick;
  ps.children_cpu_ns = (cutime + cstime) * ns_per_tick;
  return ps;
}

std::vector<pid_t> AllPids() {
  std::vector<pid_t> pids;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    pid_t pid = 0;
    auto [end, err] = std::from_chars(name.data(), name.data() + name.size(), pid);
    if (err == std::errc() && end == name.data() + name.size()) pids.push_back(pid);
  }
  return pids;
}

bool IsSshd(pid_t pid) {
  std::error_code ec;
  return fs::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec) == localnode::kSshd;
}

// CPU time of the processes rooted at `roots` and their descendants, leaving out
// the nodes' sshd and everything under them: the node side is the same work for
// Weft and Ansible, and the local provider starts the sshd as children of a worker.
std::int64_t TreeCpuNs(const std::vector<pid_t>& roots) {
  std::map<pid_t, ProcStat> stats;
  for (pid_t pid : AllPids()) {
    if (auto st = ReadProcStat(pid)) stats[pid] = *st;
  }
  std::set<pid_t> in_tree(roots.begin(), roots.end());
  bool grew = true;
  while (grew) {
    grew = false;
    for (const auto& [pid, st] : stats) {
      if (!in_tree.count(pid) && in_tree.count(st.ppid) && !IsSshd(pid)) {
        in_tree.insert(pid);
        grew = true;
      }
    }
  }
  std::int64_t total = 0;
  for (pid_t pid : in_tree) {
    if (auto it = stats.find(pid); it != stats.end()) total += it->second.cpu_ns;
  }
  return total;
}

// CPU time spent on the nodes: the listening sshd of each node and everything
// below it, living (sessions, shells, commands) or ended and waited for. Both
// sides' commands run there, so this is the work a fan-out makes the nodes do.
std::int64_t NodesCpuNs(const std::vector<pid_t>& sshd) {
  std::map<pid_t, ProcStat> stats;
  for (pid_t pid : AllPids()) {
    if (auto st = ReadProcStat(pid)) stats[pid] = *st;
  }
  std::set<pid_t> in_tree(sshd.begin(), sshd.end());
  bool grew = true;
  while (grew) {
    grew = false;
    for (const auto& [pid, st] : stats) {
      if (!in_tree.count(pid) && in_tree.count(st.ppid)) {
        in_tree.insert(pid);
        grew = true;
      }
    }
  }
  std::int64_t total = 0;
  for (pid_t pid : in_tree) {
    if (auto it = stats.find(pid); it != stats.end()) total += it->second.cpu_ns + it->second.children_cpu_ns;
  }
  return total;
}

// Processes whose command line mentions `needle` (our scratch directory): node
// sshd started under it and Ansible's ssh control masters whose sockets are in it.
std::vector<pid_t> ProcessesMentioning(const std::string& needle) {
  std::vector<pid_t> found;
  const pid_t self = getpid();
  for (pid_t pid : AllPids()) {
    if (pid == self) continue;
    std::string cmdline = ReadAll("/proc/" + std::to_string(pid) + "/cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(needle) != std::string::npos) found.push_back(pid);
  }
  return found;
}

std::string CmdlineOf(pid_t pid) {
  std::string cmdline = ReadAll("/proc/" + std::to_string(pid) + "/cmdline");
  std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
  return cmdline;
}

double LoadAverage() {
  std::ifstream in("/proc/loadavg");
  double one = 0;
  in >> one;
  return one;
}

// ---------------------------------------------------------------------------
// Weft: weftd, weft-host, the catalog and the cluster.

// weftd as this bench runs it (tests/support starts it): bench_util's, in a
// process group of its own.
testing::WeftdOptions FanoutWeftd(const fs::path& bin_dir, const fs::path& dir) {
  testing::WeftdOptions o = BenchWeftd(bin_dir / "weftd", dir);
  o.die_with_parent = false;
  o.own_process_group = true;
  o.start_timeout = std::chrono::seconds(30);
  return o;
}

// weft-host with the local provider and the shell automator of the build, in a
// process group of its own; started by the caller.
Result<testing::HostOptions> FanoutHost(const fs::path& bin_dir, const fs::path& dir, const std::string& provisioner,
                                        const Options& opts) {
  const fs::path plugins = bin_dir.parent_path() / "plugins";
  for (const char* kind :
       {"providers/local_provider.so", "automators/shell_automator.so", "automators/fake_automator.so"}) {
    if (!fs::exists(plugins / kind)) {
      return Status::NotFound((plugins / kind).string() + " not found; build the local_provider, "
                                                          "shell_automator and fake_automator targets first");
    }
  }
  testing::HostOptions o;
  o.dir = dir;
  o.id = "fanout-host";
  o.server = provisioner;
  o.capacity = opts.capacity;
  o.workers = opts.workers;
  o.take_wait_ms = static_cast<int>(kHostTakeWait.count());
  o.request_timeout_ms = 0;  // weft-host's default
  o.plugin_dirs = {plugins / "providers", plugins / "automators"};
  o.extra_toml = "log_level = \"warn\"\n";
  o.start = false;
  o.own_process_group = true;
  o.binary = bin_dir / "weft-host";
  return o;
}

// The catalog: a local provider whose nodes live under `state_dir`, and a
// template whose only service runs the command at START.
Status PutCatalog(client::Client& api, const fs::path& state_dir, const Options& opts) {
  const json provider = {{"name", "fanout-local"},
                         {"description", "weft-bench fanout: real sshd nodes on this machine"},
                         {"providertype", "local"},
                         {"provisioner", {{"state_dir", state_dir.string()}, {"ssh_port", opts.port}, {"user", "root"}}}};
  const json hardware = {{"name", "fanout-hw"},
                         {"description", "this machine"},
                         {"providermap", {{"fanout-local", {{"flavor", "loopback"}}}}}};
  const json image = {{"name", "fanout-img"},
                      {"description", "this machine's system"},
                      {"providermap", {{"fanout-local", {{"image", "host"}, {"sshuser", "root"}}}}}};
  // INSTALL is a no-op of fake-automator only so that the create job's BOOTSTRAP
  // (run by the automator of the node's first service action: install, then
  // configure, initialize, start) does not go to `shell`, which fails a BOOTSTRAP
  // that has no command or script of its own. Only START is measured.
  const json service = {
      {"name", kService},
      {"description", "weft-bench fanout: runs the benchmark command at START"},
      {"dependencies", json::object()},
      {"provisioner",
       {{"actions",
         {{"install", {{"type", "fake-automator"}, {"fields", json::object()}}},
          {"start", {{"type", "shell"}, {"fields", {{"command", opts.command}, {"timeout_ms", 120000}}}}}}}}}};
  const json tmpl = {
      {"name", "fanout"},
      {"description", "weft-bench fanout: N nodes, one service"},
      {"compatibility",
       {{"hardwaretypes", json::array({"fanout-hw"})},
        {"imagetypes", json::array({"fanout-img"})},
        {"services", json::array({kService})}}},
      {"defaults",
       {{"services", json::array({kService})},
        {"provider", "fanout-local"},
        {"hardwaretype", "fanout-hw"},
        {"imagetype", "fanout-img"},
        {"dnsSuffix", "fanout.weft"}}},
      {"constraints", {{"size", {{"min", 1}, {"max", 1000}}}}}};
  for (const auto& [op, doc] : std::vector<std::pair<const char*, json>>{{"provider.put", provider},
                                                                         {"hardwaretype.put", hardware},
                                                                         {"imagetype.put", image},
                                                                         {"service.put", service},
                                                                         {"clustertemplate.put", tmpl}}) {
    Result<json> r = api.Call(op, doc);
    if (!r.ok()) return r.status().WithContext(op);
  }
  return Status::Ok();
}

// weftd's `events` for one tenant: job status changes and task progress.
// Progress gives the phases of a shell task (5%: started, 20%: work directory
// and config.json written, command starts; 100%: command done), stamped with
// weftd's clock when the report arrived. Owns its SUB socket; one thread.
class EventWatcher {
 public:
  EventWatcher(zmq::context_t& ctx, const std::string& endpoint) : sub_(ctx, zmq::socket_type::sub) {
    sub_.set(zmq::sockopt::linger, 0);
    sub_.set(zmq::sockopt::rcvhwm, 100000);
    sub_.set(zmq::sockopt::subscribe, std::string(kTenant) + "/job/");
    sub_.set(zmq::sockopt::subscribe, std::string(kTenant) + "/task/progress");
    sub_.connect(endpoint);
  }

  // Reads everything that arrived, waiting up to wait_ms for the first message.
  void Pump(int wait_ms) {
    zmq::pollitem_t item{static_cast<void*>(sub_), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(wait_ms));
    wire::Frames frames;
    while (wire::RecvMultipart(sub_, frames, zmq::recv_flags::dontwait)) {
      if (frames.size() < 2) continue;
      json e = json::parse(frames[1].to_string(), nullptr, /*allow_exceptions=*/false);
      if (!e.is_object()) continue;
      const std::string type = e.value("type", "");
      if (type == "job" && Terminal(e.value("status", ""))) {
        ended_[e.value("job_id", "")] = e["status"].get<std::string>();
      } else if (type == "task.progress" && e.contains("task_id") && e.contains("percent")) {
        progress_[IdOf(e["task_id"])][e["percent"].get<int>()] = e.value("at_ms", 0.0);
      }
    }
  }

  std::optional<std::string> Ended(const std::string& job_id) const {
    auto it = ended_.find(job_id);
    return it == ended_.end() ? std::nullopt : std::optional<std::string>(it->second);
  }
  // at_ms by percent, for one task; empty when no report arrived.
  std::map<int, double> ProgressOf(const json& task_id) const {
    auto it = progress_.find(IdOf(task_id));
    return it == progress_.end() ? std::map<int, double>() : it->second;
  }
  void ForgetProgress() { progress_.clear(); }

  static bool Terminal(const std::string& status) {
    return status == "succeeded" || status == "failed" || status == "aborted";
  }

 private:
  static std::string IdOf(const json& id) { return id.is_string() ? id.get<std::string>() : id.dump(); }

  zmq::socket_t sub_;
  std::map<std::string, std::string> ended_;
  std::map<std::string, std::map<int, double>> progress_;
};

bool Terminal(const std::string& status) { return EventWatcher::Terminal(status); }

// Waits for job `id` to end, watching `events` when given (cheap and exact) and
// asking job.get every 250 ms in case an event was dropped. Returns the job's status.
Result<std::string> WaitJob(client::Client& api, EventWatcher* events, const std::string& id,
                            std::chrono::seconds limit) {
  const auto deadline = SteadyClock::now() + limit;
  auto next_get = SteadyClock::now() + std::chrono::milliseconds(250);
  while (true) {
    if (g_interrupted) return Status::Unavailable("interrupted");
    if (events != nullptr) {
      events->Pump(50);
      if (auto status = events->Ended(id)) return *status;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (SteadyClock::now() >= next_get) {
      Result<json> j = api.Call("job.get", {{"job", id}});
      if (!j.ok()) return j.status().WithContext("job.get " + id);
      const std::string status = (*j)["job"].value("status", "");
      if (Terminal(status)) return status;
      next_get = SteadyClock::now() + std::chrono::milliseconds(250);
    }
    if (SteadyClock::now() > deadline) {
      return Status::Timeout("job " + id + " did not end within " + std::to_string(limit.count()) + " s");
    }
  }
}

// A failed job's story: its message and the first few failed tasks.
std::string JobStory(client::Client& api, const std::string& id) {
  Result<json> j = api.Call("job.get", {{"job", id}, {"details", true}});
  if (!j.ok()) return "(job.get failed: " + j.status().message() + ")";
  const json& job = (*j)["job"];
  std::string story = "job " + id + " " + job.value("status", "") + ": " + job.value("message", "");
  int shown = 0;
  for (const json& t : job.value("tasks", json::array())) {
    if (t.value("state", "") != "failed" || ++shown > 3) continue;
    story += "\n  " + t.value("key", "") + ": " + t.value("message", "");
  }
  return story;
}

struct NodeInfo {
  std::string hostname;
  std::string address;
  int port = 22;
  std::string user;
  std::vector<std::string> host_keys;
  fs::path dir;  // the local provider's node directory (keys)
  pid_t sshd = 0;
};

// The nodes as Weft reports them (cluster.get), each matched with its node
// directory; the directory's node.json must agree with what Weft reports.
Result<std::vector<NodeInfo>> LoadNodes(client::Client& api, const fs::path& state_dir) {
  Result<json> c = api.Call("cluster.get", {{"cluster", kClusterName}});
  if (!c.ok()) return c.status().WithContext("cluster.get");
  std::vector<NodeInfo> nodes;
  for (const json& n : (*c)["cluster"].value("nodes", json::array())) {
    const json& r = n.value("results", json::object());
    NodeInfo info;
    info.hostname = n.value("hostname", "");
    info.address = r.value("access_v4", "");
    info.port = r.value("ssh_port", 22);
    info.user = r.contains("ssh_auth") ? r["ssh_auth"].value("user", "root") : "root";
    for (const json& k : r.value("host_keys", json::array())) info.host_keys.push_back(k.get<std::string>());
    const std::string provider_id = r.value("provider_id", "");
    if (info.hostname.empty() || info.address.empty() || provider_id.empty() || info.host_keys.empty()) {
      return Status::Internal("cluster.get: node '" + info.hostname +
                              "' lacks access_v4, provider_id or host_keys in its results");
    }
    info.dir = state_dir / provider_id;
    Result<localnode::Node> local = localnode::LoadNode(info.dir);
    if (!local.ok()) return local.status().WithContext("node " + info.hostname);
    if (local->address != info.address || local->port != info.port || local->user != info.user ||
        local->host_keys != info.host_keys) {
      return Status::Internal("node " + info.hostname + ": " + (info.dir / "node.json").string() +
                              " does not match what Weft reports (address, port, user or host keys)");
    }
    info.sshd = local->pid;
    nodes.push_back(std::move(info));
  }
  return nodes;
}

// The node's side of $SSH_CONNECTION as the command prints it.
std::string Marker(const NodeInfo& n) { return " " + n.address + " " + std::to_string(n.port); }

// Does some line of `out` start with "fanout " and end with the node's marker?
bool RanOn(const std::string& out, const NodeInfo& n) {
  const std::string marker = Marker(n);
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    std::size_t at = line.find("fanout ");
    if (at == std::string::npos) continue;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.size() >= marker.size() && line.compare(line.size() - marker.size(), marker.size(), marker) == 0) {
      return true;
    }
  }
  return false;
}

struct WeftRun {
  double seconds = 0;           // request sent → job end seen
  double server_ms = 0;         // the job's finished_at - created_at
  double first_take_ms = 0;     // job created → first task taken
  double take_spread_ms = 0;    // first → last task taken
  double task_median_ms = 0;    // taken → finished, per task
  double task_max_ms = 0;
  double end_lag_ms = 0;        // last task finished → job finished
  double cpu_s = 0;             // weftd + weft-host (without node sshd)
  // The phases of a task, from its progress reports (medians over the tasks that
  // reported both ends; weftd's clock at arrival):
  double startup_ms = 0;        // taken → 5% (task delivered, plugin started)
  double prepare_ms = 0;        // 5% → 20%: SSH session (pooled or new), mkdir, config.json by SCP
  double prepare_max_ms = 0;
  double command_ms = 0;        // 20% → 100%: the command itself, over its own channel
  double command_max_ms = 0;
  double report_ms = 0;         // 100% → finished
  int phases_seen = 0;          // tasks whose four reports all arrived
  int retries = 0;              // tasks that needed more than one attempt
  double node_cpu_s = 0;        // on the nodes (NodesCpuNs)
};

class WeftSide {
 public:
  WeftSide(client::Client& api, EventWatcher& events, const std::vector<NodeInfo>& nodes, testing::Weftd& weftd,
           testing::Host& host)
      : api_(api), events_(events), nodes_(nodes), weftd_(weftd), host_(host) {}

  // The plan of the measured operation: exactly one START of the service per node.
  Status CheckPlan() {
    Result<json> plan = api_.Call("cluster.start", {{"cluster", kClusterName}, {"services", json::array({kService})},
                                                    {"dry_run", true}});
    if (!plan.ok()) return plan.status().WithContext("cluster.start dry_run");
    std::set<std::string> nodes;
    std::size_t count = 0;
    for (const json& t : plan->value("tasks", json::array())) {
      ++count;
      if (t.value("action", "") != "START" || t.value("service", "") != kService) {
        return Status::Internal("the plan of cluster.start has a task other than START of '" +
                                std::string(kService) + "': " + t.dump());
      }
      nodes.insert(t.value("node", ""));
    }
    if (count != nodes_.size() || nodes.size() != nodes_.size()) {
      return Status::Internal("the plan of cluster.start has " + std::to_string(count) + " tasks on " +
                              std::to_string(nodes.size()) + " nodes; expected one per node (" +
                              std::to_string(nodes_.size()) + ")");
    }
    return Status::Ok();
  }

  Result<WeftRun> Run() {
    events_.Pump(0);
    events_.ForgetProgress();
    const std::vector<pid_t> cpu_roots = {weftd_.pid(), host_.process().pid()};
    const std::int64_t cpu_before = TreeCpuNs(cpu_roots);
    const auto start = SteadyClock::now();
    Result<json> reply = api_.Call("cluster.start", {{"cluster", kClusterName}, {"services", json::array({kService})}});
    if (!reply.ok()) return reply.status().WithContext("cluster.start");
    const std::string id = (*reply)["job"].value("id", "");
    Result<std::string> status = WaitJob(api_, &events_, id, kRunDeadline);
    const auto end = SteadyClock::now();
    const std::int64_t cpu_after = TreeCpuNs(cpu_roots);
    if (!status.ok()) return status.status();
    if (*status != "succeeded") return Status::Internal(JobStory(api_, id));

    Result<json> details = api_.Call("job.get", {{"job", id}, {"details", true}});
    if (!details.ok()) return details.status().WithContext("job.get " + id);
    const json& job = (*details)["job"];
    WeftRun run;
    run.seconds = Seconds(end - start);
    run.cpu_s = static_cast<double>(cpu_after - cpu_before) / 1e9;
    const double created = job.value("created_at_ms", 0.0);
    const double finished = job.value("finished_at_ms", 0.0);
    run.server_ms = finished - created;
    std::map<std::string, const NodeInfo*> by_host;
    for (const NodeInfo& n : nodes_) by_host[n.hostname] = &n;
    std::vector<double> taken, done, spans, startup, prepare, command, report;
    for (const json& t : job.value("tasks", json::array())) {
      const std::string node = t.value("node", "");
      auto it = by_host.find(node);
      if (it == by_host.end()) return Status::Internal("job " + id + " ran a task on unknown node '" + node + "'");
      if (t.value("attempt", 0) != 1) {
        // A retry is part of what the job took; count it and say why it happened.
        ++run.retries;
        for (const json& a : t.value("attempts", json::array())) {
          if (a.value("status", "") != "succeeded") {
            std::fprintf(stderr, "fanout: task %s attempt %d: %s\n", t.value("key", "").c_str(), a.value("attempt", 0),
                         a.value("message", "").c_str());
          }
        }
      }
      if (!RanOn(t.value("stdout", ""), *it->second)) {
        return Status::Internal("job " + id + ": task " + t.value("key", "") + " did not print 'fanout ..." +
                                Marker(*it->second) + "'; its stdout: " + t.value("stdout", ""));
      }
      by_host.erase(it);
      const json& attempts = t.value("attempts", json::array());
      if (attempts.empty()) return Status::Internal("job " + id + ": task " + t.value("key", "") + " has no attempt");
      const double a_taken = attempts.back().value("taken_at_ms", 0.0);
      const double a_done = attempts.back().value("finished_at_ms", 0.0);
      taken.push_back(a_taken);
      done.push_back(a_done);
      spans.push_back(a_done - a_taken);
      const std::map<int, double> at = events_.ProgressOf(t["id"]);
      if (at.count(5) && at.count(20) && at.count(100)) {
        startup.push_back(at.at(5) - a_taken);
        prepare.push_back(at.at(20) - at.at(5));
        command.push_back(at.at(100) - at.at(20));
        report.push_back(a_done - at.at(100));
      }
    }
    if (!by_host.empty()) {
      return Status::Internal("job " + id + " ran no task on node " + by_host.begin()->first + " (and " +
                              std::to_string(by_host.size() - 1) + " more)");
    }
    run.first_take_ms = *std::min_element(taken.begin(), taken.end()) - created;
    run.take_spread_ms = *std::max_element(taken.begin(), taken.end()) - *std::min_element(taken.begin(), taken.end());
    run.task_median_ms = Median(spans);
    run.task_max_ms = *std::max_element(spans.begin(), spans.end());
    run.end_lag_ms = finished - *std::max_element(done.begin(), done.end());
    run.phases_seen = static_cast<int>(prepare.size());
    if (!prepare.empty()) {
      run.startup_ms = Median(startup);
      run.prepare_ms = Median(prepare);
      run.prepare_max_ms = *std::max_element(prepare.begin(), prepare.end());
      run.command_ms = Median(command);
      run.command_max_ms = *std::max_element(command.begin(), command.end());
      run.report_ms = Median(report);
    }
    return run;
  }

 private:
  client::Client& api_;
  EventWatcher& events_;
  const std::vector<NodeInfo>& nodes_;
  testing::Weftd& weftd_;
  testing::Host& host_;
};

// ---------------------------------------------------------------------------
// Ansible on the same nodes.

struct AnsibleRun {
  double seconds = 0;
  double cpu_s = 0;       // ansible and every descendant it reaped (forks, ssh clients)
  double node_cpu_s = 0;  // on the nodes (NodesCpuNs)
};

class AnsibleSide {
 public:
  AnsibleSide(fs::path ansible, fs::path dir, const std::vector<NodeInfo>& nodes, const Options& opts)
      : ansible_(std::move(ansible)), dir_(std::move(dir)), nodes_(nodes), opts_(opts) {}

  // The inventory (addresses, ports, users, the nodes' own private key files),
  // known_hosts with every node's host keys, and an ansible.cfg that checks them
  // and keeps Ansible's files in the scratch directory.
  Status Prepare() {
    fs::create_directories(dir_ / "local-tmp");
    std::string known_hosts;
    std::string inventory = "[fanout]\n";
    for (const NodeInfo& n : nodes_) {
      for (const std::string& k : n.host_keys) {
        known_hosts += "[" + n.address + "]:" + std::to_string(n.port) + " " + k + "\n";
      }
      const fs::path key = n.dir / "id_ed25519";
      struct stat st {};
      if (stat(key.c_str(), &st) != 0) return Status::NotFound("node " + n.hostname + ": no key file " + key.string());
      if ((st.st_mode & 077) != 0) {
        return Status::Invalid("node " + n.hostname + ": " + key.string() +
                               " is readable by others; ssh would refuse it");
      }
      inventory += n.hostname + " ansible_host=" + n.address + " ansible_port=" + std::to_string(n.port) +
                   " ansible_user=" + n.user + " ansible_ssh_private_key_file=" + key.string() + "\n";
    }
    inventory += "\n[all:vars]\nansible_ssh_common_args=" +
                 ShellQuote("-o UserKnownHostsFile=" + (dir_ / "known_hosts").string() +
                            " -o GlobalKnownHostsFile=/dev/null -o StrictHostKeyChecking=yes") +
                 "\n";
    WEFT_RETURN_IF_ERROR(WriteText(dir_ / "known_hosts", known_hosts, 0600));
    WEFT_RETURN_IF_ERROR(WriteText(dir_ / "inventory.ini", inventory, 0600));
    std::string cfg = "[defaults]\n"
                      "host_key_checking = True\n"
                      "interpreter_python = /usr/bin/python3\n"
                      "local_tmp = " + (dir_ / "local-tmp").string() + "\n";
    if (opts_.ansible_pipelining) cfg += "[ssh_connection]\npipelining = True\n";
    return WriteText(dir_ / "ansible.cfg", cfg);
  }

  // Run `index` (a log of its own). Cold runs get a ControlPath directory of
  // their own, so no connection of an earlier run is reused; their ssh control
  // masters are ended afterwards, outside the clock. Warm runs share one.
  Result<AnsibleRun> Run(int index) {
    const fs::path log = dir_ / ("run-" + std::to_string(index) + ".log");
    const fs::path control_dir = dir_ / (opts_.warm ? std::string("cp") : "cp-" + std::to_string(index));
    std::error_code ec;
    fs::remove(log, ec);
    fs::create_directories(control_dir);
    struct EndMasters {
      const fs::path& dir;
      bool cold;
      ~EndMasters() {
        if (!cold) return;
        for (pid_t pid : ProcessesMentioning(dir.string())) kill(pid, SIGTERM);
      }
    } end_masters{control_dir, !opts_.warm};
    GroupChild ansible;
    const auto start = SteadyClock::now();
    WEFT_RETURN_IF_ERROR(ansible.Start({ansible_.string(), "all", "-i", (dir_ / "inventory.ini").string(), "-m",
                                        "shell", "-a", opts_.command, "-f", std::to_string(opts_.nodes)},
                                       log,
                                       {"ANSIBLE_CONFIG=" + (dir_ / "ansible.cfg").string(),
                                        "ANSIBLE_SSH_CONTROL_PATH_DIR=" + control_dir.string(), "ANSIBLE_NOCOLOR=1",
                                        "ANSIBLE_FORCE_COLOR=0"}));
    rusage usage{};
    std::optional<int> st;
    const auto deadline = start + kRunDeadline;
    while (!(st = ansible.Poll(&usage))) {
      if (g_interrupted) return Status::Unavailable("interrupted");
      if (SteadyClock::now() > deadline) {
        ansible.Stop(std::chrono::seconds(5));
        return Status::Timeout("ansible did not finish within " + std::to_string(kRunDeadline.count()) +
                               " s; its output ends:\n" + Tail(log));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    const auto end = SteadyClock::now();
    const std::string out = ReadAll(log);
    if (!WIFEXITED(*st) || WEXITSTATUS(*st) != 0) {
      return Status::Internal("ansible " + DescribeExit(*st) + "; its output ends:\n" + Tail(log));
    }
    // Each host's block: a line "<host> | CHANGED | rc=0 >>", then the command's output.
    std::map<std::string, std::string> blocks;
    {
      std::istringstream lines(out);
      std::string line;
      std::string* block = nullptr;
      const std::string ok = " | CHANGED | rc=0 >>";
      while (std::getline(lines, line)) {
        if (line.size() > ok.size() && line.compare(line.size() - ok.size(), ok.size(), ok) == 0) {
          block = &blocks[line.substr(0, line.size() - ok.size())];
          continue;
        }
        if (block) *block += line + "\n";
      }
    }
    for (const NodeInfo& n : nodes_) {
      auto b = blocks.find(n.hostname);
      if (b == blocks.end()) {
        return Status::Internal("ansible printed no '" + n.hostname + " | CHANGED | rc=0 >>'; its output ends:\n" +
                                Tail(log));
      }
      if (!RanOn(b->second, n)) {
        return Status::Internal("ansible's output for " + n.hostname + " lacks 'fanout ..." + Marker(n) +
                                "': " + b->second);
      }
    }
    AnsibleRun run;
    run.seconds = Seconds(end - start);
    run.cpu_s = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
    return run;
  }

 private:
  fs::path ansible_;
  fs::path dir_;
  const std::vector<NodeInfo>& nodes_;
  const Options& opts_;
};

std::string AnsibleVersion(const fs::path& ansible) {
  fs::path scratch = fs::temp_directory_path() / ("weft-fanout-version-" + std::to_string(getpid()));
  GroupChild c;
  if (!c.Start({ansible.string(), "--version"}, scratch, {}).ok()) return "unknown";
  const auto deadline = SteadyClock::now() + std::chrono::seconds(60);
  while (!c.Poll() && SteadyClock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  c.Stop(std::chrono::seconds(1));
  std::string first;
  std::ifstream in(scratch);
  std::getline(in, first);
  std::error_code ec;
  fs::remove(scratch, ec);
  return first.empty() ? "unknown" : first;
}

// ---------------------------------------------------------------------------

// Everything the bench set up, torn down in order when it goes out of scope:
// the cluster (through Weft), then any node Weft left behind (directly), then
// weft-host and weftd.
class Teardown {
 public:
  Teardown(std::optional<client::Client>& api, const fs::path& state_dir, const fs::path& scratch,
           std::optional<testing::Host>& host, testing::Weftd& weftd)
      : api_(api), state_dir_(state_dir), scratch_(scratch), host_(host), weftd_(weftd) {}
  ~Teardown() { Run(); }
  Teardown(const Teardown&) = delete;
  Teardown& operator=(const Teardown&) = delete;

  void set_cluster_created() { cluster_created_ = true; }
  void remember_sshd(pid_t pid) { sshd_.push_back(pid); }

  // Deletes the cluster through Weft, after the job it may still run (the undo
  // of a failed create) has ended.
  void DeleteCluster() {
    const bool was_interrupted = g_interrupted.exchange(false);
    std::fprintf(stderr, "fanout: deleting the cluster\n");
    Result<json> c = api_->Call("cluster.get", {{"cluster", kClusterName}});
    if (c.ok()) {
      const json& cluster = (*c)["cluster"];
      const json& jobs = cluster.value("jobs", json::array());
      if (!jobs.empty() && !Terminal(jobs[0].value("status", ""))) {
        Result<std::string> st = WaitJob(*api_, nullptr, jobs[0].value("id", ""), kRunDeadline);
        if (!st.ok()) std::fprintf(stderr, "fanout: %s\n", st.status().message().c_str());
        c = api_->Call("cluster.get", {{"cluster", kClusterName}});
      }
    }
    // NOT_FOUND: the name is free again, so the cluster was terminated (an undone create).
    if ((!c.ok() && c.status().code() == Code::kNotFound) ||
        (c.ok() && (*c)["cluster"].value("status", "") == "terminated")) {
      g_interrupted = was_interrupted;
      return;
    }
    Result<json> del = api_->Call("cluster.delete", {{"cluster", kClusterName}});
    if (!del.ok()) {
      std::fprintf(stderr, "fanout: cluster.delete failed: %s\n", del.status().message().c_str());
    } else {
      const std::string id = (*del)["job"].value("id", "");
      Result<std::string> st = WaitJob(*api_, nullptr, id, kRunDeadline);
      if (!st.ok() || *st != "succeeded") {
        std::fprintf(stderr, "fanout: the delete job did not succeed: %s\n",
                     st.ok() ? JobStory(*api_, id).c_str() : st.status().message().c_str());
      }
    }
    g_interrupted = was_interrupted;
  }

  // True when nothing was left behind.
  bool Run() {
    if (done_) return clean_;
    done_ = true;
    if (cluster_created_ && api_) DeleteCluster();
    if (host_) host_->Stop(std::chrono::seconds(20));
    weftd_.Stop(std::chrono::seconds(10));
    // Whatever the provider left: stop it directly (processes, directory, address claim).
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(state_dir_, ec)) {
      std::fprintf(stderr, "fanout: LEFTOVER node directory %s; stopping it directly\n", e.path().c_str());
      clean_ = false;
      Status st = localnode::StopNode(e.path());
      if (!st.ok()) std::fprintf(stderr, "fanout: %s\n", st.message().c_str());
    }
    for (pid_t pid : sshd_) {
      if (localnode::ProcessAlive(pid) && IsSshd(pid)) {
        std::fprintf(stderr, "fanout: LEFTOVER sshd %d still runs after its node was deleted\n", pid);
        clean_ = false;
      }
    }
    // Ansible's ssh control masters exit when their node's sshd closes the
    // connection; give them a moment, then end the ones still there (they are
    // ours: their control sockets are in our scratch directory).
    const auto deadline = SteadyClock::now() + std::chrono::seconds(5);
    std::vector<pid_t> left = ProcessesMentioning(scratch_.string());
    while (!left.empty() && SteadyClock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      left = ProcessesMentioning(scratch_.string());
    }
    for (pid_t pid : left) {
      const std::string cmd = CmdlineOf(pid);
      if (IsSshd(pid)) {
        std::fprintf(stderr, "fanout: LEFTOVER node process %d (%s)\n", pid, cmd.c_str());
        clean_ = false;
      } else {
        std::fprintf(stderr, "fanout: ending leftover process %d (%s)\n", pid, cmd.c_str());
      }
      kill(pid, SIGTERM);
    }
    if (clean_) std::fprintf(stderr, "fanout: cleaned up; no node sshd or node directory left\n");
    return clean_;
  }

 private:
  std::optional<client::Client>& api_;
  fs::path state_dir_;
  fs::path scratch_;
  std::optional<testing::Host>& host_;
  testing::Weftd& weftd_;
  std::vector<pid_t> sshd_;
  bool cluster_created_ = false;
  bool done_ = false;
  bool clean_ = true;
};

std::vector<pid_t> ChildrenOf(pid_t parent) {
  std::vector<pid_t> children;
  for (pid_t pid : AllPids()) {
    if (auto st = ReadProcStat(pid); st && st->ppid == parent) children.push_back(pid);
  }
  return children;
}

// Established TCP connections whose local end is 127.0.0.1:port (weftd's side
// of its provisioner endpoint): one per runner thread of weft-host, plus the
// master's and each worker's control connection.
int EstablishedTo(int port) {
  std::ifstream in("/proc/net/tcp");
  std::string line;
  std::getline(in, line);  // header
  int count = 0;
  char local[64], remote[64], state[8];
  while (std::getline(in, line)) {
    if (std::sscanf(line.c_str(), "%*s %63s %63s %7s", local, remote, state) != 3) continue;
    const char* colon = std::strchr(local, ':');
    if (colon && std::strtol(colon + 1, nullptr, 16) == port && std::strcmp(state, "01") == 0) ++count;
  }
  return count;
}

int PortOf(const std::string& endpoint) {
  const std::size_t colon = endpoint.rfind(':');
  return colon == std::string::npos ? 0 : std::atoi(endpoint.c_str() + colon + 1);
}

// Waits until weft-host runs its workers and every runner thread has connected
// to weftd (so a job's tasks are taken at once), then a little longer for the
// first task.take of each to arrive.
Status WaitHostReady(client::Client& api, testing::Host& host, const Options& opts, int port) {
  const fs::path log = host.log();
  const auto deadline = SteadyClock::now() + std::chrono::seconds(60);
  while (SteadyClock::now() < deadline && !g_interrupted) {
    if (!host.process().running()) {
      const int st = host.process().Wait(std::chrono::milliseconds(0)).value_or(0);
      return Status::Internal("weft-host " + DescribeExit(st) + "; its log ends:\n" + Tail(log));
    }
    Result<json> hosts = api.Call("host.list", json::object());
    bool live = false;
    if (hosts.ok()) {
      for (const json& h : (*hosts)["hosts"]) live = live || (h.value("id", "") == "fanout-host" && h.value("live", false));
    }
    if (live && static_cast<int>(ChildrenOf(host.process().pid()).size()) >= opts.workers &&
        EstablishedTo(port) >= opts.capacity) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      return Status::Ok();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Status::Timeout("weft-host did not connect its " + std::to_string(opts.capacity) +
                         " runner threads within 60 s; its log ends:\n" + Tail(log));
}

// Reads the arguments into `opts`; the exit code when the bench must not run
// (a usage error, or --help).
std::optional<int> ParseOptions(const std::vector<std::string>& args, Options& opts) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](int min, int max, int* out) {
      return i + 1 < args.size() && ParseInt(args[++i], min, max, out);
    };
    if (a == "--nodes") {
      if (!value(1, 1000, &opts.nodes)) return Usage("--nodes needs a number from 1 to 1000");
    } else if (a == "--runs") {
      if (!value(1, 100, &opts.runs)) return Usage("--runs needs a number from 1 to 100");
    } else if (a == "--warmup") {
      if (!value(0, 10, &opts.warmup)) return Usage("--warmup needs a number from 0 to 10");
    } else if (a == "--capacity") {
      if (!value(1, 4096, &opts.capacity)) return Usage("--capacity needs a number from 1 to 4096");
    } else if (a == "--workers") {
      if (!value(1, 256, &opts.workers)) return Usage("--workers needs a number from 1 to 256");
    } else if (a == "--port") {
      if (!value(1, 65535, &opts.port)) return Usage("--port needs a number from 1 to 65535");
    } else if (a == "--command") {
      if (i + 1 >= args.size() || args[i + 1].empty()) return Usage("--command needs a non-empty command");
      opts.command = args[++i];
    } else if (a == "--connections") {
      if (i + 1 >= args.size() || (args[i + 1] != "cold" && args[i + 1] != "warm")) {
        return Usage("--connections needs cold or warm");
      }
      opts.warm = args[++i] == "warm";
    } else if (a == "--ansible-pipelining") {
      opts.ansible_pipelining = true;
    } else if (a == "--help" || a == "-h") {
      Usage("runs one command on N local nodes through a Weft job and through Ansible ad-hoc");
      return 0;
    } else {
      return Usage("unknown option '" + a + "'");
    }
  }
  if (opts.capacity == 0) opts.capacity = opts.nodes;
  if (opts.workers > opts.capacity) return Usage("--workers may not exceed the capacity");
  if (opts.command.find("$SSH_CONNECTION") == std::string::npos) {
    return Usage("--command must print \"fanout $SSH_CONNECTION\" on a line of its own, so both sides can prove "
                 "where it ran");
  }
  return std::nullopt;
}

// The folder of weftd and weft-host (beside weft-bench), or empty after saying
// why the bench cannot run here.
fs::path CheckMachine() {
  if (geteuid() != 0) {
    std::fprintf(stderr, "weft-bench fanout: needs root: the local provider starts an sshd per node\n");
    return {};
  }
  std::error_code ec;
  const fs::path bin_dir = fs::read_symlink("/proc/self/exe", ec).parent_path();
  for (const char* bin : {"weftd", "weft-host"}) {
    if (ec || !fs::exists(bin_dir / bin)) {
      std::fprintf(stderr, "weft-bench fanout: %s not found; build the %s target first\n", (bin_dir / bin).c_str(),
                   bin);
      return {};
    }
  }
  return bin_dir;
}

// What Weft's side runs on: weftd, weft-host, the api client and the events.
struct WeftRig {
  const Options& opts;
  fs::path bin_dir;
  fs::path scratch;
  fs::path state_dir;
  testing::Weftd& weftd;
  std::optional<testing::Host>& host;
  std::optional<client::Client>& api;
  std::optional<EventWatcher> events;
  int provisioner_port = 0;
};

// Setup (not timed): weftd, weft-host with its runner threads connected, the catalog.
Status StartWeft(zmq::context_t& ctx, WeftRig& rig) {
  std::fprintf(stderr, "fanout: starting weftd and weft-host (capacity %d, %d workers) in %s\n", rig.opts.capacity,
               rig.opts.workers, rig.scratch.c_str());
  WEFT_RETURN_IF_ERROR(StartWeftd(rig.weftd));
  client::Client& api = rig.api.emplace(
      ctx, client::Options{.endpoint = rig.weftd.api(), .timeout_ms = 30000, .tenant = "", .limits = {}});
  rig.events.emplace(ctx, rig.weftd.events());
  Result<testing::HostOptions> host = FanoutHost(rig.bin_dir, rig.scratch, rig.weftd.provisioner(), rig.opts);
  if (!host.ok()) return host.status().WithContext("weft-host");
  rig.host.emplace(*host);
  rig.host->Start();
  rig.provisioner_port = PortOf(rig.weftd.provisioner());
  WEFT_RETURN_IF_ERROR(WaitHostReady(api, *rig.host, rig.opts, rig.provisioner_port).WithContext("weft-host"));
  return PutCatalog(api, rig.state_dir, rig.opts).WithContext("catalog");
}

// Setup (not timed): the cluster of local nodes, through a Weft job; its nodes.
Result<std::vector<NodeInfo>> CreateCluster(WeftRig& rig, Teardown& teardown) {
  client::Client& api = *rig.api;
  std::fprintf(stderr, "fanout: creating a cluster of %d local nodes (setup, not timed)\n", rig.opts.nodes);
  const auto create_start = SteadyClock::now();
  Result<json> created =
      api.Call("cluster.create", {{"name", kClusterName}, {"template", "fanout"}, {"size", rig.opts.nodes}});
  if (!created.ok()) return created.status().WithContext("cluster.create");
  teardown.set_cluster_created();
  const std::string create_job = (*created)["job"].value("id", "");
  Result<std::string> create_status = WaitJob(api, &*rig.events, create_job, kSetupDeadline);
  if (!create_status.ok()) return create_status.status().WithContext("cluster.create");
  if (*create_status != "succeeded") return Status::Internal("cluster.create: " + JobStory(api, create_job));
  std::fprintf(stderr, "fanout: cluster created in %.1f s\n", Seconds(SteadyClock::now() - create_start));

  Result<std::vector<NodeInfo>> nodes = LoadNodes(api, rig.state_dir);
  if (!nodes.ok()) return nodes.status().WithContext("nodes");
  if (static_cast<int>(nodes->size()) != rig.opts.nodes) {
    return Status::Internal("nodes: the cluster has " + std::to_string(nodes->size()) + " nodes, not " +
                            std::to_string(rig.opts.nodes));
  }
  for (const NodeInfo& n : *nodes) teardown.remember_sshd(n.sshd);
  return nodes;
}

// An empty session pool, as after a quiet minute (idle_timeout_ms): weft-host
// started again, and weftd's hold on the old host's takes run out.
Status RestartHost(WeftRig& rig) {
  rig.host->Stop(std::chrono::seconds(20));
  const auto stopped = SteadyClock::now();
  rig.host->Start();
  WEFT_RETURN_IF_ERROR(WaitHostReady(*rig.api, *rig.host, rig.opts, rig.provisioner_port));
  // weftd still holds the old host's task.take requests until their
  // wait (take_wait_ms) ends, and would hand the job's tasks to them
  // first, only to requeue each when its reply cannot be delivered.
  std::this_thread::sleep_until(stopped + kHostTakeWait + std::chrono::milliseconds(500));
  return Status::Ok();
}

// One run of Weft's side: `w` with the CPU time the nodes spent on it; printed
// on stderr, and as a JSON line when timed.
Result<WeftRun> WeftRound(WeftRig& rig, WeftSide& weft, const std::vector<pid_t>& sshd_pids, const char* label,
                          int number, bool timed) {
  if (rig.opts.warm) {
    // Prime the workers' session pools: every node's session is then seconds old.
    Result<WeftRun> prime = weft.Run();
    if (!prime.ok()) return prime.status().WithContext("weft priming run");
  } else {
    WEFT_RETURN_IF_ERROR(RestartHost(rig).WithContext("weft-host restart"));
  }
  const std::int64_t node_before = NodesCpuNs(sshd_pids);
  Result<WeftRun> w = weft.Run();
  if (!w.ok()) return w.status().WithContext("weft run");
  w->node_cpu_s = static_cast<double>(NodesCpuNs(sshd_pids) - node_before) / 1e9;
  std::fprintf(stderr,
               "fanout: %s %d weft    %.3f s (job %.0f ms: first take %.0f, takes spread %.0f, task median "
               "%.0f max %.0f, end lag %.0f; per task: startup %.0f, prepare %.0f (max %.0f), command %.0f "
               "(max %.0f), report %.0f, of %d; %d retried; CPU %.2f s, on the nodes %.2f s)\n",
               label, number, w->seconds, w->server_ms, w->first_take_ms, w->take_spread_ms, w->task_median_ms,
               w->task_max_ms, w->end_lag_ms, w->startup_ms, w->prepare_ms, w->prepare_max_ms, w->command_ms,
               w->command_max_ms, w->report_ms, w->phases_seen, w->retries, w->cpu_s, w->node_cpu_s);
  if (!timed) return w;
  ojson line;
  line["bench"] = "fanout";
  line["side"] = "weft";
  line["run"] = number;
  line["seconds"] = Round3(w->seconds);
  line["job_ms"] = std::llround(w->server_ms);
  line["first_take_ms"] = std::llround(w->first_take_ms);
  line["take_spread_ms"] = std::llround(w->take_spread_ms);
  line["task_median_ms"] = std::llround(w->task_median_ms);
  line["task_max_ms"] = std::llround(w->task_max_ms);
  line["end_lag_ms"] = std::llround(w->end_lag_ms);
  line["startup_ms"] = std::llround(w->startup_ms);
  line["prepare_ms"] = std::llround(w->prepare_ms);
  line["prepare_max_ms"] = std::llround(w->prepare_max_ms);
  line["command_ms"] = std::llround(w->command_ms);
  line["command_max_ms"] = std::llround(w->command_max_ms);
  line["report_ms"] = std::llround(w->report_ms);
  line["phases_seen"] = w->phases_seen;
  line["retries"] = w->retries;
  line["cpu_s"] = Round3(w->cpu_s);
  line["node_cpu_s"] = Round3(w->node_cpu_s);
  std::printf("%s\n", line.dump().c_str());
  std::fflush(stdout);
  return w;
}

// One run of Ansible's side, as WeftRound.
Result<AnsibleRun> AnsibleRound(AnsibleSide& ans, const Options& opts, const std::vector<pid_t>& sshd_pids,
                                const char* label, int round, int number, bool timed) {
  if (opts.warm) {
    Result<AnsibleRun> prime = ans.Run(1000 + round);
    if (!prime.ok()) return prime.status().WithContext("ansible priming run");
  }
  const std::int64_t node_before = NodesCpuNs(sshd_pids);
  Result<AnsibleRun> r = ans.Run(round + 1);
  if (!r.ok()) return r.status().WithContext("ansible run");
  r->node_cpu_s = static_cast<double>(NodesCpuNs(sshd_pids) - node_before) / 1e9;
  std::fprintf(stderr, "fanout: %s %d ansible %.3f s (CPU %.2f s, on the nodes %.2f s)\n", label, number, r->seconds,
               r->cpu_s, r->node_cpu_s);
  if (!timed) return r;
  ojson line;
  line["bench"] = "fanout";
  line["side"] = "ansible";
  line["run"] = number;
  line["seconds"] = Round3(r->seconds);
  line["cpu_s"] = Round3(r->cpu_s);
  line["node_cpu_s"] = Round3(r->node_cpu_s);
  std::printf("%s\n", line.dump().c_str());
  std::fflush(stdout);
  return r;
}

// The timed runs of both sides (after the warm-ups), alternating ABBA.
struct Runs {
  std::vector<WeftRun> weft;
  std::vector<AnsibleRun> ansible;
};

Result<Runs> Measure(WeftRig& rig, WeftSide& weft, AnsibleSide* ans, const std::vector<pid_t>& sshd_pids) {
  Runs runs;
  const int total_rounds = rig.opts.warmup + rig.opts.runs;
  for (int round = 0; round < total_rounds; ++round) {
    const bool timed = round >= rig.opts.warmup;
    const int index = round - rig.opts.warmup + 1;
    const int number = timed ? index : round + 1;
    const char* label = timed ? "run" : "warm-up";
    // ABBA: Weft first in even rounds, Ansible first in odd ones.
    const bool weft_first = round % 2 == 0;
    for (int side = 0; side < 2; ++side) {
      const bool is_weft = (side == 0) == weft_first;
      if (is_weft) {
        WEFT_ASSIGN_OR_RETURN(WeftRun w, WeftRound(rig, weft, sshd_pids, label, number, timed));
        if (timed) runs.weft.push_back(w);
      } else if (ans) {
        WEFT_ASSIGN_OR_RETURN(AnsibleRun r, AnsibleRound(*ans, rig.opts, sshd_pids, label, round, number, timed));
        if (timed) runs.ansible.push_back(r);
      }
    }
  }
  return runs;
}

double MedianOf(const std::vector<WeftRun>& runs, double WeftRun::*field) {
  std::vector<double> v;
  for (const WeftRun& r : runs) v.push_back(r.*field);
  return Median(v);
}
double MedianOf(const std::vector<AnsibleRun>& runs, double AnsibleRun::*field) {
  std::vector<double> v;
  for (const AnsibleRun& r : runs) v.push_back(r.*field);
  return Median(v);
}

// The summary line: both sides' medians and their ratio (Weft's alone when
// Ansible is missing, with `skip_reason`).
ojson Summary(const Options& opts, const Runs& runs, bool with_ansible, const std::string& ansible_version,
              const std::string& skip_reason) {
  const double weft_s = MedianOf(runs.weft, &WeftRun::seconds);
  ojson summary;
  summary["bench"] = "fanout";
  summary["nodes"] = opts.nodes;
  summary["runs"] = opts.runs;
  summary["warmup"] = opts.warmup;
  summary["connections"] = opts.warm ? "warm" : "cold";
  summary["command"] = opts.command;
  summary["host_capacity"] = opts.capacity;
  summary["host_workers"] = opts.workers;
  summary["weft_median_s"] = Round3(weft_s);
  summary["weft_job_median_ms"] = std::llround(MedianOf(runs.weft, &WeftRun::server_ms));
  summary["weft_first_take_median_ms"] = std::llround(MedianOf(runs.weft, &WeftRun::first_take_ms));
  summary["weft_take_spread_median_ms"] = std::llround(MedianOf(runs.weft, &WeftRun::take_spread_ms));
  summary["weft_task_median_ms"] = std::llround(MedianOf(runs.weft, &WeftRun::task_median_ms));
  summary["weft_end_lag_median_ms"] = std::llround(MedianOf(runs.weft, &WeftRun::end_lag_ms));
  summary["weft_prepare_median_ms"] = std::llround(MedianOf(runs.weft, &WeftRun::prepare_ms));
  summary["weft_command_median_ms"] = std::llround(MedianOf(runs.weft, &WeftRun::command_ms));
  summary["weft_cpu_median_s"] = Round3(MedianOf(runs.weft, &WeftRun::cpu_s));
  summary["weft_node_cpu_median_s"] = Round3(MedianOf(runs.weft, &WeftRun::node_cpu_s));
  if (with_ansible) {
    const double ansible_s = MedianOf(runs.ansible, &AnsibleRun::seconds);
    summary["ansible"] = ansible_version;
    summary["ansible_forks"] = opts.nodes;
    summary["ansible_pipelining"] = opts.ansible_pipelining;
    summary["ansible_median_s"] = Round3(ansible_s);
    summary["ansible_cpu_median_s"] = Round3(MedianOf(runs.ansible, &AnsibleRun::cpu_s));
    summary["ansible_node_cpu_median_s"] = Round3(MedianOf(runs.ansible, &AnsibleRun::node_cpu_s));
    const double ratio = ansible_s > 0 ? weft_s / ansible_s : 0;
    summary["ratio"] = Round3(ratio);
    summary["target_ratio"] = kTargetRatio;
    summary["target_met"] = ratio <= kTargetRatio;
  } else {
    summary["ansible"] = nullptr;
    summary["ansible_median_s"] = nullptr;
    summary["ratio"] = nullptr;
    summary["target_ratio"] = kTargetRatio;
    summary["skipped"] = skip_reason;
  }
  return summary;
}

int Fanout(const std::vector<std::string>& args) {
  Options opts;
  if (std::optional<int> exit_code = ParseOptions(args, opts)) return *exit_code;
  const fs::path bin_dir = CheckMachine();
  if (bin_dir.empty()) return 1;
  const fs::path ansible = FindOnPath("ansible");
  std::string skip_reason;
  if (ansible.empty()) {
    skip_reason = "ansible is not installed (no `ansible` on PATH); install Debian's package "
                  "(apt-get install ansible, or scripts/install-deps.sh) to compare";
    std::fprintf(stderr, "weft-bench fanout: %s. Measuring Weft only; NO COMPARISON is made.\n",
                 skip_reason.c_str());
  }

  struct sigaction sa {};
  sa.sa_handler = OnInterrupt;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  const double load_before = LoadAverage();
  ScratchDir scratch("weft-fanout");
  const fs::path state_dir = scratch.path() / "nodes";
  fs::create_directories(state_dir);
  fs::create_directories(scratch.path() / "ansible");
  testing::Weftd weftd(FanoutWeftd(bin_dir, scratch.path()), testing::Weftd::Deferred{});
  std::optional<testing::Host> host;
  zmq::context_t ctx(1);
  std::optional<client::Client> api_holder;  // outlives the teardown, which deletes the cluster through it
  Teardown teardown(api_holder, state_dir, scratch.path(), host, weftd);

  auto fail = [&](const std::string& what, const Status& st) {
    std::fprintf(stderr, "weft-bench fanout: %s: %s\n", what.c_str(), st.message().c_str());
    teardown.Run();
    return 1;
  };

  try {
    WeftRig rig{opts, bin_dir, scratch.path(), state_dir, weftd, host, api_holder, std::nullopt, 0};
    Status st = StartWeft(ctx, rig);
    if (!st.ok()) return fail("setup", st);
    Result<std::vector<NodeInfo>> nodes = CreateCluster(rig, teardown);
    if (!nodes.ok()) return fail("setup", nodes.status());
    std::vector<pid_t> sshd_pids;
    for (const NodeInfo& n : *nodes) sshd_pids.push_back(n.sshd);

    WeftSide weft(*api_holder, *rig.events, *nodes, weftd, *host);
    st = weft.CheckPlan();
    if (!st.ok()) return fail("plan", st);

    std::optional<AnsibleSide> ans;
    std::string ansible_version;
    if (!ansible.empty()) {
      ansible_version = AnsibleVersion(ansible);
      ans.emplace(ansible, scratch.path() / "ansible", *nodes, opts);
      st = ans->Prepare();
      if (!st.ok()) return fail("ansible inventory", st);
    }

    Result<Runs> runs = Measure(rig, weft, ans ? &*ans : nullptr, sshd_pids);
    if (!runs.ok()) return fail("measuring", runs.status());
    const double load_after = LoadAverage();
    const bool clean = teardown.Run();

    ojson summary = Summary(opts, *runs, ans.has_value(), ansible_version, skip_reason);
    summary["cpus"] = std::thread::hardware_concurrency();
    summary["loadavg_1m_before"] = load_before;
    summary["loadavg_1m_after"] = load_after;
    summary["clean"] = clean;
    std::printf("%s\n", summary.dump().c_str());
    return clean ? 0 : 1;
  } catch (const std::exception& e) {
    return fail("unexpected error", Status::Internal(e.what()));
  }
}

}  // namespace

WEFT_BENCH("fanout", "one command on N local nodes: a Weft job vs Ansible ad-hoc (-f N)", Fanout);

}  // namespace weft::bench

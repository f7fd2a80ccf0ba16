// ansible: runs ansible-playbook on the host against the task's node, with a
// one-host inventory built from the node's facts (address, SSH port, user,
// key, pinned host keys), the task as extra vars, and the service's playbook
// and roles from the task's `ansible` resources. Ansible's JSON callback
// turns into one log line per Ansible task and, on failure, the failed task's
// own message. See README.md.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/plugin.hpp"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using weft::sdk::Error;
using weft::sdk::OutputLines;
using weft::sdk::Task;

constexpr std::uint32_t kDefaultTimeoutMs = 30 * 60 * 1000;
constexpr std::size_t kMaxReportBytes = 32u << 20;  // the JSON callback's whole report
constexpr std::size_t kMaxMessageBytes = 2000;
// Pinned host keys are written under this name, and ssh looks them up by it
// (HostKeyAlias), whatever address and port the node has.
constexpr const char* kHostAlias = "weft-node";
// What a node's BOOTSTRAP (which names no service) runs: Ansible can log in
// and run a module with the node's Python.
constexpr const char* kBootstrapPlaybook =
    "- name: bootstrap\n"
    "  hosts: all\n"
    "  gather_facts: false\n"
    "  tasks:\n"
    "    - name: Ansible reaches the node and runs a module there\n"
    "      ansible.builtin.ping:\n";

const char* ActionName(weft_action a) {
  const char* name = weft_action_name(a);
  return name ? name : "OTHER";
}

std::string Clip(std::string s, std::size_t max = kMaxMessageBytes) {
  if (s.size() > max) s = s.substr(0, max) + "...";
  return s;
}

// A fact of the task's node as JSON, null when the task has none.
json NodeFact(const Task& task, const char* key) {
  const std::optional<std::string> text = task.NodeJson(key);
  return text ? json::parse(*text, nullptr, false) : json();
}

std::string NodeString(const Task& task, const char* key) {
  const json v = NodeFact(task, key);
  return v.is_string() ? v.get<std::string>() : std::string();
}

// ---- fields -------------------------------------------------------------------------

struct Fields {
  std::string playbook;  // a path inside `resource`, or the name of a playbook resource
  std::string resource;  // an archive resource (playbooks and roles), optional
  json extra_vars = json::object();
  std::uint32_t timeout_ms = kDefaultTimeoutMs;
};

Fields ReadFields(const Task& task) {
  auto field = [&](const char* name) {
    const std::optional<std::string> text = task.FieldJson(name);
    return text ? json::parse(*text, nullptr, false) : json();
  };
  auto str = [&](const char* name) {
    const json v = field(name);
    if (v.is_null()) return std::string();
    if (!v.is_string()) throw Error(WEFT_ERR_INVALID, std::string("ansible: field '") + name + "' must be a string");
    return v.get<std::string>();
  };
  Fields f;
  f.playbook = str("playbook");
  f.resource = str("resource");
  if (json v = field("extra_vars"); !v.is_null()) {
    if (!v.is_object()) throw Error(WEFT_ERR_INVALID, "ansible: field 'extra_vars' must be a JSON object");
    f.extra_vars = std::move(v);
  }
  if (json v = field("timeout_ms"); !v.is_null()) {
    if (!v.is_number_integer() || v.get<std::int64_t>() < 1 || v.get<std::int64_t>() > 24LL * 3600 * 1000) {
      throw Error(WEFT_ERR_INVALID, "ansible: timeout_ms must be an integer from 1 to 86400000");
    }
    f.timeout_ms = static_cast<std::uint32_t>(v.get<std::int64_t>());
  }
  return f;
}

// ---- the private directory of one run ----------------------------------------------

// A directory only this process's user can enter, removed with everything in
// it (the private key first of all) when the run ends, however it ends.
class PrivateDir {
 public:
  PrivateDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/weft-ansible-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw Error(WEFT_ERR_FAILED, "ansible: cannot make a private directory in " +
                                       pattern.substr(0, pattern.rfind('/')) + ": " + std::strerror(errno));
    }
    path_ = pattern;
  }
  ~PrivateDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  PrivateDir(const PrivateDir&) = delete;
  PrivateDir& operator=(const PrivateDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Writes a new file with `mode` from the start (never readable by others, not even briefly).
void WriteFile(const fs::path& path, const std::string& content, mode_t mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) throw Error(WEFT_ERR_FAILED, "ansible: cannot write " + path.string() + ": " + std::strerror(errno));
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = errno;
      ::close(fd);
      throw Error(WEFT_ERR_FAILED, "ansible: cannot write " + path.string() + ": " + std::strerror(e));
    }
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
}

// ---- the node: inventory, key and known hosts ----------------------------------------

struct NodeAccess {
  std::string name;  // the inventory hostname
  std::string address;
  std::int64_t port = 22;
  std::string user;
  std::string private_key;
  std::vector<std::string> host_keys;  // "ssh-ed25519 AAAA..."
};

NodeAccess ReadNode(const Task& task) {
  NodeAccess n;
  n.name = NodeString(task, "hostname");
  if (n.name.empty()) n.name = NodeString(task, "node_id");
  n.address = NodeString(task, "access_v4");
  const std::string node = n.name.empty() ? std::string("the task's node") : "node " + n.name;
  if (n.address.empty()) {
    throw Error(WEFT_ERR_INVALID, "ansible: " + node + " has no address (access_v4) from its provider yet");
  }
  if (const json port = NodeFact(task, "ssh_port"); port.is_number_integer()) n.port = port.get<std::int64_t>();
  const json auth = NodeFact(task, "ssh_auth");
  if (auth.is_object()) {
    n.user = auth.value("user", std::string());
    n.private_key = auth.value("private_key", std::string());
  }
  if (n.user.empty()) n.user = "root";
  if (n.private_key.empty()) {
    throw Error(WEFT_ERR_INVALID, "ansible: " + node + " has no SSH private key (ssh_auth) from its provider");
  }
  if (const json keys = NodeFact(task, "host_keys"); keys.is_array()) {
    for (const json& k : keys) {
      if (k.is_string() && !k.get<std::string>().empty()) n.host_keys.push_back(k.get<std::string>());
    }
  }
  if (n.host_keys.empty()) {
    // Without a pinned key, StrictHostKeyChecking=yes could only refuse the
    // node; say why instead of letting ssh say it less clearly.
    throw Error(WEFT_ERR_INVALID,
                "ansible: " + node + " has no host keys from its provider, so its identity cannot be checked");
  }
  return n;
}

// The inventory (JSON is YAML), the key and the known hosts of the one node.
fs::path WriteInventory(const fs::path& dir, const NodeAccess& n) {
  std::string key = n.private_key;
  if (key.back() != '\n') key += '\n';  // OpenSSH refuses a key file without the final newline
  WriteFile(dir / "id_node", key, 0600);
  std::string known;
  for (const std::string& k : n.host_keys) known += std::string(kHostAlias) + " " + k + "\n";
  WriteFile(dir / "known_hosts", known, 0600);
  const std::string ssh_args = "-o StrictHostKeyChecking=yes -o UserKnownHostsFile=" + (dir / "known_hosts").string() +
                               " -o GlobalKnownHostsFile=/dev/null -o HostKeyAlias=" + kHostAlias +
                               " -o IdentitiesOnly=yes -o BatchMode=yes";
  const json host = {{"ansible_host", n.address},
                     {"ansible_port", n.port},
                     {"ansible_user", n.user},
                     {"ansible_ssh_private_key_file", (dir / "id_node").string()},
                     {"ansible_ssh_common_args", ssh_args},
                     {"ansible_python_interpreter", "auto_silent"}};
  const fs::path inventory = dir / "inventory.yml";
  WriteFile(inventory, json{{"all", {{"hosts", {{n.name, host}}}}}}.dump(2) + "\n", 0600);
  return inventory;
}

// The task as extra vars: what a playbook needs to know to act on this node.
fs::path WriteExtraVars(const fs::path& dir, weft_action action, const json& t, const Fields& f, const NodeAccess& n,
                        const Task& task) {
  json node = t.contains("node") && t["node"].is_object() ? t["node"] : json::object();
  node.erase("results");  // provider results carry the SSH key; a playbook has no need for it
  node["hostname"] = n.name;
  node["access_v4"] = n.address;
  const std::string bind = NodeString(task, "bind_v4");
  node["bind_v4"] = bind.empty() ? n.address : bind;
  json vars = {
      {"weft_action", ActionName(action)},
      {"weft_task_id", t.value("task_id", std::int64_t{0})},
      {"weft_cluster", t.value("cluster", json::object())},
      {"weft_config", t.value("config", json::object())},
      {"weft_node", node},
      {"weft_nodes", t.value("nodes", json::array())},
      {"weft_service",
       t.contains("service") && t["service"].is_object() ? t["service"].value("name", std::string()) : std::string()}};
  for (const auto& [k, v] : f.extra_vars.items()) vars[k] = v;
  const fs::path file = dir / "extra-vars.json";
  WriteFile(file, vars.dump(2) + "\n", 0600);
  return file;
}

// ---- the playbook, from the task's resources ---------------------------------------------

// The local path of the task's `ansible` resource `name`, fetched and digest-checked by the host.
fs::path ResourcePath(const json& t, const std::string& name) {
  std::string names;
  for (const json& r : t.value("resources", json::array())) {
    if (!r.is_object()) continue;
    const std::string n = r.value("name", std::string());
    if (n == name && r.contains("path") && r["path"].is_string()) return r["path"].get<std::string>();
    names += (names.empty() ? "" : ", ") + n;
  }
  throw Error(WEFT_ERR_INVALID, "ansible: no active ansible resource is named '" + name + "' (the task has " +
                                    (names.empty() ? std::string("none") : names) +
                                    "); upload it with `weft resource upload ansible " + name +
                                    " FILE`, then stage and sync it");
}

bool IsArchive(const std::string& name) {
  for (const char* ext : {".tar.gz", ".tgz", ".tar"}) {
    const std::string e = ext;
    if (name.size() > e.size() && name.compare(name.size() - e.size(), e.size(), e) == 0) return true;
  }
  return false;
}

// Rejects a playbook path that could leave the run's directory.
void CheckRelative(const std::string& path) {
  const fs::path p(path);
  bool up = false;
  for (const fs::path& part : p) up = up || part == "..";
  if (path.empty() || p.is_absolute() || up) {
    throw Error(WEFT_ERR_INVALID,
                "ansible: field 'playbook' must be a relative path inside the resource, got '" + Clip(path, 200) + "'");
  }
}

struct Child {
  int status = -1;  // the exit status, or 128 + the signal
  std::string out;
  std::deque<std::string> err_tail;
  bool timed_out = false;
  bool cancelled = false;
};

// Runs argv[0] (found on PATH) in `cwd` with `env`; stdout is collected, stderr
// logged line by line as it comes. The child has a process group of its own,
// so a timeout or a cancel ends ssh and everything else it started.
Child Spawn(const Task& task, const std::vector<std::string>& argv, const std::vector<std::string>& env,
            const fs::path& cwd, std::uint32_t timeout_ms) {
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0)
    throw Error(WEFT_ERR_FAILED, std::string("ansible: pipe: ") + std::strerror(errno));
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    throw Error(WEFT_ERR_FAILED, std::string("ansible: pipe: ") + std::strerror(errno));
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
  posix_spawn_file_actions_addchdir_np(&fa, cwd.c_str());
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // weft-host blocks some signals and ignores SIGPIPE; ansible gets the defaults.
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int s : {SIGPIPE, SIGTERM, SIGINT, SIGCHLD, SIGHUP}) sigaddset(&defaults, s);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  std::vector<char*> args, envp;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, argv[0].c_str(), &fa, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (rc != 0) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    if (rc == ENOENT) {
      throw Error(WEFT_ERR_UNSUPPORTED, "ansible: " + argv[0] +
                                            " is not installed on this weft-host (not found on PATH); install "
                                            "Ansible (Debian: apt-get install ansible-core)");
    }
    throw Error(WEFT_ERR_FAILED, "ansible: cannot start " + argv[0] + ": " + std::strerror(rc));
  }

  Child child;
  OutputLines err_lines(task, WEFT_LOG_WARN);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  bool out_open = true, err_open = true;
  while (out_open || err_open) {
    if (task.Cancelled()) child.cancelled = true;
    if (std::chrono::steady_clock::now() >= deadline) child.timed_out = true;
    if (child.cancelled || child.timed_out) break;
    pollfd p[2] = {{out_open ? out_pipe[0] : -1, POLLIN, 0}, {err_open ? err_pipe[0] : -1, POLLIN, 0}};
    if (::poll(p, 2, 200) < 0 && errno != EINTR) break;
    char buf[65536];
    if (out_open && (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
      const ssize_t n = ::read(out_pipe[0], buf, sizeof buf);
      if (n > 0 && child.out.size() < kMaxReportBytes) child.out.append(buf, static_cast<std::size_t>(n));
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) out_open = false;
    }
    if (err_open && (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
      const ssize_t n = ::read(err_pipe[0], buf, sizeof buf);
      if (n > 0) err_lines.Add(std::string_view(buf, static_cast<std::size_t>(n)));
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) err_open = false;
    }
  }
  err_lines.Flush();
  child.err_tail = err_lines.tail();
  if (child.cancelled || child.timed_out) {
    ::kill(-pid, SIGTERM);
    for (int i = 0; i < 50 && ::waitpid(pid, nullptr, WNOHANG) == 0; ++i) ::usleep(100000);
    ::kill(-pid, SIGKILL);
  }
  ::close(out_pipe[0]);
  ::close(err_pipe[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  child.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return child;
}

// ---- Ansible's JSON report -----------------------------------------------------------------

std::string Text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return {};
  return v.dump();
}

// One host result's outcome, as Ansible's default output names it.
std::string Outcome(const json& r) {
  if (r.value("unreachable", false)) return "unreachable";
  if (r.value("failed", false)) return "failed";
  if (r.value("skipped", false)) return "skipping";
  return r.value("changed", false) ? "changed" : "ok";
}

// The failed item of a looped task, or the result itself.
const json& FailedItem(const json& r) {
  if (auto it = r.find("results"); it != r.end() && it->is_array()) {
    for (const json& item : *it) {
      if (item.is_object() && (item.value("failed", false) || item.value("unreachable", false))) return item;
    }
  }
  return r;
}

// What Ansible said about a failed result: its msg, then its stderr (and stdout when there is no stderr).
std::string FailureText(const json& result) {
  const json& r = FailedItem(result);
  std::string text = Text(r.value("msg", json()));
  const std::string err = Text(r.value("stderr", json()));
  const std::string out = Text(r.value("stdout", json()));
  if (!err.empty()) text += (text.empty() ? "" : "\n") + err;
  if (err.empty() && !out.empty()) text += (text.empty() ? "" : "\n") + out;
  if (text.empty()) text = Text(r.value("module_stderr", json()));
  return text.empty() ? std::string("Ansible gave no message") : text;
}

// Seconds since the epoch of a report timestamp ("2026-11-26T03:15:31.520003Z"); nullopt if it is not one.
std::optional<double> ReportTime(const json& v) {
  if (!v.is_string()) return std::nullopt;
  const std::string text = v.get<std::string>();
  std::tm tm{};
  const char* rest = ::strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (rest == nullptr) return std::nullopt;
  double fraction = 0;
  if (*rest == '.') fraction = std::strtod(rest, nullptr);
  return static_cast<double>(::timegm(&tm)) + fraction;
}

// " (1.2 s)": how long an Ansible task took, from the report; empty when it does not say.
std::string Took(const json& task) {
  const json d = task.value("task", json::object()).value("duration", json::object());
  const std::optional<double> start = ReportTime(d.value("start", json())), end = ReportTime(d.value("end", json()));
  if (!start || !end || *end < *start) return {};
  char buf[32];
  std::snprintf(buf, sizeof buf, " (%.1f s)", *end - *start);
  return buf;
}

struct Report {
  bool parsed = false;
  std::string failed_task;   // the Ansible task that stopped the play, if any
  bool unreachable = false;  // ... because ssh could not reach the node
  std::string failure;       // what Ansible said about it
  json stats;                // the node's counters (ok, changed, failures, ...)
};

// Logs one line per Ansible task (and its command output), and finds the
// failure that stopped the play: the last failed or unreachable result (the
// report does not mark the ones ignore_errors let pass; they come earlier).
Report ReadReport(const Task& task, const std::string& out, const std::string& host) {
  Report report;
  const json doc = json::parse(out, nullptr, false);
  if (!doc.is_object()) return report;
  report.parsed = true;
  for (const json& play : doc.value("plays", json::array())) {
    for (const json& t : play.value("tasks", json::array())) {
      const std::string name = t.value("task", json::object()).value("name", std::string("(unnamed task)"));
      const json hosts = t.value("hosts", json::object());
      auto it = hosts.find(host);
      if (it == hosts.end() || !it->is_object()) continue;
      const json& r = *it;
      const std::string outcome = Outcome(r);
      const bool bad = outcome == "failed" || outcome == "unreachable";
      const std::string line = outcome + ": " + name + Took(t);
      if (bad) {
        task.Warn(line);
        const std::string why = FailureText(r);
        task.Warn(why);
        report.failed_task = name;
        report.unreachable = outcome == "unreachable";
        report.failure = why;
      } else {
        task.Info(line);
        if (const std::string o = Text(r.value("stdout", json())); !o.empty()) task.Info(Clip(o, 16384));
        if (const std::string e = Text(r.value("stderr", json())); !e.empty()) task.Warn(Clip(e, 16384));
      }
    }
  }
  report.stats = doc.value("stats", json::object()).value(host, json::object());
  return report;
}

// The environment of ansible-playbook: weft-host's own, with Ansible's
// settings pinned so that no ansible.cfg or home directory changes how a run
// behaves, and everything it writes kept in the private directory.
std::vector<std::string> AnsibleEnv(const fs::path& dir) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    if (std::strncmp(*e, "ANSIBLE_", 8) != 0) env.emplace_back(*e);
  }
  const std::vector<std::pair<std::string, std::string>> settings = {
      {"ANSIBLE_CONFIG", (dir / "ansible.cfg").string()},
      {"ANSIBLE_STDOUT_CALLBACK", "json"},
      {"ANSIBLE_HOST_KEY_CHECKING", "True"},
      {"ANSIBLE_PIPELINING", "True"},
      // One SSH connection for every module of the run; its master is told
      // to exit when the run ends (SshMasters), so none outlives the key file.
      {"ANSIBLE_SSH_ARGS", "-o ControlMaster=auto -o ControlPersist=120s"},
      {"ANSIBLE_SSH_CONTROL_PATH_DIR", (dir / "cp").string()},
      {"ANSIBLE_RETRY_FILES_ENABLED", "False"},
      {"ANSIBLE_NOCOLOR", "1"},
      {"ANSIBLE_HOME", (dir / "home").string()},
      {"ANSIBLE_LOCAL_TEMP", (dir / "tmp").string()},
      {"ANSIBLE_ROLES_PATH", (dir / "files" / "roles").string()},
      {"ANSIBLE_DEPRECATION_WARNINGS", "False"},
  };
  for (const auto& [k, v] : settings) env.push_back(k + "=" + v);
  return env;
}

// Runs a command with no input or output and waits for it; false when it
// could not run or did not exit 0. For clean-up: never throws.
bool RunQuietly(const std::vector<std::string>& argv) noexcept {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  for (int fd : {0, 1, 2}) posix_spawn_file_actions_addopen(&fa, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, argv[0].c_str(), &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return false;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// The ControlPersist masters ssh leaves in `dir` (a socket each) are told to
// exit when the run ends, however it ends: they hold the node's key in memory
// and would otherwise linger after the private directory is gone.
class SshMasters {
 public:
  explicit SshMasters(fs::path dir) : dir_(std::move(dir)) { fs::create_directory(dir_); }
  ~SshMasters() {
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(dir_, ec)) {
      if (!e.is_socket(ec)) continue;
      (void)RunQuietly({"ssh", "-o", "ControlPath=" + e.path().string(), "-O", "exit", kHostAlias});
    }
  }
  SshMasters(const SshMasters&) = delete;
  SshMasters& operator=(const SshMasters&) = delete;

 private:
  fs::path dir_;
};

class AnsibleAutomator : public weft::sdk::Plugin {
 public:
  static weft::sdk::Info Describe() {
    weft::sdk::Info info;
    info.type_name = "ansible";
    info.kind = WEFT_KIND_AUTOMATOR;
    info.version = "1.0";
    info.description =
        "Runs an Ansible playbook (from the tenant's ansible resources) against the node; Ansible's own result decides";
    info.actions = {WEFT_ACTION_BOOTSTRAP, WEFT_ACTION_INSTALL, WEFT_ACTION_CONFIGURE, WEFT_ACTION_INITIALIZE,
                    WEFT_ACTION_START,     WEFT_ACTION_STOP,    WEFT_ACTION_REMOVE};
    info.fields = {
        {.name = "playbook",
         .label = "Playbook",
         .type = WEFT_FIELD_STRING,
         .description = "the playbook to run: a path inside the archive named by resource, or, without resource, "
                        "the name of an ansible resource holding one playbook"},
        {.name = "resource",
         .label = "Resource",
         .type = WEFT_FIELD_STRING,
         .description = "an ansible resource that is a .tar.gz, .tgz or .tar archive of playbooks and roles/, "
                        "unpacked for the run"},
        {.name = "extra_vars",
         .label = "Extra variables",
         .type = WEFT_FIELD_JSON,
         .default_json = "{}",
         .description = "a JSON object of more extra vars, beside weft_action, weft_node, weft_config and the others"},
        {.name = "timeout_ms",
         .label = "Timeout (ms)",
         .type = WEFT_FIELD_INTEGER,
         .default_json = std::to_string(kDefaultTimeoutMs),
         .description = "how long ansible-playbook may run before it is stopped and the task fails"},
    };
    info.resource_types = {"ansible"};
    return info;
  }

  void Run(weft_action action, Task& task) override {
    const json t = json::parse(task.Json(), nullptr, /*allow_exceptions=*/false);
    if (!t.is_object()) throw Error(WEFT_ERR_INVALID, "the task JSON is not an object");
    const Fields f = ReadFields(task);
    const bool bootstrap = action == WEFT_ACTION_BOOTSTRAP && f.playbook.empty() && f.resource.empty();
    if (!bootstrap && f.playbook.empty()) {
      throw Error(WEFT_ERR_INVALID, "ansible: give the field 'playbook' (the playbook to run)");
    }
    const NodeAccess node = ReadNode(task);
    const std::string on = "node " + node.name + ": ";
    PrivateDir dir;
    const fs::path files = dir.path() / "files";
    for (const fs::path& d : {files, dir.path() / "home", dir.path() / "tmp"}) fs::create_directory(d);
    const SshMasters masters(dir.path() / "cp");
    WriteFile(dir.path() / "ansible.cfg", "# empty: every setting comes from the environment\n", 0600);
    const fs::path inventory = WriteInventory(dir.path(), node);
    const fs::path vars = WriteExtraVars(dir.path(), action, t, f, node, task);
    task.Progress(5, "preparing the playbook");
    const fs::path playbook = PreparePlaybook(task, t, f, bootstrap, files, dir.path());

    task.Progress(
        20, std::string(ActionName(action)) + " running ansible-playbook " + fs::relative(playbook, files).string());
    const Child child = Spawn(task,
                              {"ansible-playbook", "-i", inventory.string(), "-e", "@" + vars.string(), "--limit",
                               node.name, playbook.string()},
                              AnsibleEnv(dir.path()), files, f.timeout_ms);
    task.SetResult("exit_status", std::to_string(child.status));
    if (child.cancelled) throw Error(WEFT_ERR_CANCELLED, on + "ansible-playbook was stopped: the task was cancelled");
    if (child.timed_out) {
      throw Error(WEFT_ERR_FAILED, on + "ansible-playbook timed out after " + std::to_string(f.timeout_ms) + " ms");
    }
    const Report report = ReadReport(task, child.out, node.name);
    if (report.parsed) task.SetResult("ansible_stats", report.stats.dump());
    if (child.status == 0) {
      task.Progress(100, std::string(ActionName(action)) + " done");
      return;
    }
    if (!report.failed_task.empty()) {
      throw Error(WEFT_ERR_FAILED, on + "Ansible task '" + report.failed_task + "' " +
                                       (report.unreachable ? "could not reach the node: " : "failed: ") +
                                       Clip(report.failure));
    }
    // No task failed: Ansible stopped before the play (a playbook it could not
    // read, a missing role, ...) and said why on stderr.
    std::string tail;
    for (const std::string& line : child.err_tail) tail += "\n  " + line;
    if (tail.empty() && !report.parsed) tail = "\n  " + Clip(child.out, 1000);
    throw Error(WEFT_ERR_FAILED, on + "ansible-playbook exited with status " + std::to_string(child.status) +
                                     (tail.empty() ? "" : "; it said:" + tail));
  }

 private:
  // Puts the playbook (and the roles beside it) into `files`; returns its path.
  static fs::path PreparePlaybook(const Task& task, const json& t, const Fields& f, bool bootstrap,
                                  const fs::path& files, const fs::path& dir) {
    if (bootstrap) {
      WriteFile(files / "bootstrap.yml", kBootstrapPlaybook, 0600);
      return files / "bootstrap.yml";
    }
    if (f.resource.empty()) {
      // One playbook, one resource: its name is the playbook's.
      const fs::path source = ResourcePath(t, f.playbook);
      std::error_code ec;
      fs::copy_file(source, files / f.playbook, ec);
      if (ec) throw Error(WEFT_ERR_FAILED, "ansible: cannot copy " + source.string() + ": " + ec.message());
      return files / f.playbook;
    }
    if (!IsArchive(f.resource)) {
      throw Error(WEFT_ERR_INVALID, "ansible: the resource '" + f.resource +
                                        "' must be a .tar.gz, .tgz or .tar archive; a single playbook resource is "
                                        "named by the field 'playbook' alone");
    }
    CheckRelative(f.playbook);
    const fs::path archive = ResourcePath(t, f.resource);
    // GNU tar keeps members inside the directory (it strips leading '/' and
    // refuses '..'); --no-same-owner and --no-same-permissions keep them ours.
    const Child tar =
        Spawn(task, {"tar", "-xf", archive.string(), "-C", files.string(), "--no-same-owner", "--no-same-permissions"},
              {"PATH=/usr/bin:/bin", "LC_ALL=C"}, dir, 120000);
    if (tar.status != 0) {
      std::string tail;
      for (const std::string& line : tar.err_tail) tail += "\n  " + line;
      throw Error(WEFT_ERR_FAILED, "ansible: cannot unpack the resource '" + f.resource + "' (tar status " +
                                       std::to_string(tar.status) + ")" + tail);
    }
    const fs::path playbook = files / f.playbook;
    if (!fs::is_regular_file(playbook)) {
      throw Error(WEFT_ERR_INVALID, "ansible: the resource '" + f.resource + "' has no playbook '" + f.playbook + "'");
    }
    return playbook;
  }
};

}  // namespace

WEFT_PLUGIN(AnsibleAutomator)

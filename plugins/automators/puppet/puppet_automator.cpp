// puppet: applies a Puppet class or manifest on the task's node over the host's
// SSH services. It installs the puppet agent when the node has none, unpacks a
// `puppet` resource holding the module tree into a directory of the service on
// the node, writes the task as Hiera data and runs `puppet apply
// --detailed-exitcodes`. See README.md.
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/plugin.hpp"

namespace {

using json = nlohmann::json;
using weft::sdk::Error;
using weft::sdk::OutputLines;
using weft::sdk::Task;

constexpr std::uint32_t kDefaultTimeoutMs = 10 * 60 * 1000;
constexpr std::uint32_t kInstallTimeoutMs = 10 * 60 * 1000;
constexpr std::size_t kMaxErrorLines = 10;

// Finds puppet on the node, or installs it with the node's package manager.
// Its last line of output is the path of the puppet program. Nodes may share a
// machine (local nodes do), so installs take one lock, as the example catalog's
// shell services do for apt.
constexpr const char* kBootstrapScript = R"SH(
find_puppet() { command -v puppet 2>/dev/null || { test -x /opt/puppetlabs/bin/puppet && echo /opt/puppetlabs/bin/puppet; }; }
if p=$(find_puppet); then echo "puppet $("$p" --version 2>/dev/null) is on the node"; echo "$p"; exit 0; fi
if [ "$WEFT_INSTALL_PUPPET" != true ]; then
  echo "puppet is not installed on this node and the field install_puppet is false; install it there first" >&2; exit 3
fi
echo "puppet is not installed on this node: installing it"
mkdir -p /run/lock
if command -v apt-get >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  echo "installing puppet with apt-get"
  flock /run/lock/weft-apt.lock sh -c 'apt-get install -y -q puppet >/dev/null ||
    { apt-get update -q >/dev/null && apt-get install -y -q puppet >/dev/null; }' || exit 4
elif command -v dnf >/dev/null 2>&1; then echo "installing puppet with dnf"; dnf install -y -q puppet || exit 4
elif command -v yum >/dev/null 2>&1; then echo "installing puppet with yum"; yum install -y -q puppet || exit 4
elif command -v zypper >/dev/null 2>&1; then echo "installing puppet with zypper"; zypper -n -q install puppet || exit 4
elif command -v apk >/dev/null 2>&1; then echo "installing puppet with apk"; apk add -q puppet || exit 4
else echo "no package manager this plugin knows (apt-get, dnf, yum, zypper, apk) is on this node; install puppet there first" >&2; exit 3
fi
p=$(find_puppet) || { echo "the package manager succeeded but no puppet program is on the PATH or in /opt/puppetlabs/bin" >&2; exit 4; }
echo "installed puppet $("$p" --version 2>/dev/null)"
echo "$p"
)SH";

const char* ActionName(weft_action a) {
  const char* name = weft_action_name(a);
  return name ? name : "OTHER";
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}

// A fact of the task's node as the host found it: a string as it is, any other
// value as JSON; empty when the task has none.
std::string Fact(const Task& task, const char* key) {
  const std::optional<std::string> text = task.NodeJson(key);
  if (!text) return {};
  const json v = json::parse(*text, nullptr, false);
  return v.is_string() ? v.get<std::string>() : *text;
}

// A Puppet class name: segments of [a-z][a-z0-9_]* joined by "::", optionally
// starting with "::". Anything else could smuggle code into `include`.
bool IsClassName(std::string_view name) {
  if (name.rfind("::", 0) == 0) name.remove_prefix(2);
  while (true) {
    const std::size_t end = name.find("::");
    const std::string_view part = name.substr(0, end);
    if (part.empty() || part[0] < 'a' || part[0] > 'z') return false;
    for (char c : part)
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
    if (end == std::string_view::npos) return true;
    name.remove_prefix(end + 2);
  }
}

// What the service's fields ask for, checked.
struct Settings {
  std::string modules;      // resource name of the module archive; empty: no modules
  std::string class_name;   // class to include, or
  std::string manifest;     // a manifest path inside the module tree
  json data = json::object();  // extra Hiera keys
  bool install_puppet = true;
  std::uint32_t timeout_ms = kDefaultTimeoutMs;
};

Settings ReadSettings(const Task& task) {
  Settings s;
  auto field = [&](const char* name) -> json {
    const std::optional<std::string> text = task.FieldJson(name);
    return text ? json::parse(*text, nullptr, false) : json();
  };
  auto text = [&](const char* name) {
    const json v = field(name);
    if (v.is_null()) return std::string();
    if (!v.is_string()) throw Error(WEFT_ERR_INVALID, std::string("puppet: the field '") + name + "' must be a string");
    return v.get<std::string>();
  };
  s.modules = text("modules");
  s.class_name = text("class");
  s.manifest = text("manifest");
  if (const json d = field("data"); !d.is_null()) {
    if (!d.is_object()) throw Error(WEFT_ERR_INVALID, "puppet: the field 'data' must be a JSON object of Hiera keys");
    s.data = d;
  }
  if (const json b = field("install_puppet"); !b.is_null()) {
    if (!b.is_boolean()) throw Error(WEFT_ERR_INVALID, "puppet: the field 'install_puppet' must be true or false");
    s.install_puppet = b.get<bool>();
  }
  if (const json t = field("timeout_ms"); !t.is_null()) {
    if (!t.is_number_integer() || t.get<std::int64_t>() < 1 || t.get<std::int64_t>() > 24LL * 3600 * 1000) {
      throw Error(WEFT_ERR_INVALID, "puppet: the field 'timeout_ms' must be an integer from 1 to 86400000");
    }
    s.timeout_ms = static_cast<std::uint32_t>(t.get<std::int64_t>());
  }
  if (!s.class_name.empty() && !s.manifest.empty()) {
    throw Error(WEFT_ERR_INVALID, "puppet: give one of the fields 'class' and 'manifest', not both");
  }
  if (!s.class_name.empty() && !IsClassName(s.class_name)) {
    throw Error(WEFT_ERR_INVALID, "puppet: the field 'class' must be a Puppet class name such as 'web' or "
                                  "'web::server' (lower case letters, digits and '_', parts joined by '::'), got '" +
                                      s.class_name.substr(0, 100) + "'");
  }
  if (s.manifest.find("..") != std::string::npos || (!s.manifest.empty() && s.manifest[0] == '/')) {
    throw Error(WEFT_ERR_INVALID, "puppet: the field 'manifest' is a path inside the module tree (no '/' at the "
                                  "start, no '..'), got '" + s.manifest + "'");
  }
  return s;
}

// The local path of the task's resource `name` (weft-host fetched and checked it).
std::string ResourcePath(const json& t, const std::string& name) {
  std::string known;
  if (auto r = t.find("resources"); r != t.end() && r->is_array()) {
    for (const json& res : *r) {
      if (!res.is_object()) continue;
      const std::string n = res.value("name", std::string());
      if (n == name && res.contains("path") && res["path"].is_string()) return res["path"].get<std::string>();
      known += (known.empty() ? "" : ", ") + n;
    }
  }
  throw Error(WEFT_ERR_INVALID, "puppet: the modules resource '" + name +
                                    "' is not an active 'puppet' resource of this tenant (active: " +
                                    (known.empty() ? "none" : known) +
                                    "); upload it with `weft resource upload puppet " + name +
                                    " FILE`, then stage and sync it");
}

// Streamed output as log lines (weft::sdk::OutputLines) that also keeps
// puppet's "Error:" lines for the message.
class Output {
 public:
  Output(const Task& task, weft_log_level level)
      : lines_(task, level, [this](const std::string& line) { Classify(line); }) {}
  Output(const Output&) = delete;
  Output& operator=(const Output&) = delete;
  void Add(std::string_view chunk) { lines_.Add(chunk); }
  void Flush() { lines_.Flush(); }
  const std::deque<std::string>& tail() const { return lines_.tail(); }
  const std::vector<std::string>& errors() const { return errors_; }
  const std::vector<std::string>& facter_errors() const { return facter_errors_; }

 private:
  // Facter's complaints about facts it cannot read (e.g. /proc/1/environ in
  // a container) come on every run; they explain a failure only when nothing else does.
  void Classify(const std::string& line) {
    if (line.rfind("Error:", 0) != 0) return;
    auto& list = line.rfind("Error: Facter:", 0) == 0 ? facter_errors_ : errors_;
    if (list.size() < kMaxErrorLines) list.push_back(line);
  }

  OutputLines lines_;
  std::vector<std::string> errors_;
  std::vector<std::string> facter_errors_;
};

// What a --detailed-exitcodes status means.
std::string ExitMeaning(int status) {
  switch (status) {
    case 0: return "no changes";
    case 2: return "changes applied";
    case 1: return "the run failed (the catalog could not be compiled or applied)";
    case 4: return "some resources failed";
    case 6: return "changes applied and some resources failed";
    default: return "an exit code puppet apply does not document";
  }
}

class PuppetAutomator : public weft::sdk::Plugin {
 public:
  static weft::sdk::Info Describe() {
    weft::sdk::Info info;
    info.type_name = "puppet";
    info.kind = WEFT_KIND_AUTOMATOR;
    info.version = "1.0";
    info.description =
        "Applies a Puppet class or manifest on the node over SSH (puppet apply), with the task as Hiera data; "
        "installs the puppet agent when the node has none";
    info.actions = {WEFT_ACTION_BOOTSTRAP, WEFT_ACTION_INSTALL, WEFT_ACTION_CONFIGURE, WEFT_ACTION_INITIALIZE,
                    WEFT_ACTION_START,     WEFT_ACTION_STOP,    WEFT_ACTION_REMOVE};
    info.fields = {
        {.name = "modules",
         .label = "Modules resource",
         .type = WEFT_FIELD_STRING,
         .description = "name of a 'puppet' resource: a tar archive (optionally compressed) whose top-level "
                        "directories are Puppet modules; unpacked on the node as the module path"},
        {.name = "class",
         .label = "Class",
         .type = WEFT_FIELD_STRING,
         .description = "the Puppet class to apply (puppet apply -e 'include CLASS'); give class or manifest"},
        {.name = "manifest",
         .label = "Manifest",
         .type = WEFT_FIELD_STRING,
         .description = "path of a manifest inside the modules archive to apply (e.g. site.pp); give class or manifest"},
        {.name = "data",
         .label = "Hiera data",
         .type = WEFT_FIELD_JSON,
         .default_json = "{}",
         .description = "extra Hiera keys, e.g. class parameters {\"web::port\": 8080}; macros are expanded"},
        {.name = "install_puppet",
         .label = "Install puppet",
         .type = WEFT_FIELD_BOOLEAN,
         .default_json = "true",
         .description = "install the puppet agent with the node's package manager when the node has none"},
        {.name = "timeout_ms",
         .label = "Timeout (ms)",
         .type = WEFT_FIELD_INTEGER,
         .default_json = std::to_string(kDefaultTimeoutMs),
         .description = "how long puppet apply may run before it is stopped and the task fails"},
    };
    info.resource_types = {"puppet"};
    return info;
  }

  void Run(weft_action action, Task& task) override {
    const json t = json::parse(task.Json(), nullptr, /*allow_exceptions=*/false);
    if (!t.is_object()) throw Error(WEFT_ERR_INVALID, "the task JSON is not an object");
    const Settings s = ReadSettings(task);
    if (!task.HasSsh()) {
      throw Error(WEFT_ERR_UNSUPPORTED, "puppet: this weft-host has no SSH services (plugin ABI 1.1); upgrade weft-host");
    }
    const std::string node = Fact(task, "hostname").empty() ? Fact(task, "node_id") : Fact(task, "hostname");
    std::string service;
    if (auto sv = t.find("service"); sv != t.end() && sv->is_object()) service = sv->value("name", std::string());

    // 1. The agent. A node's BOOTSTRAP names no service (the job engine hands it
    // to the automator of the node's first service, with no fields): making sure
    // puppet is there is all it does.
    task.Progress(5, "looking for puppet on node " + node);
    const std::string puppet = Bootstrap(task, s, node);
    if (action == WEFT_ACTION_BOOTSTRAP && s.class_name.empty() && s.manifest.empty()) {
      task.Progress(100, "BOOTSTRAP done");
      return;
    }
    if (s.class_name.empty() && s.manifest.empty()) {
      throw Error(WEFT_ERR_INVALID, "puppet: give the field 'class' (a class to apply) or 'manifest' (a manifest in "
                                    "the modules archive)");
    }
    if (!s.manifest.empty() && s.modules.empty()) {
      throw Error(WEFT_ERR_INVALID, "puppet: the field 'manifest' names a file of the modules archive; give 'modules'");
    }

    // 2. The service's directory on the node, with the module tree and the Hiera data.
    task.Progress(15, "preparing the puppet directory of " + (service.empty() ? "the task" : service));
    const std::string dir = PrepareDir(task, service.empty() ? "task" : service, node);
    const std::string q_dir = Task::ShellQuote(dir);
    if (!s.modules.empty()) {
      const std::string archive = ResourcePath(t, s.modules);
      task.Upload(archive, dir + "/modules.tar", 0600, 300000);
      CheckedExec(task,
                  "cd " + q_dir + " && rm -rf modules.new && mkdir modules.new && tar -xf modules.tar -C modules.new" +
                      " && rm -rf modules && mv modules.new modules && rm -f modules.tar",
                  120000, node, "unpacking the modules resource '" + s.modules + "'");
    } else {
      CheckedExec(task, "mkdir -p " + Task::ShellQuote(dir + "/modules"), 30000, node, "making the module directory");
    }
    task.Write(HieraData(t, action, service, dir, s).dump(2) + "\n", dir + "/data/weft.json", 0600, 60000);
    task.Write(HieraConfig(dir), dir + "/hiera.yaml", 0600, 60000);

    // 3. puppet apply, its state kept in the service's directory, so that runs
    // of services sharing a machine never share a lock or a state file.
    std::string apply = Task::ShellQuote(puppet) + " apply --detailed-exitcodes --color=false";
    for (const char* setting : {"confdir", "vardir", "logdir", "rundir", "codedir"}) {
      apply += std::string(" --") + setting + " " + Task::ShellQuote(dir + "/" + setting);
    }
    apply += " --hiera_config " + Task::ShellQuote(dir + "/hiera.yaml");
    apply += " --modulepath " + Task::ShellQuote(dir + "/modules");
    apply += s.manifest.empty() ? " -e " + Task::ShellQuote("include " + s.class_name)
                                : " " + Task::ShellQuote(dir + "/modules/" + s.manifest);
    const std::string what = s.manifest.empty() ? "class " + s.class_name : "manifest " + s.manifest;
    task.Info("puppet apply of " + what + " on node " + node + " for " + ActionName(action));
    task.Progress(30, std::string(ActionName(action)) + ": puppet apply of " + what);
    Output out(task, WEFT_LOG_INFO), err(task, WEFT_LOG_WARN);
    const int status = task.Exec("cd " + q_dir + " && " + apply + " </dev/null", s.timeout_ms,
                                 [&](std::string_view c) { out.Add(c); }, [&](std::string_view c) { err.Add(c); });
    out.Flush();
    err.Flush();
    task.SetResult("puppet_exit_code", std::to_string(status));
    if (status == 0 || status == 2) {
      task.SetResult("puppet_changed", status == 2 ? "true" : "false");
      task.Progress(100, std::string(ActionName(action)) + " done: " + ExitMeaning(status));
      return;
    }
    throw Error(WEFT_ERR_FAILED, FailureMessage(action, what, node, status, out, err));
  }

 private:
  // Finds or installs puppet; returns the path of the program on the node.
  static std::string Bootstrap(const Task& task, const Settings& s, const std::string& node) {
    Output out(task, WEFT_LOG_INFO), err(task, WEFT_LOG_WARN);
    std::string stdout_text;  // its end: the last line names the program
    const std::string script =
        std::string("WEFT_INSTALL_PUPPET=") + (s.install_puppet ? "true" : "false") + "\n" + kBootstrapScript;
    const int status = task.Exec(
        script, kInstallTimeoutMs,
        [&](std::string_view c) {
          out.Add(c);
          stdout_text.append(c);
          if (stdout_text.size() > 8192) stdout_text.erase(0, stdout_text.size() - 4096);
        },
        [&](std::string_view c) { err.Add(c); });
    out.Flush();
    err.Flush();
    while (!stdout_text.empty() && stdout_text.back() == '\n') stdout_text.pop_back();
    const std::string last_line = stdout_text.substr(stdout_text.rfind('\n') == std::string::npos
                                                         ? 0
                                                         : stdout_text.rfind('\n') + 1);
    if (status != 0 || last_line.empty() || last_line[0] != '/') {
      std::string why;
      for (const std::string& line : err.tail().empty() ? out.tail() : err.tail()) why += "\n  " + line;
      throw Error(WEFT_ERR_FAILED, "puppet: " + std::string(status == 3 ? "puppet is missing on node "
                                                                        : "installing puppet failed on node ") +
                                       node + " (status " + std::to_string(status) + ")" +
                                       (why.empty() ? std::string() : ":" + why));
    }
    return last_line;
  }

  // The service's own directory on the node: on the node's disk when it has one
  // ($WEFT_NODE_ROOT, local nodes), so deleting the node removes it; else under
  // /var/lib/weft/nodes/<hostname>, as the example catalog's shell services keep theirs.
  static std::string PrepareDir(const Task& task, const std::string& service, const std::string& node) {
    const std::string dir = CheckedExec(
        task,
        "umask 077 && d=${WEFT_NODE_ROOT:-/var/lib/weft/nodes/" + Task::ShellQuote(node) + "}/puppet/" +
            Task::ShellQuote(service) + " && mkdir -p \"$d/data\" && cd \"$d\" && pwd -P",
        30000, node, "making the puppet directory");
    std::string path = dir;
    while (!path.empty() && path.back() == '\n') path.pop_back();
    if (path.empty() || path[0] != '/' || path.find('\n') != std::string::npos) {
      throw Error(WEFT_ERR_FAILED, "puppet: preparing node " + node + " gave no usable directory ('" +
                                       path.substr(0, 200) + "')");
    }
    return path;
  }

  // What a manifest can look up: the task, with the fields' extra keys on top.
  static json HieraData(const json& t, weft_action action, const std::string& service, const std::string& dir,
                        const Settings& s) {
    const json node = t.value("node", json::object());
    const json results = t.value("results", json::object());
    auto fact = [&](const char* key) {
      if (results.contains(key)) return results[key];
      return node.contains(key) ? node[key] : json();
    };
    const std::string root = dir.substr(0, dir.rfind("/puppet/"));
    json data = {
        {"weft_action", Lower(ActionName(action))},
        {"weft_service", service},
        {"weft_task_id", t.value("task_id", std::int64_t{0})},
        {"weft_cluster", t.value("cluster", json::object())},
        {"weft_config", t.value("config", json::object())},
        {"weft_node",
         {{"id", node.value("id", t.value("node_id", std::string()))},
          {"hostname", fact("hostname")},
          {"access_v4", fact("access_v4")},
          {"bind_v4", fact("bind_v4").is_null() ? fact("access_v4") : fact("bind_v4")},
          {"root", root},
          {"work_dir", dir}}},
        {"weft_services", node.value("services", json::array())},
        {"weft_nodes", t.value("nodes", json::array())},
    };
    for (const auto& [key, value] : s.data.items()) data[key] = value;
    return data;
  }

  static std::string HieraConfig(const std::string& dir) {
    return "---\n"
           "# Written by the puppet automator for one task: the task as Hiera data.\n"
           "version: 5\n"
           "defaults:\n"
           "  datadir: " + json(dir + "/data").dump() + "\n"
           "  data_hash: json_data\n"
           "hierarchy:\n"
           "  - name: \"Weft task\"\n"
           "    path: \"weft.json\"\n";
  }

  static std::string FailureMessage(weft_action action, const std::string& what, const std::string& node,
                                    int status, const Output& out, const Output& err) {
    std::string msg = "puppet: " + std::string(ActionName(action)) + " (" + what + ") on node " + node +
                      " failed: puppet apply exited with " + std::to_string(status) + " (" + ExitMeaning(status) +
                      ")";
    std::vector<std::string> lines(err.errors().begin(), err.errors().end());
    lines.insert(lines.end(), out.errors().begin(), out.errors().end());
    if (lines.empty()) lines = err.facter_errors();
    if (lines.empty()) {
      for (const std::string& line : err.tail().empty() ? out.tail() : err.tail()) lines.push_back(line);
    }
    if (lines.empty()) return msg + " and no output";
    msg += ":";
    for (const std::string& line : lines) msg += "\n  " + line;
    return msg;
  }

  // Runs a preparation command that must succeed; returns its stdout.
  static std::string CheckedExec(const Task& task, const std::string& command, std::uint32_t timeout_ms,
                                 const std::string& node, const std::string& what) {
    std::string out, err;
    const int status = task.Exec(
        command, timeout_ms, [&](std::string_view c) { if (out.size() < 4096) out.append(c); },
        [&](std::string_view c) { if (err.size() < 4096) err.append(c); });
    if (status != 0) {
      throw Error(WEFT_ERR_FAILED, "puppet: " + what + " on node " + node + " failed (status " +
                                       std::to_string(status) + "): " + err.substr(0, 300));
    }
    return out;
  }
};

}  // namespace

WEFT_PLUGIN(PuppetAutomator)

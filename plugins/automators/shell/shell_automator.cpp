// shell: runs an inline command or a local script on the task's node over
// the host's SSH services (ABI 1.1), with node and cluster facts in the
// environment and the expanded cluster config in a JSON file. See README.md.
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/plugin.hpp"

namespace {

using json = nlohmann::json;
using weft::sdk::Error;
using weft::sdk::OutputLines;
using weft::sdk::Task;

constexpr std::uint32_t kDefaultTimeoutMs = 10 * 60 * 1000;
constexpr const char* kBootstrapCommand =
    "test -w /tmp || { echo \"/tmp is not writable for $(id -un)\" >&2; exit 1; }\n"
    "echo \"bootstrap: $(id -un) on $(uname -sr), in $PWD\"\n";

const char* ActionName(weft_action a) {
  const char* name = weft_action_name(a);
  return name ? name : "OTHER";
}

// This action's fields, as the host found them in the task.
json Fields(const Task& task) {
  json fields = json::object();
  for (const char* name : {"command", "script", "args", "timeout_ms"}) {
    if (const std::optional<std::string> text = task.FieldJson(name)) fields[name] = json::parse(*text);
  }
  return fields;
}

// A fact of the task's node, as the host found it: a string as it is, any other
// value as JSON text; empty when the task has none.
std::string Fact(const Task& task, const char* key) {
  const std::optional<std::string> text = task.NodeJson(key);
  if (!text) return {};
  const json v = json::parse(*text);
  return v.is_string() ? v.get<std::string>() : *text;
}

std::string RandomHex() {
  std::random_device rd;
  char buf[20];
  std::snprintf(buf, sizeof buf, "%08x%08x", rd(), rd());
  return buf;
}

class ShellAutomator : public weft::sdk::Plugin {
 public:
  static weft::sdk::Info Describe() {
    weft::sdk::Info info;
    info.type_name = "shell";
    info.kind = WEFT_KIND_AUTOMATOR;
    info.version = "1.0";
    info.description = "Runs a shell command or a script on the node over SSH; the exit status decides success";
    info.actions = {WEFT_ACTION_BOOTSTRAP, WEFT_ACTION_INSTALL, WEFT_ACTION_CONFIGURE, WEFT_ACTION_INITIALIZE,
                    WEFT_ACTION_START,     WEFT_ACTION_STOP,    WEFT_ACTION_REMOVE};
    info.fields = {
        {.name = "command",
         .label = "Command",
         .type = WEFT_FIELD_STRING,
         .description = "a shell command line run on the node; sees args as \"$@\" (give command or script)"},
        {.name = "script",
         .label = "Script",
         .type = WEFT_FIELD_STRING,
         .description = "path of a local file (e.g. a synced script resource) uploaded and run on the node with args"},
        {.name = "args",
         .label = "Arguments",
         .type = WEFT_FIELD_JSON,
         .default_json = "[]",
         .description = "array of strings passed to the command or script"},
        {.name = "timeout_ms",
         .label = "Timeout (ms)",
         .type = WEFT_FIELD_INTEGER,
         .default_json = std::to_string(kDefaultTimeoutMs),
         .description = "how long the command may run before it is stopped and the task fails"},
    };
    info.resource_types = {"scripts"};
    return info;
  }

  void Run(weft_action action, Task& task) override {
    const json t = json::parse(task.Json(), nullptr, /*allow_exceptions=*/false);
    if (!t.is_object()) throw Error(WEFT_ERR_INVALID, "the task JSON is not an object");
    const json fields = Fields(task);
    auto str = [&](const char* name) {
      auto it = fields.find(name);
      if (it == fields.end() || it->is_null()) return std::string();
      if (!it->is_string()) throw Error(WEFT_ERR_INVALID, std::string("shell: field '") + name + "' must be a string");
      return it->get<std::string>();
    };
    std::string command = str("command");
    const std::string script = str("script");
    if (action == WEFT_ACTION_BOOTSTRAP && command.empty() && script.empty()) {
      // A node's BOOTSTRAP names no service: the job engine hands it to the
      // automator of the node's first service, with no fields. Preparing a node
      // for shell actions is making sure they can run: a login over SSH with a
      // shell, and a writable /tmp for their work directories.
      command = kBootstrapCommand;
    }
    if (command.empty() == script.empty()) {
      throw Error(WEFT_ERR_INVALID, "shell: give exactly one of the fields 'command' (inline) and 'script' (a file)");
    }
    std::vector<std::string> args;
    if (auto a = fields.find("args"); a != fields.end() && !a->is_null()) {
      if (a->is_string()) {
        args.push_back(a->get<std::string>());
      } else if (a->is_array()) {
        for (const json& v : *a) args.push_back(v.is_string() ? v.get<std::string>() : v.dump());
      } else {
        throw Error(WEFT_ERR_INVALID, "shell: field 'args' must be an array of strings");
      }
    }
    std::uint32_t timeout_ms = kDefaultTimeoutMs;
    if (auto to = fields.find("timeout_ms"); to != fields.end() && !to->is_null()) {
      if (!to->is_number_integer() || to->get<std::int64_t>() < 1 || to->get<std::int64_t>() > 24LL * 3600 * 1000) {
        throw Error(WEFT_ERR_INVALID, "shell: timeout_ms must be an integer from 1 to 86400000");
      }
      timeout_ms = static_cast<std::uint32_t>(to->get<std::int64_t>());
    }
    if (!task.HasSsh()) {
      throw Error(WEFT_ERR_UNSUPPORTED, "shell: this weft-host has no SSH services (plugin ABI 1.1); upgrade weft-host");
    }

    const std::string node = Fact(task, "hostname").empty() ? Fact(task, "node_id") : Fact(task, "hostname");
    const std::string name = "weft-task-" + std::to_string(t.value("task_id", std::int64_t{0})) + "-" + RandomHex();

    // 1. A private work directory with the config (and the script): on the
    // node's own disk when it has one ($WEFT_NODE_ROOT, local nodes), so that
    // deleting the node removes it even when the command was killed before its
    // EXIT trap ran; else in /tmp.
    task.Progress(5, "preparing the work directory " + name);
    const std::string dir = CheckedExec(
        task,
        "umask 077 && d=${WEFT_NODE_ROOT:+$WEFT_NODE_ROOT/tmp}; d=${d:-/tmp}/" + name +
            " && mkdir -p \"$d\" && printf '%s' \"$d\"",
        30000, node);
    if (dir.empty() || dir[0] != '/' || dir.find('\n') != std::string::npos) {
      throw Error(WEFT_ERR_FAILED, "shell: preparing node " + node + " gave no usable work directory ('" +
                                       dir.substr(0, 200) + "')");
    }
    const std::string q_dir = Task::ShellQuote(dir);
    json config = t.contains("config") ? t["config"] : json::object();
    task.Write(config.dump(2) + "\n", dir + "/config.json", 0600, 60000);
    std::string run;
    if (!script.empty()) {
      task.Upload(script, dir + "/script", 0700, 300000);
      run = Task::ShellQuote(dir + "/script");
      for (const std::string& a : args) run += " " + Task::ShellQuote(a);
    } else {
      run = "set --";
      for (const std::string& a : args) run += " " + Task::ShellQuote(a);
      run += "\n" + command;
    }

    // 2. The command, with the facts exported and the directory removed after.
    std::string env;
    auto put = [&](const char* name, const std::string& value) {
      env += std::string("export ") + name + "=" + Task::ShellQuote(value) + "\n";
    };
    put("WEFT_ACTION", ActionName(action));
    put("WEFT_TASK_ID", std::to_string(t.value("task_id", std::int64_t{0})));
    put("WEFT_CLUSTER_ID", Fact(task, "cluster_id"));
    put("WEFT_NODE_ID", Fact(task, "node_id"));
    put("WEFT_HOSTNAME", Fact(task, "hostname"));
    put("WEFT_ACCESS_V4", Fact(task, "access_v4"));
    put("WEFT_BIND_V4", Fact(task, "bind_v4").empty() ? Fact(task, "access_v4") : Fact(task, "bind_v4"));
    std::string service;
    if (auto s = t.find("service"); s != t.end() && s->is_object()) service = s->value("name", std::string());
    put("WEFT_SERVICE", service);
    std::string hosts;
    if (auto n = t.find("nodes"); n != t.end() && n->is_array()) {
      for (const json& other : *n) {
        if (other.is_object() && other.contains("hostname") && other["hostname"].is_string()) {
          hosts += (hosts.empty() ? "" : " ") + other["hostname"].get<std::string>();
        }
      }
    }
    put("WEFT_CLUSTER_HOSTS", hosts);
    put("WEFT_CONFIG_FILE", dir + "/config.json");
    put("WEFT_WORK_DIR", dir);
    const std::string full = env + "weft_work_dir_=" + q_dir + "\ntrap 'rm -rf -- \"$weft_work_dir_\"' EXIT\ncd " +
                             q_dir + " || exit 1\n" + run + "\n";

    task.Progress(20, std::string(ActionName(action)) + " running");
    OutputLines out(task, WEFT_LOG_INFO), err(task, WEFT_LOG_WARN);
    int status = task.Exec(full, timeout_ms, [&](std::string_view c) { out.Add(c); },
                           [&](std::string_view c) { err.Add(c); });
    out.Flush();
    err.Flush();
    task.SetResult("exit_status", std::to_string(status));
    if (status != 0) {
      std::string tail;
      for (const std::string& line : err.tail().empty() ? out.tail() : err.tail()) tail += "\n  " + line;
      throw Error(WEFT_ERR_FAILED, "shell: " + std::string(ActionName(action)) + " on node " + node +
                                       " exited with status " + std::to_string(status) +
                                       (tail.empty() ? std::string(" and no output") : "; last output:" + tail));
    }
    task.Progress(100, std::string(ActionName(action)) + " done");
  }

 private:
  // Runs a preparation command that must succeed; returns its stdout.
  static std::string CheckedExec(const Task& task, const std::string& command, std::uint32_t timeout_ms,
                                 const std::string& node) {
    std::string out, err;
    int status = task.Exec(
        command, timeout_ms, [&](std::string_view c) { if (out.size() < 4096) out.append(c); },
        [&](std::string_view c) { if (err.size() < 4096) err.append(c); });
    if (status != 0) {
      throw Error(WEFT_ERR_FAILED, "shell: preparing node " + node + " failed (status " + std::to_string(status) +
                                       "): " + err.substr(0, 300));
    }
    return out;
  }
};

}  // namespace

WEFT_PLUGIN(ShellAutomator)

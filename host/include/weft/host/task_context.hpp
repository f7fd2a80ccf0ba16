// TaskContext: one task being run by a plugin, and the host services
// (weft_host_services) that act on it.
//
// The plugin sees a TaskContext only as an opaque weft_task*. The runner that
// runs the task owns the context; other threads (heartbeat, shutdown, timeout
// watchdog) may only call Cancel, cancelled and the const accessors that say so.
// Thread-safety: every member is safe to call from any thread (the plugin may
// call services from threads of its own while run is active).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "weft/plugin.h"

namespace weft::host {

inline constexpr std::size_t kOutputTailBytes = 64 * 1024;
// The most one task's result may be as JSON text: weftd fails an attempt that
// returns more, for good (its task queue's kMaxResultBytes, docs/protocol.md
// "Result limits"). Workers and `weft-host run` apply it (CheckTaskResult).
inline constexpr std::size_t kMaxTaskResultBytes = 256 * 1024;

class TaskContext {
 public:
  // Called for each plugin progress report (percent already clamped to 0..100).
  using ProgressSink = std::function<void(int percent, const std::string& message)>;

  TaskContext(std::string task_json, ProgressSink progress, std::size_t tail_bytes = kOutputTailBytes);
  TaskContext(const TaskContext&) = delete;
  TaskContext& operator=(const TaskContext&) = delete;

  weft_task* handle() { return reinterpret_cast<weft_task*>(this); }
  static TaskContext* FromHandle(weft_task* task) { return reinterpret_cast<TaskContext*>(task); }

  // ---- the services (what the weft_host_services table calls) ----
  void Log(int level, const char* message);
  void Progress(int percent, const char* message);
  int SetResult(const char* key, const char* json_value, char* err, std::size_t err_len);
  const char* TaskJson() const { return task_json_.c_str(); }
  // Replaces the task JSON the plugin sees (the runner adds resource paths).
  // Only before the plugin's run starts: the plugin holds no pointer yet.
  void ReplaceTaskJson(std::string task_json) {
    task_json_ = std::move(task_json);
    parsed_.reset();
    fields_.reset();
  }
  // The kind (weft_plugin_kind) of the plugin that runs the task: which fields
  // FieldJson reads. Only before the plugin's run starts.
  void SetPluginKind(std::uint32_t kind) { plugin_kind_ = kind; }
  // The plugin that runs the task: its kind, and the fields FieldJson reads,
  // with the defaults it declares for fields the task leaves out
  // (ResolvePluginFields, weft/ssh/task_view.hpp). Returns why the task is
  // INVALID for it (a required field missing, a value of the wrong type), else
  // "". Only before the plugin's run starts.
  std::string SetPlugin(const weft_plugin_descriptor& descriptor);
  // field_json and node_json (ABI 1.2): JSON text, or nullptr when the task does
  // not have the value. The text lives as long as the context.
  const char* FieldJson(const char* name);
  const char* NodeJson(const char* key);
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }

  // Asks the plugin to stop. The first reason wins (it becomes the finish message).
  void Cancel(const std::string& reason);
  std::string cancel_reason() const;

  nlohmann::json result() const;
  // Whether set_result refused a value of this task (not JSON, no key): a
  // plugin that then fails INVALID fails on its result, not on its task.
  bool result_refused() const { return result_refused_.load(std::memory_order_acquire); }
  // The last tail_bytes of what the plugin logged (debug/info → stdout, warn/error → stderr).
  std::string stdout_tail() const;
  std::string stderr_tail() const;

 private:
  int SetResultValue(const char* key, const char* json_value, char* err, std::size_t err_len);
  static void Append(std::string& tail, std::string_view line, std::size_t cap);
  // The task, parsed once; mu_ held.
  const nlohmann::json& Parsed();
  // Keeps the text of `value` for as long as the context; mu_ held.
  const char* Keep(std::string key, const nlohmann::json* value);

  std::string task_json_;
  const ProgressSink progress_;
  const std::size_t tail_bytes_;
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> result_refused_{false};
  mutable std::mutex mu_;
  std::string cancel_reason_;
  nlohmann::json result_ = nlohmann::json::object();
  std::string stdout_;
  std::string stderr_;
  std::uint32_t plugin_kind_ = WEFT_KIND_AUTOMATOR;
  std::optional<nlohmann::json> parsed_;
  std::optional<nlohmann::json> fields_;     // set by SetPlugin; else FieldJson reads the task's as they are
  std::map<std::string, std::string> kept_;  // what FieldJson and NodeJson handed out
};

// How one plugin action ended: succeeded, or a message a user reads,
// "<type> <action> <code>: <why>".
struct ActionOutcome {
  bool succeeded = false;
  std::string message;
  std::string code;  // a failure's code as task.finish names it: FAILED, INVALID, UNSUPPORTED, ...
};

// What weftd refuses in a succeeded attempt's result, checked before it is sent
// (docs/protocol.md "Result limits"): a result over kMaxTaskResultBytes as JSON,
// and, when `node_facts` (a job's task on a node, not its DELETE: what weftd checks
// them in), a node fact of the wrong type (weft::CheckNodeFacts).
struct ResultCheck {
  enum class Limit { kNone, kTooLarge, kNodeFacts };
  Limit limit = Limit::kNone;
  // weftd's words after the task's name: "returned a result of N bytes (as JSON),
  // over the limit of 262144 bytes that one task may return", or "returned a
  // result Weft cannot use: 'ssh_port' must be ...".
  std::string what;
  bool ok() const { return limit == Limit::kNone; }
};
ResultCheck CheckTaskResult(const nlohmann::json& result, bool node_facts);

// Runs `action` (its bit) of a loaded plugin on the context's task, through
// `services`, catching what must not cross the ABI. The worker and `weft-host run`
// both report what this returns, so a plugin reads the same either way.
ActionOutcome RunAction(const weft_plugin_descriptor* descriptor, void* instance, const weft_host_services* services,
                        TaskContext& context, std::uint32_t bit, const std::string& type, const std::string& action);

}  // namespace weft::host

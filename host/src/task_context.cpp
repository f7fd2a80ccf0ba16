#include "weft/host/task_context.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "weft/common/log.hpp"
#include "weft/common/node_facts.hpp"
#include "weft/common/wire.hpp"
#include "weft/host/plugin_loader.hpp"
#include "weft/ssh/ssh_services.hpp"
#include "weft/ssh/task_view.hpp"

namespace weft::host {
namespace {

void WriteErr(char* err, std::size_t err_len, const std::string& message) {
  if (!err || err_len == 0) return;
  std::snprintf(err, err_len, "%s", message.c_str());
}

// The services below are called from plugin code, which may be C: nothing may
// throw out of them.
void SvcLog(weft_task* task, int level, const char* message) noexcept {
  try {
    if (!message) return;
    if (task) {
      TaskContext::FromHandle(task)->Log(level, message);
    } else {
      log::Level l = level >= WEFT_LOG_ERROR  ? log::Level::kError
                     : level == WEFT_LOG_WARN ? log::Level::kWarn
                     : level == WEFT_LOG_INFO ? log::Level::kInfo
                                              : log::Level::kDebug;
      if (l >= log::CurrentLevel()) log::Write(l, "plugin", message);
    }
  } catch (...) {
  }
}

void SvcProgress(weft_task* task, int percent, const char* message) noexcept {
  try {
    if (task) TaskContext::FromHandle(task)->Progress(percent, message);
  } catch (...) {
  }
}

int SvcSetResult(weft_task* task, const char* key, const char* json_value, char* err, std::size_t err_len) noexcept {
  try {
    if (!task) {
      WriteErr(err, err_len, "set_result needs the task handle passed to run");
      return WEFT_ERR_INVALID;
    }
    return TaskContext::FromHandle(task)->SetResult(key, json_value, err, err_len);
  } catch (...) {
    WriteErr(err, err_len, "the host could not store the result (out of memory?)");
    return WEFT_ERR_INTERNAL;
  }
}

const char* SvcTaskJson(weft_task* task) noexcept { return task ? TaskContext::FromHandle(task)->TaskJson() : "{}"; }

int SvcCancelled(weft_task* task) noexcept { return task && TaskContext::FromHandle(task)->cancelled() ? 1 : 0; }

// --- 1.1: SSH to the task's node; everything but the task lookup is in weft_ssh. ---
int SvcSshExec(weft_task* task, const char* command, std::uint32_t timeout_ms, weft_output_fn on_stdout,
               weft_output_fn on_stderr, void* user_data, int* exit_status, char* err, std::size_t err_len) noexcept {
  if (!task) {
    WriteErr(err, err_len, "ssh_exec needs the task handle passed to run");
    return WEFT_ERR_INVALID;
  }
  TaskContext* ctx = TaskContext::FromHandle(task);
  return ssh::ServiceExec(ctx->TaskJson(), [ctx] { return ctx->cancelled(); }, command, timeout_ms, on_stdout,
                          on_stderr, user_data, exit_status, err, err_len);
}

int SvcSshUpload(weft_task* task, const char* local_path, const char* remote_path, std::uint32_t mode,
                 std::uint32_t timeout_ms, char* err, std::size_t err_len) noexcept {
  if (!task) {
    WriteErr(err, err_len, "ssh_upload needs the task handle passed to run");
    return WEFT_ERR_INVALID;
  }
  TaskContext* ctx = TaskContext::FromHandle(task);
  return ssh::ServiceUpload(ctx->TaskJson(), [ctx] { return ctx->cancelled(); }, local_path, remote_path, mode,
                            timeout_ms, err, err_len);
}

int SvcSshWrite(weft_task* task, const void* data, std::size_t len, const char* remote_path, std::uint32_t mode,
                std::uint32_t timeout_ms, char* err, std::size_t err_len) noexcept {
  if (!task) {
    WriteErr(err, err_len, "ssh_write needs the task handle passed to run");
    return WEFT_ERR_INVALID;
  }
  TaskContext* ctx = TaskContext::FromHandle(task);
  return ssh::ServiceWrite(ctx->TaskJson(), [ctx] { return ctx->cancelled(); }, data, len, remote_path, mode,
                           timeout_ms, err, err_len);
}

// --- 1.2: the task's fields and node ---
const char* SvcFieldJson(weft_task* task, const char* name) noexcept {
  try {
    return task && name ? TaskContext::FromHandle(task)->FieldJson(name) : nullptr;
  } catch (...) {
    return nullptr;
  }
}

const char* SvcNodeJson(weft_task* task, const char* key) noexcept {
  try {
    return task && key ? TaskContext::FromHandle(task)->NodeJson(key) : nullptr;
  } catch (...) {
    return nullptr;
  }
}

const weft_host_services kServices = {
    .struct_size = sizeof(weft_host_services),
    .abi_major = WEFT_ABI_MAJOR,
    .abi_minor = WEFT_ABI_MINOR,
    .log = &SvcLog,
    .progress = &SvcProgress,
    .set_result = &SvcSetResult,
    .task_json = &SvcTaskJson,
    .cancelled = &SvcCancelled,
    .ssh_exec = &SvcSshExec,
    .ssh_upload = &SvcSshUpload,
    .ssh_write = &SvcSshWrite,
    .field_json = &SvcFieldJson,
    .node_json = &SvcNodeJson,
};

}  // namespace

const weft_host_services* HostServices() { return &kServices; }

TaskContext::TaskContext(std::string task_json, ProgressSink progress, std::size_t tail_bytes)
    : task_json_(std::move(task_json)), progress_(std::move(progress)), tail_bytes_(tail_bytes) {}

void TaskContext::Append(std::string& tail, std::string_view line, std::size_t cap) {
  tail.append(line);
  tail.push_back('\n');
  if (tail.size() <= cap) return;
  std::size_t cut = tail.size() - cap;
  // Do not start the tail in the middle of a UTF-8 sequence.
  while (cut < tail.size() && (static_cast<unsigned char>(tail[cut]) & 0xC0) == 0x80) ++cut;
  tail.erase(0, cut);
}

const nlohmann::json& TaskContext::Parsed() {
  if (!parsed_) {
    parsed_ = nlohmann::json::parse(task_json_, nullptr, /*allow_exceptions=*/false);
    if (!parsed_->is_object()) parsed_ = nlohmann::json::object();
  }
  return *parsed_;
}

const char* TaskContext::Keep(std::string key, const nlohmann::json* value) {
  if (!value) return nullptr;
  // The same text for the same question: a pointer handed out earlier stays valid.
  auto [it, added] = kept_.try_emplace(std::move(key));
  if (added) it->second = value->dump();
  return it->second.c_str();
}

std::string TaskContext::SetPlugin(const weft_plugin_descriptor& descriptor) {
  std::lock_guard<std::mutex> lock(mu_);
  plugin_kind_ = descriptor.kind;
  ResolvedFields resolved = ResolvePluginFields(Parsed(), descriptor);
  fields_ = std::move(resolved.fields);
  kept_.clear();  // nothing was handed out yet: run has not started
  return resolved.error;
}

const char* TaskContext::FieldJson(const char* name) {
  std::lock_guard<std::mutex> lock(mu_);
  const nlohmann::json* value = nullptr;
  if (const nlohmann::json* fields = fields_ ? &*fields_ : PluginFields(Parsed(), plugin_kind_)) {
    auto it = fields->find(name);
    if (it != fields->end() && !it->is_null()) value = &*it;
  }
  return Keep(std::string("field:") + name, value);
}

const char* TaskContext::NodeJson(const char* key) {
  std::lock_guard<std::mutex> lock(mu_);
  return Keep(std::string("node:") + key, NodeFact(Parsed(), key));
}

void TaskContext::Log(int level, const char* message) {
  if (!message) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (level >= WEFT_LOG_WARN) {
    Append(stderr_, message, tail_bytes_);
  } else {
    Append(stdout_, message, tail_bytes_);
  }
}

void TaskContext::Progress(int percent, const char* message) {
  percent = std::clamp(percent, 0, 100);
  if (progress_) progress_(percent, message ? std::string(message) : std::string());
}

int TaskContext::SetResult(const char* key, const char* json_value, char* err, std::size_t err_len) {
  const int rc = SetResultValue(key, json_value, err, err_len);
  if (rc != WEFT_OK) result_refused_.store(true, std::memory_order_release);
  return rc;
}

int TaskContext::SetResultValue(const char* key, const char* json_value, char* err, std::size_t err_len) {
  if (!key || key[0] == '\0') {
    WriteErr(err, err_len, "set_result: the key must be a non-empty string");
    return WEFT_ERR_INVALID;
  }
  if (!json_value) {
    WriteErr(err, err_len, std::string("set_result: the value for '") + key + "' is NULL; pass JSON text");
    return WEFT_ERR_INVALID;
  }
  nlohmann::json value = nlohmann::json::parse(json_value, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    // The value is not echoed: it may be a secret (a password the plugin generated).
    WriteErr(err, err_len,
             std::string("set_result: the value for '") + key + "' is not valid JSON text (" +
                 std::to_string(std::strlen(json_value)) + " bytes); pass JSON, e.g. quote strings");
    return WEFT_ERR_INVALID;
  }
  std::lock_guard<std::mutex> lock(mu_);
  result_[key] = std::move(value);
  return WEFT_OK;
}

void TaskContext::Cancel(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cancel_reason_.empty()) cancel_reason_ = reason;
  }
  cancelled_.store(true, std::memory_order_release);
}

std::string TaskContext::cancel_reason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancel_reason_;
}

nlohmann::json TaskContext::result() const {
  std::lock_guard<std::mutex> lock(mu_);
  return result_;
}

std::string TaskContext::stdout_tail() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stdout_;
}

std::string TaskContext::stderr_tail() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stderr_;
}

namespace {

const char* CodeName(int rc) {
  switch (rc) {
    case WEFT_ERR_FAILED: return "failed";
    case WEFT_ERR_INVALID: return "invalid task";
    case WEFT_ERR_UNSUPPORTED: return "unsupported";
    case WEFT_ERR_CANCELLED: return "cancelled";
    case WEFT_ERR_TIMEOUT: return "timed out";
    case WEFT_ERR_INTERNAL: return "internal error";
    default: return "unknown error code";
  }
}

// The code's name in task.finish's "code" (weftd does not retry INVALID or UNSUPPORTED).
const char* WireCodeName(int rc) {
  switch (rc) {
    case WEFT_ERR_FAILED: return "FAILED";
    case WEFT_ERR_INVALID: return "INVALID";
    case WEFT_ERR_UNSUPPORTED: return "UNSUPPORTED";
    case WEFT_ERR_CANCELLED: return "CANCELLED";
    case WEFT_ERR_TIMEOUT: return "TIMEOUT";
    default: return "INTERNAL";
  }
}

}  // namespace

ResultCheck CheckTaskResult(const nlohmann::json& result, bool node_facts) {
  ResultCheck check;
  if (!result.is_object() || result.empty()) return check;  // what most tasks return: weftd checks nothing
  // Measured as the worker sends it and weftd measures it, in the same order.
  if (const std::size_t bytes = wire::Dump(result).size(); bytes > kMaxTaskResultBytes) {
    check.limit = ResultCheck::Limit::kTooLarge;
    check.what = "returned a result of " + std::to_string(bytes) + " bytes (as JSON), over the limit of " +
                 std::to_string(kMaxTaskResultBytes) + " bytes that one task may return";
  } else if (Status facts = node_facts ? CheckNodeFacts(result) : Status::Ok(); !facts.ok()) {
    check.limit = ResultCheck::Limit::kNodeFacts;
    check.what = "returned a result Weft cannot use: " + facts.message();
  }
  return check;
}

ActionOutcome RunAction(const weft_plugin_descriptor* descriptor, void* instance, const weft_host_services* services,
                        TaskContext& context, std::uint32_t bit, const std::string& type, const std::string& action) {
  char err[4096] = {0};
  int rc = WEFT_ERR_INTERNAL;
  // Defaults, required fields and field types, checked here for every plugin,
  // native or Lua, before any of its code runs.
  if (std::string invalid = context.SetPlugin(*descriptor); !invalid.empty()) {
    return {false, type + " " + action + " " + CodeName(WEFT_ERR_INVALID) + ": " + invalid,
            WireCodeName(WEFT_ERR_INVALID)};
  }
  try {
    rc = descriptor->run(instance, services, context.handle(), bit, err, sizeof err - 1);
  } catch (...) {
    std::snprintf(err, sizeof err, "%s", "run threw a C++ exception; exceptions must not cross the plugin ABI");
  }
  err[sizeof err - 1] = '\0';
  if (rc == WEFT_OK) return {true, "", ""};
  std::string why = err[0] ? err : CodeName(rc);
  if (rc == WEFT_ERR_CANCELLED && !context.cancel_reason().empty()) why = context.cancel_reason();
  // INVALID after a refused set_result: the result was wrong, not the task.
  const std::string what = rc == WEFT_ERR_INVALID && context.result_refused() ? "invalid result" : CodeName(rc);
  return {false, type + " " + action + " " + what + ": " + why, WireCodeName(rc)};
}

}  // namespace weft::host

// weft/plugin.hpp: write a native Weft plugin as a C++ class plus one macro.
//
//   class Hello : public weft::sdk::Plugin {
//    public:
//     static weft::sdk::Info Describe() {
//       weft::sdk::Info info;
//       info.type_name = "hello";
//       info.kind = WEFT_KIND_AUTOMATOR;
//       info.actions = {WEFT_ACTION_INSTALL, WEFT_ACTION_START};
//       info.fields = {{.name = "greeting", .label = "Greeting", .default_json = "\"hi\""}};
//       return info;
//     }
//     void Run(weft_action action, weft::sdk::Task& task) override {
//       task.Info("saying hello");
//       task.SetResult("said", "true");
//     }
//   };
//   WEFT_PLUGIN(Hello)
//
// Header-only; everything here compiles into the plugin, so only the C ABI of
// weft/plugin.h crosses into the host. Exceptions thrown by Run (or by the
// constructor) are caught here and become an error code and message: throw
// weft::sdk::Error for a chosen code, any std::exception for WEFT_ERR_FAILED.
//
// Threading: Run may be called from several threads at once on one instance;
// guard any state the instance keeps between tasks.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "weft/plugin.h"

namespace weft::sdk {

// Throw to fail a task with a specific code (WEFT_ERR_*).
class Error : public std::runtime_error {
 public:
  Error(int code, const std::string& message) : std::runtime_error(message), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

// Written with designated initializers, naming only what differs from the
// defaults: {.name = "greeting", .label = "Greeting", .default_json = "\"hi\""}.
struct Field {
  std::string name{};
  std::string label{};
  weft_field_type type = WEFT_FIELD_STRING;
  bool required = false;
  bool sensitive = false;
  std::string default_json{};  // empty: no default
  std::string description{};
};

struct Info {
  std::string type_name;
  weft_plugin_kind kind = WEFT_KIND_AUTOMATOR;
  std::vector<weft_action> actions;
  std::string version;
  std::string description;
  std::vector<Field> fields;
  std::vector<std::string> resource_types;
};

// The task being run, with the host's services. Valid only inside Run.
class Task {
 public:
  Task(const weft_host_services* host, weft_task* task) : host_(host), task_(task) {}

  // The task as JSON text (see docs/protocol.md).
  std::string_view Json() const {
    const char* s = host_->task_json(task_);
    return s ? std::string_view(s) : std::string_view("{}");
  }
  void Log(weft_log_level level, const std::string& message) const { host_->log(task_, level, message.c_str()); }
  void Debug(const std::string& m) const { Log(WEFT_LOG_DEBUG, m); }
  void Info(const std::string& m) const { Log(WEFT_LOG_INFO, m); }
  void Warn(const std::string& m) const { Log(WEFT_LOG_WARN, m); }
  void Progress(int percent, const std::string& message = {}) const {
    host_->progress(task_, percent, message.empty() ? nullptr : message.c_str());
  }
  // Sets a result field; `json_value` is JSON text ("\"i-123\"", "42", "{...}").
  void SetResult(const std::string& key, const std::string& json_value) const {
    char err[256] = {0};
    int rc = host_->set_result(task_, key.c_str(), json_value.c_str(), err, sizeof err);
    if (rc != WEFT_OK) throw Error(rc, std::string("set_result('") + key + "'): " + err);
  }
  // Convenience: sets a string result (quoted and escaped for you).
  void SetResultString(const std::string& key, std::string_view value) const { SetResult(key, Quote(value)); }
  bool Cancelled() const { return host_->cancelled(task_) != 0; }
  const weft_host_services* host() const { return host_; }

  // ---- the task's fields and node, found by the host (ABI 1.2) ----
  // Each returns JSON text ("\"10.0.0.5\"", "22", "{...}"), or nullopt when the
  // task does not have the value, and throws Error(WEFT_ERR_UNSUPPORTED, ...) on
  // a host older than 1.2.
  // This plugin's field `name`: the provider's fields for a provider, the
  // service action's for an automator.
  std::optional<std::string> FieldJson(const std::string& name) const {
    Require("field_json", WEFT_HOST_HAS(host_, field_json) && host_->field_json, "it arrived in 1.2");
    const char* s = host_->field_json(task_, name.c_str());
    return s ? std::optional<std::string>(s) : std::nullopt;
  }
  // A fact about the task's node: "hostname", "access_v4", "ssh_port",
  // "ssh_auth", "host_keys", "provider_id", ...
  std::optional<std::string> NodeJson(const std::string& key) const {
    Require("node_json", WEFT_HOST_HAS(host_, node_json) && host_->node_json, "it arrived in 1.2");
    const char* s = host_->node_json(task_, key.c_str());
    return s ? std::optional<std::string>(s) : std::nullopt;
  }

  // ---- SSH to the task's node (ABI 1.1; docs/ssh.md) ----
  // Each throws Error(WEFT_ERR_UNSUPPORTED, ...) on a host without SSH
  // services, and Error(code, message) when the call fails. A nonzero exit
  // status of the command is returned, not thrown.
  using OutputFn = std::function<void(std::string_view chunk)>;

  bool HasSsh() const { return WEFT_HOST_HAS(host_, ssh_exec) && host_->ssh_exec != nullptr; }

  // Runs `command` on the node; returns its exit status. timeout_ms 0: host default.
  int Exec(const std::string& command, std::uint32_t timeout_ms = 0, const OutputFn& on_stdout = {},
           const OutputFn& on_stderr = {}) const {
    RequireSsh("ssh_exec", WEFT_HOST_HAS(host_, ssh_exec) && host_->ssh_exec);
    Sinks sinks{&on_stdout, &on_stderr, nullptr};
    int exit_status = -1;
    char err[512] = {0};
    int rc = host_->ssh_exec(task_, command.c_str(), timeout_ms, on_stdout ? &Sinks::Out : nullptr,
                             on_stderr ? &Sinks::Err : nullptr, &sinks, &exit_status, err, sizeof err);
    // An exception from a callback was kept out of the host's C frames; rethrow it here.
    if (sinks.error) std::rethrow_exception(sinks.error);
    if (rc != WEFT_OK) throw Error(rc, err[0] ? err : "ssh_exec failed");
    return exit_status;
  }
  // Copies a local file to the node.
  void Upload(const std::string& local_path, const std::string& remote_path, std::uint32_t mode = 0644,
              std::uint32_t timeout_ms = 0) const {
    RequireSsh("ssh_upload", WEFT_HOST_HAS(host_, ssh_upload) && host_->ssh_upload);
    char err[512] = {0};
    int rc = host_->ssh_upload(task_, local_path.c_str(), remote_path.c_str(), mode, timeout_ms, err, sizeof err);
    if (rc != WEFT_OK) throw Error(rc, err[0] ? err : "ssh_upload failed");
  }
  // Writes bytes to a file on the node.
  void Write(std::string_view bytes, const std::string& remote_path, std::uint32_t mode = 0644,
             std::uint32_t timeout_ms = 0) const {
    RequireSsh("ssh_write", WEFT_HOST_HAS(host_, ssh_write) && host_->ssh_write);
    char err[512] = {0};
    int rc = host_->ssh_write(task_, bytes.data(), bytes.size(), remote_path.c_str(), mode, timeout_ms, err,
                              sizeof err);
    if (rc != WEFT_OK) throw Error(rc, err[0] ? err : "ssh_write failed");
  }

  // Quotes s for a POSIX shell: 'it'\''s'.
  static std::string ShellQuote(std::string_view s) {
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

  static std::string Quote(std::string_view s) {
    std::string out = "\"";
    for (unsigned char c : s) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
          if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
          } else {
            out += static_cast<char>(c);
          }
      }
    }
    return out + "\"";
  }

 private:
  struct Sinks {
    const OutputFn* out;
    const OutputFn* err;
    std::exception_ptr error;
    static void Out(void* self, const char* data, std::size_t len) { Call(self, true, data, len); }
    static void Err(void* self, const char* data, std::size_t len) { Call(self, false, data, len); }
    static void Call(void* self, bool out, const char* data, std::size_t len) {
      auto* s = static_cast<Sinks*>(self);
      if (s->error) return;
      try {
        (*(out ? s->out : s->err))(std::string_view(data, len));
      } catch (...) {
        s->error = std::current_exception();
      }
    }
  };
  void RequireSsh(const char* member, bool present) const {
    Require(member, present, "SSH services arrived in 1.1");
  }
  // `since`: when the member arrived, for the message.
  void Require(const char* member, bool present, const char* since) const {
    if (present) return;
    char msg[200];
    std::snprintf(msg, sizeof msg, "this weft-host offers plugin ABI %u.%u, which has no %s (%s); upgrade weft-host",
                  host_->abi_major, host_->abi_minor, member, since);
    throw Error(WEFT_ERR_UNSUPPORTED, msg);
  }

  const weft_host_services* host_;
  weft_task* task_;
};

// Streamed output (Task::Exec's chunks, a pipe's reads) as log lines: each
// complete line, or each kMaxLineBytes of a longer one, goes to the task's log
// at `level` and to `on_line` when given; the last kKeptLines stay for an error
// message. Flush() once the stream ends logs a last line that had no newline.
//
//   weft::sdk::OutputLines out(task, WEFT_LOG_INFO), err(task, WEFT_LOG_WARN);
//   int status = task.Exec(cmd, 0, [&](std::string_view c) { out.Add(c); },
//                          [&](std::string_view c) { err.Add(c); });
//   out.Flush();
//   err.Flush();
class OutputLines {
 public:
  static constexpr std::size_t kMaxLineBytes = 4096;
  static constexpr std::size_t kKeptLines = 20;
  using LineFn = std::function<void(const std::string& line)>;

  OutputLines(const Task& task, weft_log_level level, LineFn on_line = {})
      : task_(task), level_(level), on_line_(std::move(on_line)) {}

  void Add(std::string_view chunk) {
    while (!chunk.empty()) {
      const std::size_t room = kMaxLineBytes - partial_.size();
      const std::size_t newline = chunk.substr(0, room).find('\n');
      if (newline != std::string_view::npos) {
        partial_.append(chunk.substr(0, newline));
        chunk.remove_prefix(newline + 1);
      } else {
        const std::size_t take = std::min(room, chunk.size());
        partial_.append(chunk.substr(0, take));
        chunk.remove_prefix(take);
        if (partial_.size() < kMaxLineBytes) break;
      }
      Flush();
    }
  }
  void Flush() {
    if (partial_.empty()) return;
    task_.Log(level_, partial_);
    if (on_line_) on_line_(partial_);
    tail_.push_back(std::move(partial_));
    if (tail_.size() > kKeptLines) tail_.pop_front();
    partial_.clear();
  }
  // The last lines, oldest first.
  const std::deque<std::string>& tail() const { return tail_; }

 private:
  const Task& task_;
  const weft_log_level level_;
  const LineFn on_line_;
  std::string partial_;
  std::deque<std::string> tail_;
};

class Plugin {
 public:
  virtual ~Plugin() = default;
  virtual void Run(weft_action action, Task& task) = 0;
};

namespace detail {

inline void CopyError(char* err, std::size_t err_len, const char* message) {
  if (!err || err_len == 0) return;
  std::snprintf(err, err_len, "%s", message);
}

// Owns the descriptor and every string it points at, for the library's lifetime.
template <typename P>
class Registration {
 public:
  Registration() : info_(P::Describe()) {
    for (weft_action a : info_.actions) actions_ |= static_cast<std::uint32_t>(a);
    for (const Field& f : info_.fields) {
      weft_field c{};
      c.name = f.name.c_str();
      c.label = f.label.c_str();
      c.type = static_cast<std::uint32_t>(f.type);
      c.flags = (f.required ? WEFT_FIELD_REQUIRED : 0u) | (f.sensitive ? WEFT_FIELD_SENSITIVE : 0u);
      c.default_json = f.default_json.empty() ? nullptr : f.default_json.c_str();
      c.description = f.description.empty() ? nullptr : f.description.c_str();
      fields_.push_back(c);
    }
    for (const std::string& r : info_.resource_types) resources_.push_back(r.c_str());
    d_.struct_size = sizeof(weft_plugin_descriptor);
    d_.abi_major = WEFT_ABI_MAJOR;
    d_.abi_minor = WEFT_ABI_MINOR;
    d_.kind = static_cast<std::uint32_t>(info_.kind);
    d_.type_name = info_.type_name.c_str();
    d_.version = info_.version.empty() ? nullptr : info_.version.c_str();
    d_.description = info_.description.empty() ? nullptr : info_.description.c_str();
    d_.actions = actions_;
    d_.field_count = static_cast<std::uint32_t>(fields_.size());
    d_.field_size = sizeof(weft_field);
    d_.resource_type_count = static_cast<std::uint32_t>(resources_.size());
    d_.fields = fields_.empty() ? nullptr : fields_.data();
    d_.resource_types = resources_.empty() ? nullptr : resources_.data();
    d_.init = &Init;
    d_.run = &Run;
    d_.destroy = &Destroy;
  }
  const weft_plugin_descriptor* descriptor() const { return &d_; }

 private:
  static int Init(const weft_host_services*, void** instance, char* err, std::size_t err_len) {
    try {
      *instance = new P();
      return WEFT_OK;
    } catch (const std::exception& e) {
      CopyError(err, err_len, e.what());
    } catch (...) {
      CopyError(err, err_len, "plugin constructor threw a non-standard exception");
    }
    return WEFT_ERR_INTERNAL;
  }

  static int Run(void* instance, const weft_host_services* host, weft_task* task, std::uint32_t action, char* err,
                 std::size_t err_len) {
    try {
      Task t(host, task);
      static_cast<P*>(instance)->Run(static_cast<weft_action>(action), t);
      return WEFT_OK;
    } catch (const Error& e) {
      CopyError(err, err_len, e.what());
      return e.code() == WEFT_OK ? WEFT_ERR_FAILED : e.code();
    } catch (const std::exception& e) {
      CopyError(err, err_len, e.what());
    } catch (...) {
      CopyError(err, err_len, "plugin threw a non-standard exception");
    }
    return WEFT_ERR_FAILED;
  }

  static void Destroy(void* instance) { delete static_cast<P*>(instance); }

  Info info_;
  std::uint32_t actions_ = 0;
  std::vector<weft_field> fields_;
  std::vector<const char*> resources_;
  weft_plugin_descriptor d_{};
};

// A function, not an inline `<`: while WEFT_ABI_MINOR is 0 the comparison is
// constant and -Wtype-limits (-Wextra) would break plugins built with -Werror.
inline bool OlderMinor(std::uint32_t have, std::uint32_t need) { return have < need; }

template <typename P>
const weft_plugin_descriptor* Entry(std::uint32_t host_major, std::uint32_t host_minor, char* err,
                                    std::size_t err_len) {
  if (host_major != WEFT_ABI_MAJOR || OlderMinor(host_minor, WEFT_ABI_MINOR)) {
    char msg[160];
    std::snprintf(msg, sizeof msg, "plugin needs Weft plugin ABI %u.%u or a later %u.x; the host offers %u.%u",
                  WEFT_ABI_MAJOR, WEFT_ABI_MINOR, WEFT_ABI_MAJOR, host_major, host_minor);
    CopyError(err, err_len, msg);
    return nullptr;
  }
  try {
    static const Registration<P> registration;
    return registration.descriptor();
  } catch (const std::exception& e) {
    CopyError(err, err_len, e.what());
  } catch (...) {
    CopyError(err, err_len, "plugin's Describe() threw a non-standard exception");
  }
  return nullptr;
}

}  // namespace detail
}  // namespace weft::sdk

// Exports the entry symbol for plugin class `Class` (one per shared library).
#define WEFT_PLUGIN(Class)                                                                               \
  extern "C" WEFT_PLUGIN_EXPORT const weft_plugin_descriptor* weft_plugin_entry(                          \
      std::uint32_t host_abi_major, std::uint32_t host_abi_minor, char* err, std::size_t err_len) {       \
    return ::weft::sdk::detail::Entry<Class>(host_abi_major, host_abi_minor, err, err_len);               \
  }

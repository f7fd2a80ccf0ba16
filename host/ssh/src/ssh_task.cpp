#include <cstdio>
#include <exception>

#include "weft/ssh/ssh.hpp"
#include "weft/ssh/ssh_services.hpp"
#include "weft/ssh/task_view.hpp"

namespace weft::host::ssh {
namespace {

using json = nlohmann::json;

void WriteErr(char* err, std::size_t err_len, const std::string& message) {
  if (!err || err_len == 0) return;
  std::snprintf(err, err_len, "%s", message.c_str());
}

int CodeFor(const Status& s) {
  switch (s.code()) {
    case Code::kTimeout: return WEFT_ERR_TIMEOUT;
    case Code::kConflict: return WEFT_ERR_CANCELLED;
    case Code::kInvalid: return WEFT_ERR_INVALID;
    case Code::kInternal: return WEFT_ERR_INTERNAL;
    default: return WEFT_ERR_FAILED;
  }
}

int Fail(const Status& s, char* err, std::size_t err_len) {
  WriteErr(err, err_len, s.message());
  return CodeFor(s);
}

Result<Target> ParseTarget(const char* task_json) {
  if (!task_json) return Status::Invalid("the SSH service needs the task handle passed to run");
  json t = json::parse(task_json, nullptr, /*allow_exceptions=*/false);
  if (!t.is_object()) return Status::Invalid("the task JSON is not an object");
  return TargetFromTask(t);
}

// Runs op on a pooled session; retries once on a fresh connection when a
// reused one turns out dead before anything ran on it.
template <typename Op>
Status WithSession(const Target& target, const CancelledFn& cancelled, Op op) {
  for (int attempt = 0;; ++attempt) {
    if (cancelled && cancelled()) return Status::Conflict("SSH to node " + target.Name() + " cancelled: the task was asked to stop");
    WEFT_ASSIGN_OR_RETURN(auto lease, Pool::Default().Acquire(target, kConnectTimeoutMs));
    bool retryable = false;
    Status s = op(*lease, &retryable);
    if (s.ok() || attempt > 0 || !lease.reused() || !retryable) return s;
  }
}

}  // namespace

Result<Target> TargetFromTask(const json& t) {
  Target target;
  if (const json* h = NodeFact(t, "hostname"); h && h->is_string()) target.node = h->get<std::string>();
  if (target.node.empty()) {
    if (const json* n = NodeFact(t, "node_id"); n && n->is_string()) target.node = n->get<std::string>();
  }
  const std::string who = "node " + (target.node.empty() ? std::string("(unnamed)") : target.node);
  const json* address = NodeFact(t, "access_v4");
  if (!address || !address->is_string() || address->get<std::string>().empty()) {
    return Status::Invalid("the task for " + who +
                           " has no access_v4 address; the provider's CONFIRM must return it before SSH can be used");
  }
  target.address = address->get<std::string>();
  if (const json* port = NodeFact(t, "ssh_port")) {
    if (!port->is_number_integer() || port->get<std::int64_t>() < 1 || port->get<std::int64_t>() > 65535) {
      return Status::Invalid("the task for " + who + " has an ssh_port that is not an integer 1-65535");
    }
    target.port = static_cast<std::uint16_t>(port->get<std::int64_t>());
  }
  const json* auth = NodeFact(t, "ssh_auth");
  if (!auth || !auth->is_object()) {
    return Status::Invalid("the task for " + who +
                           " has no ssh_auth object; the provider's CREATE must return {user, private_key}");
  }
  if (auto u = auth->find("user"); u != auth->end() && u->is_string() && !u->get<std::string>().empty()) {
    target.user = u->get<std::string>();
  }
  if (auto k = auth->find("private_key"); k != auth->end() && k->is_string()) target.private_key = k->get<std::string>();
  if (auto p = auth->find("passphrase"); p != auth->end() && p->is_string()) target.passphrase = p->get<std::string>();
  if (target.private_key.empty()) {
    return Status::Invalid("the task for " + who + " has no ssh_auth.private_key; key authentication is the only kind "
                           "Weft uses");
  }
  const json* keys = NodeFact(t, "host_keys");
  if (keys && keys->is_string()) {
    target.host_keys.push_back(keys->get<std::string>());
  } else if (keys && keys->is_array()) {
    for (const json& k : *keys) {
      if (k.is_string()) target.host_keys.push_back(k.get<std::string>());
    }
  }
  if (target.host_keys.empty()) {
    return Status::Invalid("the task for " + who +
                           " has no host_keys; the provider's CONFIRM must report the node's SSH host keys (Weft "
                           "never connects without checking them)");
  }
  return target;
}

int ServiceExec(const char* task_json, const CancelledFn& cancelled, const char* command, std::uint32_t timeout_ms,
                OutputCallback on_stdout, OutputCallback on_stderr, void* user_data, int* exit_status, char* err,
                std::size_t err_len) noexcept {
  try {
    if (!command || !exit_status) {
      WriteErr(err, err_len, "ssh_exec needs a command and an exit_status pointer");
      return WEFT_ERR_INVALID;
    }
    auto target = ParseTarget(task_json);
    if (!target.ok()) return Fail(target.status(), err, err_len);
    const int timeout = static_cast<int>(timeout_ms ? timeout_ms : kDefaultExecTimeoutMs);
    OutputFn out, errf;
    if (on_stdout) out = [&](std::string_view c) { on_stdout(user_data, c.data(), c.size()); };
    if (on_stderr) errf = [&](std::string_view c) { on_stderr(user_data, c.data(), c.size()); };
    ExecResult result;
    Status s = WithSession(*target, cancelled, [&](Session& session, bool* retryable) -> Status {
      auto r = session.Exec(command, timeout, out, errf, cancelled);
      if (!r.ok()) {
        *retryable = !session.command_started() && r.status().code() == Code::kUnavailable;
        return r.status();
      }
      result = *r;
      return Status::Ok();
    });
    if (!s.ok()) return Fail(s, err, err_len);
    *exit_status = result.exit_status;
    return WEFT_OK;
  } catch (const std::exception& e) {
    WriteErr(err, err_len, std::string("ssh_exec failed inside the host: ") + e.what());
  } catch (...) {
    WriteErr(err, err_len, "ssh_exec failed inside the host");
  }
  return WEFT_ERR_INTERNAL;
}

namespace {

// ssh_write, and ssh_upload once it read the file: `op` names the service in errors.
int WriteBytes(const char* task_json, const CancelledFn& cancelled, const void* data, std::size_t len,
               const char* remote_path, std::uint32_t mode, std::uint32_t timeout_ms, char* err, std::size_t err_len,
               std::string_view op) noexcept {
  try {
    if (!remote_path || (!data && len > 0)) {
      WriteErr(err, err_len, "ssh_write needs a remote path and data");
      return WEFT_ERR_INVALID;
    }
    auto target = ParseTarget(task_json);
    if (!target.ok()) return Fail(target.status(), err, err_len);
    const int timeout = static_cast<int>(timeout_ms ? timeout_ms : kDefaultUploadTimeoutMs);
    std::string_view bytes(static_cast<const char*>(data), len);
    Status s = WithSession(*target, cancelled, [&](Session& session, bool* retryable) -> Status {
      Status w = session.Write(bytes, remote_path, static_cast<int>(mode), timeout, op);
      // A dead pooled connection shows up as an unhealthy session.
      *retryable = !w.ok() && !session.healthy() && w.code() == Code::kUnavailable;
      return w;
    });
    if (!s.ok()) return Fail(s, err, err_len);
    return WEFT_OK;
  } catch (const std::exception& e) {
    WriteErr(err, err_len, "ssh_" + std::string(op) + " failed inside the host: " + e.what());
  } catch (...) {
    WriteErr(err, err_len, op == "upload" ? "ssh_upload failed inside the host" : "ssh_write failed inside the host");
  }
  return WEFT_ERR_INTERNAL;
}

}  // namespace

int ServiceWrite(const char* task_json, const CancelledFn& cancelled, const void* data, std::size_t len,
                 const char* remote_path, std::uint32_t mode, std::uint32_t timeout_ms, char* err,
                 std::size_t err_len) noexcept {
  return WriteBytes(task_json, cancelled, data, len, remote_path, mode, timeout_ms, err, err_len, "write");
}

int ServiceUpload(const char* task_json, const CancelledFn& cancelled, const char* local_path,
                  const char* remote_path, std::uint32_t mode, std::uint32_t timeout_ms, char* err,
                  std::size_t err_len) noexcept {
  try {
    if (!local_path || !remote_path) {
      WriteErr(err, err_len, "ssh_upload needs a local and a remote path");
      return WEFT_ERR_INVALID;
    }
    std::FILE* f = std::fopen(local_path, "rb");
    if (!f) {
      WriteErr(err, err_len, std::string("ssh_upload: cannot read the local file ") + local_path);
      return WEFT_ERR_INVALID;
    }
    std::string bytes;
    char buf[65536];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.append(buf, n);
    const bool bad = std::ferror(f) != 0;
    std::fclose(f);
    if (bad) {
      WriteErr(err, err_len, std::string("ssh_upload: reading the local file ") + local_path + " failed");
      return WEFT_ERR_FAILED;
    }
    return WriteBytes(task_json, cancelled, bytes.data(), bytes.size(), remote_path, mode, timeout_ms, err, err_len,
                      "upload");
  } catch (const std::exception& e) {
    WriteErr(err, err_len, std::string("ssh_upload failed inside the host: ") + e.what());
  } catch (...) {
    WriteErr(err, err_len, "ssh_upload failed inside the host");
  }
  return WEFT_ERR_INTERNAL;
}

}  // namespace weft::host::ssh

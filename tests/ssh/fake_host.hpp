// Test helper: a stand-in for weft-host's services table, wired to the SSH
// services exactly as the host wires them (weft::host::ssh::Service*), and a
// plugin .so loaded and driven through its descriptor. Fields are resolved as a
// worker resolves them (weft::host::ResolvePluginFields): the plugin sees the
// declared defaults, and a task the host would refuse as INVALID is refused here.
#pragma once

#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/temp_dir.hpp"
#include "weft/plugin.h"
#include "weft/ssh/ssh_services.hpp"
#include "weft/ssh/task_view.hpp"

namespace weft::testing {

// What the stand-in services record for one task.
struct FakeTask {
  explicit FakeTask(std::string text) : json_text(std::move(text)) {}
  std::string json_text;
  std::vector<std::string> logs;  // every log line and progress note
  nlohmann::json results = nlohmann::json::object();
  std::atomic<bool> cancelled{false};
  std::uint32_t kind = WEFT_KIND_PROVIDER;   // whose fields field_json finds (LoadedPlugin::Run sets it)
  std::optional<nlohmann::json> fields;      // resolved with the plugin's defaults (LoadedPlugin::Run sets it)
  std::map<std::string, std::string> kept;  // the text field_json and node_json handed out

  const char* Keep(const std::string& key, const nlohmann::json* value) {
    return value ? kept.try_emplace(key, value->dump()).first->second.c_str() : nullptr;
  }

  std::string AllLogs() const {
    std::string all;
    for (const std::string& l : logs) all += l + "\n";
    return all;
  }
};

inline FakeTask* F(weft_task* t) { return reinterpret_cast<FakeTask*>(t); }

// with_ssh false: a 1.0 host (struct_size ends before ssh_exec).
inline weft_host_services FakeServices(bool with_ssh = true) {
  weft_host_services s{};
  s.struct_size = with_ssh ? sizeof s : offsetof(weft_host_services, ssh_exec);
  s.abi_major = WEFT_ABI_MAJOR;
  s.abi_minor = with_ssh ? WEFT_ABI_MINOR : 0;
  s.log = [](weft_task* t, int, const char* m) {
    if (t && m) F(t)->logs.push_back(m);
  };
  s.progress = [](weft_task* t, int, const char* m) {
    if (t && m) F(t)->logs.push_back(m);
  };
  s.set_result = [](weft_task* t, const char* key, const char* value, char* err, size_t err_len) -> int {
    nlohmann::json v = nlohmann::json::parse(value, nullptr, false);
    if (v.is_discarded()) {
      std::snprintf(err, err_len, "not JSON");
      return WEFT_ERR_INVALID;
    }
    F(t)->results[key] = v;
    return WEFT_OK;
  };
  s.task_json = [](weft_task* t) -> const char* { return F(t)->json_text.c_str(); };
  s.cancelled = [](weft_task* t) -> int { return F(t)->cancelled.load() ? 1 : 0; };
  if (!with_ssh) return s;
  // --- 1.1: exactly what weft-host's table does (see docs/ssh.md) ---
  s.ssh_exec = [](weft_task* t, const char* command, uint32_t timeout_ms, weft_output_fn out, weft_output_fn err_fn,
                  void* user, int* exit_status, char* err, size_t err_len) -> int {
    return host::ssh::ServiceExec(F(t)->json_text.c_str(), [t] { return F(t)->cancelled.load(); }, command,
                                  timeout_ms, out, err_fn, user, exit_status, err, err_len);
  };
  s.ssh_upload = [](weft_task* t, const char* local_path, const char* remote_path, uint32_t mode,
                    uint32_t timeout_ms, char* err, size_t err_len) -> int {
    return host::ssh::ServiceUpload(F(t)->json_text.c_str(), [t] { return F(t)->cancelled.load(); }, local_path,
                                    remote_path, mode, timeout_ms, err, err_len);
  };
  s.ssh_write = [](weft_task* t, const void* data, size_t len, const char* remote_path, uint32_t mode,
                   uint32_t timeout_ms, char* err, size_t err_len) -> int {
    return host::ssh::ServiceWrite(F(t)->json_text.c_str(), [t] { return F(t)->cancelled.load(); }, data, len,
                                   remote_path, mode, timeout_ms, err, err_len);
  };
  // --- 1.2: found where weft-host finds them (weft/ssh/task_view.hpp) ---
  s.field_json = [](weft_task* t, const char* name) -> const char* {
    const nlohmann::json task = nlohmann::json::parse(F(t)->json_text);
    const nlohmann::json* fields = F(t)->fields ? &*F(t)->fields : host::PluginFields(task, F(t)->kind);
    auto it = fields ? fields->find(name) : task.end();
    return F(t)->Keep(std::string("field:") + name, fields && it != fields->end() && !it->is_null() ? &*it : nullptr);
  };
  s.node_json = [](weft_task* t, const char* key) -> const char* {
    const nlohmann::json task = nlohmann::json::parse(F(t)->json_text);
    return F(t)->Keep(std::string("node:") + key, host::NodeFact(task, key));
  };
  return s;
}

class LoadedPlugin {
 public:
  explicit LoadedPlugin(const std::string& relative_so, bool with_ssh = true) : services_(FakeServices(with_ssh)) {
    const std::filesystem::path so = BuildPath(relative_so);
    lib_ = ::dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib_) FAIL("dlopen " << so << ": " << ::dlerror());
    auto entry = reinterpret_cast<weft_plugin_entry_fn>(::dlsym(lib_, WEFT_PLUGIN_ENTRY_SYMBOL));
    REQUIRE(entry != nullptr);
    char err[256] = {0};
    d_ = entry(WEFT_ABI_MAJOR, WEFT_ABI_MINOR, err, sizeof err);
    if (!d_) FAIL("entry declined: " << err);
    REQUIRE(d_->init(&services_, &instance_, err, sizeof err) == WEFT_OK);
  }
  ~LoadedPlugin() {
    if (d_ && d_->destroy) d_->destroy(instance_);
    // Never dlclose: the ABI rules say a plugin stays loaded.
  }
  LoadedPlugin(const LoadedPlugin&) = delete;
  LoadedPlugin& operator=(const LoadedPlugin&) = delete;

  int Run(FakeTask& task, weft_action action, std::string* error = nullptr) {
    char err[1024] = {0};
    task.kind = d_->kind;  // as weft-host does: field_json finds this plugin's fields
    // As a worker does before any plugin code runs (weft::host::RunAction):
    // declared defaults filled in, a missing required field or a value of the
    // wrong type refused as INVALID.
    const nlohmann::json parsed = nlohmann::json::parse(task.json_text, nullptr, /*allow_exceptions=*/false);
    host::ResolvedFields resolved = host::ResolvePluginFields(parsed.is_discarded() ? nlohmann::json() : parsed, *d_);
    if (!resolved.error.empty()) {
      if (error) *error = resolved.error;
      return WEFT_ERR_INVALID;
    }
    task.fields = std::move(resolved.fields);
    int rc = d_->run(instance_, &services_, reinterpret_cast<weft_task*>(&task), action, err, sizeof err);
    if (error) *error = err;
    return rc;
  }
  const weft_plugin_descriptor* descriptor() const { return d_; }

 private:
  void* lib_ = nullptr;
  const weft_plugin_descriptor* d_ = nullptr;
  weft_host_services services_;
  void* instance_ = nullptr;
};

}  // namespace weft::testing

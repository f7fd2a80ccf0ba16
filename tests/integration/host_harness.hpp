// weftd and weft-host as real processes for the integration tests: one
// weftd per data dir with ephemeral ports read back from endpoints.json, one
// weft-host per config file, each logging to a file the test can read.
// Test-only; not thread-safe.
#pragma once

#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "weft/client/client.hpp"

namespace weft::integration {

using json = nlohmann::json;
using namespace std::chrono_literals;
using weft::testing::Process;
using weft::testing::WaitFor;

inline const std::filesystem::path kBuild = WEFT_BUILD_DIR;

// One weftd with its own data dir; endpoints read back from endpoints.json.
class Server {
 public:
  // `endpoints` empty: ephemeral ports. Otherwise {"api":..,"provisioner":..,"events":..}.
  Server(const std::filesystem::path& dir, const json& endpoints = json(), int lease_ms = 1500) : dir_(dir) {
    std::filesystem::create_directories(dir_);
    std::filesystem::remove(dir_ / "data" / "endpoints.json");
    auto ep = [&](const char* key) {
      return endpoints.is_object() ? endpoints[key].get<std::string>() : std::string("tcp://127.0.0.1:*");
    };
    weft::testing::WriteFile(dir_ / "weftd.toml",
                             "[server]\ndata_dir = \"" + (dir_ / "data").string() +
                                 "\"\n"
                                 "[endpoints]\napi = \"" +
                                 ep("api") + "\"\nprovisioner = \"" + ep("provisioner") + "\"\nevents = \"" +
                                 ep("events") +
                                 "\"\n"
                                 "[tasks]\nlease_ms = " + std::to_string(lease_ms) + "\n"
                                 "[hosts]\nheartbeat_ms = 300\nsilent_after_ms = 3000\n"
                                 "[security]\ncurve = false\n");  // tested in tests/security
    weft::testing::ProcessOptions opts;
    opts.stderr_path = dir_ / ("weftd-" + std::to_string(++starts_) + ".log");
    log_ = opts.stderr_path;
    proc_ = Process(kBuild / "bin/weftd", {"--config", (dir_ / "weftd.toml").string()}, opts);
    const auto file = dir_ / "data" / "endpoints.json";
    REQUIRE(WaitFor([&] { return std::filesystem::exists(file) && !weft::testing::ReadFile(file).empty(); }, 10s));
    endpoints_ = json::parse(weft::testing::ReadFile(file));
    api_ = std::make_unique<weft::client::Client>(ctx_, weft::client::Options{endpoints_["api"], 3000, {}, {}});
  }

  const json& endpoints() const { return endpoints_; }
  std::string provisioner() const { return endpoints_["provisioner"]; }
  std::filesystem::path db() const { return dir_ / "data" / "weft.db"; }
  Process& process() { return proc_; }
  std::string Log() const { return weft::testing::ReadFile(log_); }

  json Call(const std::string& op, const json& body) {
    auto r = api_->Call(op, body);
    INFO(op << ": " << r.status().ToString());
    REQUIRE(r.ok());
    return *r;
  }
  std::optional<json> TryCall(const std::string& op, const json& body) {
    auto r = api_->Call(op, body);
    if (!r.ok()) return std::nullopt;
    return *r;
  }
  std::int64_t Enqueue(const json& task) {
    json r = Call("debug.enqueue", {{"tasks", json::array({task})}});
    return r["task_ids"][0].get<std::int64_t>();
  }
  json Task(std::int64_t id) { return Call("task.get", {{"task_id", id}}); }
  // Waits until the task is in `state`; returns its record.
  json WaitState(std::int64_t id, const std::string& state, std::chrono::milliseconds timeout) {
    json last;
    bool reached = WaitFor(
        [&] {
          auto t = TryCall("task.get", {{"task_id", id}});
          if (t) last = *t;
          return t && (*t)["state"] == state;
        },
        timeout);
    INFO("task " << id << " last seen as " << last.dump());
    REQUIRE(reached);
    return last;
  }

 private:
  static inline int starts_ = 0;
  std::filesystem::path dir_;
  std::filesystem::path log_;
  Process proc_;
  json endpoints_;
  zmq::context_t ctx_;
  std::unique_ptr<weft::client::Client> api_;
};

// One weft-host with its own config and log file.
class Host {
 public:
  Host(const std::filesystem::path& dir, const std::string& id, const std::string& server,
       const std::vector<std::filesystem::path>& plugin_dirs = {}, int capacity = 2, const std::string& extra = "") {
    std::filesystem::create_directories(dir);
    std::string dirs;
    for (const auto& d : plugin_dirs) dirs += (dirs.empty() ? "\"" : ", \"") + d.string() + "\"";
    weft::testing::WriteFile(dir / (id + ".toml"),
                             "server = \"" + server + "\"\nhost_id = \"" + id + "\"\ncapacity = " +
                                 std::to_string(capacity) +
                                 "\ntake_wait_ms = 500\nrequest_timeout_ms = 1000\n" +
                                 (extra.find("shutdown_grace_ms") == std::string::npos ? "shutdown_grace_ms = 2000\n"
                                                                                       : "") +
                                 (dirs.empty() ? "" : "plugin_dirs = [" + dirs + "]\n") + extra);
    log_ = dir / (id + ".log");
    weft::testing::ProcessOptions opts;
    opts.stderr_path = log_;
    proc_ = Process(kBuild / "bin/weft-host", {"--config", (dir / (id + ".toml")).string()}, opts);
  }
  Process& process() { return proc_; }
  std::string Log() const { return weft::testing::ReadFile(log_); }

 private:
  std::filesystem::path log_;
  Process proc_;
};

inline bool HostLive(Server& server, const std::string& id) {
  auto hosts = server.TryCall("host.list", json::object());
  if (!hosts) return false;
  for (const auto& h : (*hosts)["hosts"]) {
    if (h["id"] == id && h["live"] == true) return true;
  }
  return false;
}

inline int ExitCodeOf(int wait_status) { return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1; }

}  // namespace weft::integration

// The real processes for the audit and follow tests: a weftd on a data
// directory that outlives the process (Restart() brings it back on the same
// ports, so clients that keep trying find it again), weft-host processes, and
// the weft CLI run to completion or started in the background.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/process.hpp"
#include "support/temp_dir.hpp"

namespace weft::audit_test {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using testing::BuildPath;
using testing::Process;
using testing::ReadFile;
using testing::RunResult;
using testing::WaitFor;
using testing::WriteFile;

inline std::string Tail(const std::string& text, std::size_t bytes = 4000) {
  return text.size() <= bytes ? text : "..." + text.substr(text.size() - bytes);
}

class Server {
 public:
  // `curve`: CurveZMQ on (the CLI then uses the superadmin credential weftd writes).
  Server(fs::path dir, bool curve, std::string extra_toml = "")
      : dir_(std::move(dir)), curve_(curve), extra_(std::move(extra_toml)) {
    Start();
  }

  void Start() {
    const fs::path endpoints_file = dir_ / "data" / "endpoints.json";
    std::error_code ec;
    fs::remove(endpoints_file, ec);
    auto ep = [&](const char* key) {
      return endpoints_.is_object() ? endpoints_[key].get<std::string>() : std::string("tcp://127.0.0.1:*");
    };
    WriteFile(dir_ / "weftd.toml", "[server]\ndata_dir = \"" + (dir_ / "data").string() + "\"\n[endpoints]\napi = \"" +
                                       ep("api") + "\"\nprovisioner = \"" + ep("provisioner") + "\"\nevents = \"" +
                                       ep("events") + "\"\n[security]\ncurve = " + (curve_ ? "true" : "false") +
                                       "\n" + extra_);
    testing::ProcessOptions o;
    log_ = dir_ / ("weftd-" + std::to_string(++starts_) + ".log");
    o.stderr_path = log_;
    proc_ = Process(BuildPath("bin/weftd"), {"--config", (dir_ / "weftd.toml").string()}, o);
    json found;
    const bool up = WaitFor(
        [&] {
          json j = json::parse(ReadFile(endpoints_file), nullptr, false);
          if (!j.is_object() || !j.contains("api") || j.value("pid", 0) != proc_.pid()) return false;
          found = j;
          return true;
        },
        30s);
    INFO(Log());
    REQUIRE(up);
    endpoints_ = found;
  }
  // SIGTERM, then the same store on the same ports.
  void Restart() {
    Stop();
    Start();
  }
  void Stop() { proc_.Stop(); }

  std::string api() const { return endpoints_["api"]; }
  std::string provisioner() const { return endpoints_["provisioner"]; }
  std::string events() const { return endpoints_["events"]; }
  fs::path superadmin() const { return dir_ / "data" / "credentials" / "superadmin.json"; }
  fs::path db() const { return dir_ / "data" / "weft.db"; }
  std::string Log() const { return ReadFile(log_); }

  // How `weft` reaches this weftd as `who` (a credential file; empty: the superadmin, or nobody without curve).
  std::vector<std::string> Connect(const fs::path& who = {}) const {
    if (!curve_) return {"--server", api()};
    return {"--credentials", (who.empty() ? superadmin() : who).string()};
  }
  RunResult Weft(std::vector<std::string> args, const fs::path& who = {}) const {
    std::vector<std::string> all = Connect(who);
    all.insert(all.end(), args.begin(), args.end());
    return testing::Run(BuildPath("bin/weft"), all, 60s);
  }
  // `weft -o json ARGS`, which must succeed.
  json WeftJson(std::vector<std::string> args, const fs::path& who = {}) const {
    args.insert(args.begin(), {"-o", "json"});
    RunResult r = Weft(args, who);
    INFO("weft " << args[2] << ": " << r.out << r.err << Tail(Log()));
    REQUIRE(r.exit_code == 0);
    json j = json::parse(r.out, nullptr, false);
    REQUIRE(j.is_object());
    return j;
  }
  // `weft ARGS` in the background, stdout and stderr to files named after `name`.
  Process Background(const std::string& name, std::vector<std::string> args, const fs::path& who = {}) const {
    std::vector<std::string> all = Connect(who);
    all.insert(all.end(), args.begin(), args.end());
    testing::ProcessOptions o;
    o.stdout_path = dir_ / (name + ".out");
    o.stderr_path = dir_ / (name + ".err");
    return Process(BuildPath("bin/weft"), all, o);
  }
  std::string Out(const std::string& name) const { return ReadFile(dir_ / (name + ".out")); }
  std::string Err(const std::string& name) const { return ReadFile(dir_ / (name + ".err")); }

 private:
  fs::path dir_;
  bool curve_;
  std::string extra_;
  fs::path log_;
  int starts_ = 0;
  Process proc_;
  json endpoints_;
};

// One weft-host with the build's plugins; `extra` adds config lines (enroll_token, server_key).
class Host {
 public:
  Host(const fs::path& dir, const std::string& id, const std::string& server, const std::string& extra = "")
      : dir_(dir / id) {
    fs::create_directories(dir_);
    WriteFile(dir_ / "host.toml", "server = \"" + server + "\"\nhost_id = \"" + id + "\"\nstate_dir = \"" +
                                      (dir_ / "state").string() +
                                      "\"\ncapacity = 4\nworkers = 1\nrequest_timeout_ms = 1000\ntake_wait_ms = 500\n"
                                      "shutdown_grace_ms = 1000\n" + extra);
    testing::ProcessOptions o;
    o.stderr_path = dir_ / "host.log";
    proc_ = Process(BuildPath("bin/weft-host"), {"--config", (dir_ / "host.toml").string()}, o);
  }
  std::string Log() const { return ReadFile(dir_ / "host.log"); }

 private:
  fs::path dir_;
  Process proc_;
};

// examples/catalog copied to `dir`, for a test to change before importing it.
inline fs::path CopyExamples(const fs::path& dir) {
  fs::create_directories(dir);
  fs::copy(fs::path(WEFT_SOURCE_DIR) / "examples" / "catalog", dir, fs::copy_options::recursive);
  return dir;
}

// Merges `patch` into every action's fields of every fake-* service under `catalog`.
inline void PatchFakeServices(const fs::path& catalog, const json& patch) {
  for (const char* s : {"fake-base", "fake-haproxy", "fake-nginx", "fake-redis", "fake-monitoring"}) {
    const fs::path file = catalog / "services" / (std::string(s) + ".json");
    json doc = json::parse(ReadFile(file));
    for (auto& [name, def] : doc["provisioner"]["actions"].items()) def["fields"].merge_patch(patch);
    WriteFile(file, doc.dump(2));
  }
}

}  // namespace weft::audit_test

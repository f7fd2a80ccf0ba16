// A real weftd for integration tests and benches: its own directory
// (weftd.toml, logs, data/), endpoints on ports the system picks (read back
// from <data>/endpoints.json, checked to belong to this very process), a
// restart on the same data directory and ports, an api client and the real
// `weft` CLI against it. The process is killed when the object dies.
//
// Failures to start are a Status from Start(); the test helpers (the
// constructor that starts, Call, WeftJson) throw std::runtime_error with the
// log's tail, which Catch2 reports as the test's failure.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "support/postgres.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "weft/client/client.hpp"
#include "weft/common/status.hpp"

namespace weft::testing {

struct WeftdOptions {
  // Where weftd.toml, the logs and data/ go; empty: a fresh temp directory named `name`-XXXXXX.
  std::filesystem::path dir = {};
  std::string name = "weftd-test";
  // CurveZMQ on every endpoint. Off by default: tests/security covers it, and the
  // benches measure weftd's work, not encryption. With it on, `weft` and the api
  // client use the superadmin credential weftd writes.
  bool curve = false;
  std::string security_toml = {};  // more keys of [security]
  std::string server_toml = {};    // more keys of [server] (log_level, ...)
  int lease_ms = 0;           // [tasks] lease_ms; 0: weftd's default
  int heartbeat_ms = 0;       // [hosts] heartbeat_ms; 0: weftd's default
  int silent_after_ms = 0;    // [hosts] silent_after_ms; 0: weftd's default
  // More tables, appended. When it has a [security] table of its own, `curve` and
  // `security_toml` are not written.
  std::string extra_toml = {};
  // The data directory on the command line (--data-dir) instead of in weftd.toml.
  bool data_dir_flag = false;
  // The ports to bind on the first start ({"api":..,"provisioner":..,"events":..} as
  // endpoints() gives them); empty: ports the system picks.
  nlohmann::json endpoints = {};
  bool die_with_parent = false;    // benches: weftd dies with the bench
  bool own_process_group = false;  // a terminal's Ctrl-C reaches only the bench, which then stops weftd
  // When the object dies: SIGTERM and a wait (a clean stop), instead of SIGKILL.
  bool stop_on_destroy = false;
  std::filesystem::path binary = {};  // empty: the build's bin/weftd
  std::chrono::milliseconds start_timeout = std::chrono::seconds(30);
  int api_timeout_ms = 10000;                              // Call / TryCall
  std::chrono::milliseconds cli_timeout = std::chrono::seconds(30);  // Weft()
  std::vector<std::string> cli_args = {};                  // put before every Weft() command, e.g. --timeout
  // The store: "sqlite" (<data>/weft.db) or "postgres" (a throwaway PostgreSQL in <dir>/postgres, started with
  // the first Start() and stopped when the object dies; a later Weftd on the same dir finds its data again);
  // empty: WEFT_TEST_STORE, else sqlite.
  std::string store = {};
};

class Weftd {
 public:
  // Starts at once (throws if weftd does not come up).
  explicit Weftd(WeftdOptions options);
  explicit Weftd(const std::string& name = "weftd-test", const std::string& extra_toml = "");
  // Does not start: call Start(), which says why it failed (benches).
  struct Deferred {};
  Weftd(WeftdOptions options, Deferred);
  ~Weftd();
  Weftd(const Weftd&) = delete;
  Weftd& operator=(const Weftd&) = delete;

  // Writes weftd.toml and starts weftd; the first start picks free ports, later ones
  // bind the ports the first got (so hosts and clients find the new process again).
  Status Start();
  // SIGTERM (then SIGKILL after `grace`); the wait status.
  int Stop(std::chrono::milliseconds grace = std::chrono::seconds(10));
  // SIGKILL, as a crash.
  void Kill();
  // Stop(), then Start() on the same data directory and ports; throws if it fails.
  void Restart();
  // The next Start() binds `*` ports in weftd.toml (as scripts/demo.sh has them), so
  // weftd itself must find the ports it had.
  void ForgetPorts() { endpoints_ = nlohmann::json(); }
  // The tables appended to weftd.toml (WeftdOptions::extra_toml) from the next Start() on.
  void SetExtraToml(std::string toml) { options_.extra_toml = std::move(toml); }

  std::string api() const { return endpoints_["api"].get<std::string>(); }
  std::string provisioner() const { return endpoints_["provisioner"].get<std::string>(); }
  std::string events() const { return endpoints_["events"].get<std::string>(); }
  const nlohmann::json& endpoints() const { return endpoints_; }
  Process& process() { return proc_; }
  pid_t pid() const { return proc_.pid(); }
  int starts() const { return starts_; }
  bool curve() const { return options_.curve; }

  const std::filesystem::path& dir() const { return dir_; }
  // A path inside weftd's directory.
  std::filesystem::path Path(const std::string& name) const { return dir_ / name; }
  std::filesystem::path data() const { return dir_ / "data"; }
  // The SQLite file (with the sqlite store).
  std::filesystem::path db() const { return data() / "weft.db"; }
  // The PostgreSQL server of the postgres store (null with sqlite, and before the first Start()).
  PostgresServer* postgres() const { return postgres_.get(); }
  bool on_postgres() const { return store_ == "postgres"; }
  std::filesystem::path superadmin() const { return data() / "credentials" / "superadmin.json"; }
  // stdout and stderr of the current process, of every start so far.
  std::string Log() const;
  std::string AllLogs() const;
  std::filesystem::path LogPath() const { return LogFile(starts_); }

  // The api client (the superadmin's keys when curve is on).
  Result<nlohmann::json> TryCall(const std::string& op, const nlohmann::json& body, int timeout_ms = -1);
  // TryCall, which must succeed.
  nlohmann::json Call(const std::string& op, const nlohmann::json& body);
  zmq::context_t& ctx() { return ctx_; }
  // Whether host.list shows `id` as live.
  bool HostLive(const std::string& id);
  // job.get (with its tasks when `details`) and cluster.get, which must succeed.
  nlohmann::json Job(const std::string& id, bool details = true);
  nlohmann::json Cluster(const std::string& name);
  // Polls until the job is neither running nor failing (weftd may be down meanwhile); the job.
  nlohmann::json WaitJob(const std::string& id, std::chrono::milliseconds timeout = std::chrono::seconds(60));
  // A task put on the queue through debug.enqueue; its id.
  std::int64_t Enqueue(const nlohmann::json& task);
  nlohmann::json Task(std::int64_t id) { return Call("task.get", {{"task_id", id}}); }
  // Waits until the task is in `state`; its record.
  nlohmann::json WaitTaskState(std::int64_t id, const std::string& state, std::chrono::milliseconds timeout);
  // Registers a host through a raw host.register call (no weft-host needed; curve off).
  void RegisterHost(const std::string& host_id, const nlohmann::json& plugins, int capacity = 2) const;

  // How `weft` reaches this weftd as `who` (a credential file; empty: the superadmin
  // with curve on, else --server).
  std::vector<std::string> Connect(const std::filesystem::path& who = {}) const;
  // `weft ARGS...` as `who`, run to completion.
  RunResult Weft(std::vector<std::string> args, const std::filesystem::path& who = {}) const;
  // `weft -o json ARGS...`, which must succeed, parsed.
  nlohmann::json WeftJson(std::vector<std::string> args, const std::filesystem::path& who = {}) const;
  // `weft ARGS...` in the background, stdout and stderr to <dir>/<name>.out and .err.
  Process Background(const std::string& name, std::vector<std::string> args,
                     const std::filesystem::path& who = {}) const;
  std::string Out(const std::string& name) const { return ReadFile(dir_ / (name + ".out")); }
  std::string Err(const std::string& name) const { return ReadFile(dir_ / (name + ".err")); }

 private:
  std::string Toml() const;
  std::filesystem::path LogFile(int start) const;
  void StartOrThrow();

  WeftdOptions options_;
  std::unique_ptr<TempDir> temp_;
  std::filesystem::path dir_;
  std::string store_;
  std::unique_ptr<PostgresServer> postgres_;  // outlives proc_: weftd is stopped first
  Process proc_;
  nlohmann::json endpoints_;
  int starts_ = 0;
  zmq::context_t ctx_;
  std::unique_ptr<client::Client> client_;
};

// The last `bytes` of a text (of a log, for a failure message).
std::string Tail(const std::string& text, std::size_t bytes = 6000);

}  // namespace weft::testing

#include "support/weftd.hpp"

#include <signal.h>

#include <stdexcept>

#include "weft/common/curve.hpp"

namespace weft::testing {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string Tail(const std::string& text, std::size_t bytes) {
  return text.size() <= bytes ? text : "..." + text.substr(text.size() - bytes);
}

namespace {

WeftdOptions Named(const std::string& name, const std::string& extra_toml) {
  WeftdOptions o;
  o.name = name;
  o.extra_toml = extra_toml;
  return o;
}

}  // namespace

Weftd::Weftd(WeftdOptions options) : Weftd(std::move(options), Deferred{}) { StartOrThrow(); }

Weftd::Weftd(const std::string& name, const std::string& extra_toml) : Weftd(Named(name, extra_toml)) {}

Weftd::Weftd(WeftdOptions options, Deferred) : options_(std::move(options)), endpoints_(options_.endpoints) {
  store_ = !options_.store.empty() ? options_.store : TestStoreIsPostgres() ? "postgres" : "sqlite";
  if (options_.dir.empty()) {
    temp_ = std::make_unique<TempDir>(options_.name);
    dir_ = temp_->path();
  } else {
    dir_ = options_.dir;
    fs::create_directories(dir_);
  }
}

Weftd::~Weftd() {
  client_.reset();
  if (options_.stop_on_destroy) proc_.Stop();  // else the Process dies of SIGKILL
}

std::string Weftd::Toml() const {
  auto endpoint = [&](const char* key) {
    return endpoints_.is_object() ? endpoints_[key].get<std::string>() : std::string("tcp://127.0.0.1:*");
  };
  std::string toml = "[server]\n";
  if (!options_.data_dir_flag) toml += "data_dir = " + json(data().string()).dump() + "\n";
  toml += options_.server_toml;
  toml += "[endpoints]\napi = \"" + endpoint("api") + "\"\nprovisioner = \"" + endpoint("provisioner") +
          "\"\nevents = \"" + endpoint("events") + "\"\n";
  if (options_.lease_ms > 0) toml += "[tasks]\nlease_ms = " + std::to_string(options_.lease_ms) + "\n";
  if (options_.heartbeat_ms > 0 || options_.silent_after_ms > 0) {
    toml += "[hosts]\n";
    if (options_.heartbeat_ms > 0) toml += "heartbeat_ms = " + std::to_string(options_.heartbeat_ms) + "\n";
    if (options_.silent_after_ms > 0) toml += "silent_after_ms = " + std::to_string(options_.silent_after_ms) + "\n";
  }
  if (options_.extra_toml.find("[security]") == std::string::npos)
    toml += std::string("[security]\ncurve = ") + (options_.curve ? "true" : "false") + "\n" + options_.security_toml;
  std::string extra = options_.extra_toml;
  if (postgres_) {
    // Into the test's own [store] table when it has one (TOML allows a table once).
    const std::string keys = "backend = \"postgres\"\nconninfo = " + json(postgres_->conninfo()).dump() + "\n";
    const std::size_t table = extra.find("[store]\n");
    if (table == std::string::npos)
      toml += "[store]\n" + keys;
    else
      extra.insert(table + 8, keys);
  }
  return toml + extra;
}

fs::path Weftd::LogFile(int start) const { return dir_ / ("weftd-" + std::to_string(start) + ".log"); }

Status Weftd::Start() {
  client_.reset();
  if (store_ == "postgres" && !postgres_) {
    Result<std::unique_ptr<PostgresServer>> started = PostgresServer::Start(dir_ / "postgres");
    if (!started.ok()) return started.status();
    postgres_ = std::move(*started);
  }
  const fs::path config = dir_ / "weftd.toml";
  const fs::path endpoints_file = data() / "endpoints.json";
  try {
    WriteFile(config, Toml());
  } catch (const std::exception& e) {
    return Status::Internal(e.what());
  }
  std::error_code ec;
  fs::remove(endpoints_file, ec);
  ProcessOptions o;
  o.stdout_path = LogFile(++starts_);
  o.stderr_path = o.stdout_path;
  o.die_with_parent = options_.die_with_parent;
  o.own_process_group = options_.own_process_group;
  std::vector<std::string> args = {"--config", config.string()};
  if (options_.data_dir_flag) args.insert(args.end(), {"--data-dir", data().string()});
  proc_ = Process(options_.binary.empty() ? BuildPath("bin/weftd") : options_.binary, args, o);
  json found;
  bool exited = false;
  const bool up = WaitFor(
      [&] {
        if (!proc_.running()) return exited = true;
        json j = json::parse(ReadFile(endpoints_file), nullptr, false);
        // A file left by an earlier process does not count.
        if (!j.is_object() || !j.contains("api") || !j.contains("provisioner") || j.value("pid", 0) != proc_.pid())
          return false;
        found = j;
        return true;
      },
      options_.start_timeout);
  if (exited) return Status::Internal("weftd exited during start-up; its log ends:\n" + Tail(Log(), 2000));
  if (!up)
    return Status::Timeout("weftd did not write " + endpoints_file.string() + " in time; its log ends:\n" +
                           Tail(Log(), 2000));
  if (endpoints_.is_object() && (found["api"] != endpoints_["api"] || found["provisioner"] != endpoints_["provisioner"]))
    return Status::Internal("weftd came back on other ports: " + found.dump() + " instead of " + endpoints_.dump());
  endpoints_ = found;
  return Status::Ok();
}

void Weftd::StartOrThrow() {
  Status st = Start();
  if (!st.ok()) throw std::runtime_error(st.ToString());
}

int Weftd::Stop(std::chrono::milliseconds grace) {
  client_.reset();
  return proc_.Stop(grace);
}

void Weftd::Kill() {
  client_.reset();
  proc_.Signal(SIGKILL);
  if (!proc_.Wait(std::chrono::seconds(10))) throw std::runtime_error("weftd did not die of SIGKILL");
}

void Weftd::Restart() {
  Stop();
  StartOrThrow();
}

std::string Weftd::Log() const { return starts_ == 0 ? std::string() : ReadFile(LogFile(starts_)); }

std::string Weftd::AllLogs() const {
  std::string out;
  for (int i = 1; i <= starts_; ++i)
    out += "--- weftd start " + std::to_string(i) + " ---\n" + ReadFile(LogFile(i));
  return out;
}

Result<json> Weftd::TryCall(const std::string& op, const json& body, int timeout_ms) {
  if (!client_) {
    client::Options o{.endpoint = api(), .timeout_ms = options_.api_timeout_ms, .tenant = "", .limits = {}};
    if (options_.curve) {
      WEFT_ASSIGN_OR_RETURN(curve::Credential c, curve::LoadCredential(superadmin()));
      o = client::FromCredential(c, options_.api_timeout_ms);
      o.endpoint = api();
    }
    client_ = std::make_unique<client::Client>(ctx_, o);
  }
  return timeout_ms < 0 ? client_->Call(op, body) : client_->Call(op, body, timeout_ms);
}

json Weftd::Call(const std::string& op, const json& body) {
  Result<json> r = TryCall(op, body);
  if (!r.ok())
    throw std::runtime_error(op + " " + body.dump() + ": " + r.status().ToString() + "\n" + Tail(Log()));
  return *r;
}

bool Weftd::HostLive(const std::string& id) {
  Result<json> hosts = TryCall("host.list", json::object());
  if (!hosts.ok()) return false;
  for (const json& h : (*hosts)["hosts"])
    if (h["id"] == id) return h.value("live", false);
  return false;
}

json Weftd::Job(const std::string& id, bool details) {
  return Call("job.get", {{"job", id}, {"details", details}})["job"];
}

json Weftd::Cluster(const std::string& name) { return Call("cluster.get", {{"cluster", name}})["cluster"]; }

json Weftd::WaitJob(const std::string& id, std::chrono::milliseconds timeout) {
  std::string status;
  const bool done = WaitFor(
      [&] {
        Result<json> r = TryCall("job.get", {{"job", id}}, 2000);
        if (!r.ok()) return false;
        status = (*r)["job"].value("status", "");
        return status != "running" && status != "failing";
      },
      timeout);
  if (!done) throw std::runtime_error("job " + id + " is still " + status + "\n" + Tail(Log()));
  return Job(id);
}

std::int64_t Weftd::Enqueue(const json& task) {
  return Call("debug.enqueue", {{"tasks", json::array({task})}})["task_ids"][0].get<std::int64_t>();
}

json Weftd::WaitTaskState(std::int64_t id, const std::string& state, std::chrono::milliseconds timeout) {
  json last;
  const bool reached = WaitFor(
      [&] {
        Result<json> t = TryCall("task.get", {{"task_id", id}});
        if (t.ok()) last = *t;
        return t.ok() && (*t)["state"] == state;
      },
      timeout);
  if (!reached)
    throw std::runtime_error("task " + std::to_string(id) + " never reached " + state + "; last seen as " +
                             last.dump());
  return last;
}

void Weftd::RegisterHost(const std::string& host_id, const json& plugins, int capacity) const {
  zmq::context_t ctx(1);
  client::Client c(ctx, client::Options{.endpoint = provisioner(), .timeout_ms = 5000, .tenant = "", .limits = {}});
  Result<json> reply =
      c.Call("host.register", json{{"host_id", host_id}, {"capacity", capacity}, {"version", "0.1.0"}, {"plugins", plugins}});
  if (!reply.ok()) throw std::runtime_error("host.register " + host_id + ": " + reply.status().ToString());
}

std::vector<std::string> Weftd::Connect(const fs::path& who) const {
  std::vector<std::string> args;
  if (!who.empty())
    args = {"--credentials", who.string()};
  else if (options_.curve)
    args = {"--credentials", superadmin().string()};
  else
    args = {"--server", api()};
  args.insert(args.end(), options_.cli_args.begin(), options_.cli_args.end());
  return args;
}

RunResult Weftd::Weft(std::vector<std::string> args, const fs::path& who) const {
  std::vector<std::string> all = Connect(who);
  all.insert(all.end(), args.begin(), args.end());
  return Run(BuildPath("bin/weft"), all, options_.cli_timeout);
}

json Weftd::WeftJson(std::vector<std::string> args, const fs::path& who) const {
  args.insert(args.begin(), {"-o", "json"});
  RunResult r = Weft(args, who);
  json j = json::parse(r.out, nullptr, false);
  if (r.exit_code != 0 || !j.is_object()) {
    std::string command;
    for (const std::string& a : args) command += " " + a;
    throw std::runtime_error("weft" + command + " exited " + std::to_string(r.exit_code) + ": " + r.out + r.err +
                             "\nweftd's log ends:\n" + Tail(Log(), 4000));
  }
  return j;
}

Process Weftd::Background(const std::string& name, std::vector<std::string> args, const fs::path& who) const {
  std::vector<std::string> all = Connect(who);
  all.insert(all.end(), args.begin(), args.end());
  ProcessOptions o;
  o.stdout_path = dir_ / (name + ".out");
  o.stderr_path = dir_ / (name + ".err");
  return Process(BuildPath("bin/weft"), all, o);
}

}  // namespace weft::testing

#include "weft/host/runtime.hpp"

#include <cstdio>
#include <cstdlib>

#include "weft/common/log.hpp"

#ifndef WEFT_VERSION
#define WEFT_VERSION "0.0.0"
#endif

namespace weft::host {
namespace {

using json = nlohmann::json;
constexpr int kBackoffMs = 500;
constexpr int kTakeMarginMs = 3000;  // weftd answers a take at wait_ms; allow for transit
constexpr std::size_t kMaxQueuedProgress = 1000;
constexpr auto kOutageLogEvery = std::chrono::seconds(10);

// Logs a loop's failures without flooding: the first failure, then at most one
// line every 10 s while it lasts, and one line when it recovers.
class OutageLog {
 public:
  explicit OutageLog(std::string what) : what_(std::move(what)) {}
  void Failure(const Status& status) {
    auto now = std::chrono::steady_clock::now();
    ++failures_;
    if (failures_ == 1 || now - last_log_ >= kOutageLogEvery) {
      WEFT_LOG(kWarn, "host") << what_ << ": " << status.ToString()
                              << (failures_ > 1 ? " (" + std::to_string(failures_) + " failures so far; retrying)"
                                                : std::string(" (retrying)"));
      last_log_ = now;
    }
  }
  void Success() {
    if (failures_ > 0) {
      WEFT_LOG(kInfo, "host") << what_ << ": working again after " << failures_ << " failures";
    }
    failures_ = 0;
  }

 private:
  std::string what_;
  std::int64_t failures_ = 0;
  std::chrono::steady_clock::time_point last_log_{};
};

std::int64_t IntOr(const json& obj, const char* key, std::int64_t fallback) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_number_integer() ? it->get<std::int64_t>() : fallback;
}

std::string StringOr(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

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

}  // namespace

Runtime::Runtime(HostConfig config, const PluginSet& plugins)
    : config_(std::move(config)), plugins_(plugins), ctx_(1), take_ctx_(1) {}

Runtime::~Runtime() {
  RequestStop();
  if (control_.joinable() || !runners_.empty()) {
    // Run() joins everything; reaching here with live threads means Run threw.
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = hard_stop_ = control_stop_ = true;
    }
    take_ctx_.shutdown();
    cv_.notify_all();
    for (auto& t : runners_) {
      if (t.joinable()) t.join();
    }
    if (control_.joinable()) control_.join();
  }
}

void Runtime::RequestStop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_requested_ = true;
  }
  cv_.notify_all();
}

int Runtime::Run() {
  control_ = std::thread([this] { ControlLoop(); });
  {
    std::lock_guard<std::mutex> lock(mu_);
    runners_alive_ = config_.capacity;
  }
  for (int i = 0; i < config_.capacity; ++i) runners_.emplace_back([this, i] { RunnerLoop(i); });

  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return stop_requested_; });
  WEFT_LOG(kInfo, "host") << "stopping: taking no new tasks; " << in_flight_.size()
                          << " running task(s) get up to " << config_.shutdown_grace_ms << " ms to finish";
  stopping_ = true;
  lock.unlock();
  take_ctx_.shutdown();  // aborts every held task.take
  cv_.notify_all();
  lock.lock();

  auto grace_end = Clock::now() + std::chrono::milliseconds(config_.shutdown_grace_ms);
  if (!cv_.wait_until(lock, grace_end, [this] { return in_flight_.empty(); })) {
    WEFT_LOG(kWarn, "host") << "grace period over: cancelling " << in_flight_.size()
                            << " running task(s); they are reported as failed";
    hard_stop_ = true;
    for (auto& [key, f] : in_flight_) f.context->Cancel("host shutting down");
  }
  // A cancelled plugin should return promptly; the finishes then get a bounded
  // number of retries (SendFinish gives up once hard_stop_ is set and it fails).
  auto runners_end = Clock::now() + std::chrono::milliseconds(config_.request_timeout_ms * 2 + 5000);
  if (!cv_.wait_until(lock, runners_end, [this] { return runners_alive_ == 0; })) {
    hard_stop_ = true;
    WEFT_LOG(kError, "host") << runners_alive_
                             << " task(s) ignored cancellation; exiting without reporting them (their lease "
                                "will expire and weftd will hand them out again)";
    std::fflush(nullptr);
    std::_Exit(0);
  }
  lock.unlock();
  for (auto& t : runners_) t.join();
  runners_.clear();
  lock.lock();
  control_stop_ = true;
  lock.unlock();
  cv_.notify_all();
  control_.join();
  WEFT_LOG(kInfo, "host") << "stopped";
  return 0;
}

bool Runtime::Backoff(int ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return !cv_.wait_for(lock, std::chrono::milliseconds(ms), [this] { return stopping_; });
}

bool Runtime::WaitRegistered() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return registered_ || stopping_; });
  return !stopping_;
}

void Runtime::MarkUnregistered(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!registered_) return;
    registered_ = false;
  }
  WEFT_LOG(kWarn, "host") << why << "; registering again";
  cv_.notify_all();
}

// ---- control thread --------------------------------------------------------

void Runtime::ControlLoop() {
  client::Client client(ctx_, {config_.server, config_.request_timeout_ms, {}, {}});
  OutageLog register_log("cannot register with weftd at " + config_.server);
  auto next_heartbeat = Clock::now();
  while (true) {
    bool registered;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (control_stop_) return;
      registered = registered_;
    }
    if (!registered) {
      Result<json> r = client.Call("host.register",
                                   {{"host_id", config_.host_id},
                                    {"capacity", config_.capacity},
                                    {"version", WEFT_VERSION},
                                    {"plugins", plugins_.RegisterJson()}});
      if (!r.ok()) {
        register_log.Failure(r.status());
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait_for(lock, std::chrono::milliseconds(kBackoffMs), [this] { return control_stop_; });
        continue;
      }
      register_log.Success();
      std::int64_t hb = IntOr(*r, "heartbeat_ms", 2000);
      if (hb < 50) hb = 50;
      std::string types;
      for (const auto& p : plugins_.plugins()) types += (types.empty() ? "" : ", ") + p.type_name;
      WEFT_LOG(kInfo, "host") << "registered with weftd at " << config_.server << " as '" << config_.host_id
                              << "', capacity " << config_.capacity << ", plugins [" << types << "], heartbeat every "
                              << hb << " ms";
      {
        std::lock_guard<std::mutex> lock(mu_);
        heartbeat_ms_ = hb;
        registered_ = true;
      }
      cv_.notify_all();
      next_heartbeat = Clock::now() + std::chrono::milliseconds(hb);
    }
    SendProgress(client);
    CancelExpired();
    if (Clock::now() >= next_heartbeat) {
      Heartbeat(client);
      std::lock_guard<std::mutex> lock(mu_);
      next_heartbeat = Clock::now() + std::chrono::milliseconds(heartbeat_ms_);
    }
    std::unique_lock<std::mutex> lock(mu_);
    auto wake = std::min(next_heartbeat, Clock::now() + std::chrono::milliseconds(200));
    cv_.wait_until(lock, wake, [this] { return control_stop_ || !progress_.empty() || !registered_; });
  }
}

void Runtime::Heartbeat(client::Client& client) {
  static thread_local OutageLog outage("cannot heartbeat to weftd");
  json in_flight = json::array();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, f] : in_flight_) in_flight.push_back({{"task_id", key.first}, {"attempt", key.second}});
  }
  Result<json> r = client.Call("host.heartbeat", {{"host_id", config_.host_id}, {"in_flight", in_flight}});
  if (!r.ok()) {
    if (r.status().code() == Code::kNotFound) {
      MarkUnregistered("weftd does not know host '" + config_.host_id + "' (was it restarted with a fresh store?)");
    } else {
      outage.Failure(r.status());
    }
    return;
  }
  outage.Success();
  auto stale = r->find("stale");
  if (stale == r->end() || !stale->is_array()) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (const json& s : *stale) {
    if (!s.is_object()) continue;
    TaskKey key{IntOr(s, "task_id", -1), IntOr(s, "attempt", -1)};
    auto it = in_flight_.find(key);
    if (it == in_flight_.end()) continue;
    WEFT_LOG(kWarn, "host") << "task " << key.first << " attempt " << key.second
                            << " is stale (weftd handed the task out again); cancelling it";
    it->second.context->Cancel("attempt " + std::to_string(key.second) + " of task " + std::to_string(key.first) +
                               " is no longer current; weftd handed the task out again");
  }
}

void Runtime::SendProgress(client::Client& client) {
  std::deque<json> batch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    batch.swap(progress_);
  }
  // Progress is best effort: when weftd does not answer, the rest of the batch
  // is dropped rather than delaying heartbeats further.
  int timeout_ms = std::min(config_.request_timeout_ms, 2000);
  for (json& body : batch) {
    Result<json> r = client.Call("task.progress", std::move(body), timeout_ms);
    if (!r.ok() && r.status().code() == Code::kUnavailable) {
      WEFT_LOG(kDebug, "host") << "dropping progress reports: " << r.status().ToString();
      return;
    }
  }
}

void Runtime::CancelExpired() {
  auto now = Clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [key, f] : in_flight_) {
    if (now >= f.deadline && !f.context->cancelled()) {
      WEFT_LOG(kWarn, "host") << "task " << key.first << " attempt " << key.second << " ran longer than "
                              << config_.task_timeout_ms << " ms; cancelling it";
      f.context->Cancel("task timed out after " + std::to_string(config_.task_timeout_ms) +
                        " ms (task_timeout_ms in weft-host.toml)");
    }
  }
}

// ---- runner threads --------------------------------------------------------

void Runtime::RunnerLoop(int index) {
  {
    // One socket per thread, for takes and for everything else (see ctx_).
    client::Client take_client(take_ctx_, {config_.server, config_.take_wait_ms + kTakeMarginMs, {}, {}});
    client::Client client(ctx_, {config_.server, config_.request_timeout_ms, {}, {}});
    OutageLog outage("runner " + std::to_string(index) + ": task.take from " + config_.server);
    while (WaitRegistered()) {
      Result<json> r = take_client.Call("task.take", {{"host_id", config_.host_id}, {"wait_ms", config_.take_wait_ms}});
      if (!r.ok()) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          if (stopping_) break;
        }
        if (r.status().code() == Code::kNotFound) {
          MarkUnregistered("weftd answered task.take with NOT_FOUND: " + r.status().message());
        } else {
          outage.Failure(r.status());
          if (!Backoff(kBackoffMs)) break;
        }
        continue;
      }
      outage.Success();
      auto task = r->find("task");
      if (task == r->end() || task->is_null()) continue;
      if (!task->is_object()) {
        WEFT_LOG(kError, "host") << "weftd sent a task that is not a JSON object; ignoring it";
        continue;
      }
      RunTask(client, *task);
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    --runners_alive_;
  }
  cv_.notify_all();
}

void Runtime::RunTask(client::Client& client, const json& task) {
  const std::int64_t task_id = IntOr(task, "task_id", -1);
  const std::int64_t attempt = IntOr(task, "attempt", -1);
  if (task_id < 0 || attempt < 0) {
    WEFT_LOG(kError, "host") << "weftd sent a task without integer task_id and attempt; cannot run or report it";
    return;
  }
  const std::string type = StringOr(task, "plugin");
  const std::string action = StringOr(task, "action");
  const TaskKey key{task_id, attempt};
  auto context = std::make_shared<TaskContext>(
      wire::Dump(task), [this, task_id, attempt](int percent, const std::string& message) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          if (progress_.size() >= kMaxQueuedProgress) progress_.pop_front();
          progress_.push_back({{"host_id", config_.host_id},
                               {"task_id", task_id},
                               {"attempt", attempt},
                               {"percent", percent},
                               {"message", message}});
        }
        cv_.notify_all();
      });
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_flight_[key] = {context, Clock::now() + std::chrono::milliseconds(config_.task_timeout_ms)};
    if (hard_stop_) context->Cancel("host shutting down");
  }
  WEFT_LOG(kInfo, "host") << "task " << task_id << " attempt " << attempt << ": " << type << " " << action;
  const auto started = Clock::now();

  std::string status = "failed";
  std::string message;
  const LoadedPlugin* plugin = plugins_.Find(type);
  const std::uint32_t bit = ActionFromName(action);
  if (!plugin) {
    std::string loaded;
    for (const auto& p : plugins_.plugins()) loaded += (loaded.empty() ? "" : ", ") + p.type_name;
    message = "host '" + config_.host_id + "' has no plugin of type '" + type + "' (it has: " +
              (loaded.empty() ? "none" : loaded) + ")";
  } else if (bit == 0) {
    message = "unknown action '" + action + "'";
  } else if (!(plugin->descriptor->actions & bit)) {
    message = "plugin '" + type + "' does not implement action " + action;
  } else {
    char err[4096] = {0};
    int rc = WEFT_ERR_INTERNAL;
    try {
      rc = plugin->descriptor->run(plugin->instance, HostServices(), context->handle(), bit, err, sizeof err - 1);
    } catch (...) {
      std::snprintf(err, sizeof err, "%s", "run threw a C++ exception; exceptions must not cross the plugin ABI");
    }
    err[sizeof err - 1] = '\0';
    if (rc == WEFT_OK) {
      status = "succeeded";
    } else {
      std::string why = err[0] ? err : CodeName(rc);
      if (rc == WEFT_ERR_CANCELLED && !context->cancel_reason().empty()) why = context->cancel_reason();
      message = type + " " + action + " " + CodeName(rc) + ": " + why;
    }
  }
  const auto took_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count();
  WEFT_LOG(kInfo, "host") << "task " << task_id << " attempt " << attempt << " " << status << " in " << took_ms
                          << " ms" << (message.empty() ? "" : ": " + message);
  SendFinish(client, {{"host_id", config_.host_id},
                      {"task_id", task_id},
                      {"attempt", attempt},
                      {"status", status},
                      {"message", message},
                      {"result", context->result()},
                      {"stdout", context->stdout_tail()},
                      {"stderr", context->stderr_tail()}});
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_flight_.erase(key);
  }
  cv_.notify_all();
}

void Runtime::SendFinish(client::Client& client, const json& body) {
  const std::string what = "task " + std::to_string(body["task_id"].get<std::int64_t>()) + " attempt " +
                           std::to_string(body["attempt"].get<std::int64_t>());
  OutageLog outage("cannot report " + what + " to weftd");
  int not_found = 0;
  while (true) {
    Result<json> r = client.Call("task.finish", body);
    if (r.ok()) {
      outage.Success();
      return;
    }
    const Status& s = r.status();
    switch (s.code()) {
      case Code::kConflict:
        WEFT_LOG(kWarn, "host") << "weftd refused the finish of " << what << " (" << s.message()
                                << "); dropping it: a newer attempt owns the task";
        return;
      case Code::kInvalid:
      case Code::kDenied:
      case Code::kTooLarge:
        WEFT_LOG(kError, "host") << "weftd refused the finish of " << what << ": " << s.ToString() << "; dropping it";
        return;
      case Code::kNotFound:
        // Usually a fresh weftd that does not know this host yet; register and
        // resend. If the task itself is unknown, resending cannot help.
        if (++not_found > 3) {
          WEFT_LOG(kError, "host") << "weftd does not know " << what << ": " << s.message() << "; dropping it";
          return;
        }
        MarkUnregistered("weftd answered task.finish with NOT_FOUND: " + s.message());
        if (!WaitRegistered()) {
          // Stopping: one more try without waiting for registration.
          if (not_found > 1) return;
        }
        continue;
      default:
        outage.Failure(s);
        {
          std::lock_guard<std::mutex> lock(mu_);
          if (hard_stop_) {
            WEFT_LOG(kError, "host") << "host shutting down and weftd is unreachable; " << what
                                     << " is not reported (weftd will hand it out again when its lease expires)";
            return;
          }
        }
        // Backoff returns early on shutdown; the loop then tries again until hard_stop_.
        if (!Backoff(kBackoffMs)) std::this_thread::sleep_for(std::chrono::milliseconds(kBackoffMs));
    }
  }
}

}  // namespace weft::host

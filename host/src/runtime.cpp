#include "weft/host/runtime.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "weft/common/log.hpp"
#include "weft/common/wire.hpp"
#include "weft/host/enrollment.hpp"

namespace weft::host {

// Logs the failures of calls to weftd without flooding: the first failure, then
// at most one line every 10 s while they go on, and one line when calls work
// again. Thread-safe: a worker has one for all its runners' takes and one for
// all their finishes, because a host of capacity 1,000 has 1,000 runners and
// weftd going away must read as one line every 10 s, not as 1,000.
class OutageLog {
 public:
  OutageLog(std::string component, std::string what) : component_(std::move(component)), what_(std::move(what)) {}
  // `detail` names what failed this time (e.g. the task), for the logged line.
  void Failure(const Status& status, const std::string& detail = "") {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    ++failures_;
    // Also rate-limited across a recovery, so calls that fail and work by
    // turns (some runners but not others) cannot flood the log either.
    if (logged_ == 0 || now - last_log_ >= kEvery) {
      WEFT_LOG(kWarn, component_) << what_ << (detail.empty() ? "" : " (" + detail + ")") << ": "
                                  << status.ToString()
                                  << (failures_ > 1 ? " (" + std::to_string(failures_) + " failures so far; retrying)"
                                                    : std::string(" (retrying)"));
      last_log_ = now;
      ++logged_;
      outage_logged_ = true;
    }
  }
  void Success() {
    std::lock_guard<std::mutex> lock(mu_);
    if (failures_ == 0) return;
    if (outage_logged_) {
      WEFT_LOG(kInfo, component_) << what_ << ": working again after " << failures_ << " failure(s)";
      last_log_ = std::chrono::steady_clock::now();
    }
    failures_ = 0;
    outage_logged_ = false;
  }

 private:
  static constexpr auto kEvery = std::chrono::seconds(10);
  const std::string component_;
  const std::string what_;
  std::mutex mu_;
  std::int64_t failures_ = 0;      // since calls last worked
  std::int64_t logged_ = 0;        // lines ever logged
  bool outage_logged_ = false;     // this outage has a line (so its end gets one)
  std::chrono::steady_clock::time_point last_log_{};
};

namespace {

using json = nlohmann::json;
constexpr int kBackoffMs = 500;
constexpr int kReplacedRetryMs = 5000;  // a take while another process holds the host id
constexpr int kTakeMarginMs = 3000;  // weftd answers a take at wait_ms; allow for transit
constexpr std::size_t kMaxQueuedProgress = 1000;
constexpr int kProgressDelayMs = 25;  // how long a progress report waits before the control thread sends it
constexpr int kStartAnswerWaitS = 30;  // how long a runner waits for the master's answer to its "start"
// Why the tasks still running when the grace period of a stop is over are cancelled.
constexpr const char* kStopReason = "host shutting down";
// Sockets a worker's context may hold beyond one per runner thread: the control
// thread's, and resource fetches.
constexpr int kSpareSockets = 64;

// libzmq refuses a context's 1,024th socket ("Too many open files") unless told
// otherwise, and each context of a worker has a socket per runner thread: a
// worker of more than ~1,000 threads would have runners that can never reach weftd.
int MaxSockets(int threads) { return std::max(ZMQ_MAX_SOCKETS_DFLT, threads + kSpareSockets); }

std::int64_t IntOr(const json& obj, const char* key, std::int64_t fallback) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_number_integer() ? it->get<std::int64_t>() : fallback;
}

std::string StringOr(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Why weftd refused an attempt's finish, from the refusal's details
// ({"current_attempt","state","host_id"}): the task was cancelled, or weftd
// handed it out again.
std::string WhyNotCurrent(std::int64_t attempt, const json& details) {
  const std::string state = details.is_object() ? StringOr(details, "state") : "";
  const std::int64_t current = details.is_object() ? IntOr(details, "current_attempt", 0) : 0;
  if (state == "cancelled")
    return "the task was cancelled by its job (the job was aborted, or failed)";
  if (current > attempt) {
    const std::string holder = StringOr(details, "host_id");
    return "attempt " + std::to_string(attempt) + " was superseded: weftd handed the task out again as attempt " +
           std::to_string(current) + (holder.empty() ? std::string() : " (to host '" + holder + "')");
  }
  if (!state.empty())
    return "attempt " + std::to_string(attempt) + " is no longer current (the task is " + state + " at attempt " +
           std::to_string(current) + ")";
  return "attempt " + std::to_string(attempt) + " is no longer current";
}

}  // namespace

Runtime::Runtime(HostConfig config, const PluginSet& plugins, WorkerOptions options)
    : config_(std::move(config)),
      plugins_(plugins),
      options_(std::move(options)),
      component_(options_.log_component),
      cache_(ResourceCacheDir(config_)),
      ctx_(1, MaxSockets(options_.threads)),
      take_ctx_(1, MaxSockets(options_.threads)),
      take_outage_(std::make_unique<OutageLog>(component_, "task.take from " + config_.server)),
      finish_outage_(std::make_unique<OutageLog>(component_, "cannot report finished tasks to weftd")),
      take_refusals_(std::make_unique<RefusalBackoff>(component_, "task.take from " + config_.server)) {}

Runtime::~Runtime() {
  RequestStop();
  if (control_.joinable() || channel_.joinable() || !runners_.empty()) {
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
    if (channel_.joinable()) channel_.join();
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
  {
    WorkerMessage ready;
    ready.kind = WorkerMessage::Kind::kReady;
    ready.plugins = static_cast<int>(plugins_.plugins().size());
    Send(ready);
  }
  control_ = std::thread([this] { ControlLoop(); });
  if (options_.channel_fd >= 0) channel_ = std::thread([this] { ChannelLoop(); });
  {
    std::lock_guard<std::mutex> lock(mu_);
    runners_alive_ = options_.threads;
  }
  for (int i = 0; i < options_.threads; ++i) runners_.emplace_back([this, i] { RunnerLoop(i); });

  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return stop_requested_ || drain_requested_; });
  if (!stop_requested_) {
    // Rolled out: the held takes run to their end (a task they bring still
    // runs here), then every running task finishes; the master kills a task
    // that hangs past its timeout.
    WEFT_LOG(kInfo, component_) << "draining: taking no new tasks; " << in_flight_.size()
                                << " running task(s) finish here, then this worker exits";
    stopping_ = true;
    {
      // No runner starts a take from here on: the master has weftd let go of
      // the ones still held, instead of waiting them out (take_wait_ms).
      WorkerMessage draining;
      draining.kind = WorkerMessage::Kind::kDraining;
      Send(draining);
    }
    MaybeDrainedLocked();
    cv_.notify_all();
    cv_.wait(lock, [this] { return stop_requested_ || runners_alive_ == 0; });
  }
  if (stop_requested_) {
    WEFT_LOG(kInfo, component_) << "stopping: taking no new tasks; " << in_flight_.size()
                                << " running task(s) get up to " << config_.shutdown_grace_ms << " ms to finish";
    stopping_ = true;
    lock.unlock();
    take_ctx_.shutdown();  // aborts every held task.take
    cv_.notify_all();
    lock.lock();

    auto grace_end = Clock::now() + std::chrono::milliseconds(config_.shutdown_grace_ms);
    if (!cv_.wait_until(lock, grace_end, [this] { return in_flight_.empty(); })) {
      // Only what still runs is cancelled; a task whose plugin returned only
      // waits to report (with the bounded retries of a hard stop).
      std::size_t running = 0;
      for (const auto& [key, f] : in_flight_) running += f.ran ? 0 : 1;
      const std::size_t reporting = in_flight_.size() - running;
      WEFT_LOG(kWarn, component_) << "grace period over: cancelling " << running
                                  << " running task(s); they are given up, not reported: weftd queues them again "
                                     "when this host leaves, without counting the attempt"
                                  << (reporting ? "; " + std::to_string(reporting) +
                                                      " task(s) that returned still wait to report to weftd"
                                                : std::string());
      hard_stop_ = true;
      for (auto& [key, f] : in_flight_)
        if (!f.ran) f.context->Cancel(kStopReason);
    }
  }
  // A cancelled plugin should return promptly; the finishes then get a bounded
  // number of retries (SendFinish gives up once hard_stop_ is set and it fails).
  auto runners_end = Clock::now() + std::chrono::milliseconds(config_.request_timeout_ms * 2 + 5000);
  if (!cv_.wait_until(lock, runners_end, [this] { return runners_alive_ == 0; })) {
    hard_stop_ = true;
    WEFT_LOG(kError, component_) << runners_alive_
                                 << " task(s) ignored cancellation; exiting without reporting them (given up: "
                                    "weftd queues them again when this host leaves)";
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
  if (channel_.joinable()) channel_.join();
  WEFT_LOG(kInfo, component_) << "stopped";
  return 0;
}

bool Runtime::Backoff(int ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return !cv_.wait_for(lock, std::chrono::milliseconds(ms), [this] { return stopping_; });
}

void Runtime::MaybeDrainedLocked() {
  if (!stopping_ || taking_ > 0 || drained_sent_) return;
  drained_sent_ = true;
  WorkerMessage m;
  m.kind = WorkerMessage::Kind::kDrained;
  Send(m);
}

// ---- the channel to the master ---------------------------------------------

void Runtime::Send(const WorkerMessage& message) {
  if (options_.channel_fd < 0) return;
  std::string line = EncodeWorkerMessage(message) + "\n";
  std::lock_guard<std::mutex> lock(write_mu_);
  std::string_view left = line;
  while (!left.empty()) {
    ssize_t n = write(options_.channel_fd, left.data(), left.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the master is gone; PR_SET_PDEATHSIG ends this process
    left.remove_prefix(static_cast<std::size_t>(n));
  }
}

void Runtime::ChannelLoop() {
  LineBuffer buffer;
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (control_stop_) return;
    }
    pollfd p{options_.channel_fd, POLLIN, 0};
    int n = poll(&p, 1, 200);
    if (n <= 0) continue;
    char buf[4096];
    ssize_t r = read(options_.channel_fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      // The master closed the channel or died: nobody supervises this worker
      // and nobody heartbeats for its tasks any more.
      WEFT_LOG(kError, component_) << "the master went away; exiting";
      std::fflush(nullptr);
      std::_Exit(1);
    }
    buffer.Append(std::string_view(buf, static_cast<std::size_t>(r)));
    while (auto line = buffer.Next()) {
      Result<WorkerMessage> m = ParseWorkerMessage(*line);
      if (!m.ok()) {
        WEFT_LOG(kError, component_) << m.status().message();
        continue;
      }
      HandleCommand(*m);
    }
  }
}

void Runtime::HandleCommand(const WorkerMessage& m) {
  switch (m.kind) {
    case WorkerMessage::Kind::kCancel: {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = in_flight_.find({m.task_id, m.attempt});
      if (it != in_flight_.end() && it->second.ran) {
        // The plugin returned already: its finish is on its way, and weftd judges it.
        WEFT_LOG(kInfo, component_) << "task " << m.task_id << " attempt " << m.attempt << ": not cancelled ("
                                    << m.reason
                                    << "): its plugin had returned already; only its report to weftd "
                                       "was pending";
      } else if (it != in_flight_.end()) {
        WEFT_LOG(kWarn, component_) << "task " << m.task_id << " attempt " << m.attempt << ": cancelling: " << m.reason;
        it->second.context->Cancel(m.reason);
      }
      return;
    }
    case WorkerMessage::Kind::kRun:
    case WorkerMessage::Kind::kSkip: {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = start_answers_.find({m.task_id, m.attempt});
      if (it == start_answers_.end()) return;  // the runner gave up waiting
      it->second.set_value(m.kind == WorkerMessage::Kind::kRun ? std::string()
                           : m.reason.empty()                  ? std::string("refused by the master")
                                                               : m.reason);
      start_answers_.erase(it);
      return;
    }
    case WorkerMessage::Kind::kDrain: {
      {
        std::lock_guard<std::mutex> lock(mu_);
        drain_requested_ = true;
      }
      cv_.notify_all();
      return;
    }
    case WorkerMessage::Kind::kStop:
      RequestStop();
      return;
    default:
      WEFT_LOG(kError, component_) << "the master sent a worker event; ignoring it";
  }
}

// ---- control thread --------------------------------------------------------

void Runtime::ControlLoop() {
  client::Client client(ctx_, ClientOptions(config_, config_.request_timeout_ms));
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (control_stop_) return;
    }
    SendProgress(client);
    CancelExpired();
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(100), [this] { return control_stop_ || !progress_.empty(); });
    // A report waits a moment before it goes: the plugin that made it has
    // often returned by then (one that reports 100 % as it returns, at every
    // task), and its report is dropped instead of reaching weftd after the finish.
    if (!control_stop_ && !progress_.empty())
      cv_.wait_for(lock, std::chrono::milliseconds(kProgressDelayMs), [this] { return control_stop_; });
  }
}

void Runtime::SendProgress(client::Client& client) {
  std::deque<json> batch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    batch.swap(progress_);
  }
  // Progress is best effort: when weftd does not answer, the rest of the batch
  // is dropped rather than delaying the timeout checks further.
  int timeout_ms = std::min(config_.request_timeout_ms, 2000);
  for (json& body : batch) {
    if (!Reportable(body)) continue;
    Result<json> r = client.Call("task.progress", std::move(body), timeout_ms);
    if (!r.ok() && (r.status().code() == Code::kUnavailable || r.status().code() == Code::kTimeout)) {
      WEFT_LOG(kDebug, component_) << "dropping progress reports: " << r.status().ToString();
      return;
    }
  }
}

bool Runtime::Reportable(const json& body) {
  const TaskKey key{IntOr(body, "task_id", -1), IntOr(body, "attempt", -1)};
  std::lock_guard<std::mutex> lock(mu_);
  auto it = in_flight_.find(key);
  return it != in_flight_.end() && !it->second.ran;
}

void Runtime::CancelExpired() {
  auto now = Clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [key, f] : in_flight_) {
    if (now >= f.deadline && f.ran && !f.late_report_noted) {
      // Nothing runs to be cancelled: the plugin returned within its time and
      // the finish waits for weftd (down, or slow to answer).
      f.late_report_noted = true;
      WEFT_LOG(kInfo, component_) << "task " << key.first << " attempt " << key.second
                                  << " has returned and still waits to report its result to weftd, past "
                                  << config_.task_timeout_ms << " ms (task_timeout_ms); nothing to cancel";
    } else if (now >= f.deadline && !f.ran && !f.context->cancelled()) {
      WEFT_LOG(kWarn, component_) << "task " << key.first << " attempt " << key.second << " ran longer than "
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
    client::Client take_client(take_ctx_, ClientOptions(config_, config_.take_wait_ms + kTakeMarginMs));
    client::Client client(ctx_, ClientOptions(config_, config_.request_timeout_ms));
    // Unique among this host's live runners: the worker process and the thread.
    const std::string runner = std::to_string(getpid()) + "." + std::to_string(index);
    json take = TakeFields(config_.take_wait_ms, runner);
    take["host_id"] = config_.host_id;
    if (!options_.incarnation.empty()) take["incarnation"] = options_.incarnation;
    json next;  // a task the last finish brought: leased to this host, so it runs even when stopping
    while (true) {
      if (next.is_object()) {
        next = RunTask(client, std::exchange(next, json()), runner);
        continue;
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) break;
        ++taking_;
      }
      client::DetailedResult r = take_client.Call("task.take", take);
      {
        std::lock_guard<std::mutex> lock(mu_);
        --taking_;
        MaybeDrainedLocked();
      }
      if (!r.ok()) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          if (stopping_) break;
        }
        // NOT_FOUND: weftd does not know the host (yet); the master registers
        // it again, this worker only waits.
        if (KeyRefused(r.status())) {
          // Revoked: the runners wait longer and longer, together, instead of
          // retrying every kBackoffMs for ever; the master's log says what to do.
          const auto wait = take_refusals_->Refused(r.status(), "the master's log line says what to do");
          if (!Backoff(static_cast<int>(wait.count()))) break;
          continue;
        }
        if (ProcessReplaced(r.status(), r.details())) {
          // Another process holds the host id now: the master logs it and registers
          // again; until weftd lets it back in, a take every few seconds, not a tight loop.
          WEFT_LOG(kDebug, component_) << "runner " << index << ": " << r.status().message();
          if (!Backoff(kReplacedRetryMs)) break;
          continue;
        }
        take_outage_->Failure(r.status(), "runner " + std::to_string(index));
        if (!Backoff(kBackoffMs)) break;
        continue;
      }
      take_refusals_->Accepted();
      take_outage_->Success();
      next = TaskOf(*r);
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    --runners_alive_;
  }
  cv_.notify_all();
}

namespace {

// A finish whose result would make its request larger than weftd reads on its
// provisioner endpoint (limits.max_header_bytes, the same default here) would
// be dropped unread, and resent without end: it reports the attempt failed instead.
void FitFinish(json& body) {
  auto result = body.find("result");
  if (result == body.end() || !result->is_object() || result->empty()) return;
  constexpr std::size_t kEnvelopeBytes = 4096;  // the request's id, op, tenant and take
  const std::size_t limit = wire::Limits{}.max_header_bytes - kEnvelopeBytes;
  const std::size_t size = wire::Dump(body).size();
  if (size <= limit) return;
  const std::size_t result_bytes = wire::Dump(*result).size();
  body["status"] = "failed";
  body["code"] = "TOO_LARGE";
  body["message"] = "the result was " + std::to_string(result_bytes) + " bytes as JSON, which makes the finish " +
                    std::to_string(size) + " bytes, over the " + std::to_string(limit) +
                    " bytes weft-host sends in one (limits.max_header_bytes); it was not sent";
  *result = json::object();
}

}  // namespace

json Runtime::RunTask(client::Client& client, json task, const std::string& runner) {
  const std::int64_t task_id = IntOr(task, "task_id", -1);
  const std::int64_t attempt = IntOr(task, "attempt", -1);
  if (task_id < 0 || attempt < 0) {
    WEFT_LOG(kError, component_) << "weftd sent a task without integer task_id and attempt; cannot run or report it";
    return json();
  }
  const std::string type = StringOr(task, "plugin");
  const std::string action = StringOr(task, "action");
  const TaskKey key{task_id, attempt};
  // weftd sends the node's results once, as "results"; plugins also find them as "node.results".
  if (auto n = task.find("node"), r = task.find("results");
      n != task.end() && n->is_object() && r != task.end() && !n->contains("results"))
    (*n)["results"] = *r;
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
    if (hard_stop_) context->Cancel(kStopReason);
  }
  {
    WorkerMessage m;
    m.kind = WorkerMessage::Kind::kStart;
    m.task_id = task_id;
    m.attempt = attempt;
    m.plugin = type;
    m.action = action;
    m.tenant = StringOr(task, "tenant");
    m.node = StringOr(task, "node_id");
    if (std::string refused = AskToStart(m); !refused.empty()) {
      // The master logged why. Nothing to report: this attempt is not the
      // task's current one, and this runner's next take tells weftd that it
      // holds nothing (the protocol's way to drop a take).
      WEFT_LOG(kDebug, component_) << "task " << task_id << " attempt " << attempt << ": not run: " << refused;
      std::lock_guard<std::mutex> lock(mu_);
      in_flight_.erase(key);
      return json();
    }
  }
  // A task's routine start and first-attempt success are DEBUG (at INFO they were two
  // lines a task, megabytes an hour); a failure, a cancel or a retry's outcome stays INFO.
  WEFT_LOG(kDebug, component_) << "task " << task_id << " attempt " << attempt << ": " << type << " " << action;
  const auto started = Clock::now();

  std::string status = "failed";
  std::string message;
  std::string code;  // a failure's code, when it says that another attempt cannot help
  bool result_kept = true;  // false when weftd would refuse the result (CheckTaskResult)
  // A tenant's own Lua plugin runs only that tenant's tasks (docs/host.md).
  const LoadedPlugin* plugin = plugins_.Find(type, StringOr(task, "tenant"));
  const std::uint32_t bit = ActionFromName(action);
  // The versions the task names (pinned by weftd when it handed the task out)
  // are fetched and verified first; the plugin sees each with its local "path".
  Status resources = Status::Ok();
  if (auto r = task.find("resources"); plugin && r != task.end() && r->is_array() && !r->empty()) {
    json resolved = task;
    resources = ResolveTaskResources(
        client, cache_, resolved, [&context] { return context->cancelled(); },
        [&context](const std::string& line) { context->Log(WEFT_LOG_INFO, line.c_str()); });
    if (resources.ok()) context->ReplaceTaskJson(wire::Dump(resolved));
  }
  if (!resources.ok()) {
    message = type + " " + action + " was not run: " +
              (context->cancelled() && !context->cancel_reason().empty() ? context->cancel_reason()
                                                                         : resources.message());
    WEFT_LOG(kWarn, component_) << "task " << task_id << " attempt " << attempt << ": " << message;
  } else if (!plugin) {
    std::string loaded;
    for (const auto& p : plugins_.plugins()) loaded += (loaded.empty() ? "" : ", ") + p.type_name;
    message = "host '" + config_.host_id + "' has no plugin of type '" + type + "' (it has: " +
              (loaded.empty() ? "none" : loaded) + ")";
  } else if (bit == 0) {
    message = "unknown action '" + action + "'";
    code = "INVALID";
  } else if (bit == WEFT_ACTION_BOOTSTRAP && !(plugin->descriptor->actions & bit)) {
    // BOOTSTRAP is optional: weftd plans one for an automator no host had
    // registered yet (it might declare it). One that does not has nothing to
    // prepare on the node; the plugin is not called (docs/plugin-abi.md).
    status = "succeeded";
    message = "plugin '" + type + "' does not declare BOOTSTRAP: nothing to prepare on the node (not called)";
    WEFT_LOG(kInfo, component_) << "task " << task_id << " attempt " << attempt << ": " << message;
  } else if (!(plugin->descriptor->actions & bit)) {
    message = "plugin '" + type + "' does not implement action " + action;
    code = "UNSUPPORTED";
  } else {
    const ActionOutcome outcome =
        RunAction(plugin->descriptor, plugin->instance, HostServices(), *context, bit, type, action);
    if (outcome.succeeded) status = "succeeded";
    message = outcome.message;
    code = outcome.code;
    // What weftd would refuse in this finish fails here, in weftd's words: the
    // plugin's author finds why in this log, and no result is sent to be refused.
    // weftd checks node facts in a job's task on a node, except its DELETE.
    const bool node_facts =
        !StringOr(task, "task_key").empty() && !StringOr(task, "node_id").empty() && action != "DELETE";
    if (const ResultCheck check = outcome.succeeded ? CheckTaskResult(context->result(), node_facts) : ResultCheck{};
        !check.ok()) {
      const bool large = check.limit == ResultCheck::Limit::kTooLarge;
      status = "failed";
      result_kept = false;
      code = large ? "TOO_LARGE" : "INVALID";
      message = "task " + std::to_string(task_id) +
                (large ? " attempt " + std::to_string(attempt) : " (" + StringOr(task, "task_key") + ")") + " " +
                check.what + "; the result was not kept and the task failed";
    }
  }
  {
    // The finish says how it ended: a report still queued would reach weftd
    // after it, only to be refused as stale (a plugin that says 100 % as it
    // returns, at every task).
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = in_flight_.find(key); it != in_flight_.end()) it->second.ran = true;
    std::erase_if(progress_, [task_id, attempt](const json& body) {
      return IntOr(body, "task_id", -1) == task_id && IntOr(body, "attempt", -1) == attempt;
    });
  }
  {
    WorkerMessage m;
    m.kind = WorkerMessage::Kind::kRan;
    m.task_id = task_id;
    m.attempt = attempt;
    m.outcome = status;
    const CacheUse use = TakeCacheUse();
    m.cache_hits = use.hits;
    m.cache_misses = use.misses;
    m.cache_fetched_bytes = use.fetched_bytes;
    Send(m);
  }
  const auto took_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count();
  bool given_up = false;
  if (status != "succeeded") {
    // Cancelled because the host stops and the grace period is over: not the
    // task's failure. Unreported, it stays leased to this host until the
    // master's host.leave, and weftd queues it again without counting the attempt.
    std::lock_guard<std::mutex> lock(mu_);
    given_up = hard_stop_ && context->cancelled() && context->cancel_reason() == kStopReason;
  }
  json next;
  if (given_up) {
    WEFT_LOG(kWarn, component_) << "task " << task_id << " attempt " << attempt << " given up after " << took_ms
                                << " ms: the host stops and shutdown_grace_ms is over; not reported (weftd queues "
                                   "it again when this host leaves, without counting the attempt)";
  } else {
    const std::string ended = "task " + std::to_string(task_id) + " attempt " + std::to_string(attempt) + " " + status +
                              " in " + std::to_string(took_ms) + " ms (" + type + " " + action + ")" +
                              (message.empty() ? "" : ": " + message);
    if (status == "succeeded" && attempt <= 1) {
      WEFT_LOG(kDebug, component_) << ended;
    } else {
      WEFT_LOG(kInfo, component_) << ended;
    }
    json finish = {{"host_id", config_.host_id},
                   {"task_id", task_id},
                   {"attempt", attempt},
                   {"status", status},
                   {"message", message},
                   {"result", result_kept ? context->result() : json::object()},
                   {"stdout", context->stdout_tail()},
                   {"stderr", context->stderr_tail()}};
    if (!code.empty()) finish["code"] = code;
    FitFinish(finish);
    if (finish["status"] != status) {
      WEFT_LOG(kWarn, component_) << "task " << task_id << " attempt " << attempt << ": "
                                  << finish["message"].get<std::string>();
    }
    next = Finish(client, std::move(finish), runner);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_flight_.erase(key);
  }
  {
    WorkerMessage m;
    m.kind = WorkerMessage::Kind::kEnd;
    m.task_id = task_id;
    m.attempt = attempt;
    Send(m);
  }
  cv_.notify_all();
  return next;
}

std::string Runtime::AskToStart(const WorkerMessage& start) {
  if (options_.channel_fd < 0) return "";  // no master (a worker run on its own)
  const TaskKey key{start.task_id, start.attempt};
  std::future<std::string> answer;
  {
    std::lock_guard<std::mutex> lock(mu_);
    answer = start_answers_[key].get_future();
  }
  Send(start);
  // The master answers from its main loop at once; it may be busy for a
  // moment (probing a new plugin file). A master that is gone ends this
  // process (ChannelLoop).
  if (answer.wait_for(std::chrono::seconds(kStartAnswerWaitS)) == std::future_status::ready) return answer.get();
  std::lock_guard<std::mutex> lock(mu_);
  start_answers_.erase(key);
  WEFT_LOG(kError, component_) << "the master did not answer the start of task " << start.task_id << " attempt "
                               << start.attempt << " within " << kStartAnswerWaitS << " s; not running it";
  return "the master did not answer";
}

json Runtime::Finish(client::Client& client, json body, const std::string& runner) {
  bool stopping = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping = stopping_;
    if (!stopping) ++taking_;  // the finish may bring a task: not drained until it is answered
  }
  if (stopping) {
    SendFinish(client, body);
    return json();
  }
  body["take"] = TakeFields(0, runner);  // never held: a finish is answered at once
  Result<json> r = client.Call("task.finish", body);
  {
    std::lock_guard<std::mutex> lock(mu_);
    --taking_;
    MaybeDrainedLocked();
  }
  if (r.ok()) {
    finish_outage_->Success();
    return TaskOf(*r);
  }
  // Whether the finish landed is not known when weftd did not answer; a
  // repeated finish of the accepted attempt is answered ok, so the plain
  // finish with its retries (and its handling of every refusal) takes over.
  body.erase("take");
  SendFinish(client, body);
  return json();
}

json Runtime::TakeFields(int wait_ms, const std::string& runner) const {
  json take = {{"runner", runner}, {"wait_ms", wait_ms}};
  if (!options_.tenant.empty()) take["tenant"] = options_.tenant;
  return take;
}

json Runtime::TaskOf(json& reply) const {
  auto task = reply.find("task");
  if (task == reply.end() || task->is_null()) return json();
  if (task->is_object()) return std::move(*task);
  WEFT_LOG(kError, component_) << "weftd sent a task that is not a JSON object; ignoring it";
  return json();
}

void Runtime::SendFinish(client::Client& client, const json& body) {
  const std::string what = "task " + std::to_string(body["task_id"].get<std::int64_t>()) + " attempt " +
                           std::to_string(body["attempt"].get<std::int64_t>());
  const std::int64_t attempt = body["attempt"].get<std::int64_t>();
  wire::Request request;
  request.op = "task.finish";
  request.body = body;
  int not_found = 0;
  while (true) {
    // Raw, for the details of a refusal: what became of the task.
    Result<wire::Reply> reply = client.CallRaw(request);
    const Status s = reply.ok() ? reply->ToStatus() : reply.status();
    if (s.ok()) {
      finish_outage_->Success();
      return;
    }
    switch (s.code()) {
      case Code::kConflict:
        WEFT_LOG(kWarn, component_) << "weftd refused the finish of " << what << " (" << s.message()
                                    << "); dropping it: "
                                    << WhyNotCurrent(attempt, reply.ok() ? reply->error.details : json());
        return;
      case Code::kInvalid:
      case Code::kDenied:
      case Code::kTooLarge:
        WEFT_LOG(kError, component_) << "weftd refused the finish of " << what << ": " << s.ToString() << "; dropping it";
        return;
      case Code::kNotFound:
        // Usually a fresh weftd that does not know this host yet; the master
        // registers it again. If the task itself is unknown, resending cannot help.
        if (++not_found > 5) {
          WEFT_LOG(kError, component_) << "weftd does not know " << what << ": " << s.message() << "; dropping it";
          return;
        }
        if (!Backoff(kBackoffMs)) std::this_thread::sleep_for(std::chrono::milliseconds(kBackoffMs));
        continue;
      default:
        finish_outage_->Failure(s, what);
        {
          std::lock_guard<std::mutex> lock(mu_);
          if (hard_stop_) {
            WEFT_LOG(kError, component_) << "host shutting down and weftd is unreachable; " << what
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

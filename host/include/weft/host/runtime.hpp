// Runtime: the life of one weft-host WORKER process after its plugins are
// loaded. The master (master.hpp) registers and heartbeats for the host; a
// worker only takes, runs and finishes tasks, and tells the master over its
// channel (worker_protocol.hpp) which tasks it holds.
//
//   control thread  send queued task.progress, cancel tasks past task_timeout_ms.
//   channel thread  reads the master's commands: cancel one task (stale or
//                   hung), drain (roll out: no more takes, finish, exit), stop.
//   runner threads  `threads` of them: task.take (long poll, with the worker's
//                   tenant) → fetch the resource versions the task names into
//                   the cache → plugin run → task.finish, resent until weftd answers.
//   Run()'s thread  waits for RequestStop or a drain, then shuts down.
//
// Every thread owns its own weft::client::Client, so no socket is ever shared.
//
// Thread-safety: RequestStop may be called from any thread; Run once, from one.
// The PluginSet must outlive the Runtime. The channel fd is owned by the caller.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "weft/client/client.hpp"
#include "weft/host/config.hpp"
#include "weft/host/plugin_loader.hpp"
#include "weft/host/resource_cache.hpp"
#include "weft/host/task_context.hpp"
#include "weft/host/worker_protocol.hpp"

namespace weft::host {

class OutageLog;  // runtime.cpp: rate-limited logging of failed calls to weftd
class RefusalBackoff;  // enrollment.hpp: waits growing while weftd refuses this host's key

struct WorkerOptions {
  int threads = 1;          // tasks run at once
  std::string tenant;       // sent in task.take; empty: any tenant
  int channel_fd = -1;      // to the master; -1: none (messages are dropped)
  std::string log_component = "host";
  // The master's incarnation (its host.register's): sent in task.take, so that weftd
  // refuses the takes of a process another one replaced under the host id.
  std::string incarnation;
};

class Runtime {
 public:
  Runtime(HostConfig config, const PluginSet& plugins, WorkerOptions options);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Runs until RequestStop, then stops taking tasks, lets running ones finish
  // for up to shutdown_grace_ms, cancels the rest and reports them as failed.
  // After a drain command it finishes every running task (the master's hang
  // detection bounds them). Returns the process exit code (0).
  int Run();
  void RequestStop();

 private:
  using Clock = std::chrono::steady_clock;
  using TaskKey = std::pair<std::int64_t, std::int64_t>;  // task_id, attempt
  struct InFlight {
    std::shared_ptr<TaskContext> context;
    Clock::time_point deadline;
    // The plugin returned: the finish goes next, and progress reports of the
    // attempt are dropped (weftd would refuse them once the finish is in).
    bool ran = false;
    // Said once that it ran past task_timeout_ms while only its report was pending.
    bool late_report_noted = false;
  };

  void ControlLoop();
  void ChannelLoop();
  void HandleCommand(const WorkerMessage& message);
  void Send(const WorkerMessage& message);
  void RunnerLoop(int index);
  void SendProgress(client::Client& client);
  // Whether a queued progress report is still worth sending: its attempt runs.
  bool Reportable(const nlohmann::json& body);
  void CancelExpired();
  // Tells the master a task was taken and waits for its answer: "" when the
  // task may run, else why not (the master started a newer attempt of it).
  std::string AskToStart(const WorkerMessage& start);
  // Runs the task and reports it; returns the next task when the finish
  // brought one (see Finish), null otherwise.
  nlohmann::json RunTask(client::Client& client, nlohmann::json task, const std::string& runner);
  // Reports a task. While the worker takes tasks, the finish asks for the
  // next one in the same round trip (its "take", not held: wait_ms 0), so a
  // busy runner pays one round trip per task instead of two. Returns that
  // task, or null (none ready, or the worker is stopping).
  nlohmann::json Finish(client::Client& client, nlohmann::json body, const std::string& runner);
  void SendFinish(client::Client& client, const nlohmann::json& body);
  // What a take asks for, in task.take and in a finish's "take": how long to
  // hold it, the worker's tenant if it serves one, and the runner thread that
  // asks (it runs one task at a time: weftd ends an attempt handed to it that
  // it never named, once it asks again, instead of waiting for the lease).
  nlohmann::json TakeFields(int wait_ms, const std::string& runner) const;
  // The task a take or finish reply hands out, moved out of it; null when none
  // (or when it is not an object, which is logged).
  nlohmann::json TaskOf(nlohmann::json& reply) const;
  // Call with mu_ held: sends "drained" once no runner is inside a take.
  void MaybeDrainedLocked();
  // Sleeps up to `ms`, waking early when the worker stops; false when stopping.
  bool Backoff(int ms);

  const HostConfig config_;
  const PluginSet& plugins_;
  const WorkerOptions options_;
  const std::string component_;
  ResourceCache cache_;  // the versions tasks name are fetched here before their plugin runs
  // Two contexts on purpose: task.take is held open by weftd for up to
  // take_wait_ms, and shutting down take_ctx_ aborts those calls at once on
  // SIGTERM. Everything else (finish, progress) uses ctx_, which stays up
  // until the last finish is sent.
  zmq::context_t ctx_;
  zmq::context_t take_ctx_;
  // Shared by every runner: failed takes, failed finishes.
  std::unique_ptr<OutageLog> take_outage_;
  std::unique_ptr<OutageLog> finish_outage_;
  std::unique_ptr<RefusalBackoff> take_refusals_;  // the runners' takes refused for this host's key

  std::mutex write_mu_;  // the channel's write side

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_requested_ = false;  // RequestStop was called
  bool drain_requested_ = false; // the master rolls this worker out
  bool stopping_ = false;        // no new takes
  bool hard_stop_ = false;       // grace is over: running tasks are cancelled
  bool control_stop_ = false;
  bool drained_sent_ = false;
  int taking_ = 0;               // runners inside task.take
  int runners_alive_ = 0;
  std::map<TaskKey, InFlight> in_flight_;
  // Runners waiting for the master's answer to their "start": "" run, else why not.
  std::map<TaskKey, std::promise<std::string>> start_answers_;
  std::deque<nlohmann::json> progress_;

  std::thread control_;
  std::thread channel_;
  std::vector<std::thread> runners_;
};

}  // namespace weft::host

// Runtime: weft-host's life after its plugins are loaded.
//
//   control thread  register (again on NOT_FOUND), heartbeat with the in-flight
//                   {task_id, attempt} list (stale ones are cancelled), send
//                   queued task.progress, cancel tasks past task_timeout_ms.
//   runner threads  `capacity` of them: task.take (long poll) → plugin run →
//                   task.finish, resent until weftd answers.
//   Run()'s thread  waits for RequestStop, then shuts down gracefully.
//
// Every thread owns its own weft::client::Client, so no socket is ever shared.
// weftd restarting is survived by every loop: calls time out, the client makes
// a fresh socket, and the host registers again when the server says NOT_FOUND.
//
// Thread-safety: RequestStop may be called from any thread; Run once, from one.
// The PluginSet must outlive the Runtime.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
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
#include "weft/host/task_context.hpp"

namespace weft::host {

class Runtime {
 public:
  Runtime(HostConfig config, const PluginSet& plugins);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Runs until RequestStop, then stops taking tasks, lets running ones finish
  // for up to shutdown_grace_ms, cancels the rest and reports them as failed.
  // Returns the process exit code (0).
  int Run();
  void RequestStop();

 private:
  using Clock = std::chrono::steady_clock;
  using TaskKey = std::pair<std::int64_t, std::int64_t>;  // task_id, attempt
  struct InFlight {
    std::shared_ptr<TaskContext> context;
    Clock::time_point deadline;
  };

  void ControlLoop();
  void RunnerLoop(int index);
  bool Register(client::Client& client);
  void Heartbeat(client::Client& client);
  void SendProgress(client::Client& client);
  void CancelExpired();
  void RunTask(client::Client& client, const nlohmann::json& task);
  void SendFinish(client::Client& client, const nlohmann::json& body);
  void MarkUnregistered(const std::string& why);
  // Waits until registered or stopping; false when stopping.
  bool WaitRegistered();
  // Sleeps up to `ms`, waking early when the host stops; false when stopping.
  bool Backoff(int ms);

  const HostConfig config_;
  const PluginSet& plugins_;
  // Two contexts on purpose: task.take is held open by weftd for up to
  // take_wait_ms, and shutting down take_ctx_ aborts those calls at once on
  // SIGTERM. Everything else (finish, heartbeat, progress) uses ctx_, which
  // stays up until the last finish is sent.
  zmq::context_t ctx_;
  zmq::context_t take_ctx_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_requested_ = false;  // RequestStop was called
  bool stopping_ = false;        // no new takes
  bool hard_stop_ = false;       // grace is over: running tasks are cancelled
  bool control_stop_ = false;
  bool registered_ = false;
  int runners_alive_ = 0;
  std::int64_t heartbeat_ms_ = 2000;
  std::map<TaskKey, InFlight> in_flight_;
  std::deque<nlohmann::json> progress_;

  std::thread control_;
  std::vector<std::thread> runners_;
};

}  // namespace weft::host

// The channel between weft-host's master and one worker process: a
// socketpair carrying JSON lines, one message per line, both ways.
//
//   worker → master  {"ev":"ready","plugins":N}
//                    {"ev":"start","task_id":..,"attempt":..,"plugin":..,"action":..,"tenant":..,
//                     "node":..}                                the node is the task's node_id ("" none)
//                                                               a task was taken; the runner waits for
//                                                               "run" or "skip" before its plugin runs
//                    {"ev":"ran","task_id":..,"attempt":..,"outcome":..,"cache":[hits,misses,bytes]}
//                                                               the plugin returned (succeeded or failed);
//                                                               the resource cache's use since the last ran
//                    {"ev":"end","task_id":..,"attempt":..}     the finish was sent (or dropped)
//                    {"ev":"drained"}                            takes no more tasks
//   master → worker  {"cmd":"cancel","task_id":..,"attempt":..,"reason":..}
//                    {"cmd":"drain"}   stop taking, finish running tasks, exit
//                    {"cmd":"stop"}    graceful stop, as on SIGTERM
//                    {"cmd":"run","task_id":..,"attempt":..}    the answer to "start": run it
//                    {"cmd":"skip","task_id":..,"attempt":..,"reason":..}
//                                      the answer to "start": do not run it (this host started
//                                      a newer attempt of the task); no "ran" or "end" follows
//
// Plain values and free functions; LineBuffer is thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.hpp"

namespace weft::host {

struct WorkerMessage {
  enum class Kind {
    kReady = 1,  // worker: plugins loaded, taking tasks
    kStart,      // worker: a task was taken and its plugin is about to run
    kRan,        // worker: the plugin returned
    kEnd,        // worker: the task is reported (or given up on); no longer in flight
    kDrained,    // worker: no more takes
    kCancel,     // master: cancel one task
    kDrain,      // master: roll this worker out
    kStop,       // master: graceful stop
    kRun,        // master: the task of a kStart may run
    kSkip,       // master: the task of a kStart must not run (reason says why)
    kDraining,   // worker: answering kDrain, no runner starts a take any more
  };
  Kind kind = Kind::kReady;
  std::int64_t task_id = 0;
  std::int64_t attempt = 0;
  std::string plugin;
  std::string action;
  std::string tenant;
  std::string node;    // kStart: the task's node_id, for messages that name the task
  std::string reason;  // kCancel, kSkip
  int plugins = 0;     // kReady
  // kRan: "succeeded" or "failed", and the worker's resource cache hits,
  // misses and bytes fetched since its previous kRan (for the master's metrics).
  std::string outcome;
  std::uint64_t cache_hits = 0;
  std::uint64_t cache_misses = 0;
  std::uint64_t cache_fetched_bytes = 0;
};

// One line, without the trailing newline.
std::string EncodeWorkerMessage(const WorkerMessage& message);
// Parses one line (no newline). A malformed line or unknown kind is INVALID.
Result<WorkerMessage> ParseWorkerMessage(std::string_view line);

// Collects bytes read from the channel and hands out complete lines.
class LineBuffer {
 public:
  // Lines longer than this are dropped (and counted) instead of buffered forever.
  static constexpr std::size_t kMaxLineBytes = 64 * 1024;

  void Append(std::string_view bytes);
  // The next complete line (without '\n'), or nullopt.
  std::optional<std::string> Next();
  std::size_t dropped() const { return dropped_; }

 private:
  std::string buffer_;
  bool skipping_ = false;  // inside an overlong line
  std::size_t dropped_ = 0;
};

}  // namespace weft::host

// weft::server::HeldTakes: task.take requests held open (a long poll) until a
// task is ready for their host or their wait runs out. Part of weftd's
// reactor: each turn it serves what it can inside the turn's transaction, and
// the replies go out with the batch after the commit.
//
// Not thread-safe: runs on the reactor thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "weft/server/auth/auth.hpp"
#include "weft/server/config/config.hpp"
#include "weft/server/daemon/pending.hpp"
#include "weft/server/hosts/dispatcher.hpp"
#include "weft/server/queue/task_queue.hpp"
#include "weft/common/clock.hpp"

namespace weft::server {

class HeldTakes {
 public:
  HeldTakes(const Config& config, const Clock& clock, queue::TaskQueue& queue, hosts::Dispatcher& dispatcher,
            const auth::Registry& registry);

  // Keeps `p`, a take the router answered `held`, until it can be answered.
  void Hold(Pending p);
  // The earliest deadline of a held take.
  std::optional<std::int64_t> NextDeadlineMs() const;
  bool AnyDue(std::int64_t now_ms) const;
  // Answers, into `out`, the held takes that a task is ready for, whose wait
  // ran out, or whose key was revoked meanwhile. Handing out tasks stops at
  // `deadline`; returns whether it stopped early with more to serve. `force`:
  // look even when the queue says nothing became ready.
  bool Serve(std::vector<Pending>* out, bool force, std::chrono::steady_clock::time_point deadline);
  // Answers every held take with `status` (shutdown).
  void AnswerAll(std::vector<Pending>* out, const Status& status);
  // A newer take of `runner` of `host_id` came: the runner gave up on the one
  // held here, which must not get a task (it would never arrive).
  void Supersede(const std::string& host_id, const std::string& runner);
  // A new process registered under `host_id` as `incarnation`: a take held for
  // another process of that host gets no task (the earlier process is gone, or
  // stops once it hears) but CONFLICT with details.reason "process_replaced",
  // as its other requests do. A take that named no incarnation is kept.
  void ProcessReplaced(const std::string& host_id, const std::string& incarnation);

 private:
  struct Waiter {
    wire::Frames envelope;
    std::string id;
    std::string host_id;
    std::string tenant;  // the take's "tenant"; empty: any tenant
    std::string runner;  // the take's "runner"; empty: none named
    std::string incarnation;  // the asking process's; empty: not said
    std::int64_t until_ms = 0;
    std::string key;  // the key that asked (security on): once it is revoked, the take ends
  };
  // Whether the key that asked for a held take still acts for its host.
  bool KeyInForce(const Waiter& w) const;
  static Pending Answer(Waiter& w, api::Response response, std::optional<queue::AttemptRef> delivers = {});
  // Removes a held take (and its place in by_runner_); the next one.
  std::list<Waiter>::iterator Erase(std::list<Waiter>::iterator it);

  const Config& config_;
  const Clock& clock_;
  queue::TaskQueue& queue_;
  hosts::Dispatcher& dispatcher_;
  const auth::Registry& registry_;
  std::list<Waiter> waiters_;
  // The held take of each runner that named itself: "host\nrunner" -> its waiter.
  std::unordered_map<std::string, std::list<Waiter>::iterator> by_runner_;
  std::vector<Waiter> superseded_;  // answered at the next Serve
  // Takes of a process that another one replaced, with that one's incarnation: answered at the next Serve.
  std::vector<std::pair<Waiter, std::string>> replaced_;
};

}  // namespace weft::server

#include "weft/server/daemon/held_takes.hpp"

#include <algorithm>
#include <iterator>
#include <utility>

#include "weft/common/curve.hpp"

namespace weft::server {
namespace {

std::string RunnerKey(const std::string& host_id, const std::string& runner) { return host_id + '\n' + runner; }

}  // namespace

HeldTakes::HeldTakes(const Config& config, const Clock& clock, queue::TaskQueue& queue, hosts::Dispatcher& dispatcher,
                     const auth::Registry& registry)
    : config_(config), clock_(clock), queue_(queue), dispatcher_(dispatcher), registry_(registry) {
  dispatcher_.set_runner_listener(
      [this](const std::string& host_id, const std::string& runner) { Supersede(host_id, runner); });
  dispatcher_.set_replaced_listener(
      [this](const std::string& host_id, const std::string& incarnation) { ProcessReplaced(host_id, incarnation); });
}

void HeldTakes::Hold(Pending p) {
  waiters_.push_back(Waiter{std::move(p.envelope), std::move(p.id), p.response.held_host_id,
                            std::move(p.response.held_tenant), std::move(p.response.held_runner),
                            std::move(p.response.held_incarnation), p.response.held_until_ms, std::move(p.key)});
  const Waiter& w = waiters_.back();
  if (!w.runner.empty()) by_runner_[RunnerKey(w.host_id, w.runner)] = std::prev(waiters_.end());
}

std::list<HeldTakes::Waiter>::iterator HeldTakes::Erase(std::list<Waiter>::iterator it) {
  if (!it->runner.empty()) {
    auto indexed = by_runner_.find(RunnerKey(it->host_id, it->runner));
    if (indexed != by_runner_.end() && indexed->second == it) by_runner_.erase(indexed);
  }
  return waiters_.erase(it);
}

void HeldTakes::Supersede(const std::string& host_id, const std::string& runner) {
  auto indexed = by_runner_.find(RunnerKey(host_id, runner));
  if (indexed == by_runner_.end()) return;
  auto it = indexed->second;
  by_runner_.erase(indexed);
  superseded_.push_back(std::move(*it));
  waiters_.erase(it);
}

void HeldTakes::ProcessReplaced(const std::string& host_id, const std::string& incarnation) {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (it->host_id != host_id || it->incarnation.empty() || it->incarnation == incarnation) {
      ++it;
      continue;
    }
    replaced_.emplace_back(std::move(*it), incarnation);
    it = Erase(it);
  }
}

std::optional<std::int64_t> HeldTakes::NextDeadlineMs() const {
  std::optional<std::int64_t> due;
  for (const Waiter& w : waiters_) due = due ? std::min(*due, w.until_ms) : w.until_ms;
  return due;
}

bool HeldTakes::AnyDue(std::int64_t now_ms) const {
  return std::any_of(waiters_.begin(), waiters_.end(), [&](const Waiter& w) { return w.until_ms <= now_ms; });
}

Pending HeldTakes::Answer(Waiter& w, api::Response response, std::optional<queue::AttemptRef> delivers) {
  return Pending{api::Endpoint::kProvisioner, std::move(w.envelope), w.id, std::move(response), delivers, {}, {}};
}

bool HeldTakes::Serve(std::vector<Pending>* out, bool force, std::chrono::steady_clock::time_point deadline) {
  const std::int64_t now = clock_.NowMs();
  const bool ready = queue_.TakeReadyChanged() || force;
  for (Waiter& w : superseded_) {
    out->push_back(Answer(w, api::Response::Error(Status::Conflict(
                                 "runner '" + w.runner + "' of host '" + w.host_id +
                                 "' sent a newer task.take, which replaces this one"))));
  }
  superseded_.clear();
  for (auto& [w, now_incarnation] : replaced_) {
    out->push_back(Answer(
        w, api::Response::Error(
               Status::Conflict("this process (incarnation " + w.incarnation + ") no longer acts for host '" +
                                w.host_id + "': another process (incarnation " + now_incarnation +
                                ") registered under that id while this task.take was held, so it gets no task; "
                                "stop this process's tasks and register again (refused while that process is live)"),
               {{"reason", "process_replaced"}, {"host_id", w.host_id}})));
  }
  replaced_.clear();
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (!KeyInForce(*it)) {
      // Revoked by any path (host.revoke, a new key by enrollment or accept):
      // what it waited for must not go to a key that no longer speaks for the host.
      out->push_back(Answer(*it, api::Response::Error(Status::Denied(
                                     "host '" + it->host_id + "': this key " + curve::ShortKey(it->key) +
                                     " was revoked while it waited for a task"))));
      it = Erase(it);
      continue;
    }
    hosts::Taken task;
    if ((ready || queue_.queued() > 0) && dispatcher_.CanServe(it->host_id, it->tenant)) {
      Result<hosts::Taken> taken = dispatcher_.TryTake(it->host_id, it->tenant, it->runner);
      if (!taken.ok()) {
        out->push_back(Answer(*it, api::Response::Error(taken.status())));
        it = Erase(it);
        continue;
      }
      task = std::move(*taken);
    }
    if (task.task_id > 0 || it->until_ms <= now) {
      const bool served = task.task_id > 0;
      std::optional<queue::AttemptRef> delivers;
      if (served) delivers = queue::AttemptRef{task.task_id, task.attempt};
      out->push_back(Answer(*it, hosts::TakeReply(std::move(task)), delivers));
      it = Erase(it);
      // Handing out a task is the costly part: past the budget, the rest next turn (which comes at once).
      if (served && it != waiters_.end() && std::chrono::steady_clock::now() >= deadline) return true;
      continue;
    }
    ++it;
  }
  return false;
}

void HeldTakes::AnswerAll(std::vector<Pending>* out, const Status& status) {
  for (Waiter& w : waiters_) out->push_back(Answer(w, api::Response::Error(status)));
  waiters_.clear();
  by_runner_.clear();
  for (Waiter& w : superseded_) out->push_back(Answer(w, api::Response::Error(status)));
  superseded_.clear();
  for (auto& [w, unused] : replaced_) out->push_back(Answer(w, api::Response::Error(status)));
  replaced_.clear();
}

bool HeldTakes::KeyInForce(const Waiter& w) const {
  if (!config_.security.curve) return true;
  const auth::KeyEntry* e = registry_.Find(w.key);
  return e && e->kind == auth::Kind::kHost && e->host_id == w.host_id;
}

}  // namespace weft::server

#include "weft/server/daemon/held_takes.hpp"

#include <algorithm>
#include <utility>

#include "weft/common/curve.hpp"

namespace weft::server {

using json = nlohmann::json;

void HeldTakes::Hold(Pending p) {
  waiters_.push_back(Waiter{std::move(p.envelope), std::move(p.id), p.response.held_host_id,
                            std::move(p.response.held_tenant), p.response.held_until_ms, std::move(p.key)});
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
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (!KeyInForce(*it)) {
      // Revoked by any path (host.revoke, a new key by enrollment or accept):
      // what it waited for must not go to a key that no longer speaks for the host.
      out->push_back(Answer(*it, api::Response::Error(Status::Denied(
                                     "host '" + it->host_id + "': this key " + curve::ShortKey(it->key) +
                                     " was revoked while it waited for a task"))));
      it = waiters_.erase(it);
      continue;
    }
    json task;
    if ((ready || queue_.queued() > 0) && dispatcher_.CanServe(it->host_id, it->tenant)) {
      Result<json> taken = dispatcher_.TryTake(it->host_id, it->tenant);
      if (!taken.ok()) {
        out->push_back(Answer(*it, api::Response::Error(taken.status())));
        it = waiters_.erase(it);
        continue;
      }
      task = std::move(*taken);
    }
    if (task.is_object() || it->until_ms <= now) {
      const bool served = task.is_object();
      std::optional<queue::AttemptRef> delivers;
      if (served)
        delivers = queue::AttemptRef{task["task_id"].get<std::int64_t>(), task["attempt"].get<std::int64_t>()};
      json body = json::object();
      body["task"] = std::move(task);
      out->push_back(Answer(*it, api::Response::Ok(std::move(body)), delivers));
      it = waiters_.erase(it);
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
}

bool HeldTakes::KeyInForce(const Waiter& w) const {
  if (!config_.security.curve) return true;
  const auth::KeyEntry* e = registry_.Find(w.key);
  return e && e->kind == auth::Kind::kHost && e->host_id == w.host_id;
}

}  // namespace weft::server

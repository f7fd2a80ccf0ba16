#include "weft/server/daemon/group_commit.hpp"

#include <chrono>
#include <iterator>
#include <optional>
#include <string>

#include "weft/common/log.hpp"

namespace weft::server {
namespace {

template <typename T>
void Append(std::vector<T>& to, std::vector<T>& from) {
  to.insert(to.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
  from.clear();
}

}  // namespace

Status GroupCommit::End(Status status, std::vector<Pending>& batch) {
  // A handler's store error leaves the transaction in an unknown state: roll
  // it all back. Not a refusal the handler made before it changed anything
  // (a rate limit's UNAVAILABLE: Response::changed_nothing).
  for (const Pending& p : batch)
    if (status.ok() && !p.response.changed_nothing &&
        (p.response.status.code() == Code::kInternal || p.response.status.code() == Code::kUnavailable))
      status = p.response.status;
  if (!store_.OverlapsCommits()) {
    if (status.ok()) status = Commit();
    if (status.ok()) {
      components_.Committed();
      return Status::Ok();
    }
    WEFT_RETURN_IF_ERROR(Recover(status, batch));
    (void)components_.DrainEvents();  // what they report never happened
    return Status::Ok();
  }
  // This turn went out behind the commit in flight: that one's outcome first.
  std::vector<Pending> ready;
  if (in_flight_) {
    Status earlier = AwaitInFlight(ready);
    if (!earlier.ok()) {
      // The server ran nothing of this turn either; it was rolled back with it.
      // Logged (throttled) by Recover, as one batch with the earlier one.
      WEFT_LOG(kDebug, "weftd") << "the " << batch.size() << " requests begun behind a failed commit are rolled back "
                                << "with it";
      Append(ready, batch);
      WEFT_RETURN_IF_ERROR(Recover(earlier, ready));
      (void)components_.DrainEvents();
      batch = std::move(ready);
      return Status::Ok();
    }
  }
  if (status.ok()) status = Send();
  if (status.ok()) {
    in_flight_ = true;
    flight_ = std::move(batch);
    flight_events_ = components_.DrainEvents();
    batch = std::move(ready);
    return Status::Ok();
  }
  WEFT_RETURN_IF_ERROR(Recover(status, batch));
  (void)components_.DrainEvents();
  Append(ready, batch);
  batch = std::move(ready);
  return Status::Ok();
}

Status GroupCommit::Settle(std::vector<Pending>& replies) {
  if (!in_flight_) return Status::Ok();
  if (store_.in_transaction()) return Status::Internal("a commit was settled inside a transaction");
  std::vector<Pending> ready;
  Status outcome = AwaitInFlight(ready);
  if (!outcome.ok()) {
    WEFT_RETURN_IF_ERROR(Recover(outcome, ready));
    (void)components_.DrainEvents();
  }
  Append(replies, ready);
  return Status::Ok();
}

Status GroupCommit::AwaitInFlight(std::vector<Pending>& ready) {
  in_flight_ = false;
  ServerMetrics* m = components_.metrics();
  const auto start = std::chrono::steady_clock::now();
  Status outcome = store_.AwaitCommit();
  if (m) m->commit_seconds().Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  Append(ready, flight_);
  if (outcome.ok()) {
    if (m) m->commits().Inc();
    components_.store_health().Committed(components_.clock().NowMs());
    components_.Committed();
    Append(ready_events_, flight_events_);
  } else {
    flight_events_.clear();  // what they report never happened
  }
  return outcome;
}

Status GroupCommit::Commit() {
  ServerMetrics* m = components_.metrics();
  const auto start = std::chrono::steady_clock::now();
  Status s = store_.Commit();
  if (s.ok()) components_.store_health().Committed(components_.clock().NowMs());
  if (!m) return s;
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  if (s.ok()) m->commits().Inc();  // a failed one is counted by Recover
  m->commit_seconds().Observe(took.count());
  return s;
}

Status GroupCommit::Send() {
  // Timed, and counted once it landed, when its outcome is awaited (AwaitInFlight).
  return store_.SendCommit();
}

Status GroupCommit::Recover(const Status& why, std::vector<Pending>& replies) {
  const std::optional<std::string> disk_full = store::DiskFull(why);
  // Said once, then once a minute (StoreHealth): a line per batch would fill a full disk further.
  components_.store_health().Failed(why, replies.size(), components_.clock().NowMs());
  if (ServerMetrics* m = components_.metrics()) m->commit_failures(disk_full.has_value()).Inc();
  Status rb = store_.Rollback();
  if (!rb.ok()) {
    WEFT_LOG(kError, "weftd") << "rollback failed: " << rb.message();
  }
  // The in-memory indexes may hold changes that were just rolled back.
  WEFT_RETURN_IF_ERROR(components_.Reset());
  // A full disk is not fixed by retrying alone: the reply says where and what to do.
  const Status reply = disk_full ? Status::Unavailable("weftd cannot write its store: " + *disk_full + ", then retry")
                                 : Status::Unavailable("the store could not commit this request (" +
                                                       why.message() + "); retry it");
  for (Pending& p : replies) {
    const OpMetrics* outcome = p.response.outcome;  // counted when the reply goes out: as the error it now is
    p.response = api::Response::Error(reply);
    p.response.outcome = outcome;
    p.delivers.reset();
  }
  return Status::Ok();
}

}  // namespace weft::server

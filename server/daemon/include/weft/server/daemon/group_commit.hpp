// weft::server::GroupCommit: the one store transaction of a reactor turn.
// Every request of a batch, the lease expiries and the held takes served in
// that turn write into it; it commits once, and only then do the replies go
// out: a reply never reports a change that is not durable. Part of weftd's
// reactor.
//
// On PostgreSQL a turn does not wait for its COMMIT: End() sends it and the
// batch waits "in flight" while the reactor handles the next turn, whose
// statements go out behind that COMMIT (so weftd and PostgreSQL work at the
// same time instead of taking turns). The next End() first waits for the
// earlier commit: confirmed, its replies and events are handed out; failed,
// the server ran nothing of the later turn either (Store::AwaitCommit), and
// both batches roll back and ask to retry. Settle() waits for it between
// turns: before the reactor sleeps, answers a read or stops. A confirmed
// commit with no turn behind it leaves the next transaction begun on the
// server (ChainWaiting()) until the next turn, or Rest().
//
// Not thread-safe: runs on the reactor thread.
#pragma once

#include <vector>

#include "weft/common/event.hpp"
#include "weft/server/daemon/components.hpp"
#include "weft/server/daemon/pending.hpp"
#include "weft/server/store/store.hpp"
#include "weft/common/status.hpp"

namespace weft::server {

class GroupCommit {
 public:
  GroupCommit(store::Store& store, Components& components) : store_(store), components_(components) {}

  [[nodiscard]] Status Begin() { return store_.Begin(); }
  // Ends the turn: commits, unless `status` (the turn's own work) failed or a
  // handler met a store error (which leaves the transaction in an unknown
  // state). Then it rolls everything back, rebuilds the components' in-memory
  // state from the store, and every reply of `batch` asks to retry. Returns an
  // error only when that state cannot be rebuilt (weftd must stop).
  // Afterwards `batch` holds the replies to send now: with a commit in flight
  // (see the header), those of the earlier turn, and this turn's wait.
  [[nodiscard]] Status End(Status status, std::vector<Pending>& batch);
  // Between turns (no transaction open): waits for the commit in flight and
  // appends its replies to `replies`.
  [[nodiscard]] Status Settle(std::vector<Pending>& replies);
  bool InFlight() const { return in_flight_; }
  // What to poll(2) for the outcome of the commit in flight (-1: none).
  int Socket() const { return in_flight_ ? store_.CommitSocket() : -1; }
  // PostgreSQL: the last commit, confirmed, left the next transaction begun
  // for the next turn (store::Store::ChainWaiting()); Rest() ends it, as the
  // reactor does when no request came for a while: a turn that comes soon
  // then sends no BEGIN, and the connection ends no pipeline in between.
  bool ChainWaiting() const { return !in_flight_ && store_.ChainWaiting(); }
  void Rest() { store_.EndChain(); }
  // The events of the commits confirmed by End() or Settle() since the last call.
  std::vector<Event> TakeEvents() { return std::move(ready_events_); }

 private:
  Status Commit();  // timed, with metrics on
  Status Send();    // SendCommit, counted with metrics on
  // Waits for the commit in flight; its batch goes to the end of `ready`.
  Status AwaitInFlight(std::vector<Pending>& ready);
  Status Recover(const Status& why, std::vector<Pending>& replies);

  store::Store& store_;
  Components& components_;
  bool in_flight_ = false;
  std::vector<Pending> flight_;       // the replies waiting for the commit in flight
  std::vector<Event> flight_events_;  // and its events
  std::vector<Event> ready_events_;
};

}  // namespace weft::server

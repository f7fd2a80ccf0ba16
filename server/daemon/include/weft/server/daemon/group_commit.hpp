// weft::server::GroupCommit: the one SQLite transaction of a reactor turn.
// Every request of a batch, the lease expiries and the held takes served in
// that turn write into it; it commits once, and only then do the replies go
// out: a reply never reports a change that is not durable. Part of weftd's
// reactor.
//
// Not thread-safe: runs on the reactor thread.
#pragma once

#include <vector>

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
  [[nodiscard]] Status End(Status status, std::vector<Pending>& batch);

 private:
  Status Commit();  // timed, with metrics on
  Status Recover(const Status& why, std::vector<Pending>& replies);

  store::Store& store_;
  Components& components_;
};

}  // namespace weft::server

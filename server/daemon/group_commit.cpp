#include "weft/server/daemon/group_commit.hpp"

#include <chrono>

#include "weft/common/log.hpp"

namespace weft::server {

Status GroupCommit::End(Status status, std::vector<Pending>& batch) {
  // A handler's store error leaves the transaction in an unknown state: roll it all back.
  for (const Pending& p : batch)
    if (status.ok() && (p.response.status.code() == Code::kInternal || p.response.status.code() == Code::kUnavailable))
      status = p.response.status;
  if (status.ok()) status = Commit();
  if (status.ok()) {
    components_.Committed();
    return Status::Ok();
  }
  WEFT_RETURN_IF_ERROR(Recover(status, batch));
  (void)components_.DrainEvents();  // what they report never happened
  return Status::Ok();
}

Status GroupCommit::Commit() {
  ServerMetrics* m = components_.metrics();
  if (!m) return store_.Commit();
  const auto start = std::chrono::steady_clock::now();
  Status s = store_.Commit();
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  m->commits().Inc();
  m->commit_seconds().Observe(took.count());
  return s;
}

Status GroupCommit::Recover(const Status& why, std::vector<Pending>& replies) {
  WEFT_LOG(kError, "weftd") << "a batch of " << replies.size() << " requests was rolled back: " << why.message();
  Status rb = store_.Rollback();
  if (!rb.ok()) {
    WEFT_LOG(kError, "weftd") << "rollback failed: " << rb.message();
  }
  // The in-memory indexes may hold changes that were just rolled back.
  WEFT_RETURN_IF_ERROR(components_.Reset());
  for (Pending& p : replies) {
    p.response = api::Response::Error(
        Status::Unavailable("the store could not commit this request (" + why.message() + "); retry it"));
    p.delivers.reset();
  }
  return Status::Ok();
}

}  // namespace weft::server

#include "weft/server/daemon/retention.hpp"

#include "weft/common/log.hpp"
#include "weft/common/text.hpp"

namespace weft::server {

bool Retention::Wanted(Phase phase) const {
  switch (phase) {
    case Phase::kEnded: return config_.ended_after_ms > 0;
    case Phase::kTokens: return config_.tokens_after_ms > 0;
    case Phase::kAudit: return config_.audit_after_ms > 0;
    case Phase::kVacuum: return config_.vacuum_pages > 0 && store_.backend() == store::Backend::kSqlite;
    case Phase::kDone: return true;
  }
  return true;
}

Retention::Phase Retention::WantedFrom(Phase phase) const {
  while (phase != Phase::kDone && !Wanted(phase)) phase = static_cast<Phase>(static_cast<int>(phase) + 1);
  return phase;
}

Status Retention::Step(std::int64_t now_ms, Done* done, bool* more) {
  *more = false;
  switch (phase_) {
    case Phase::kEnded: {
      WEFT_ASSIGN_OR_RETURN(done->ended, store_.PruneEnded(now_ms - config_.ended_after_ms, config_.batch_rows));
      *more = done->ended.more;
      return Status::Ok();
    }
    case Phase::kTokens: {
      done->tokens_cutoff_ms = now_ms - config_.tokens_after_ms;
      WEFT_ASSIGN_OR_RETURN(done->tokens, store_.PruneSpentApiTokens(done->tokens_cutoff_ms, config_.batch_rows));
      *more = done->tokens >= config_.batch_rows;
      return Status::Ok();
    }
    case Phase::kAudit: {
      WEFT_ASSIGN_OR_RETURN(done->audit, store_.PruneAudit(now_ms - config_.audit_after_ms, config_.batch_rows));
      *more = done->audit >= config_.batch_rows;
      return Status::Ok();
    }
    case Phase::kVacuum: {
      WEFT_ASSIGN_OR_RETURN(store::StoreSpace before, store_.Space());
      done->free_before = before.free_pages;
      WEFT_ASSIGN_OR_RETURN(store::StoreSpace after, store_.ReclaimSpace(config_.vacuum_pages));
      done->freed_pages = before.free_pages - after.free_pages;
      // Until the free list is empty, as long as a step gives some back.
      *more = after.incremental && after.free_pages > 0 && after.free_pages < before.free_pages;
      return Status::Ok();
    }
    case Phase::kDone: return Status::Ok();
  }
  return Status::Ok();
}

Status Retention::Batch(std::int64_t now_ms) {
  if (!in_round_) {
    in_round_ = true;
    round_started_ms_ = now_ms;
    phase_ = WantedFrom(Phase::kEnded);
  }
  Done done;
  done.transaction = store_.transactions_begun();
  done.phase = phase_;
  done.now_ms = now_ms;
  done.round_started_ms = round_started_ms_;
  bool more = false;
  if (Status s = Step(now_ms, &done, &more); !s.ok()) {
    in_round_ = false;
    next_ms_ = now_ms + config_.interval_ms;
    // Its batches count in the totals; the next round's line starts from nothing.
    round_ = {};
    round_tokens_ = round_audit_ = round_freed_pages_ = 0;
    round_free_before_ = -1;
    WEFT_LOG(kError, "weftd") << "retention: a round failed; tried again in " << DurationText(config_.interval_ms)
                              << ": " << s.message();
    return s;
  }
  if (!more) phase_ = WantedFrom(static_cast<Phase>(static_cast<int>(phase_) + 1));
  if (phase_ != Phase::kDone) {
    next_ms_ = now_ms;  // the next turn goes on
  } else {
    in_round_ = false;
    next_ms_ = now_ms + config_.interval_ms;
    done.ends_round = true;
  }
  pending_.push_back(std::move(done));
  return Status::Ok();
}

void Retention::Committed() {
  // With PostgreSQL the commit confirmed may be the one in flight while the
  // next transaction is open: that one's batch is not committed yet.
  const std::uint64_t begun = store_.transactions_begun();
  const std::uint64_t committed = store_.in_transaction() ? begun - 1 : begun;
  while (!pending_.empty() && pending_.front().transaction <= committed) {
    const Done done = std::move(pending_.front());
    pending_.pop_front();
    Count(done);
    if (done.ends_round) EndRound(done);
  }
}

void Retention::RolledBack() {
  if (pending_.empty()) return;
  // Nothing of these batches happened: the round goes on from the first one's
  // phase, in the next turn (the rows it would have removed are still there).
  const Done& first = pending_.front();
  phase_ = first.phase;
  round_started_ms_ = first.round_started_ms;
  in_round_ = true;
  next_ms_ = 0;
  pending_.clear();
}

void Retention::Count(const Done& done) {
  round_.Add(done.ended);
  round_tokens_ += done.tokens;
  // The phase's last batch's cutoff: every token spent before it is gone when the phase ends.
  if (done.phase == Phase::kTokens) round_tokens_cutoff_ms_ = done.tokens_cutoff_ms;
  round_audit_ += done.audit;
  round_freed_pages_ += done.freed_pages;
  if (round_free_before_ < 0 && done.free_before >= 0) round_free_before_ = done.free_before;
  constexpr auto kRelaxed = std::memory_order_relaxed;
  removed_clusters_.fetch_add(done.ended.clusters, kRelaxed);
  removed_jobs_.fetch_add(done.ended.jobs, kRelaxed);
  removed_tasks_.fetch_add(done.ended.tasks, kRelaxed);
  removed_tokens_.fetch_add(done.tokens, kRelaxed);
  removed_audit_.fetch_add(done.audit, kRelaxed);
  freed_pages_.fetch_add(done.freed_pages, kRelaxed);
}

void Retention::EndRound(const Done& last) {
  const std::int64_t now_ms = last.now_ms;
  if (round_.rows() > 0) {
    WEFT_LOG(kInfo, "weftd") << "retention: removed " << round_.clusters << " deleted clusters, " << round_.jobs
                             << " jobs, " << round_.tasks << " tasks, " << round_.attempts << " attempts and "
                             << round_.nodes << " nodes that ended more than " << DurationText(config_.ended_after_ms)
                             << " ago, in " << DurationText(now_ms - last.round_started_ms);
  }
  if (round_tokens_ > 0) {
    WEFT_LOG(kInfo, "weftd") << "retention: removed " << round_tokens_ << " API tokens revoked or expired more than "
                             << DurationText(config_.tokens_after_ms) << " ago";
    if (forget_tokens_) forget_tokens_(round_tokens_cutoff_ms_);
  }
  if (round_audit_ > 0) {
    WEFT_LOG(kInfo, "weftd") << "retention: removed " << round_audit_ << " audit entries older than "
                             << DurationText(config_.audit_after_ms) << " ([retention] audit_after_days)";
  }
  if (round_freed_pages_ > 0) {
    WEFT_LOG(kInfo, "weftd") << "retention: gave " << round_freed_pages_ << " free pages of the store back to the "
                             << "file system (of " << round_free_before_ << ")";
  }
  round_ = {};
  round_tokens_ = round_audit_ = round_freed_pages_ = 0;
  round_free_before_ = -1;
  constexpr auto kRelaxed = std::memory_order_relaxed;
  if (Result<store::StoreSpace> space = store_.Space(); space.ok() && space->pages > 0) {
    pages_.store(space->pages, kRelaxed);
    free_pages_.store(space->free_pages, kRelaxed);
    page_size_.store(space->page_size, kRelaxed);
    incremental_.store(space->incremental, kRelaxed);
  }
  last_ms_.store(now_ms, std::memory_order_release);
}

void Retention::AppendMetrics(metrics::Snapshot& out) const {
  constexpr auto kRelaxed = std::memory_order_relaxed;
  out.push_back({"weft_retention_removed_total",
                 "Rows retention removed since weftd started, by kind ([retention] in weftd.toml).",
                 "counter",
                 {{{{"kind", "clusters"}}, static_cast<double>(removed_clusters_.load(kRelaxed))},
                  {{{"kind", "jobs"}}, static_cast<double>(removed_jobs_.load(kRelaxed))},
                  {{{"kind", "tasks"}}, static_cast<double>(removed_tasks_.load(kRelaxed))},
                  {{{"kind", "api_tokens"}}, static_cast<double>(removed_tokens_.load(kRelaxed))},
                  {{{"kind", "audit"}}, static_cast<double>(removed_audit_.load(kRelaxed))}}});
  if (store_.backend() != store::Backend::kSqlite) return;
  out.push_back({"weft_store_freed_pages_total",
                 "Free pages of the SQLite store retention gave back to the file system since weftd started.",
                 "counter",
                 {{{}, static_cast<double>(freed_pages_.load(kRelaxed))}}});
  Result<store::StoreSpace> space = store_.Space();
  if (!space.ok() || space->pages <= 0) return;
  out.push_back({"weft_store_pages", "Pages in the SQLite store's file (free ones included).", "gauge",
                 {{{}, static_cast<double>(space->pages)}}});
  out.push_back({"weft_store_free_pages",
                 "Pages on the SQLite store's free list: space retention's vacuum_pages (with auto_vacuum "
                 "incremental) or weftd --vacuum gives back.",
                 "gauge",
                 {{{}, static_cast<double>(space->free_pages)}}});
  out.push_back({"weft_store_page_size_bytes", "The SQLite store's page size.", "gauge",
                 {{{}, static_cast<double>(space->page_size)}}});
}

nlohmann::json Retention::Json() const {
  constexpr auto kRelaxed = std::memory_order_relaxed;
  nlohmann::json j = {{"ended_after_ms", config_.ended_after_ms},
                      {"tokens_after_ms", config_.tokens_after_ms},
                      {"audit_after_ms", config_.audit_after_ms},
                      {"interval_ms", config_.interval_ms}};
  const std::int64_t last = last_ms_.load(std::memory_order_acquire);
  if (last > 0) j["last_round_at_ms"] = last;
  j["removed"] = {{"clusters", removed_clusters_.load(kRelaxed)},
                  {"jobs", removed_jobs_.load(kRelaxed)},
                  {"tasks", removed_tasks_.load(kRelaxed)},
                  {"api_tokens", removed_tokens_.load(kRelaxed)},
                  {"audit", removed_audit_.load(kRelaxed)},
                  {"freed_pages", freed_pages_.load(kRelaxed)}};
  if (const std::int64_t pages = pages_.load(kRelaxed); pages > 0) {
    j["store"] = {{"pages", pages},
                  {"free_pages", free_pages_.load(kRelaxed)},
                  {"page_size", page_size_.load(kRelaxed)},
                  {"auto_vacuum", incremental_.load(kRelaxed) ? "incremental" : "none"}};
  }
  return j;
}

}  // namespace weft::server

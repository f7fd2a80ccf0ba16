// weftd's retention timer ([retention] in weftd.toml, docs/configuration.md):
// on the leader, every interval_ms and once when it starts leading, the
// reactor runs one batch per turn, inside the turn's group commit, until
// nothing more is due; each batch removes at most batch_rows rows, so a turn
// that prunes is never held up for long. A round goes through, in order:
// what ended (Store::PruneEnded), spent API tokens, audit entries (only with
// an age set), then, on SQLite, gives free pages back to the file system
// vacuum_pages a turn. What is removed and what is kept:
// server/store/retention_store.cpp. What a batch removed counts (in the log,
// server.status and /metrics) only once its transaction committed
// (Committed); a batch rolled back counts for nothing, and the round goes on
// from that batch's phase at once (RolledBack).
//
// Batch and Due on the reactor thread; Json from any thread (server.status on
// the api front reads what the last round published).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>

#include <nlohmann/json.hpp>

#include "weft/common/metrics.hpp"
#include "weft/common/status.hpp"
#include "weft/server/config/config.hpp"
#include "weft/server/store/store.hpp"

namespace weft::server {

class Retention {
 public:
  Retention(const RetentionConfig& config, store::Store& store) : config_(config), store_(store) {}

  // Called when a round removed spent API tokens (with the round's cutoff), so
  // what holds them in memory forgets them too.
  void OnTokensPruned(std::function<void(std::int64_t cutoff_ms)> forget) { forget_tokens_ = std::move(forget); }

  // Whether a batch is due now (never when every age is 0 and vacuum_pages
  // is 0: everything is kept).
  bool Due(std::int64_t now_ms) const { return Enabled() && now_ms >= next_ms_; }
  // When the next batch is due (INT64_MAX: never).
  std::int64_t NextMs() const { return Enabled() ? next_ms_ : INT64_MAX; }
  // One batch, in the caller's transaction. When it leaves nothing due, the
  // round is over: it is logged with what it removed, and the next one is
  // due interval_ms later. A failure also puts the next round off that long.
  [[nodiscard]] Status Batch(std::int64_t now_ms);
  // The store committed a transaction: the batches of every transaction up to
  // that one count now (PostgreSQL confirms a commit while the next
  // transaction is open, whose batch waits for its own commit). A round whose
  // last batch committed is logged then.
  void Committed();
  // The store rolled back what was not committed: those batches removed
  // nothing, and the round goes on from the first of them at once.
  void RolledBack();
  // This weftd starts leading: a round is due at once.
  void Restart() {
    next_ms_ = 0;
    round_ = {};
    round_tokens_ = round_audit_ = round_freed_pages_ = 0;
    round_free_before_ = -1;
    pending_.clear();
    in_round_ = false;
  }

  // The policy, when the last round ended and what the rounds removed since
  // weftd started, and the store's free pages, for server.status.
  nlohmann::json Json() const;
  // For /metrics (docs/metrics.md), on the reactor thread: the SQLite store's pages and
  // free pages as they are now (read off the file's header), and what the rounds
  // removed and gave back since weftd started.
  void AppendMetrics(metrics::Snapshot& out) const;

 private:
  enum class Phase { kEnded, kTokens, kAudit, kVacuum, kDone };
  bool Enabled() const {
    return config_.ended_after_ms > 0 || config_.tokens_after_ms > 0 || config_.audit_after_ms > 0 ||
           config_.vacuum_pages > 0;
  }
  // Whether `phase` has anything to do under the policy.
  bool Wanted(Phase phase) const;
  // `phase` or the first wanted phase after it (kDone at the end).
  Phase WantedFrom(Phase phase) const;
  // What one batch removed, counted once its transaction committed.
  struct Done {
    std::uint64_t transaction = 0;  // Store::transactions_begun() when it ran
    Phase phase = Phase::kEnded;    // the phase it was a batch of
    std::int64_t now_ms = 0;
    std::int64_t round_started_ms = 0;
    store::PruneCounts ended;
    std::int64_t tokens = 0;
    std::int64_t tokens_cutoff_ms = 0;
    std::int64_t audit = 0;
    std::int64_t freed_pages = 0;
    std::int64_t free_before = -1;
    bool ends_round = false;  // the round's last batch
  };
  // One batch of the round's current phase into `done`; `more`: that phase goes on next turn.
  [[nodiscard]] Status Step(std::int64_t now_ms, Done* done, bool* more);
  // A committed batch's counts join the round's and the totals.
  void Count(const Done& done);
  void EndRound(const Done& last);

  const RetentionConfig& config_;
  store::Store& store_;
  std::function<void(std::int64_t)> forget_tokens_;
  std::int64_t next_ms_ = 0;
  bool in_round_ = false;
  Phase phase_ = Phase::kEnded;
  std::int64_t round_started_ms_ = 0;
  // Batches whose transaction is open or in flight, oldest first.
  std::deque<Done> pending_;
  // The round's committed batches' counts, until its last batch committed.
  store::PruneCounts round_;
  std::int64_t round_tokens_ = 0;
  std::int64_t round_tokens_cutoff_ms_ = 0;
  std::int64_t round_audit_ = 0;
  std::int64_t round_freed_pages_ = 0;
  std::int64_t round_free_before_ = -1;
  // When the last round ended (0: none yet), and what the rounds removed
  // since weftd started, as published.
  std::atomic<std::int64_t> last_ms_{0};
  std::atomic<std::int64_t> removed_clusters_{0};
  std::atomic<std::int64_t> removed_jobs_{0};
  std::atomic<std::int64_t> removed_tasks_{0};
  std::atomic<std::int64_t> removed_tokens_{0};
  std::atomic<std::int64_t> removed_audit_{0};
  std::atomic<std::int64_t> freed_pages_{0};
  // The store's file as the last round left it (SQLite; -1: not read yet).
  std::atomic<std::int64_t> pages_{-1};
  std::atomic<std::int64_t> free_pages_{-1};
  std::atomic<std::int64_t> page_size_{0};
  std::atomic<bool> incremental_{false};
};

}  // namespace weft::server

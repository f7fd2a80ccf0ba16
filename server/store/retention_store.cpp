// Retention ([retention] in weftd.toml, docs/configuration.md): removes what
// ended long ago, a batch at a time, in the caller's transaction. weftd's
// leader runs a batch per turn of its reactor until nothing more is due, so a
// batch never holds up the requests of that turn for long.
//
// What goes: a deleted (terminated) cluster whose deletion is older than the
// cutoff, with its jobs, their tasks, the tasks' superseded attempts and the
// cluster's nodes; and a job of a live cluster that ended before the cutoff,
// with its tasks and attempts, unless it is the cluster's latest job (the one
// `cluster.retry` and the cluster's status name). What stays whatever its age:
// the audit log (append only, migration 6); every job of a cluster that has a
// job running (its undo or retry may read them); a job with a task not
// finished (a host may still report it); tasks of no job (debug.enqueue); and
// the job of the newest task, until a newer task exists: SQLite gives a task
// the largest id plus one (migration 14), so removing the newest would give
// its id again.
//
// A job goes task by task (attempts first: they reference their task), then
// its own row; a cluster once its last job is gone, its nodes first. Whatever
// a batch leaves is found again by the next one: nothing here is remembered
// between batches, so a rollback loses nothing.
//
// Beside what ended: API tokens revoked or expired before a cutoff (a token
// weftd does not know is refused with the very words of a revoked one, so
// removing the row changes no answer), and, only when asked, audit entries
// older than a cutoff. The audit log's triggers refuse every DELETE; a batch
// lifts the one against deleting for its own statement only, inside the
// caller's transaction, so a crash or a rollback leaves the log append-only.
// Space: SQLite keeps what was deleted as free pages inside the file;
// ReclaimSpace gives some back (auto_vacuum=INCREMENTAL), Vacuum all of it.
#include <string>
#include <utility>
#include <vector>

#include "weft/server/store/database.hpp"
#include "weft/server/store/store.hpp"

namespace weft::store {
namespace {

// Candidates are read a page at a time, in full, before anything is deleted.
constexpr std::int64_t kPage = 64;

enum class Pruned { kGone, kKept, kOutOfRows };

// Rows left in this batch; `used` says whether it removed anything yet.
struct Budget {
  std::int64_t left = 0;
  bool used = false;
  void Take(std::int64_t rows) {
    left -= rows;
    used = used || rows > 0;
  }
};

Result<std::vector<std::int64_t>> Ids(sql::Statement& st) {
  std::vector<std::int64_t> out;
  WEFT_RETURN_IF_ERROR(sql::ForEachRow(st, [&](const sql::Statement& row) { out.push_back(row.Int(0)); }));
  return out;
}

Result<bool> Any(sql::Database& db, std::string_view text, std::string_view job_id) {
  WEFT_ASSIGN_OR_RETURN(sql::Statement st, db.Prepare(text));
  st.Bind(1, job_id);
  WEFT_ASSIGN_OR_RETURN(bool row, st.Step());
  return row;
}

// Removes job `job_id` with its tasks and their attempts, within `budget`.
// Each statement by job says `job_id != ''` too: the partial index
// task_specs_by_job is then used, not a scan of every task.
// kOutOfRows: part of it may be gone; the next batch goes on.
Result<Pruned> PruneJob(sql::Database& db, std::int64_t job_id, Budget& budget, PruneCounts& counts) {
  const std::string job = std::to_string(job_id);
  WEFT_ASSIGN_OR_RETURN(bool unfinished,
                        Any(db, "SELECT 1 FROM task_specs s WHERE s.job_id = ?1 AND s.job_id != '' AND EXISTS "
                            "(SELECT 1 FROM tasks t WHERE t.id = s.id AND t.finished_at_ms = 0) LIMIT 1",
                            job));
  if (unfinished) return Pruned::kKept;
  WEFT_ASSIGN_OR_RETURN(bool newest,
                        Any(db, "SELECT 1 FROM task_specs WHERE id = (SELECT MAX(id) FROM tasks) AND job_id = ?1", job));
  if (newest) return Pruned::kKept;
  while (true) {
    if (budget.left <= 0) return Pruned::kOutOfRows;
    // The next tasks, each with its superseded attempts, as many as fit.
    const std::int64_t limit = budget.left;
    WEFT_ASSIGN_OR_RETURN(sql::Statement next,
                          db.Prepare("SELECT t.id, (SELECT COUNT(*) FROM attempts a WHERE a.task_id = t.id) "
                                     "FROM task_specs t WHERE t.job_id = ?1 AND t.job_id != '' ORDER BY t.id LIMIT ?2"));
    next.Bind(1, job).Bind(2, limit);
    std::vector<std::pair<std::int64_t, std::int64_t>> tasks;
    WEFT_RETURN_IF_ERROR(sql::ForEachRow(next, [&](const sql::Statement& row) {
      tasks.emplace_back(row.Int(0), row.Int(1));
    }));
    if (tasks.empty()) break;
    std::int64_t rows = 0, last = 0;
    std::size_t fit = 0;
    for (; fit < tasks.size() && rows + 1 + tasks[fit].second <= budget.left; ++fit) {
      rows += 1 + tasks[fit].second;
      last = tasks[fit].first;
    }
    if (fit == 0) {
      // One task with more attempts than a batch holds goes in a batch of its own.
      if (budget.used) return Pruned::kOutOfRows;
      fit = 1;
      last = tasks[0].first;
    }
    if (db.dialect() == sql::Dialect::kPostgres) {
      // Finished tasks may still be listed there (Store::PruneOpenTasks removes them later).
      WEFT_ASSIGN_OR_RETURN(sql::Statement open,
                            db.Prepare("DELETE FROM open_tasks WHERE id IN "
                                       "(SELECT id FROM task_specs WHERE job_id = ?1 AND job_id != '' AND id <= ?2)"));
      WEFT_RETURN_IF_ERROR(open.Bind(1, job).Bind(2, last).Run());
    }
    WEFT_ASSIGN_OR_RETURN(sql::Statement attempts,
                          db.Prepare("DELETE FROM attempts WHERE task_id IN "
                                     "(SELECT id FROM task_specs WHERE job_id = ?1 AND job_id != '' AND id <= ?2)"));
    WEFT_RETURN_IF_ERROR(attempts.Bind(1, job).Bind(2, last).Run());
    const std::int64_t attempts_gone = db.Changes();
    // A task's two rows (migration 21): its tasks row, found by its task_specs row, goes first.
    WEFT_ASSIGN_OR_RETURN(sql::Statement gone,
                          db.Prepare("DELETE FROM tasks WHERE id IN "
                                     "(SELECT id FROM task_specs WHERE job_id = ?1 AND job_id != '' AND id <= ?2)"));
    WEFT_RETURN_IF_ERROR(gone.Bind(1, job).Bind(2, last).Run());
    const std::int64_t tasks_gone = db.Changes();
    WEFT_ASSIGN_OR_RETURN(sql::Statement specs_gone,
                          db.Prepare("DELETE FROM task_specs WHERE job_id = ?1 AND job_id != '' AND id <= ?2"));
    WEFT_RETURN_IF_ERROR(specs_gone.Bind(1, job).Bind(2, last).Run());
    counts.attempts += attempts_gone;
    counts.tasks += tasks_gone;
    budget.Take(attempts_gone + tasks_gone);
    // Every task of the job was in the page, and went: the job's row is next.
    if (fit == tasks.size() && static_cast<std::int64_t>(tasks.size()) < limit) break;
  }
  if (budget.left <= 0) return Pruned::kOutOfRows;
  WEFT_ASSIGN_OR_RETURN(sql::Statement st, db.Prepare("DELETE FROM jobs WHERE id = ?1"));
  WEFT_RETURN_IF_ERROR(st.Bind(1, job_id).Run());
  counts.jobs += db.Changes();
  budget.Take(db.Changes());
  return Pruned::kGone;
}

// Removes deleted cluster `cluster_id`: its jobs, then its nodes and its row.
Result<Pruned> PruneCluster(sql::Database& db, std::int64_t cluster_id, Budget& budget, PruneCounts& counts) {
  const std::string cluster = std::to_string(cluster_id);
  WEFT_ASSIGN_OR_RETURN(sql::Statement list, db.Prepare("SELECT id FROM jobs WHERE cluster_id = ?1 ORDER BY id"));
  list.Bind(1, cluster);
  WEFT_ASSIGN_OR_RETURN(std::vector<std::int64_t> jobs, Ids(list));
  bool kept = false;
  for (std::int64_t job : jobs) {
    WEFT_ASSIGN_OR_RETURN(Pruned p, PruneJob(db, job, budget, counts));
    if (p == Pruned::kOutOfRows) return p;
    kept = kept || p == Pruned::kKept;
  }
  if (kept) return Pruned::kKept;
  while (true) {
    if (budget.left <= 0) return Pruned::kOutOfRows;
    WEFT_ASSIGN_OR_RETURN(sql::Statement nodes,
                          db.Prepare("DELETE FROM nodes WHERE cluster_id = ?1 AND id IN "
                                     "(SELECT id FROM nodes WHERE cluster_id = ?1 ORDER BY id LIMIT ?2)"));
    const std::int64_t limit = budget.left;
    WEFT_RETURN_IF_ERROR(nodes.Bind(1, cluster).Bind(2, limit).Run());
    const std::int64_t gone = db.Changes();
    counts.nodes += gone;
    budget.Take(gone);
    if (gone < limit) break;
  }
  if (budget.left <= 0) return Pruned::kOutOfRows;
  WEFT_ASSIGN_OR_RETURN(sql::Statement st, db.Prepare("DELETE FROM clusters WHERE id = ?1"));
  WEFT_RETURN_IF_ERROR(st.Bind(1, cluster_id).Run());
  counts.clusters += db.Changes();
  budget.Take(db.Changes());
  return Pruned::kGone;
}

}  // namespace

Result<PruneCounts> Store::PruneEnded(std::int64_t cutoff_ms, std::int64_t max_rows) {
  if (max_rows < 1) return Status::Invalid("a retention batch needs room for at least one row");
  sql::Database& db = database();
  PruneCounts counts;
  Budget budget{max_rows, false};
  // Deleted clusters, oldest id first; one with a job running is not due.
  // A page starts after the last cluster looked at: those kept stay behind.
  for (std::int64_t after = 0;;) {
    WEFT_ASSIGN_OR_RETURN(
        sql::Statement page,
        db.Prepare("SELECT id FROM clusters WHERE status = 'terminated' AND updated_at_ms < ?1 AND id > ?2 AND "
                   "CAST(id AS TEXT) NOT IN (SELECT cluster_id FROM jobs WHERE finished_at_ms = 0) "
                   "ORDER BY id LIMIT ?3"));
    page.Bind(1, cutoff_ms).Bind(2, after).Bind(3, kPage);
    WEFT_ASSIGN_OR_RETURN(std::vector<std::int64_t> clusters, Ids(page));
    if (clusters.empty()) break;
    for (std::int64_t id : clusters) {
      after = id;
      WEFT_ASSIGN_OR_RETURN(Pruned p, PruneCluster(db, id, budget, counts));
      if (p == Pruned::kGone) ClusterWritten(id);
      if (p == Pruned::kOutOfRows) {
        counts.more = true;
        return counts;
      }
    }
  }
  // Jobs of live clusters that ended before the cutoff, oldest end first
  // (the index of migration 19), but neither a cluster's newest job nor the
  // one it names as its latest, nor any job of a cluster with a job running.
  std::int64_t after_ms = 0, after_id = 0;
  while (true) {
    WEFT_ASSIGN_OR_RETURN(
        sql::Statement page,
        db.Prepare("SELECT j.id, j.finished_at_ms FROM jobs j WHERE j.finished_at_ms > 0 AND j.finished_at_ms < ?1 "
                   "AND (j.finished_at_ms > ?2 OR (j.finished_at_ms = ?2 AND j.id > ?3)) "
                   "AND j.id < (SELECT MAX(m.id) FROM jobs m WHERE m.cluster_id = j.cluster_id) "
                   "AND j.cluster_id IN (SELECT CAST(c.id AS TEXT) FROM clusters c WHERE c.status <> 'terminated') "
                   "AND CAST(j.id AS TEXT) NOT IN (SELECT c.latest_job FROM clusters c) "
                   "AND j.cluster_id NOT IN (SELECT u.cluster_id FROM jobs u WHERE u.finished_at_ms = 0) "
                   "ORDER BY j.finished_at_ms, j.id LIMIT ?4"));
    page.Bind(1, cutoff_ms).Bind(2, after_ms).Bind(3, after_id).Bind(4, kPage);
    std::vector<std::pair<std::int64_t, std::int64_t>> jobs;
    WEFT_RETURN_IF_ERROR(sql::ForEachRow(page, [&](const sql::Statement& row) {
      jobs.emplace_back(row.Int(0), row.Int(1));
    }));
    if (jobs.empty()) break;
    for (const auto& [id, finished_ms] : jobs) {
      after_ms = finished_ms;
      after_id = id;
      WEFT_ASSIGN_OR_RETURN(Pruned p, PruneJob(db, id, budget, counts));
      if (p == Pruned::kOutOfRows) {
        counts.more = true;
        return counts;
      }
    }
  }
  return counts;
}

Result<std::int64_t> Store::PruneSpentApiTokens(std::int64_t cutoff_ms, std::int64_t max_rows) {
  if (max_rows < 1) return Status::Invalid("a retention batch needs room for at least one row");
  sql::Database& db = database();
  // Spent since before the cutoff: revoked then, or expired then (whichever came first).
  WEFT_ASSIGN_OR_RETURN(sql::Statement st,
                        db.Prepare("DELETE FROM api_tokens WHERE id IN (SELECT id FROM api_tokens WHERE "
                                   "(revoked_at_ms > 0 AND revoked_at_ms < ?1) OR (expires_at_ms > 0 AND "
                                   "expires_at_ms < ?1) ORDER BY id LIMIT ?2)"));
  WEFT_RETURN_IF_ERROR(st.Bind(1, cutoff_ms).Bind(2, max_rows).Run());
  return static_cast<std::int64_t>(db.Changes());
}

Result<std::int64_t> Store::PruneAudit(std::int64_t cutoff_ms, std::int64_t max_rows) {
  if (max_rows < 1) return Status::Invalid("a retention batch needs room for at least one row");
  sql::Database& db = database();
  // The oldest entries by id, up to the first that is not due: no scan of the
  // whole log when nothing is (ids grow with time).
  std::int64_t last = 0;
  {
    WEFT_ASSIGN_OR_RETURN(sql::Statement oldest, db.Prepare("SELECT id, at_ms FROM audit_log ORDER BY id LIMIT ?1"));
    oldest.Bind(1, max_rows);
    bool due = true;
    WEFT_RETURN_IF_ERROR(sql::ForEachRow(oldest, [&](const sql::Statement& row) {
      due = due && row.Int(1) < cutoff_ms;
      if (due) last = row.Int(0);
    }));
  }
  if (last == 0) return std::int64_t{0};
  const bool postgres = db.dialect() == sql::Dialect::kPostgres;
  std::string trigger;  // SQLite: the trigger's own text, put back as it was
  if (postgres) {
    WEFT_RETURN_IF_ERROR(db.Exec("ALTER TABLE audit_log DISABLE TRIGGER audit_log_no_delete"));
  } else {
    WEFT_ASSIGN_OR_RETURN(
        sql::Statement text,
        db.Prepare("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'audit_log_no_delete'"));
    WEFT_RETURN_IF_ERROR(sql::ForEachRow(text, [&](const sql::Statement& row) { trigger = row.Text(0); }));
    if (!trigger.empty()) WEFT_RETURN_IF_ERROR(db.Exec("DROP TRIGGER audit_log_no_delete"));
  }
  std::int64_t gone = 0;
  {
    WEFT_ASSIGN_OR_RETURN(sql::Statement del, db.Prepare("DELETE FROM audit_log WHERE id <= ?1 AND at_ms < ?2"));
    WEFT_RETURN_IF_ERROR(del.Bind(1, last).Bind(2, cutoff_ms).Run());
    gone = db.Changes();
  }
  if (postgres) {
    WEFT_RETURN_IF_ERROR(db.Exec("ALTER TABLE audit_log ENABLE TRIGGER audit_log_no_delete"));
  } else if (!trigger.empty()) {
    WEFT_RETURN_IF_ERROR(db.Exec(trigger));
  }
  return gone;
}

namespace {

Result<std::int64_t> PragmaInt(sql::Database& db, const char* text) {
  WEFT_ASSIGN_OR_RETURN(sql::Statement st, db.Prepare(text));
  WEFT_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return Status::Internal(std::string(text) + " returned no row");
  const std::int64_t value = st.Int(0);
  WEFT_RETURN_IF_ERROR(st.Run());
  return value;
}

}  // namespace

Result<StoreSpace> Store::Space() {
  StoreSpace space;
  sql::Database& db = database();
  if (db.dialect() != sql::Dialect::kSqlite) return space;
  WEFT_ASSIGN_OR_RETURN(space.pages, PragmaInt(db, "PRAGMA page_count"));
  WEFT_ASSIGN_OR_RETURN(space.free_pages, PragmaInt(db, "PRAGMA freelist_count"));
  WEFT_ASSIGN_OR_RETURN(space.page_size, PragmaInt(db, "PRAGMA page_size"));
  WEFT_ASSIGN_OR_RETURN(std::int64_t mode, PragmaInt(db, "PRAGMA auto_vacuum"));
  space.incremental = mode == 2;
  return space;
}

Result<StoreSpace> Store::ReclaimSpace(std::int64_t max_pages) {
  WEFT_ASSIGN_OR_RETURN(StoreSpace space, Space());
  if (!space.incremental || space.free_pages == 0 || max_pages < 1) return space;
  // Runs to its end only through exec (each step of the statement frees one page).
  WEFT_RETURN_IF_ERROR(database().Exec("PRAGMA incremental_vacuum(" + std::to_string(max_pages) + ")"));
  return Space();
}

Status Store::Vacuum() {
  sql::Database& db = database();
  if (db.dialect() != sql::Dialect::kSqlite)
    return Status::Invalid("only a SQLite store is vacuumed by weftd; PostgreSQL's autovacuum looks after its own");
  WEFT_RETURN_IF_ERROR(db.Exec("PRAGMA auto_vacuum=INCREMENTAL"));
  return db.Exec("VACUUM");
}

}  // namespace weft::store

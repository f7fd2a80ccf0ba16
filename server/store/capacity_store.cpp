// What each tenant's tasks asked of the worker threads over a window, read
// from the tasks and attempts tables (a task's current attempt is in its row), for the capacity advice
// (server/capacity, docs/capacity.md). Aggregated in SQL so a long window
// returns one row per tenant, not one per attempt.
#include <map>
#include <string>

#include "weft/server/store/database.hpp"
#include "weft/server/store/store.hpp"

namespace weft::store {
namespace {

// A SUM of doubles, which may be NULL.
double Real(const sql::Statement& s, int column) {
  if (s.IsNull(column)) return 0;
  const std::string text = s.Text(column);
  try {
    return std::stod(text);
  } catch (...) {
    return 0;
  }
}

}  // namespace

// Task ids grow in the order tasks are created, and so (but for a clock that
// steps back) do their creation times: a binary search over ids by primary
// key finds the first task of the window without reading the tasks before it,
// whose rows (with their payloads and output) are most of the file.
Result<std::int64_t> Store::FirstTaskSince(std::int64_t since_ms) {
  WEFT_ASSIGN_OR_RETURN(sql::Statement bounds, database().Prepare("SELECT MIN(id), MAX(id) FROM task_specs"));
  std::int64_t lo = 0;
  std::int64_t hi = 0;
  WEFT_RETURN_IF_ERROR(sql::ForEachRow(bounds, [&](sql::Statement& row) {
    lo = row.Int(0);
    hi = row.Int(1) + 1;  // one past the last: "no task of the window"
  }));
  WEFT_ASSIGN_OR_RETURN(sql::Statement probe,
                        database().Prepare("SELECT id, created_at_ms FROM task_specs WHERE id >= ?1 ORDER BY id LIMIT 1"));
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    std::int64_t id = hi;
    std::int64_t created = since_ms;
    probe.Reset().Bind(1, mid);
    WEFT_RETURN_IF_ERROR(sql::ForEachRow(probe, [&](sql::Statement& row) {
      id = row.Int(0);
      created = row.Int(1);
    }));
    if (created >= since_ms)
      hi = mid;
    else
      lo = id + 1;
  }
  return lo;
}

Result<std::vector<TenantLoad>> Store::MeasureLoad(std::int64_t since_ms, std::string_view tenant) {
  std::map<std::string, TenantLoad> by_tenant;
  auto entry = [&by_tenant](const std::string& name) -> TenantLoad& {
    TenantLoad& l = by_tenant[name];
    l.tenant = name;
    return l;
  };
  // Tasks that came in: a JOIN (no plugin) never reaches a host, and a task
  // cancelled before its first attempt never asked for a thread.
  WEFT_ASSIGN_OR_RETURN(const std::int64_t first, FirstTaskSince(since_ms));
  WEFT_ASSIGN_OR_RETURN(
      sql::Statement arrived,
      database().Prepare("SELECT s.tenant, COUNT(*) FROM task_specs s JOIN tasks t ON t.id = s.id "
                         "WHERE s.id >= ?3 AND s.created_at_ms >= ?1 AND (?2 = '' OR s.tenant = ?2) AND s.plugin != '' "
                         "AND (t.attempt > 0 OR t.state = 'queued' OR t.state = 'waiting') GROUP BY s.tenant"));
  arrived.Bind(1, since_ms).Bind(2, tenant).Bind(3, first);
  WEFT_RETURN_IF_ERROR(
      sql::ForEachRow(arrived, [&](sql::Statement& row) { entry(row.Text(0)).enqueued = row.Int(1); }));

  // Attempts: started in the window, and those that ended with a result in it
  // (an expired, undelivered or cancelled attempt says nothing of how long a
  // task takes). A first attempt of a task with no predecessor was ready when
  // the task was created, so created -> taken is its queue wait.
  // Two kinds of rows: the attempts table's (superseded ones), each task of
  // the window's attempts looked up by id, the CROSS JOIN keeping SQLite from
  // walking every task by tenant instead (PostgreSQL plans it by itself, and
  // takes no ON after CROSS JOIN); and each task's current attempt, in its own
  // row, ended at its updated_at_ms (each task's task_specs row looked up by
  // id, after). Both are read whole (about 0.1 s a
  // million attempts); a current attempt of the window was taken or ended in
  // it, so its task was updated in it, and updated_at_ms, ahead of the long
  // texts in the row, rules out the others before anything else is read.
  // Counts are SUMs of CASEs and durations doubles, in words both accept.
  const bool sqlite = database().dialect() == sql::Dialect::kSqlite;
  WEFT_ASSIGN_OR_RETURN(
      sql::Statement attempts,
      database().Prepare(
          std::string("SELECT tenant, "
                      "SUM(CASE WHEN taken_at_ms >= ?1 THEN 1 ELSE 0 END), "
                      "SUM(CASE WHEN taken_at_ms >= ?1 AND attempt > 1 THEN 1 ELSE 0 END), "
                      "SUM(served), SUM(CASE WHEN served = 1 THEN run_ms END), "
                      "SUM(CASE WHEN served = 1 THEN run_ms * run_ms END), "
                      "SUM(CASE WHEN taken_at_ms >= ?1 AND attempt = 1 AND after = '[]' THEN 1 ELSE 0 END), "
                      "SUM(CASE WHEN taken_at_ms >= ?1 AND attempt = 1 AND after = '[]' "
                      "THEN CAST(taken_at_ms - created_at_ms AS DOUBLE PRECISION) END) "
                      "FROM (SELECT s.tenant, s.after, s.created_at_ms, a.attempt, a.taken_at_ms, a.run_ms, a.served "
                      "FROM (SELECT task_id, attempt, taken_at_ms, "
                      "CAST(finished_at_ms - taken_at_ms AS DOUBLE PRECISION) AS run_ms, "
                      "CASE WHEN finished_at_ms >= ?1 AND (status = 'succeeded' OR status = 'failed') THEN 1 ELSE 0 "
                      "END AS served "
                      "FROM attempts WHERE taken_at_ms >= ?1 OR finished_at_ms >= ?1) AS a ") +
          (sqlite ? "CROSS JOIN" : "JOIN") + " tasks t ON t.id = a.task_id " + (sqlite ? "CROSS JOIN" : "JOIN") +
          " task_specs s ON s.id = a.task_id WHERE (?2 = '' OR s.tenant = ?2) "
          "AND (t.attempt_status = '' OR t.attempt != a.attempt) "
          "UNION ALL SELECT s.tenant, s.after, s.created_at_ms, t.attempt, t.taken_at_ms, "
          "CAST(t.updated_at_ms - t.taken_at_ms AS DOUBLE PRECISION), "
          "CASE WHEN t.attempt_status = 'succeeded' OR t.attempt_status = 'failed' THEN 1 ELSE 0 END "
          "FROM tasks t " + (sqlite ? "CROSS JOIN" : "JOIN") +
          " task_specs s ON s.id = t.id WHERE t.updated_at_ms >= ?1 AND t.attempt_status != '' "
          "AND (t.taken_at_ms >= ?1 OR t.attempt_status != 'running') AND (?2 = '' OR s.tenant = ?2)) AS x "
          "GROUP BY tenant"));
  attempts.Bind(1, since_ms).Bind(2, tenant);
  WEFT_RETURN_IF_ERROR(sql::ForEachRow(attempts, [&](sql::Statement& row) {
    TenantLoad& l = entry(row.Text(0));
    l.started = row.Int(1);
    l.retried = row.Int(2);
    l.served = row.Int(3);
    l.service_ms_sum = Real(row, 4);
    l.service_ms_squares = Real(row, 5);
    l.waited = row.Int(6);
    l.wait_ms_sum = Real(row, 7);
  }));

  std::vector<TenantLoad> out;
  out.reserve(by_tenant.size());
  for (auto& [name, load] : by_tenant) out.push_back(std::move(load));
  return out;
}

}  // namespace weft::store

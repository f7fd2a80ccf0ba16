#include "weft/server/store/store.hpp"

#include <utility>

#include <sqlite3.h>

#include "weft/server/store/checkpointer.hpp"
#include "weft/server/store/sqlite.hpp"
#include "weft/common/log.hpp"

namespace weft::store {
namespace {

struct Migration {
  std::int64_t version;
  const char* sql;
};

// Append only: a released migration never changes, a new one gets the next number.
const Migration kMigrations[] = {
    {1, R"sql(
CREATE TABLE hosts (
  id TEXT PRIMARY KEY,
  capacity INTEGER NOT NULL,
  version TEXT NOT NULL DEFAULT '',
  plugins TEXT NOT NULL DEFAULT '[]',
  registered_at_ms INTEGER NOT NULL,
  last_seen_ms INTEGER NOT NULL
);
CREATE TABLE tasks (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  tenant TEXT NOT NULL,
  plugin TEXT NOT NULL,
  action TEXT NOT NULL,
  job_id TEXT NOT NULL DEFAULT '',
  cluster_id TEXT NOT NULL DEFAULT '',
  node_id TEXT NOT NULL DEFAULT '',
  state TEXT NOT NULL CHECK (state IN ('queued','leased','succeeded','failed')),
  attempt INTEGER NOT NULL DEFAULT 0,
  max_attempts INTEGER NOT NULL,
  host_id TEXT NOT NULL DEFAULT '',
  created_at_ms INTEGER NOT NULL,
  updated_at_ms INTEGER NOT NULL,
  lease_until_ms INTEGER NOT NULL DEFAULT 0,
  payload TEXT NOT NULL DEFAULT '{}',
  result TEXT NOT NULL DEFAULT '{}',
  message TEXT NOT NULL DEFAULT '',
  stdout TEXT NOT NULL DEFAULT '',
  stderr TEXT NOT NULL DEFAULT ''
);
-- Only unfinished tasks: a take (queued -> leased) leaves this index alone,
-- so the hot path writes fewer pages per commit than an index on state would.
CREATE INDEX tasks_unfinished ON tasks (id) WHERE state IN ('queued', 'leased');
CREATE INDEX tasks_by_tenant ON tasks (tenant, id);
CREATE TABLE attempts (
  task_id INTEGER NOT NULL REFERENCES tasks (id),
  attempt INTEGER NOT NULL,
  host_id TEXT NOT NULL,
  taken_at_ms INTEGER NOT NULL,
  finished_at_ms INTEGER NOT NULL DEFAULT 0,
  status TEXT NOT NULL DEFAULT 'running',
  message TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (task_id, attempt)
) WITHOUT ROWID;
)sql"},
    {2, R"sql(
CREATE TABLE catalog_entities (
  tenant TEXT NOT NULL,
  kind TEXT NOT NULL,
  name TEXT NOT NULL,
  version INTEGER NOT NULL,
  json TEXT NOT NULL,
  created_at_ms INTEGER NOT NULL,
  deleted INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (tenant, kind, name, version)
) WITHOUT ROWID;
)sql"},
    // The tasks table again, with the state CHECK written as comparisons: an
    // IN list of more than two values makes SQLite build a temporary b-tree
    // every time a statement sets `state`, which was about 40% of the
    // instructions of a take or a finish. Rebuilt as SQLite's ALTER TABLE
    // page describes (Migrate runs this with foreign keys off).
    {3, R"sql(
CREATE TABLE tasks_v3 (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  tenant TEXT NOT NULL,
  plugin TEXT NOT NULL,
  action TEXT NOT NULL,
  job_id TEXT NOT NULL DEFAULT '',
  cluster_id TEXT NOT NULL DEFAULT '',
  node_id TEXT NOT NULL DEFAULT '',
  state TEXT NOT NULL CHECK (state = 'queued' OR state = 'leased' OR state = 'succeeded' OR state = 'failed'),
  attempt INTEGER NOT NULL DEFAULT 0,
  max_attempts INTEGER NOT NULL,
  host_id TEXT NOT NULL DEFAULT '',
  created_at_ms INTEGER NOT NULL,
  updated_at_ms INTEGER NOT NULL,
  lease_until_ms INTEGER NOT NULL DEFAULT 0,
  payload TEXT NOT NULL DEFAULT '{}',
  result TEXT NOT NULL DEFAULT '{}',
  message TEXT NOT NULL DEFAULT '',
  stdout TEXT NOT NULL DEFAULT '',
  stderr TEXT NOT NULL DEFAULT ''
);
INSERT INTO tasks_v3 SELECT id, tenant, plugin, action, job_id, cluster_id, node_id, state, attempt, max_attempts,
  host_id, created_at_ms, updated_at_ms, lease_until_ms, payload, result, message, stdout, stderr FROM tasks;
DROP TABLE tasks;
ALTER TABLE tasks_v3 RENAME TO tasks;
CREATE INDEX tasks_unfinished ON tasks (id) WHERE state IN ('queued', 'leased');
CREATE INDEX tasks_by_tenant ON tasks (tenant, id);
)sql"},
    // The job engine: clusters, their nodes' facts, jobs, and tasks that wait
    // for predecessors (`after`) or were cancelled when their job failed.
    {4, R"sql(
CREATE TABLE tasks_v4 (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  tenant TEXT NOT NULL,
  plugin TEXT NOT NULL,
  action TEXT NOT NULL,
  job_id TEXT NOT NULL DEFAULT '',
  cluster_id TEXT NOT NULL DEFAULT '',
  node_id TEXT NOT NULL DEFAULT '',
  state TEXT NOT NULL CHECK (state = 'queued' OR state = 'leased' OR state = 'succeeded' OR state = 'failed' OR
                             state = 'waiting' OR state = 'cancelled'),
  attempt INTEGER NOT NULL DEFAULT 0,
  max_attempts INTEGER NOT NULL,
  host_id TEXT NOT NULL DEFAULT '',
  created_at_ms INTEGER NOT NULL,
  updated_at_ms INTEGER NOT NULL,
  lease_until_ms INTEGER NOT NULL DEFAULT 0,
  payload TEXT NOT NULL DEFAULT '{}',
  result TEXT NOT NULL DEFAULT '{}',
  message TEXT NOT NULL DEFAULT '',
  stdout TEXT NOT NULL DEFAULT '',
  stderr TEXT NOT NULL DEFAULT '',
  task_key TEXT NOT NULL DEFAULT '',
  service TEXT NOT NULL DEFAULT '',
  after TEXT NOT NULL DEFAULT '[]'
);
INSERT INTO tasks_v4 (id, tenant, plugin, action, job_id, cluster_id, node_id, state, attempt, max_attempts, host_id,
  created_at_ms, updated_at_ms, lease_until_ms, payload, result, message, stdout, stderr)
  SELECT id, tenant, plugin, action, job_id, cluster_id, node_id, state, attempt, max_attempts, host_id,
  created_at_ms, updated_at_ms, lease_until_ms, payload, result, message, stdout, stderr FROM tasks;
DROP TABLE tasks;
ALTER TABLE tasks_v4 RENAME TO tasks;
CREATE INDEX tasks_unfinished ON tasks (id) WHERE state IN ('queued', 'leased');
CREATE INDEX tasks_by_tenant ON tasks (tenant, id);
CREATE INDEX tasks_by_job ON tasks (job_id, id) WHERE job_id != '';
CREATE TABLE clusters (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  tenant TEXT NOT NULL,
  name TEXT NOT NULL,
  owner TEXT NOT NULL,
  status TEXT NOT NULL,
  spec TEXT NOT NULL DEFAULT '{}',
  layout TEXT NOT NULL DEFAULT '{}',
  previous TEXT NOT NULL DEFAULT '',
  created_at_ms INTEGER NOT NULL,
  updated_at_ms INTEGER NOT NULL,
  expire_at_ms INTEGER NOT NULL DEFAULT 0,
  latest_job TEXT NOT NULL DEFAULT ''
);
CREATE INDEX clusters_by_tenant ON clusters (tenant, name);
CREATE TABLE nodes (
  cluster_id TEXT NOT NULL,
  id TEXT NOT NULL,
  results TEXT NOT NULL DEFAULT '{}',
  PRIMARY KEY (cluster_id, id)
) WITHOUT ROWID;
CREATE TABLE jobs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  tenant TEXT NOT NULL,
  cluster_id TEXT NOT NULL,
  operation TEXT NOT NULL,
  status TEXT NOT NULL,
  requested_by TEXT NOT NULL DEFAULT '',
  options TEXT NOT NULL DEFAULT '{}',
  before TEXT NOT NULL DEFAULT '{}',
  target TEXT NOT NULL DEFAULT '{}',
  message TEXT NOT NULL DEFAULT '',
  parent_job TEXT NOT NULL DEFAULT '',
  created_at_ms INTEGER NOT NULL,
  updated_at_ms INTEGER NOT NULL,
  finished_at_ms INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX jobs_by_cluster ON jobs (cluster_id, id);
CREATE INDEX jobs_unfinished ON jobs (id) WHERE finished_at_ms = 0;
)sql"},
    // Security (docs/security.md): who may connect, as whom; tenants and users.
    {5, R"sql(
CREATE TABLE principals (
  public_key TEXT PRIMARY KEY,
  kind TEXT NOT NULL CHECK (kind IN ('user', 'host', 'token')),
  tenant TEXT NOT NULL DEFAULT '',
  user TEXT NOT NULL DEFAULT '',
  role TEXT NOT NULL DEFAULT '',
  host_id TEXT NOT NULL DEFAULT '',
  created_by TEXT NOT NULL DEFAULT '',
  created_at_ms INTEGER NOT NULL,
  expires_at_ms INTEGER NOT NULL DEFAULT 0,
  revoked_at_ms INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE tenants (
  name TEXT PRIMARY KEY,
  created_at_ms INTEGER NOT NULL,
  max_clusters INTEGER NOT NULL DEFAULT 0,
  max_nodes INTEGER NOT NULL DEFAULT 0,
  max_workers INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE users (
  tenant TEXT NOT NULL,
  name TEXT NOT NULL,
  role TEXT NOT NULL,
  created_at_ms INTEGER NOT NULL,
  PRIMARY KEY (tenant, name)
);
CREATE TABLE host_requests (
  host_id TEXT PRIMARY KEY,
  public_key TEXT NOT NULL,
  address TEXT NOT NULL DEFAULT '',
  requested_at_ms INTEGER NOT NULL
);
)sql"},
    // The audit log (server/store/audit_store.cpp): who changed what, when.
    // Append only: triggers refuse to change or remove an entry.
    {6, R"sql(
CREATE TABLE audit_log (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  at_ms INTEGER NOT NULL,
  actor TEXT NOT NULL,
  actor_tenant TEXT NOT NULL,
  actor_role TEXT NOT NULL,
  op TEXT NOT NULL,
  tenant TEXT NOT NULL,
  target TEXT NOT NULL DEFAULT '',
  cluster_id TEXT NOT NULL DEFAULT '',
  cluster TEXT NOT NULL DEFAULT '',
  job_id TEXT NOT NULL DEFAULT '',
  outcome TEXT NOT NULL,
  detail TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_log_by_tenant ON audit_log (tenant, id);
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
)sql"},
    // A retried job keeps what its earlier runs ended with (server/jobs: JobEngine::Retry).
    {7, R"sql(
ALTER TABLE jobs ADD COLUMN history TEXT NOT NULL DEFAULT '[]';
)sql"},
    // Host requests by key: several keys may ask for one host id, and the
    // admin accepts one of them by its fingerprint (a later request no longer
    // replaces an earlier one).
    {8, R"sql(
CREATE TABLE host_requests_by_key (
  public_key TEXT PRIMARY KEY,
  host_id TEXT NOT NULL,
  address TEXT NOT NULL DEFAULT '',
  requested_at_ms INTEGER NOT NULL
);
INSERT INTO host_requests_by_key (public_key, host_id, address, requested_at_ms)
  SELECT public_key, host_id, address, requested_at_ms FROM host_requests;
DROP TABLE host_requests;
ALTER TABLE host_requests_by_key RENAME TO host_requests;
CREATE INDEX host_requests_host ON host_requests (host_id);
)sql"},
    // Browser logins: passwords, sessions and API tokens (server/auth/logins.cpp).
    {9, R"sql(
CREATE TABLE user_passwords (
  tenant TEXT NOT NULL,
  user TEXT NOT NULL,
  hash TEXT NOT NULL,
  set_at_ms INTEGER NOT NULL,
  PRIMARY KEY (tenant, user)
);
CREATE TABLE sessions (
  id_hash TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  user TEXT NOT NULL,
  csrf_salt TEXT NOT NULL,
  gateway TEXT NOT NULL DEFAULT '',
  client_addr TEXT NOT NULL DEFAULT '',
  created_at_ms INTEGER NOT NULL,
  last_used_ms INTEGER NOT NULL,
  expires_at_ms INTEGER NOT NULL
);
CREATE TABLE api_tokens (
  id TEXT PRIMARY KEY,
  secret_hash TEXT NOT NULL UNIQUE,
  tenant TEXT NOT NULL,
  user TEXT NOT NULL,
  name TEXT NOT NULL DEFAULT '',
  created_at_ms INTEGER NOT NULL,
  expires_at_ms INTEGER NOT NULL DEFAULT 0,
  revoked_at_ms INTEGER NOT NULL DEFAULT 0
);
)sql"},
};

constexpr const char* kTaskColumns =
    "id, tenant, plugin, action, job_id, cluster_id, node_id, state, attempt, max_attempts, host_id, "
    "created_at_ms, updated_at_ms, lease_until_ms, task_key, service, after";
constexpr const char* kTaskDetailColumns = ", payload, result, message, stdout, stderr";

TaskRecord ReadTask(const sql::Statement& s, bool details) {
  TaskRecord t;
  t.id = s.Int(0);
  t.tenant = s.Text(1);
  t.plugin = s.Text(2);
  t.action = s.Text(3);
  t.job_id = s.Text(4);
  t.cluster_id = s.Text(5);
  t.node_id = s.Text(6);
  if (!ParseTaskState(s.Text(7), &t.state)) t.state = TaskState::kFailed;  // CHECK constraint makes this unreachable
  t.attempt = s.Int(8);
  t.max_attempts = s.Int(9);
  t.host_id = s.Text(10);
  t.created_at_ms = s.Int(11);
  t.updated_at_ms = s.Int(12);
  t.lease_until_ms = s.Int(13);
  t.task_key = s.Text(14);
  t.service = s.Text(15);
  t.after_json = s.Text(16);
  if (details) {
    t.payload_json = s.Text(17);
    t.result_json = s.Text(18);
    t.message = s.Text(19);
    t.stdout_tail = s.Text(20);
    t.stderr_tail = s.Text(21);
  } else {
    t.payload_json.clear();
    t.result_json.clear();
  }
  return t;
}

}  // namespace

std::string_view TaskStateName(TaskState state) {
  switch (state) {
    case TaskState::kQueued: return "queued";
    case TaskState::kLeased: return "leased";
    case TaskState::kSucceeded: return "succeeded";
    case TaskState::kFailed: return "failed";
    case TaskState::kWaiting: return "waiting";
    case TaskState::kCancelled: return "cancelled";
  }
  return "unknown";
}

bool ParseTaskState(std::string_view name, TaskState* out) {
  for (TaskState s : {TaskState::kQueued, TaskState::kLeased, TaskState::kSucceeded, TaskState::kFailed,
                      TaskState::kWaiting, TaskState::kCancelled}) {
    if (TaskStateName(s) == name) {
      *out = s;
      return true;
    }
  }
  return false;
}

// The database is declared first so that it is destroyed last: every
// statement is finalized before the connection closes.
struct Store::Impl {
  sql::Database db;
  sql::Statement begin, commit, rollback;
  sql::Statement upsert_host, touch_host, list_hosts;
  sql::Statement insert_task, get_task, lease_task, insert_attempt, renew_lease, end_task, end_attempt;
  sql::Statement list_attempts, count_tasks, list_unfinished;
  sql::Statement set_task_state, set_task_after, set_task_max_attempts;
  // Last: stopped (and its connection closed) before the statements and db go.
  std::unique_ptr<Checkpointer> checkpointer;
};

Store::Store(std::filesystem::path path) : path_(std::move(path)), impl_(std::make_unique<Impl>()) {}

Store::~Store() {
  if (in_transaction_) (void)impl_->rollback.Reset().Run();
}

std::int64_t Store::LatestSchemaVersion() { return kMigrations[std::size(kMigrations) - 1].version; }

sql::Database& Store::database() { return impl_->db; }

CheckpointStats Store::checkpoint_stats() const { return impl_->checkpointer->stats(); }

Result<std::unique_ptr<Store>> Store::Open(const std::filesystem::path& path, StoreOptions options) {
  // SQLite's memory statistics take a global mutex on every allocation; nothing reads them.
  // Only possible before the library initializes, hence once per process.
  static const bool kConfigured = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0) == SQLITE_OK;
  (void)kConfigured;
  std::unique_ptr<Store> store(new Store(path));
  auto& db = store->impl_->db;
  Status s = db.Open(path.string(), options.busy_timeout_ms);
  if (!s.ok()) return s.WithContext("cannot open the store " + path.string());
  WEFT_RETURN_IF_ERROR(db.Exec("PRAGMA journal_mode=WAL"));
  WEFT_ASSIGN_OR_RETURN(std::string mode, store->JournalMode());
  if (mode != "wal")
    return Status::Internal("the store " + path.string() + " cannot use write-ahead logging (journal mode is '" + mode +
                            "'); put the data directory on a local file system");
  // NORMAL in WAL mode: a commit survives a crash of the process; only an OS
  // crash or power loss can take the last commits with it.
  WEFT_RETURN_IF_ERROR(db.Exec("PRAGMA synchronous=NORMAL"));
  // When the WAL starts over after a checkpoint, it gives back what it grew beyond 32 MiB.
  WEFT_RETURN_IF_ERROR(db.Exec("PRAGMA journal_size_limit=33554432"));
  // Foreign keys are enforced only after the migrations: a migration that
  // rebuilds a table drops the old one, which they would refuse.
  WEFT_RETURN_IF_ERROR(store->Migrate());
  WEFT_RETURN_IF_ERROR(db.Exec("PRAGMA foreign_keys=ON"));
  WEFT_RETURN_IF_ERROR(store->PrepareAll());
  // A checkpoint copies the WAL into the database and fsyncs both: tens of
  // milliseconds that, on the committing thread, no request would be answered.
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Checkpointer> checkpointer,
                        Checkpointer::Start(db.handle(), path.string(), options.checkpoint));
  store->impl_->checkpointer = std::move(checkpointer);
  return store;
}

Result<std::string> Store::JournalMode() {
  WEFT_ASSIGN_OR_RETURN(sql::Statement st, impl_->db.Prepare("PRAGMA journal_mode"));
  WEFT_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return Status::Internal("PRAGMA journal_mode returned no row");
  return st.Text(0);
}

Status Store::Migrate() {
  auto& db = impl_->db;
  WEFT_RETURN_IF_ERROR(
      db.Exec("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at_ms INTEGER "
              "NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)))"));
  WEFT_ASSIGN_OR_RETURN(sql::Statement current, db.Prepare("SELECT COALESCE(MAX(version), 0) FROM schema_migrations"));
  WEFT_RETURN_IF_ERROR(current.Step().status());
  schema_version_ = current.Int(0);
  current.Reset();  // an active statement would make DROP TABLE in a migration fail
  if (schema_version_ > LatestSchemaVersion())
    return Status::Invalid("the store " + path_.string() + " has schema version " + std::to_string(schema_version_) +
                           ", newer than this weftd knows (" + std::to_string(LatestSchemaVersion()) +
                           "); run a newer weftd");
  for (const Migration& m : kMigrations) {
    if (m.version <= schema_version_) continue;
    WEFT_RETURN_IF_ERROR(db.Exec("BEGIN IMMEDIATE"));
    Status s = db.Exec(m.sql);
    if (s.ok())
      s = db.Exec("INSERT INTO schema_migrations (version) VALUES (" + std::to_string(m.version) + ")");
    if (s.ok()) s = db.Exec("COMMIT");
    if (!s.ok()) {
      (void)db.Exec("ROLLBACK");
      return s.WithContext("schema migration " + std::to_string(m.version) + " of " + path_.string());
    }
    schema_version_ = m.version;
  }
  return Status::Ok();
}

Status Store::PrepareAll() {
  auto& db = impl_->db;
  auto prep = [&](sql::Statement* out, const std::string& text) -> Status {
    WEFT_ASSIGN_OR_RETURN(sql::Statement st, db.Prepare(text));
    *out = std::move(st);
    return Status::Ok();
  };
  const std::string cols = kTaskColumns;
  Impl& i = *impl_;
  WEFT_RETURN_IF_ERROR(prep(&i.begin, "BEGIN IMMEDIATE"));
  WEFT_RETURN_IF_ERROR(prep(&i.commit, "COMMIT"));
  WEFT_RETURN_IF_ERROR(prep(&i.rollback, "ROLLBACK"));
  WEFT_RETURN_IF_ERROR(prep(&i.upsert_host,
                            "INSERT INTO hosts (id, capacity, version, plugins, registered_at_ms, last_seen_ms) "
                            "VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (id) DO UPDATE SET capacity = ?2, "
                            "version = ?3, plugins = ?4, registered_at_ms = ?5, last_seen_ms = ?6"));
  WEFT_RETURN_IF_ERROR(prep(&i.touch_host, "UPDATE hosts SET last_seen_ms = ?2 WHERE id = ?1"));
  WEFT_RETURN_IF_ERROR(prep(&i.list_hosts,
                            "SELECT id, capacity, version, plugins, registered_at_ms, last_seen_ms FROM hosts "
                            "ORDER BY id"));
  WEFT_RETURN_IF_ERROR(prep(&i.insert_task,
                            "INSERT INTO tasks (tenant, plugin, action, job_id, cluster_id, node_id, state, attempt, "
                            "max_attempts, host_id, created_at_ms, updated_at_ms, lease_until_ms, payload, task_key, "
                            "service, after) VALUES "
                            "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11, ?12, ?13, ?14, ?15, ?16)"));
  WEFT_RETURN_IF_ERROR(prep(&i.get_task, "SELECT " + cols + kTaskDetailColumns + " FROM tasks WHERE id = ?1"));
  WEFT_RETURN_IF_ERROR(prep(&i.lease_task,
                            "UPDATE tasks SET state = 'leased', attempt = ?2, host_id = ?3, lease_until_ms = ?4, "
                            "updated_at_ms = ?5 WHERE id = ?1"));
  WEFT_RETURN_IF_ERROR(prep(&i.insert_attempt,
                            "INSERT OR REPLACE INTO attempts (task_id, attempt, host_id, taken_at_ms) "
                            "VALUES (?1, ?2, ?3, ?4)"));
  WEFT_RETURN_IF_ERROR(prep(&i.renew_lease, "UPDATE tasks SET lease_until_ms = ?2 WHERE id = ?1"));
  WEFT_RETURN_IF_ERROR(prep(&i.end_task,
                            "UPDATE tasks SET state = ?2, lease_until_ms = 0, updated_at_ms = ?3, message = ?4, "
                            "result = ?5, stdout = ?6, stderr = ?7 WHERE id = ?1"));
  WEFT_RETURN_IF_ERROR(prep(&i.end_attempt,
                            "UPDATE attempts SET finished_at_ms = ?3, status = ?4, message = ?5 "
                            "WHERE task_id = ?1 AND attempt = ?2"));
  WEFT_RETURN_IF_ERROR(prep(&i.list_attempts,
                            "SELECT task_id, attempt, host_id, taken_at_ms, finished_at_ms, status, message "
                            "FROM attempts WHERE task_id = ?1 ORDER BY attempt"));
  WEFT_RETURN_IF_ERROR(prep(&i.count_tasks, "SELECT state, COUNT(*) FROM tasks GROUP BY state"));
  WEFT_RETURN_IF_ERROR(prep(&i.set_task_state,
                            "UPDATE tasks SET state = ?2, message = ?3, lease_until_ms = ?4, updated_at_ms = ?5 "
                            "WHERE id = ?1"));
  WEFT_RETURN_IF_ERROR(prep(&i.set_task_after, "UPDATE tasks SET after = ?2 WHERE id = ?1"));
  WEFT_RETURN_IF_ERROR(prep(&i.set_task_max_attempts, "UPDATE tasks SET max_attempts = ?2 WHERE id = ?1"));
  WEFT_RETURN_IF_ERROR(prep(&i.list_unfinished,
                            "SELECT " + cols + " FROM tasks WHERE state IN ('queued', 'leased') ORDER BY id"));
  return Status::Ok();
}

Status Store::Begin() {
  if (in_transaction_) return Status::Internal("Store::Begin inside a transaction");
  WEFT_RETURN_IF_ERROR(impl_->begin.Reset().Run());
  in_transaction_ = true;
  return Status::Ok();
}

Status Store::Commit() {
  if (!in_transaction_) return Status::Internal("Store::Commit outside a transaction");
  Status s = impl_->commit.Reset().Run();
  if (!s.ok()) return s;  // still in the transaction: the caller rolls back
  in_transaction_ = false;
  EndLeftoverReads();
  return Status::Ok();
}

void Store::EndLeftoverReads() {
  // After COMMIT a statement still on a row keeps the connection in a read
  // transaction at its old snapshot, so checkpoints copy nothing newer and the
  // WAL grows without bound. Every read here finishes or resets its statement;
  // one that does not is a bug, said once and made harmless.
  for (const std::string& sql : impl_->db.ResetActiveStatements()) {
    if (warned_leftover_read_) continue;
    warned_leftover_read_ = true;
    WEFT_LOG(kWarn, "store") << "a read was left open across a commit and was reset (it would stop WAL "
                             << "checkpoints): " << sql.substr(0, 80);
  }
}

Status Store::Rollback() {
  if (!in_transaction_) return Status::Ok();
  in_transaction_ = false;
  Status s = impl_->rollback.Reset().Run();
  EndLeftoverReads();
  return s;
}

Status Store::UpsertHost(const HostRecord& h) {
  return impl_->upsert_host.Reset()
      .Bind(1, h.id)
      .Bind(2, h.capacity)
      .Bind(3, h.version)
      .Bind(4, h.plugins_json)
      .Bind(5, h.registered_at_ms)
      .Bind(6, h.last_seen_ms)
      .Run();
}

Status Store::TouchHost(std::string_view host_id, std::int64_t last_seen_ms) {
  return impl_->touch_host.Reset().Bind(1, host_id).Bind(2, last_seen_ms).Run();
}

Result<std::vector<HostRecord>> Store::ListHosts() {
  sql::Statement& s = impl_->list_hosts.Reset();
  std::vector<HostRecord> out;
  WEFT_RETURN_IF_ERROR(sql::ForEachRow(s, [&](sql::Statement& row) {
    HostRecord h;
    h.id = row.Text(0);
    h.capacity = row.Int(1);
    h.version = row.Text(2);
    h.plugins_json = row.Text(3);
    h.registered_at_ms = row.Int(4);
    h.last_seen_ms = row.Int(5);
    out.push_back(std::move(h));
  }));
  return out;
}

Status Store::InsertTask(TaskRecord* t) {
  WEFT_RETURN_IF_ERROR(impl_->insert_task.Reset()
                           .Bind(1, t->tenant)
                           .Bind(2, t->plugin)
                           .Bind(3, t->action)
                           .Bind(4, t->job_id)
                           .Bind(5, t->cluster_id)
                           .Bind(6, t->node_id)
                           .Bind(7, TaskStateName(t->state))
                           .Bind(8, t->attempt)
                           .Bind(9, t->max_attempts)
                           .Bind(10, t->host_id)
                           .Bind(11, t->created_at_ms)
                           .Bind(12, t->lease_until_ms)
                           .Bind(13, t->payload_json)
                           .Bind(14, t->task_key)
                           .Bind(15, t->service)
                           .Bind(16, t->after_json)
                           .Run());
  t->id = impl_->db.LastInsertRowId();
  t->updated_at_ms = t->created_at_ms;
  return Status::Ok();
}

Result<std::optional<TaskRecord>> Store::GetTask(std::int64_t task_id) {
  sql::Statement& s = impl_->get_task.Reset().Bind(1, task_id);
  Result<bool> row = s.Step();
  std::optional<TaskRecord> task;
  if (row.ok() && *row) task = ReadTask(s, true);
  // Left on its row, the statement would hold a read transaction open across
  // commits, and with it a WAL snapshot that no checkpoint may copy past.
  s.Reset();
  if (!row.ok()) return row.status();
  return task;
}

Result<std::vector<TaskRecord>> Store::ListTasks(std::string_view tenant, std::optional<TaskState> state,
                                                 std::int64_t limit) {
  // Rarely called (admins, tests): prepared per call, not cached.
  std::string text = std::string("SELECT ") + kTaskColumns + " FROM tasks WHERE tenant = ?1" +
                     (state ? " AND state = ?3" : "") + " ORDER BY id DESC LIMIT ?2";
  WEFT_ASSIGN_OR_RETURN(sql::Statement st, impl_->db.Prepare(text));
  st.Bind(1, tenant).Bind(2, limit);
  if (state) st.Bind(3, TaskStateName(*state));
  std::vector<TaskRecord> out;
  WEFT_RETURN_IF_ERROR(sql::ForEachRow(st, [&](sql::Statement& row) { out.push_back(ReadTask(row, false)); }));
  return out;
}

Result<std::vector<TaskRecord>> Store::ListUnfinishedTasks() {
  sql::Statement& s = impl_->list_unfinished.Reset();
  std::vector<TaskRecord> out;
  WEFT_RETURN_IF_ERROR(sql::ForEachRow(s, [&](sql::Statement& row) {
    out.push_back(ReadTask(row, false));
  }));
  return out;
}

Result<TaskCounts> Store::CountTasks() {
  sql::Statement& s = impl_->count_tasks.Reset();
  TaskCounts c;
  WEFT_RETURN_IF_ERROR(sql::ForEachRow(s, [&](sql::Statement& row) {
    TaskState state;
    if (!ParseTaskState(row.Text(0), &state)) return;
    std::int64_t n = row.Int(1);
    switch (state) {
      case TaskState::kQueued: c.queued = n; break;
      case TaskState::kLeased: c.leased = n; break;
      case TaskState::kSucceeded: c.succeeded = n; break;
      case TaskState::kFailed: c.failed = n; break;
      case TaskState::kWaiting: c.waiting = n; break;
      case TaskState::kCancelled: c.cancelled = n; break;
    }
  }));
  return c;
}

Status Store::LeaseTask(std::int64_t task_id, std::int64_t attempt, std::string_view host_id,
                        std::int64_t lease_until_ms, std::int64_t now_ms) {
  WEFT_RETURN_IF_ERROR(impl_->lease_task.Reset()
                           .Bind(1, task_id)
                           .Bind(2, attempt)
                           .Bind(3, host_id)
                           .Bind(4, lease_until_ms)
                           .Bind(5, now_ms)
                           .Run());
  if (impl_->db.Changes() != 1) return Status::NotFound("task " + std::to_string(task_id) + " does not exist");
  return impl_->insert_attempt.Reset().Bind(1, task_id).Bind(2, attempt).Bind(3, host_id).Bind(4, now_ms).Run();
}

Status Store::RenewLease(std::int64_t task_id, std::int64_t lease_until_ms) {
  return impl_->renew_lease.Reset().Bind(1, task_id).Bind(2, lease_until_ms).Run();
}

Status Store::EndAttempt(std::int64_t task_id, std::int64_t attempt, TaskState state, AttemptStatus attempt_status,
                         std::string_view message, std::string_view result_json, std::string_view stdout_tail,
                         std::string_view stderr_tail, std::int64_t now_ms) {
  WEFT_RETURN_IF_ERROR(impl_->end_task.Reset()
                           .Bind(1, task_id)
                           .Bind(2, TaskStateName(state))
                           .Bind(3, now_ms)
                           .Bind(4, message)
                           .Bind(5, result_json.empty() ? std::string_view("{}") : result_json)
                           .Bind(6, stdout_tail)
                           .Bind(7, stderr_tail)
                           .Run());
  if (impl_->db.Changes() != 1) return Status::NotFound("task " + std::to_string(task_id) + " does not exist");
  return impl_->end_attempt.Reset()
      .Bind(1, task_id)
      .Bind(2, attempt)
      .Bind(3, now_ms)
      .Bind(4, ToString(attempt_status))
      .Bind(5, message)
      .Run();
}

Result<std::vector<AttemptRecord>> Store::ListAttempts(std::int64_t task_id) {
  sql::Statement& s = impl_->list_attempts.Reset().Bind(1, task_id);
  std::vector<AttemptRecord> out;
  WEFT_RETURN_IF_ERROR(sql::ForEachRow(s, [&](sql::Statement& row) {
    AttemptRecord a;
    a.task_id = row.Int(0);
    a.attempt = row.Int(1);
    a.host_id = row.Text(2);
    a.taken_at_ms = row.Int(3);
    a.finished_at_ms = row.Int(4);
    a.status = row.Text(5);
    a.message = row.Text(6);
    out.push_back(std::move(a));
  }));
  return out;
}

Status Store::SetTaskState(std::int64_t task_id, TaskState state, std::string_view message,
                           std::int64_t not_before_ms, std::int64_t now_ms) {
  WEFT_RETURN_IF_ERROR(impl_->set_task_state.Reset()
                           .Bind(1, task_id)
                           .Bind(2, TaskStateName(state))
                           .Bind(3, message)
                           .Bind(4, not_before_ms)
                           .Bind(5, now_ms)
                           .Run());
  if (impl_->db.Changes() != 1) return Status::NotFound("task " + std::to_string(task_id) + " does not exist");
  return Status::Ok();
}

Status Store::SetTaskMaxAttempts(std::int64_t task_id, std::int64_t max_attempts) {
  return impl_->set_task_max_attempts.Reset().Bind(1, task_id).Bind(2, max_attempts).Run();
}

Status Store::SetTaskAfter(std::int64_t task_id, std::string_view after_json) {
  return impl_->set_task_after.Reset().Bind(1, task_id).Bind(2, after_json).Run();
}

Result<std::vector<TaskRecord>> Store::ListJobTasks(std::string_view job_id, bool details) {
  WEFT_ASSIGN_OR_RETURN(sql::Statement st,
                        impl_->db.Prepare(std::string("SELECT ") + kTaskColumns + (details ? kTaskDetailColumns : "") +
                                          " FROM tasks WHERE job_id = ?1 ORDER BY id"));
  st.Bind(1, job_id);
  std::vector<TaskRecord> out;
  WEFT_RETURN_IF_ERROR(sql::ForEachRow(st, [&](sql::Statement& row) { out.push_back(ReadTask(row, details)); }));
  return out;
}

}  // namespace weft::store

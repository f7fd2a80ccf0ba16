// weft::store::Store: weftd's durable state, and the only code in Weft that
// speaks SQL. Two backends behind one SQL layer (database.hpp): one SQLite
// file (<data_dir>/weft.db), the embedded default, or a PostgreSQL database
// (`[store] backend = "postgres"`). Both get the same numbered migrations.
//
// Callers see plain structs (hosts, tasks, attempts). The SQLite file uses WAL with
// synchronous=NORMAL: a committed transaction survives a crash of weftd (the
// process), though the last commits before a power loss or OS crash may be
// lost. The schema is created by numbered migrations recorded in the
// `schema_migrations` table; opening a file applies the ones it lacks.
//
// Transactions are explicit (Begin/Commit/Rollback) so that the daemon can
// group many requests into one commit. Every statement the hot path uses is
// prepared once, at Open.
//
// SQLite's WAL checkpoints run on a thread of the Store's own, with its own
// connection, so that a commit never waits for the database file to be
// written and synced. PostgreSQL does its own.
//
// Not thread-safe: one thread (weftd's reactor) owns a Store.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/common/lifecycle.hpp"
#include "weft/common/status.hpp"
#include "weft/server/store/outage.hpp"

namespace weft::store {

// waiting: a job's task whose predecessors have not all succeeded (the job
// engine holds it, not the queue); cancelled: its job failed or was aborted.
enum class TaskState : int { kQueued = 1, kLeased, kSucceeded, kFailed, kWaiting, kCancelled };
std::string_view TaskStateName(TaskState state);
// False when `name` is not a state name.
bool ParseTaskState(std::string_view name, TaskState* out);
// When `s` is a write that failed because the disk holding the store is
// full (SQLite): the words that say so, which disk, the bytes free and what
// to do ("the disk holding DIR is full (statvfs: N bytes free; ...); free space there").
std::optional<std::string> DiskFull(const Status& s);

struct HostRecord {
  std::string id;
  std::int64_t capacity = 1;
  std::string version;
  std::string plugins_json = "[]";  // the descriptors the host registered, a JSON array
  std::int64_t registered_at_ms = 0;
  std::int64_t last_seen_ms = 0;
  std::string incarnation;  // the process that registered last (host.register's), "" when it named none
  bool draining = false;    // weft host drain: no new task goes to it (written by SetHostDraining only)
};

struct TaskRecord {
  std::int64_t id = 0;
  std::string tenant;
  std::string plugin;
  std::string action;
  std::string job_id;
  std::string cluster_id;
  std::string node_id;
  TaskState state = TaskState::kQueued;
  std::int64_t attempt = 0;  // the current (or last) attempt; 0 before the first take
  std::int64_t max_attempts = 3;
  std::string host_id;       // holder of the current attempt
  std::int64_t created_at_ms = 0;
  std::int64_t updated_at_ms = 0;
  std::int64_t lease_until_ms = 0;
  std::string payload_json = "{}";
  std::string result_json = "{}";
  std::string message;
  std::string stdout_tail;
  std::string stderr_tail;
  std::string task_key;         // the plan's id of the task: "web-1/INSTALL/nginx"
  std::string service;          // empty for node-level actions
  std::string after_json = "[]";  // ids of the tasks that must succeed first
};

struct AttemptRecord {
  std::int64_t task_id = 0;
  std::int64_t attempt = 0;
  std::string host_id;
  std::int64_t taken_at_ms = 0;
  std::int64_t finished_at_ms = 0;
  std::string status;  // "running", "succeeded", "failed", "expired", "undelivered"
  std::string message;
};

// Clusters of one tenant in one status, and their nodes (for metrics).
struct ClusterCount {
  std::string tenant;
  std::string status;
  std::int64_t clusters = 0;
  std::int64_t nodes = 0;
};

struct TaskCounts {
  std::int64_t queued = 0;
  std::int64_t leased = 0;
  std::int64_t succeeded = 0;
  std::int64_t failed = 0;
  std::int64_t waiting = 0;
  std::int64_t cancelled = 0;
};

// A cluster. spec and layout are JSON the job
// engine owns: the frozen template/provider/service copies and config, and the
// solver's layout. `previous` is {"spec","layout"} before the last successful
// change (empty when there is none).
struct ClusterRecord {
  std::string id;
  std::string tenant;
  std::string name;
  std::string owner;
  std::string status;  // pending, active, incomplete, inconsistent, terminated
  std::string spec_json = "{}";
  std::string layout_json = "{}";
  std::string previous_json;
  std::int64_t created_at_ms = 0;
  std::int64_t updated_at_ms = 0;
  std::int64_t expire_at_ms = 0;  // 0: no lease
  std::string latest_job;
  // What a list shows of spec and layout: the store derives these from the two
  // texts on every write and keeps them in columns of their own, so that a
  // list of clusters reads neither text.
  std::string template_name;
  std::string provider_name;
  std::int64_t size = 0;              // nodes in the layout
  std::vector<std::string> services;  // run on any node, sorted
};

// What the tasks of a node returned so far (provider id, addresses, ...), merged.
struct NodeRecord {
  std::string cluster_id;
  std::string id;
  std::string results_json = "{}";
};

struct JobRecord {
  std::string id;
  std::string tenant;
  std::string cluster_id;
  std::string operation;  // create, scale, ..., rollback (of a failed job)
  std::string status;     // running, failing, succeeded, failed, aborted
  std::string requested_by;
  std::string options_json = "{}";
  std::string before_json = "{}";  // {"spec","layout","status"} of the cluster when the job started
  std::string target_json = "{}";  // {"spec","layout","status"} it has when the job succeeds
  std::string message;
  std::string parent_job;  // a rollback job: the job it undoes
  std::int64_t created_at_ms = 0;
  std::int64_t updated_at_ms = 0;
  std::int64_t finished_at_ms = 0;
  // A retried job's earlier runs, oldest first: how each ended, its message, what
  // failed with its output (JSON array; the job engine writes it).
  std::string history_json = "[]";
};

// One version of a catalog entity (provider, hardwaretype, ...). Every put adds
// a version; a delete adds a tombstone (deleted, empty json) and a later put
// goes on numbering after it. Kinds and JSON are opaque text here.
struct CatalogEntityRecord {
  std::string tenant;
  std::string kind;
  std::string name;
  std::int64_t version = 0;
  std::string json;
  std::int64_t created_at_ms = 0;
  bool deleted = false;
};

// Security (server/store/auth_store.cpp). A principal is a CurveZMQ public key
// and who it is: a user of a tenant with a role, a host, or a one-time host
// enrollment token. Revoked rows stay, for the audit.
struct PrincipalRecord {
  std::string public_key;
  std::string kind;  // user, host, token
  std::string tenant;
  std::string user;
  std::string role;  // user, admin, superadmin; a token's: "replace" if it may replace a live host
  std::string host_id;  // a host's; a token's: the host it may enroll ("": only a new host)
  std::string created_by;
  std::int64_t created_at_ms = 0;
  std::int64_t expires_at_ms = 0;  // tokens; 0: never
  std::int64_t revoked_at_ms = 0;  // 0: in force
};

struct TenantRecord {
  std::string name;
  std::int64_t created_at_ms = 0;
  std::int64_t max_clusters = 0;  // 0: no limit
  std::int64_t max_nodes = 0;
  std::int64_t max_workers = 0;
};

struct UserRecord {
  std::string tenant;
  std::string name;
  std::string role;  // user, admin
  std::int64_t created_at_ms = 0;
};

// A host whose key weftd does not know asked to join; an admin may accept it.
struct HostRequestRecord {
  std::string host_id;
  std::string public_key;
  std::string address;
  std::int64_t requested_at_ms = 0;
};

// Browser logins (server/store/auth_store.cpp): a user's password, the
// sessions weftd issued and the API tokens users made. No secret is stored as
// it is: a password as a crypto_pwhash string, a session id and a token's
// secret as their BLAKE2b hashes.
struct PasswordRecord {
  std::string tenant;  // "_system" for the superadmin
  std::string user;
  std::string hash;
  std::int64_t set_at_ms = 0;
};

struct SessionRecord {
  std::string id_hash;
  std::string tenant;
  std::string user;
  std::string csrf_salt;  // with the session id, makes its CSRF token
  std::string gateway;    // the gateway it was made through ("": security off)
  std::string client_addr;
  std::int64_t created_at_ms = 0;
  std::int64_t last_used_ms = 0;
  std::int64_t expires_at_ms = 0;  // the absolute end
  // Made by a login with an API token: the token's secret hash ("": made
  // with a password). The session ends when that token does.
  std::string token_hash;
};

struct ApiTokenRecord {
  std::string id;  // shown in lists, part of the secret
  std::string secret_hash;
  std::string tenant;
  std::string user;
  std::string name;
  std::int64_t created_at_ms = 0;
  std::int64_t expires_at_ms = 0;  // 0: never
  std::int64_t revoked_at_ms = 0;  // 0: in force
};

// One entry of the audit log (server/store/audit_store.cpp): who changed what,
// when. Append only: no statement changes one, and only retention removes any
// (Store::PruneAudit, when [retention] audit_after_days is set).
struct AuditRecord {
  std::int64_t id = 0;
  std::int64_t at_ms = 0;
  std::string actor;         // the user ("alice"), or "host h1" / "token 1a2b3c4d" on the provisioner endpoint
  std::string actor_tenant;  // the actor's own tenant
  std::string actor_role;    // user, admin, superadmin, host, enrolling host
  std::string op;
  std::string tenant;        // the tenant acted in ("_system" for hosts and tenants themselves)
  std::string target;        // what was acted on: "cluster web1", "provider aws", "host h1", ...
  std::string cluster_id;    // when a cluster was acted on
  std::string cluster;       // its name
  std::string job_id;        // the job started, retried or aborted
  std::string outcome;       // "ok": only changes that succeeded are recorded
  std::string detail_json;   // a JSON object of the call's non-secret parameters, bounded
  std::string address;       // where the request came from: the client's IP address ("" when unknown)
};

// Which entries an audit read returns: every filter that is set must hold.
struct AuditQuery {
  std::int64_t since_ms = 0;
  std::string tenant;        // acted in this tenant
  std::string actor;         // by this user...
  std::string actor_tenant;  // ...of this tenant
  std::string cluster;       // on this cluster (id or name)
  std::int64_t limit = 1000; // the newest that many
  std::int64_t before_id = 0;  // only entries older than this one (a page after it); 0: any
};

// What one tenant's tasks asked of the worker threads over a window
// (server/store/capacity_store.cpp), for the capacity advice. Durations in ms.
struct TenantLoad {
  std::string tenant;
  std::int64_t enqueued = 0;          // tasks for a plugin created in the window (never-run cancelled ones aside)
  std::int64_t retried = 0;           // attempts after a task's first, started in the window
  std::int64_t started = 0;           // attempts started in the window
  std::int64_t served = 0;            // attempts that succeeded or failed in the window
  double service_ms_sum = 0;          // their run times (taken to finished), summed
  double service_ms_squares = 0;      // ... and their squares, for the spread
  std::int64_t waited = 0;            // first attempts of tasks with no predecessor, started in the window
  double wait_ms_sum = 0;             // their queue waits (created to taken), summed
};

// What one batch of retention removed (Store::PruneEnded).
struct PruneCounts {
  std::int64_t clusters = 0;
  std::int64_t jobs = 0;
  std::int64_t tasks = 0;
  std::int64_t attempts = 0;  // superseded attempts (the current one is in its task's row)
  std::int64_t nodes = 0;
  bool more = false;  // the batch stopped at its limit: more is due now
  std::int64_t rows() const { return clusters + jobs + tasks + attempts + nodes; }
  void Add(const PruneCounts& other) {
    clusters += other.clusters;
    jobs += other.jobs;
    tasks += other.tasks;
    attempts += other.attempts;
    nodes += other.nodes;
  }
};

// The size of the store's file and how much of it is free (Store::Space).
// SQLite only; PostgreSQL's autovacuum looks after its own files (all zero).
struct StoreSpace {
  std::int64_t pages = 0;       // pages in the file
  std::int64_t free_pages = 0;  // pages on the free list: space a VACUUM would give back
  std::int64_t page_size = 0;   // bytes
  bool incremental = false;     // auto_vacuum=INCREMENTAL: ReclaimSpace gives free pages back a few at a time
};

// When the WAL is copied into the database file (a checkpoint), in pages of
// 4 KiB. Checkpoints run on a thread of their own (server/store/checkpointer.hpp).
struct CheckpointOptions {
  // The WAL size at which the checkpoint thread is asked for a round.
  int background_pages = 4096;
  // The WAL size at which the committing thread checkpoints by itself (a guard).
  int limit_pages = 65536;
};

struct CheckpointStats {
  std::int64_t background_rounds = 0;  // PASSIVE checkpoints the thread ran
  std::int64_t writer_rounds = 0;      // checkpoints commits ran (finishing a round, or at the limit)
  std::int64_t wal_pages = 0;          // the WAL's size after the last commit
};

// Plugin resources kept in the store (server/store/resource_store.cpp), for
// server/resources' DatabaseResourceStore, which owns their rules. A
// version's content is the rows of resource_content with its content id (the
// id of the upload that made it), each at most kResourceRowBytes.
struct ResourceVersionRecord {
  std::string tenant;
  std::string type;
  std::string name;
  std::int64_t version = 0;
  std::string state;  // inactive, staged, active, retired
  std::int64_t size_bytes = 0;
  std::string digest;
  std::int64_t created_at_ms = 0;
  std::string created_by;
  std::int64_t activated_at_ms = 0;
  std::int64_t retired_at_ms = 0;
  std::string content_id;
};

// An upload in progress (version 0), or finished lately: the version it made
// and its digest, so that a repeated final chunk gets the same answer.
struct ResourceUploadRecord {
  std::string id;
  std::string tenant;
  std::string type;
  std::string name;
  std::int64_t received = 0;
  std::int64_t touched_ms = 0;
  std::int64_t version = 0;
  std::string digest;
};

enum class Backend { kSqlite, kPostgres };

struct StoreOptions {
  Backend backend = Backend::kSqlite;
  // SQLite only.
  int busy_timeout_ms = 5000;
  CheckpointOptions checkpoint;
  // PostgreSQL only: a libpq connection string, passed through as it is, and
  // how long a statement waits for a lost server to come back.
  std::string conninfo;
  int reconnect_timeout_ms = 60'000;
  // PostgreSQL only: a call unanswered for this long closes the connection (0: no limit).
  int call_timeout_ms = 15'000;
  // PostgreSQL only: a new connection gives up on a server that has not answered for this long.
  int connect_timeout_ms = 5'000;
  // A second connection, beside the one that writes, that only reads (weftd's
  // api reads on their own thread): on SQLite it runs no checkpoints.
  bool reader = false;
};

// A leader's fence (server/leader, docs/failover.md) that PostgreSQL's server
// checks in every write transaction, sent with its COMMIT: no round trip of
// its own. The transaction fails on the server unless weft_leader still holds
// `epoch()` (none: this weftd does not lead), whose row it keeps locked FOR
// SHARE until the commit, so that a takeover waits for it. After a failed
// commit `refused` is told the epoch in force and says what to answer.
struct LeaderFence {
  std::function<std::optional<std::int64_t>()> epoch;
  std::function<Status(std::int64_t in_force)> refused;
};

namespace sql {
class Database;
class Statement;
}  // namespace sql

class Store {
 public:
  // `path` is the SQLite file; PostgreSQL is reached through options.conninfo.
  static Result<std::unique_ptr<Store>> Open(const std::filesystem::path& path, StoreOptions options = {});
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // The SQLite file, or where PostgreSQL is ("PostgreSQL host=... port=... dbname=...", no secret).
  const std::filesystem::path& path() const { return path_; }
  Backend backend() const { return backend_; }
  // The highest migration applied.
  std::int64_t schema_version() const { return schema_version_; }
  static std::int64_t LatestSchemaVersion();
  // What the checkpoint thread and the commits did with the WAL so far.
  CheckpointStats checkpoint_stats() const;
  // "wal" when write-ahead logging is on (asked of SQLite, not remembered);
  // "postgres" on PostgreSQL.
  Result<std::string> JournalMode();

  // Replaces the leader's fence (none: empty functions). PostgreSQL only.
  void SetLeaderFence(LeaderFence fence);
  // What a statement outside a transaction does while it waits for a lost
  // PostgreSQL to come back (outage.hpp); none: it sleeps. PostgreSQL only.
  void SetReconnectWait(ReconnectWait wait);
  // Several weftd on one PostgreSQL (server/leader, docs/failover.md): the
  // leader's epoch in weft_leader, read FOR SHARE so that a takeover waits
  // for this transaction to end. For the write guard, in a transaction.
  [[nodiscard]] Result<std::int64_t> LeaderEpoch();

  [[nodiscard]] Status Begin();
  [[nodiscard]] Status Commit();
  [[nodiscard]] Status Rollback();
  // On a reader's connection (StoreOptions::reader): every statement from
  // BeginRead to EndRead sees the same commit (SQLite: a deferred transaction,
  // which takes no lock a writer waits for; PostgreSQL: each statement its own).
  [[nodiscard]] Status BeginRead();
  void EndRead();
  bool in_transaction() const { return in_transaction_; }
  // How many transactions Begin() began: names the open one, and tells which
  // of them a confirmed commit covers (the one in flight is the one before
  // the open one).
  std::uint64_t transactions_begun() const { return transactions_begun_; }
  // A commit whose outcome is read later (PostgreSQL; SQLite commits in
  // SendCommit): SendCommit() sends the transaction's writes, the leader
  // fence and COMMIT without waiting, and ends the transaction (on failure it
  // is still open: roll back). The next transaction may begin meanwhile.
  // AwaitCommit() waits for the outcome; when the commit failed, a
  // transaction begun behind it is rolled back too (the server ran none of
  // it), and a refused leader fence is reported as Commit() reports it.
  bool OverlapsCommits() const { return backend_ == Backend::kPostgres; }
  [[nodiscard]] Status SendCommit();
  [[nodiscard]] Status AwaitCommit();
  bool CommitInFlight() const;
  // What to poll(2) for the outcome of the commit in flight (-1: none).
  int CommitSocket() const;
  // PostgreSQL: a confirmed commit leaves the next transaction begun on the
  // server, for a Begin() that comes soon (sql::Database::ChainWaiting());
  // EndChain() ends it, as the caller does before it waits for long.
  bool ChainWaiting() const;
  void EndChain();

  // Hosts.
  [[nodiscard]] Status UpsertHost(const HostRecord& host);
  [[nodiscard]] Status TouchHost(std::string_view host_id, std::int64_t last_seen_ms);
  // UpsertHost leaves `draining` as it is; this sets it.
  [[nodiscard]] Status SetHostDraining(std::string_view host_id, bool draining);
  [[nodiscard]] Result<std::vector<HostRecord>> ListHosts();

  // Tasks. InsertTask sets task->id.
  [[nodiscard]] Status InsertTask(TaskRecord* task);
  // The next `count` InsertTask calls of this transaction (a job's tasks) are
  // written together, a few statements for all of them instead of one or two
  // each: their ids are taken now, the ones inserting them one by one would
  // have given (SQLite: after the largest id; PostgreSQL: from the ids'
  // sequence), and each InsertTask gives the next. The rows are written once
  // all are given, by EndTaskInserts, before any other statement on the tasks
  // or by the commit, so nothing reads the table without them; a rollback
  // drops them with the rest. Outside a transaction InsertTask writes at once.
  [[nodiscard]] Status BeginTaskInserts(std::size_t count);
  // Writes the tasks given since BeginTaskInserts, and the next InsertTask
  // writes at once again (the ids left are not used).
  [[nodiscard]] Status EndTaskInserts();
  [[nodiscard]] Result<std::optional<TaskRecord>> GetTask(std::int64_t task_id);
  // Newest first; `state` empty for any state. Payload, result and output are left empty.
  [[nodiscard]] Result<std::vector<TaskRecord>> ListTasks(std::string_view tenant, std::optional<TaskState> state,
                                                          std::int64_t limit);
  // Every queued or leased task, oldest first, without payload, result or output:
  // what the queue rebuilds its index from at start.
  [[nodiscard]] Result<std::vector<TaskRecord>> ListUnfinishedTasks();
  // Scans every task: for start-up, not for the hot path.
  [[nodiscard]] Result<TaskCounts> CountTasks();

  // A take: the task becomes leased by `host_id` at `attempt`, and the attempt is recorded.
  // On PostgreSQL, in a transaction, takes and attempt ends are sent together,
  // as one statement, before the next statement or the commit: a task that is
  // missing fails the transaction there.
  [[nodiscard]] Status LeaseTask(std::int64_t task_id, std::int64_t attempt, std::string_view host_id,
                                 std::int64_t lease_until_ms, std::int64_t now_ms);
  [[nodiscard]] Status RenewLease(std::int64_t task_id, std::int64_t lease_until_ms);
  // The current attempt, `attempt`, ends with `attempt_status`; the task moves
  // to `state` (queued again, or a final state with its result and output).
  // A task that is at another attempt is not written: the transaction fails
  // (NOT_FOUND, naming the task), here or at the commit.
  [[nodiscard]] Status EndAttempt(std::int64_t task_id, std::int64_t attempt, TaskState state,
                                  AttemptStatus attempt_status, std::string_view message,
                                  std::string_view result_json, std::string_view stdout_tail,
                                  std::string_view stderr_tail, std::int64_t now_ms);
  [[nodiscard]] Result<std::vector<AttemptRecord>> ListAttempts(std::int64_t task_id);

  // Moves a task to `state` without an attempt ending (waiting -> queued when its
  // predecessors succeeded; -> cancelled; a JOIN -> succeeded). `not_before_ms`
  // is kept in lease_until_ms for a queued task: it may not be taken earlier.
  [[nodiscard]] Status SetTaskState(std::int64_t task_id, TaskState state, std::string_view message,
                                    std::int64_t not_before_ms, std::int64_t now_ms);
  // A failed task of a job gets more attempts (job retry).
  [[nodiscard]] Status SetTaskMaxAttempts(std::int64_t task_id, std::int64_t max_attempts);
  [[nodiscard]] Status SetTaskAfter(std::int64_t task_id, std::string_view after_json);

  // Clusters, nodes and jobs (server/store/job_store.cpp). Inserts set the id.
  [[nodiscard]] Status InsertCluster(ClusterRecord* cluster);
  // The same for a cluster whose spec_json and layout_json are the texts of
  // `spec` and `layout`: its summary is read from them, not from the texts.
  [[nodiscard]] Status InsertCluster(ClusterRecord* cluster, const nlohmann::json& spec, const nlohmann::json& layout);
  [[nodiscard]] Status UpdateCluster(const ClusterRecord& cluster);
  [[nodiscard]] Result<std::optional<ClusterRecord>> GetCluster(std::string_view cluster_id);
  // The same without spec, layout and previous (empty): the summary fields only.
  [[nodiscard]] Result<std::optional<ClusterRecord>> GetClusterSummary(std::string_view cluster_id);
  // By name among the tenant's clusters that are not terminated, else by id,
  // else the newest terminated one of that name (a terminated cluster's name
  // is free for a new cluster, which then wins).
  [[nodiscard]] Result<std::optional<ClusterRecord>> FindCluster(std::string_view tenant, std::string_view id_or_name);
  [[nodiscard]] Result<std::vector<ClusterRecord>> ListClusters(std::string_view tenant, bool include_terminated);
  // The same without spec, layout and previous (empty): the summary fields only.
  [[nodiscard]] Result<std::vector<ClusterRecord>> ListClusterSummaries(std::string_view tenant,
                                                                        bool include_terminated);
  // ListClusterSummaries without reading every row: visits them in id order
  // from summaries kept in memory, which only the clusters written since the
  // last call are read again for (a list of a thousand clusters read every
  // row, a third of its cost). Clusters change only through this Store, or
  // through another whose writes it is told of (ClustersWrittenElsewhere).
  [[nodiscard]] Status VisitClusterSummaries(std::string_view tenant, bool include_terminated,
                                             const std::function<void(const ClusterRecord&)>& visit);
  // Forgets the summaries kept: after a rollback (they may hold what it undid)
  // and when this weftd takes over from another one on the same database.
  void ForgetClusterSummaries();
  // Which clusters a commit wrote (`all`: any may have changed), for a reader
  // of the same database that keeps summaries (the api front's Store).
  struct ClusterWrites {
    std::set<std::int64_t> ids;
    bool all = false;
    bool empty() const { return ids.empty() && !all; }
    void Merge(ClusterWrites&& other);
  };
  // The clusters written by the transactions whose commit succeeded since the
  // last call, and by those rolled back (reading one again costs a read, a
  // rollback is rare). Never those of a transaction open or in flight: its
  // clusters come with its own commit.
  ClusterWrites TakeCommittedClusterWrites();
  // On a reader's Store: clusters another connection wrote and committed. The
  // summaries kept read them again at the next visit (`all`: forgets them all).
  void ClustersWrittenElsewhere(const ClusterWrites& writes);
  // Clusters and their nodes by tenant and status, every tenant.
  [[nodiscard]] Result<std::vector<ClusterCount>> CountClusters();
  // Clusters (any tenant) whose lease ran out by `now_ms` and that are not terminated.
  [[nodiscard]] Result<std::vector<ClusterRecord>> ListExpiredClusters(std::int64_t now_ms);
  [[nodiscard]] Status PutNode(const NodeRecord& node);
  [[nodiscard]] Status DeleteNode(std::string_view cluster_id, std::string_view node_id);
  [[nodiscard]] Result<std::vector<NodeRecord>> ListNodes(std::string_view cluster_id);
  [[nodiscard]] Status InsertJob(JobRecord* job);
  [[nodiscard]] Status UpdateJob(const JobRecord& job);
  // `with_states` false: without the cluster states (before_json and target_json
  // empty), the large part of a job, which only the job engine needs.
  [[nodiscard]] Result<std::optional<JobRecord>> GetJob(std::string_view job_id, bool with_states = true);
  // Newest first; empty cluster_id: every job of the tenant; `before_id` > 0:
  // only jobs older than that one (the next page). Without the cluster
  // states and the history (before_json and target_json empty, history_json
  // "[]"): GetJob reads those. `owner`: only the jobs of the clusters that
  // user owns (what a user may see).
  [[nodiscard]] Result<std::vector<JobRecord>> ListJobs(std::string_view tenant, std::string_view cluster_id,
                                                        std::int64_t limit, std::int64_t before_id = 0,
                                                        std::optional<std::string_view> owner = std::nullopt);
  // Jobs not finished yet (running or failing), oldest first: what the engine resumes at start.
  [[nodiscard]] Result<std::vector<JobRecord>> ListUnfinishedJobs();
  // Every task of a job, in id order; `details` adds payload, result and output.
  [[nodiscard]] Result<std::vector<TaskRecord>> ListJobTasks(std::string_view job_id, bool details);
  // The attempts of every task of a job, by task id then attempt: one query, not one per task.
  [[nodiscard]] Result<std::vector<AttemptRecord>> ListJobAttempts(std::string_view job_id);
  // ListJobTasks(job_id, true) without the payloads, and ListJobAttempts(job_id), in two
  // queries that read each task's rows once (job.get with details): each task's current
  // attempt comes from the task's own row, not from a second read of it.
  [[nodiscard]] Status ListJobTaskDetails(std::string_view job_id, std::vector<TaskRecord>* tasks,
                                          std::vector<AttemptRecord>* attempts);

  // Security (server/store/auth_store.cpp). Puts insert or replace.
  [[nodiscard]] Status PutPrincipal(const PrincipalRecord& principal);
  [[nodiscard]] Result<std::vector<PrincipalRecord>> ListPrincipals();
  [[nodiscard]] Status PutTenant(const TenantRecord& tenant);
  [[nodiscard]] Status DeleteTenant(std::string_view name);
  [[nodiscard]] Result<std::vector<TenantRecord>> ListTenants();
  [[nodiscard]] Status PutUser(const UserRecord& user);
  [[nodiscard]] Status DeleteUser(std::string_view tenant, std::string_view name);
  [[nodiscard]] Result<std::vector<UserRecord>> ListUsers();
  [[nodiscard]] Status PutHostRequest(const HostRequestRecord& request);
  // Every request for `host_id` (one per key that asked).
  [[nodiscard]] Status DeleteHostRequest(std::string_view host_id);
  [[nodiscard]] Status DeleteHostRequestKey(std::string_view public_key);
  [[nodiscard]] Result<std::vector<HostRequestRecord>> ListHostRequests();
  [[nodiscard]] Status DeleteHost(std::string_view host_id);
  [[nodiscard]] Status PutPassword(const PasswordRecord& password);
  [[nodiscard]] Result<std::optional<PasswordRecord>> GetPassword(std::string_view tenant, std::string_view user);
  // A user's password, sessions and tokens; every user's of the tenant when `user` is empty.
  [[nodiscard]] Status ForgetLogins(std::string_view tenant, std::string_view user);
  [[nodiscard]] Status PutSession(const SessionRecord& session);
  [[nodiscard]] Status DeleteSession(std::string_view id_hash);
  [[nodiscard]] Result<std::vector<SessionRecord>> ListSessions();
  [[nodiscard]] Status PutApiToken(const ApiTokenRecord& token);
  [[nodiscard]] Result<std::vector<ApiTokenRecord>> ListApiTokens();
  // Replaces every sealed value ("enc:v2:...", server/auth/secrets.hpp) kept for
  // a cluster (its spec, its nodes, its tasks' payloads and results) with
  // "<wiped>": what a deleted cluster leaves holds no secret, not even sealed.
  [[nodiscard]] Status WipeSealedValues(std::string_view cluster_id);
  // Calls `rewrite` with its tenant on every stored version of every live
  // catalog entity of `kind` whose text contains `containing`; writes back
  // those it changed (it returns true).
  [[nodiscard]] Status RewriteCatalogEntities(
      std::string_view kind, std::string_view containing,
      const std::function<bool(const std::string& tenant, nlohmann::json& entity)>& rewrite);
  // The same for every cluster's spec and previous spec.
  [[nodiscard]] Status RewriteClusterSpecs(
      std::string_view containing, const std::function<bool(const std::string& tenant, nlohmann::json& spec)>& rewrite);

  // The audit log (server/store/audit_store.cpp). A read returns the newest
  // `limit` entries that match, oldest first.
  [[nodiscard]] Status AppendAudit(const AuditRecord& entry);
  [[nodiscard]] Result<std::vector<AuditRecord>> ListAudit(const AuditQuery& query);

  // Each tenant's load since `since_ms` (server/store/capacity_store.cpp); one
  // tenant when `tenant` is set. Scans the tasks and attempts tables: for an
  // occasional read, not for the hot path.
  [[nodiscard]] Result<std::vector<TenantLoad>> MeasureLoad(std::int64_t since_ms, std::string_view tenant = {});
  // The id of the first task created at or after `since_ms` (one past the last when none was).
  [[nodiscard]] Result<std::int64_t> FirstTaskSince(std::int64_t since_ms);

  // Retention (server/store/retention_store.cpp): one batch of what ended
  // before `cutoff_ms` removed, in the caller's transaction, at most
  // `max_rows` rows (attempts, tasks, jobs, nodes, clusters; a single task
  // with more attempts than that goes alone). Removed: a deleted cluster whose
  // deletion is older than the cutoff, with its jobs, tasks, their attempts
  // and its nodes; a job of a live cluster that ended before the cutoff, with
  // its tasks and attempts, unless it is the cluster's latest job. Kept: the
  // audit log, every cluster and job that has an unfinished job or task
  // beside it, tasks of no job, and the job of the newest task (so SQLite,
  // whose task ids are the largest plus one, never gives an id twice).
  [[nodiscard]] Result<PruneCounts> PruneEnded(std::int64_t cutoff_ms, std::int64_t max_rows);
  // API tokens revoked or expired before `cutoff_ms`, at most `max_rows` of
  // them, in the caller's transaction; the number removed. Auth refuses a
  // token it does not know exactly as one revoked or expired.
  [[nodiscard]] Result<std::int64_t> PruneSpentApiTokens(std::int64_t cutoff_ms, std::int64_t max_rows);
  // Audit entries written before `cutoff_ms`, oldest first, at most
  // `max_rows`, in the caller's transaction; the number removed. Only
  // retention removes any (the log's triggers refuse every other DELETE).
  [[nodiscard]] Result<std::int64_t> PruneAudit(std::int64_t cutoff_ms, std::int64_t max_rows);
  // The file's size and free pages (SQLite; cheap: read off the header).
  [[nodiscard]] Result<StoreSpace> Space();
  // SQLite with auto_vacuum=INCREMENTAL: gives up to `max_pages` free pages
  // back to the file system (the file shrinks at the next checkpoint), in the
  // caller's transaction; a store without it, or PostgreSQL, is left as it
  // is. What is left, as Space().
  [[nodiscard]] Result<StoreSpace> ReclaimSpace(std::int64_t max_pages);
  // SQLite: rewrites the whole file with auto_vacuum=INCREMENTAL (VACUUM),
  // outside any transaction; for a store nothing else has open (weftd --vacuum).
  [[nodiscard]] Status Vacuum();

  // Plugin resources (server/store/resource_store.cpp). The rules (states,
  // one active, checks) are the caller's; these only read and write rows.
  static constexpr std::int64_t kResourceRowBytes = std::int64_t{1} << 20;
  // Versions of a tenant's resources by type, name and version; `type` empty:
  // every type; `name` empty: every name of the type.
  [[nodiscard]] Result<std::vector<ResourceVersionRecord>> ListResourceVersions(std::string_view tenant,
                                                                                std::string_view type,
                                                                                std::string_view name);
  // The active versions of the tenant, by type and name.
  [[nodiscard]] Result<std::vector<ResourceVersionRecord>> ListActiveResourceVersions(std::string_view tenant);
  // Whether the resource exists (has a version counter, even with no version
  // left, and was not deleted whole since).
  [[nodiscard]] Result<bool> ResourceExists(std::string_view tenant, std::string_view type, std::string_view name);
  // The resource's next version number, counted on (never given twice, a
  // deleted version's included, nor after the resource was deleted whole:
  // the name's counter stays). The resource exists afterwards.
  [[nodiscard]] Result<std::int64_t> TakeResourceVersion(std::string_view tenant, std::string_view type,
                                                         std::string_view name);
  // The number the resource's next version would get (1 when it does not exist): one
  // above every number it ever gave, a deleted version's included (an export).
  [[nodiscard]] Result<std::int64_t> ResourceNextVersion(std::string_view tenant, std::string_view type,
                                                         std::string_view name);
  // Sets the counter so that the next version is at least `next_version` (an
  // import); the resource exists afterwards.
  [[nodiscard]] Status RaiseResourceVersion(std::string_view tenant, std::string_view type, std::string_view name,
                                            std::int64_t next_version);
  // The names of the tenant's resources deleted whole, with the number each
  // one's next version gets (an export), by type and name.
  [[nodiscard]] Result<std::vector<std::pair<std::pair<std::string, std::string>, std::int64_t>>>
  ListDeletedResourceNames(std::string_view tenant);
  // Sets the counter so that the next version is at least `next_version`,
  // leaving the resource as it is; a name the store does not know is recorded
  // as deleted (an import of a resource deleted whole).
  [[nodiscard]] Status KeepResourceNumbering(std::string_view tenant, std::string_view type, std::string_view name,
                                             std::int64_t next_version);
  [[nodiscard]] Status InsertResourceVersion(const ResourceVersionRecord& version);
  // Sets state, activated_at_ms and retired_at_ms of the version `record` names.
  [[nodiscard]] Status UpdateResourceVersion(const ResourceVersionRecord& version);
  // One version and its content.
  [[nodiscard]] Status DeleteResourceVersion(const ResourceVersionRecord& version);
  // The whole resource: its versions and their content, its uploads and their
  // content. Its counter stays, marked deleted (ResourceExists is false).
  [[nodiscard]] Status DeleteResource(std::string_view tenant, std::string_view type, std::string_view name);
  [[nodiscard]] Result<std::optional<ResourceUploadRecord>> GetResourceUpload(std::string_view id);
  // Inserts or replaces.
  [[nodiscard]] Status PutResourceUpload(const ResourceUploadRecord& upload);
  // The upload, and its content when it made no version.
  [[nodiscard]] Status DeleteResourceUpload(std::string_view id);
  // Uploads untouched since `cutoff_ms` (and the content of those that made no version); the number removed.
  [[nodiscard]] Result<std::int64_t> PruneResourceUploads(std::int64_t cutoff_ms);
  // Writes `bytes` as the content from byte `start` on, in rows of at most kResourceRowBytes.
  [[nodiscard]] Status AppendResourceContent(std::string_view content_id, std::int64_t start, std::string_view bytes);
  // Up to `length` bytes from `offset`, reading only the rows that hold them;
  // fewer when the content ends (or has a gap) before.
  [[nodiscard]] Result<std::string> ReadResourceContent(std::string_view content_id, std::int64_t offset,
                                                        std::int64_t length);
  // Calls `visit` with each row's bytes in order (a digest of the whole);
  // stops at a gap. The number of bytes visited.
  [[nodiscard]] Result<std::int64_t> VisitResourceContent(std::string_view content_id,
                                                          const std::function<void(std::string_view)>& visit);

  // Catalog entities, tenant-scoped and versioned (server/store/catalog_store.cpp).
  // catalog_generation() moves whenever they may have changed: at every put,
  // delete or rewrite, and when told (CatalogMayHaveChanged: a rollback, or
  // another weftd led meanwhile), so a copy made at one value is good while it holds.
  std::uint64_t catalog_generation() const { return catalog_generation_; }
  void CatalogMayHaveChanged() { ++catalog_generation_; }
  // A put returns the new version (1 + the highest so far, tombstones included).
  [[nodiscard]] Result<std::int64_t> PutCatalogEntity(std::string_view tenant, std::string_view kind,
                                                      std::string_view name, std::string_view json,
                                                      std::int64_t now_ms);
  // The latest version (nullopt when there is none or it is a tombstone), or the
  // given version (nullopt when there is no such version or it is a tombstone).
  [[nodiscard]] Result<std::optional<CatalogEntityRecord>> GetCatalogEntity(
      std::string_view tenant, std::string_view kind, std::string_view name,
      std::optional<std::int64_t> version = std::nullopt);
  // The latest version of every live entity of a kind, by name; a page of
  // them with `after` (names after it) and `limit` (at most that many; < 0: all).
  [[nodiscard]] Result<std::vector<CatalogEntityRecord>> ListCatalogEntities(std::string_view tenant,
                                                                             std::string_view kind,
                                                                             std::string_view after = {},
                                                                             std::int64_t limit = -1);
  // Adds a tombstone; returns its version, or nullopt when the entity does not exist (or is deleted).
  [[nodiscard]] Result<std::optional<std::int64_t>> DeleteCatalogEntity(std::string_view tenant,
                                                                         std::string_view kind,
                                                                         std::string_view name, std::int64_t now_ms);

 private:
  void EndLeftoverReads();
  // The leader's fence: sent before COMMIT; after a failed one, what the leadership says.
  Status SendFence();
  Status FenceVerdict(Status failed);
  // PostgreSQL, in a transaction: takes and attempt ends are gathered and sent
  // as one statement (see TaskWrite in store.cpp).
  bool GathersTaskWrites() const { return backend_ == Backend::kPostgres && in_transaction_; }
  Status SendTaskWrites();
  // PostgreSQL, in a transaction: removes from open_tasks the tasks the
  // gathered writes finished in commits confirmed, once there are a batch of them.
  Status PruneOpenTasks();
  // PostgreSQL: a write that leaves the task unfinished: PruneOpenTasks must not remove it.
  void ForgetFinished(std::int64_t task_id);
  // Writes the tasks InsertTask gave since BeginTaskInserts and not written yet.
  Status WriteTaskInserts();
  // InsertCluster once the summary fields are set.
  Status InsertSummarizedCluster(ClusterRecord* cluster);
  // Why a task write changed no row (SQLite, or outside a transaction).
  Status TaskWriteMissed(std::int64_t task_id, std::optional<std::int64_t> attempt);
  sql::Database& database();
  struct Impl;
  explicit Store(std::filesystem::path path);
  Status OpenSqlite(const StoreOptions& options);
  Status OpenPostgres(const StoreOptions& options);
  Status Migrate();
  Status ApplyMigrations();
  Status PrepareAll();

  std::filesystem::path path_;
  Backend backend_ = Backend::kSqlite;
  std::int64_t schema_version_ = 0;
  bool in_transaction_ = false;
  std::uint64_t transactions_begun_ = 0;
  std::uint64_t catalog_generation_ = 0;
  bool warned_leftover_read_ = false;
  std::unique_ptr<Impl> impl_;
  // The summaries VisitClusterSummaries keeps (job_store.cpp); null: none.
  struct ClusterSummaries;
  std::shared_ptr<ClusterSummaries> cluster_summaries_;
  // A cluster was inserted or changed: its summary is read again when next visited.
  void ClusterWritten(std::int64_t id);
  // TakeCommittedClusterWrites's: of the open transaction, of the commit in
  // flight (PostgreSQL), and committed (or rolled back) not yet taken.
  ClusterWrites open_cluster_writes_;
  ClusterWrites flight_cluster_writes_;
  ClusterWrites done_cluster_writes_;
};

}  // namespace weft::store

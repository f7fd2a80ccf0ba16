// Clusters, nodes and jobs in the store (migration 4). Statements are prepared
// per call: a job's bookkeeping is a few statements per task, far from the
// take/finish hot path that the prepared statements of store.cpp serve.
#include <string>
#include <utility>

#include "weft/server/store/database.hpp"
#include "weft/server/store/store.hpp"

namespace weft::store {
namespace {

constexpr const char* kClusterColumns =
    "id, tenant, name, owner, status, spec, layout, previous, created_at_ms, updated_at_ms, expire_at_ms, latest_job";
constexpr const char* kJobColumns =
    "id, tenant, cluster_id, operation, status, requested_by, options, before, target, message, parent_job, "
    "created_at_ms, updated_at_ms, finished_at_ms, history";
// The same without the two cluster states, the large part of a job (megabytes for
// a cluster of thousands of nodes): what lists of jobs read.
constexpr const char* kJobListColumns =
    "id, tenant, cluster_id, operation, status, requested_by, options, '', '', message, parent_job, "
    "created_at_ms, updated_at_ms, finished_at_ms, history";

ClusterRecord ReadCluster(const sql::Statement& s) {
  ClusterRecord c;
  c.id = std::to_string(s.Int(0));
  c.tenant = s.Text(1);
  c.name = s.Text(2);
  c.owner = s.Text(3);
  c.status = s.Text(4);
  c.spec_json = s.Text(5);
  c.layout_json = s.Text(6);
  c.previous_json = s.Text(7);
  c.created_at_ms = s.Int(8);
  c.updated_at_ms = s.Int(9);
  c.expire_at_ms = s.Int(10);
  c.latest_job = s.Text(11);
  return c;
}

JobRecord ReadJob(const sql::Statement& s) {
  JobRecord j;
  j.id = std::to_string(s.Int(0));
  j.tenant = s.Text(1);
  j.cluster_id = s.Text(2);
  j.operation = s.Text(3);
  j.status = s.Text(4);
  j.requested_by = s.Text(5);
  j.options_json = s.Text(6);
  j.before_json = s.Text(7);
  j.target_json = s.Text(8);
  j.message = s.Text(9);
  j.parent_job = s.Text(10);
  j.created_at_ms = s.Int(11);
  j.updated_at_ms = s.Int(12);
  j.finished_at_ms = s.Int(13);
  j.history_json = s.Text(14);
  return j;
}

// Ids are integers in the tables and strings everywhere else; a string that is
// not a number names no row.
bool ParseId(std::string_view text, std::int64_t* out) {
  if (text.empty() || text.size() > 18) return false;
  std::int64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

template <typename Record, typename Read>
Result<std::vector<Record>> Rows(sql::Statement& st, Read read) {
  std::vector<Record> out;
  WEFT_RETURN_IF_ERROR(sql::ForEachRow(st, [&](sql::Statement& row) { out.push_back(read(row)); }));
  return out;
}

}  // namespace

Status Store::InsertCluster(ClusterRecord* c) {
  WEFT_ASSIGN_OR_RETURN(
      sql::Statement st,
      database().Prepare(
          "INSERT INTO clusters (tenant, name, owner, status, spec, layout, previous, created_at_ms, updated_at_ms, "
          "expire_at_ms, latest_job) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, ?9, ?10) RETURNING id"));
  WEFT_ASSIGN_OR_RETURN(const std::int64_t id, st.Bind(1, c->tenant)
                           .Bind(2, c->name)
                           .Bind(3, c->owner)
                           .Bind(4, c->status)
                           .Bind(5, c->spec_json)
                           .Bind(6, c->layout_json)
                           .Bind(7, c->previous_json)
                           .Bind(8, c->created_at_ms)
                           .Bind(9, c->expire_at_ms)
                           .Bind(10, c->latest_job)
                           .RunReturningId());
  c->id = std::to_string(id);
  c->updated_at_ms = c->created_at_ms;
  return Status::Ok();
}

Status Store::UpdateCluster(const ClusterRecord& c) {
  std::int64_t id = 0;
  if (!ParseId(c.id, &id)) return Status::NotFound("cluster '" + c.id + "' does not exist");
  WEFT_ASSIGN_OR_RETURN(sql::Statement st,
                        database().Prepare("UPDATE clusters SET status = ?2, spec = ?3, layout = ?4, previous = ?5, "
                                           "updated_at_ms = ?6, expire_at_ms = ?7, "
                                           "latest_job = ?8, owner = ?9 WHERE id = ?1"));
  WEFT_RETURN_IF_ERROR(st.Bind(1, id)
                           .Bind(2, c.status)
                           .Bind(3, c.spec_json)
                           .Bind(4, c.layout_json)
                           .Bind(5, c.previous_json)
                           .Bind(6, c.updated_at_ms)
                           .Bind(7, c.expire_at_ms)
                           .Bind(8, c.latest_job)
                           .Bind(9, c.owner)
                           .Run());
  if (database().Changes() != 1) return Status::NotFound("cluster '" + c.id + "' does not exist");
  return Status::Ok();
}

Result<std::optional<ClusterRecord>> Store::GetCluster(std::string_view cluster_id) {
  std::int64_t id = 0;
  if (!ParseId(cluster_id, &id)) return std::optional<ClusterRecord>();
  // Cached: a job reads its cluster a few times; reset once read.
  WEFT_ASSIGN_OR_RETURN(sql::Statement * st,
                        Cached(std::string("SELECT ") + kClusterColumns + " FROM clusters WHERE id = ?1"));
  st->Bind(1, id);
  Result<bool> row = st->Step();
  std::optional<ClusterRecord> out;
  if (row.ok() && *row) out = ReadCluster(*st);
  st->Reset();
  if (!row.ok()) return row.status();
  return out;
}

Result<std::optional<ClusterRecord>> Store::FindCluster(std::string_view tenant, std::string_view id_or_name) {
  WEFT_ASSIGN_OR_RETURN(sql::Statement st, database().Prepare(std::string("SELECT ") + kClusterColumns +
                                                              " FROM clusters WHERE tenant = ?1 AND name = ?2 AND "
                                                              "status != 'terminated' ORDER BY id DESC LIMIT 1"));
  st.Bind(1, tenant).Bind(2, id_or_name);
  WEFT_ASSIGN_OR_RETURN(bool row, st.Step());
  if (row) return std::optional<ClusterRecord>(ReadCluster(st));
  Result<std::optional<ClusterRecord>> by_id = GetCluster(id_or_name);
  if (!by_id.ok()) return by_id;
  if (by_id->has_value() && (**by_id).tenant == tenant) return by_id;
  WEFT_ASSIGN_OR_RETURN(sql::Statement gone, database().Prepare(std::string("SELECT ") + kClusterColumns +
                                                                " FROM clusters WHERE tenant = ?1 AND name = ?2 "
                                                                "ORDER BY id DESC LIMIT 1"));
  gone.Bind(1, tenant).Bind(2, id_or_name);
  WEFT_ASSIGN_OR_RETURN(bool found, gone.Step());
  if (found) return std::optional<ClusterRecord>(ReadCluster(gone));
  return std::optional<ClusterRecord>();
}

Result<std::vector<ClusterRecord>> Store::ListClusters(std::string_view tenant, bool include_terminated) {
  WEFT_ASSIGN_OR_RETURN(
      sql::Statement st,
      database().Prepare(std::string("SELECT ") + kClusterColumns + " FROM clusters WHERE tenant = ?1" +
                         (include_terminated ? "" : " AND status != 'terminated'") + " ORDER BY id"));
  st.Bind(1, tenant);
  return Rows<ClusterRecord>(st, ReadCluster);
}

Result<std::vector<ClusterCount>> Store::CountClusters() {
  WEFT_ASSIGN_OR_RETURN(
      sql::Statement st,
      database().Prepare("SELECT c.tenant, c.status, COUNT(*), "
                         "COALESCE(SUM((SELECT COUNT(*) FROM nodes n WHERE n.cluster_id = CAST(c.id AS TEXT))), 0) "
                         "FROM clusters c GROUP BY c.tenant, c.status ORDER BY c.tenant, c.status"));
  return Rows<ClusterCount>(st, [](const sql::Statement& row) {
    return ClusterCount{row.Text(0), row.Text(1), row.Int(2), row.Int(3)};
  });
}

Result<std::vector<ClusterRecord>> Store::ListExpiredClusters(std::int64_t now_ms) {
  WEFT_ASSIGN_OR_RETURN(sql::Statement st,
                        database().Prepare(std::string("SELECT ") + kClusterColumns +
                                           " FROM clusters WHERE expire_at_ms > 0 AND expire_at_ms <= ?1 AND "
                                           "status != 'terminated' ORDER BY id"));
  st.Bind(1, now_ms);
  return Rows<ClusterRecord>(st, ReadCluster);
}

Status Store::PutNode(const NodeRecord& n) {
  // Cached: a job writes a node's results after most of its tasks.
  WEFT_ASSIGN_OR_RETURN(sql::Statement * st,
                        Cached("INSERT INTO nodes (cluster_id, id, results) VALUES (?1, ?2, ?3) "
                               "ON CONFLICT (cluster_id, id) DO UPDATE SET results = ?3"));
  return st->Bind(1, n.cluster_id).Bind(2, n.id).Bind(3, n.results_json).Run();
}

Status Store::DeleteNode(std::string_view cluster_id, std::string_view node_id) {
  WEFT_ASSIGN_OR_RETURN(sql::Statement * st, Cached("DELETE FROM nodes WHERE cluster_id = ?1 AND id = ?2"));
  return st->Bind(1, cluster_id).Bind(2, node_id).Run();
}

Result<std::vector<NodeRecord>> Store::ListNodes(std::string_view cluster_id) {
  WEFT_ASSIGN_OR_RETURN(sql::Statement * st,
                        Cached("SELECT cluster_id, id, results FROM nodes WHERE cluster_id = ?1 ORDER BY id"));
  st->Bind(1, cluster_id);
  return Rows<NodeRecord>(*st, [](const sql::Statement& s) { return NodeRecord{s.Text(0), s.Text(1), s.Text(2)}; });
}

Status Store::InsertJob(JobRecord* j) {
  WEFT_ASSIGN_OR_RETURN(
      sql::Statement * st,
      Cached("INSERT INTO jobs (tenant, cluster_id, operation, status, requested_by, options, before, target, message, "
             "parent_job, created_at_ms, updated_at_ms, finished_at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, "
             "?11, ?11, ?12) RETURNING id"));
  WEFT_ASSIGN_OR_RETURN(const std::int64_t id, st->Bind(1, j->tenant)
                           .Bind(2, j->cluster_id)
                           .Bind(3, j->operation)
                           .Bind(4, j->status)
                           .Bind(5, j->requested_by)
                           .Bind(6, j->options_json)
                           .Bind(7, j->before_json)
                           .Bind(8, j->target_json)
                           .Bind(9, j->message)
                           .Bind(10, j->parent_job)
                           .Bind(11, j->created_at_ms)
                           .Bind(12, j->finished_at_ms)
                           .RunReturningId());
  j->id = std::to_string(id);
  j->updated_at_ms = j->created_at_ms;
  return Status::Ok();
}

Status Store::UpdateJob(const JobRecord& j) {
  std::int64_t id = 0;
  if (!ParseId(j.id, &id)) return Status::NotFound("job '" + j.id + "' does not exist");
  WEFT_ASSIGN_OR_RETURN(sql::Statement * st,
                        Cached("UPDATE jobs SET status = ?2, message = ?3, updated_at_ms = ?4, finished_at_ms = ?5, "
                               "options = ?6, history = ?7 WHERE id = ?1"));
  WEFT_RETURN_IF_ERROR(st->Bind(1, id)
                           .Bind(2, j.status)
                           .Bind(3, j.message)
                           .Bind(4, j.updated_at_ms)
                           .Bind(5, j.finished_at_ms)
                           .Bind(6, j.options_json)
                           .Bind(7, j.history_json)
                           .Run());
  if (database().Changes() != 1) return Status::NotFound("job '" + j.id + "' does not exist");
  return Status::Ok();
}

Result<std::optional<JobRecord>> Store::GetJob(std::string_view job_id) {
  std::int64_t id = 0;
  if (!ParseId(job_id, &id)) return std::optional<JobRecord>();
  WEFT_ASSIGN_OR_RETURN(sql::Statement st,
                        database().Prepare(std::string("SELECT ") + kJobColumns + " FROM jobs WHERE id = ?1"));
  st.Bind(1, id);
  WEFT_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return std::optional<JobRecord>();
  return std::optional<JobRecord>(ReadJob(st));
}

Result<std::vector<JobRecord>> Store::ListJobs(std::string_view tenant, std::string_view cluster_id,
                                               std::int64_t limit) {
  WEFT_ASSIGN_OR_RETURN(
      sql::Statement st,
      database().Prepare(std::string("SELECT ") + kJobListColumns + " FROM jobs WHERE tenant = ?1" +
                         (cluster_id.empty() ? "" : " AND cluster_id = ?3") + " ORDER BY id DESC LIMIT ?2"));
  st.Bind(1, tenant).Bind(2, limit);
  if (!cluster_id.empty()) st.Bind(3, cluster_id);
  return Rows<JobRecord>(st, ReadJob);
}

Result<std::vector<JobRecord>> Store::ListUnfinishedJobs() {
  WEFT_ASSIGN_OR_RETURN(sql::Statement st, database().Prepare(std::string("SELECT ") + kJobColumns +
                                                              " FROM jobs WHERE finished_at_ms = 0 ORDER BY id"));
  return Rows<JobRecord>(st, ReadJob);
}

}  // namespace weft::store

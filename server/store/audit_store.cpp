// The audit log in the store (migration 6; the address column: migration 20). An entry is written in the
// transaction of the change it records, so a change is never committed
// without its entry. Nothing here updates or deletes one, and the table's
// triggers refuse it.
#include <cstdint>
#include <string>

#include "weft/server/store/database.hpp"
#include "weft/server/store/store.hpp"

namespace weft::store {
namespace {

constexpr const char* kAuditColumns =
    "id, at_ms, actor, actor_tenant, actor_role, op, tenant, target, cluster_id, cluster, job_id, outcome, detail, "
    "address";

AuditRecord ReadAudit(const sql::Statement& s) {
  AuditRecord a;
  a.id = s.Int(0);
  a.at_ms = s.Int(1);
  a.actor = s.Text(2);
  a.actor_tenant = s.Text(3);
  a.actor_role = s.Text(4);
  a.op = s.Text(5);
  a.tenant = s.Text(6);
  a.target = s.Text(7);
  a.cluster_id = s.Text(8);
  a.cluster = s.Text(9);
  a.job_id = s.Text(10);
  a.outcome = s.Text(11);
  a.detail_json = s.Text(12);
  a.address = s.Text(13);
  return a;
}

}  // namespace

Status Store::AppendAudit(const AuditRecord& a) {
  WEFT_ASSIGN_OR_RETURN(
      sql::Statement st,
      database().Prepare(
          "INSERT INTO audit_log (at_ms, actor, actor_tenant, actor_role, op, tenant, target, cluster_id, cluster, "
          "job_id, outcome, detail, address) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"));
  st.Bind(1, a.at_ms)
      .Bind(2, a.actor)
      .Bind(3, a.actor_tenant)
      .Bind(4, a.actor_role)
      .Bind(5, a.op)
      .Bind(6, a.tenant)
      .Bind(7, a.target)
      .Bind(8, a.cluster_id)
      .Bind(9, a.cluster)
      .Bind(10, a.job_id)
      .Bind(11, a.outcome)
      .Bind(12, a.detail_json.empty() ? std::string_view("{}") : std::string_view(a.detail_json))
      .Bind(13, a.address);
  return st.Run();
}

Result<std::vector<AuditRecord>> Store::ListAudit(const AuditQuery& q) {
  // Unset filters bind values that match everything, so there is one statement.
  WEFT_ASSIGN_OR_RETURN(
      sql::Statement st,
      database().Prepare(std::string("SELECT ") + kAuditColumns + " FROM (SELECT " + kAuditColumns +
                         " FROM audit_log WHERE at_ms >= ?1 AND (?2 = '' OR tenant = ?2) AND (?3 = '' OR actor = ?3) "
                         "AND (?4 = '' OR actor_tenant = ?4) AND (?5 = '' OR cluster_id = ?5 OR cluster = ?5) "
                         "AND id < ?7 ORDER BY id DESC LIMIT ?6) AS newest ORDER BY id"));
  st.Bind(1, q.since_ms).Bind(2, q.tenant).Bind(3, q.actor).Bind(4, q.actor_tenant).Bind(5, q.cluster).Bind(6, q.limit);
  st.Bind(7, q.before_id > 0 ? q.before_id : INT64_MAX);
  std::vector<AuditRecord> out;
  WEFT_RETURN_IF_ERROR(sql::ForEachRow(st, [&](sql::Statement& row) { out.push_back(ReadAudit(row)); }));
  return out;
}

}  // namespace weft::store

// Principals, tenants, users and host requests in the store (migration 5).
// All of it is small and read once at start (server/auth keeps it in memory),
// so statements are prepared per call.
#include <array>
#include <string>
#include <utility>

#include "server/store/sqlite.hpp"
#include "server/store/store.hpp"

namespace weft::store {
namespace {

template <typename Record, typename Read>
Result<std::vector<Record>> Select(sql::Database& db, std::string_view query, Read read) {
  Result<sql::Statement> st = db.Prepare(query);
  if (!st.ok()) return st.status();
  std::vector<Record> out;
  WEFT_RETURN_IF_ERROR(sql::ForEachRow(*st, [&](sql::Statement& row) { out.push_back(read(row)); }));
  return out;
}

// Sealed values are JSON strings of base64 after "enc:v1:": no quote or
// backslash inside, so the text can be rewritten without parsing it.
std::string Wipe(std::string text) {
  static const std::string kSealed = "\"enc:v1:";
  for (std::size_t at = text.find(kSealed); at != std::string::npos; at = text.find(kSealed, at + 1)) {
    const std::size_t end = text.find('"', at + kSealed.size());
    if (end == std::string::npos) break;
    text.replace(at, end - at + 1, "\"<wiped>\"");
  }
  return text;
}

// Rewrites `columns` of the rows of `table` matching `where` (bound to ?1) that hold a sealed value.
Status WipeRows(sql::Database& db, const std::string& table, const std::string& key_column,
                const std::vector<std::string>& columns, const std::string& where, std::string_view value) {
  std::string select = "SELECT " + key_column;
  std::string hit;
  for (const std::string& c : columns) {
    select += ", " + c;
    hit += (hit.empty() ? "" : " OR ") + c + " LIKE '%enc:v1:%'";
  }
  Result<sql::Statement> st = db.Prepare(select + " FROM " + table + " WHERE " + where + " AND (" + hit + ")");
  if (!st.ok()) return st.status();
  st->Bind(1, value);
  std::vector<std::vector<std::string>> rows;
  WEFT_RETURN_IF_ERROR(sql::ForEachRow(*st, [&](sql::Statement& r) {
    std::vector<std::string> row;
    for (std::size_t i = 0; i <= columns.size(); ++i) row.push_back(r.Text(static_cast<int>(i)));
    rows.push_back(std::move(row));
  }));
  for (const auto& row : rows) {
    std::string update = "UPDATE " + table + " SET ";
    for (std::size_t i = 0; i < columns.size(); ++i)
      update += (i ? ", " : "") + columns[i] + " = ?" + std::to_string(i + 3);
    Result<sql::Statement> up = db.Prepare(update + " WHERE " + where + " AND " + key_column + " = ?2");
    if (!up.ok()) return up.status();
    up->Bind(1, value).Bind(2, row[0]);
    for (std::size_t i = 0; i < columns.size(); ++i) up->Bind(static_cast<int>(i + 3), Wipe(row[i + 1]));
    WEFT_RETURN_IF_ERROR(up->Run());
  }
  return Status::Ok();
}

}  // namespace

Status Store::WipeSealedValues(std::string_view cluster_id) {
  WEFT_RETURN_IF_ERROR(WipeRows(database(), "tasks", "id", {"payload", "result"}, "cluster_id = ?1", cluster_id));
  WEFT_RETURN_IF_ERROR(WipeRows(database(), "nodes", "id", {"results"}, "cluster_id = ?1", cluster_id));
  return WipeRows(database(), "clusters", "id", {"spec", "previous"}, "id = ?1", cluster_id);
}

Status Store::RewriteProviderFields(std::string_view provider_type,
                                    const std::function<bool(nlohmann::json& fields)>& rewrite) {
  using json = nlohmann::json;
  const std::string like = "%" + std::string(provider_type) + "%";
  // Provider entities, every version.
  Result<sql::Statement> st = database().Prepare(
      "SELECT tenant, name, version, json FROM catalog_entities WHERE kind = 'provider' AND deleted = 0 AND json LIKE ?1");
  if (!st.ok()) return st.status();
  st->Bind(1, like);
  struct Row {
    std::string tenant, name;
    std::int64_t version;
    std::string text;
  };
  std::vector<Row> rows;
  WEFT_RETURN_IF_ERROR(sql::ForEachRow(*st, [&](sql::Statement& r) {
    rows.push_back({r.Text(0), r.Text(1), r.Int(2), r.Text(3)});
  }));
  for (Row& row : rows) {
    json entity = json::parse(row.text, nullptr, false);
    if (!entity.is_object() || entity.value("providertype", "") != provider_type || !entity.contains("provisioner") ||
        !rewrite(entity["provisioner"]))
      continue;
    Result<sql::Statement> up = database().Prepare(
        "UPDATE catalog_entities SET json = ?1 WHERE tenant = ?2 AND kind = 'provider' AND name = ?3 AND version = ?4");
    if (!up.ok()) return up.status();
    WEFT_RETURN_IF_ERROR(up->Bind(1, entity.dump()).Bind(2, row.tenant).Bind(3, row.name).Bind(4, row.version).Run());
  }
  // Cluster specs keep a copy of their provider's fields.
  Result<sql::Statement> cs =
      database().Prepare("SELECT id, spec, previous FROM clusters WHERE spec LIKE ?1 OR previous LIKE ?1");
  if (!cs.ok()) return cs.status();
  cs->Bind(1, like);
  std::vector<std::array<std::string, 3>> clusters;
  WEFT_RETURN_IF_ERROR(
      sql::ForEachRow(*cs, [&](sql::Statement& r) { clusters.push_back({r.Text(0), r.Text(1), r.Text(2)}); }));
  for (auto& [id, spec_text, previous_text] : clusters) {
    bool changed = false;
    auto fix = [&](json& spec) {
      if (spec.is_object() && spec.contains("provider") && spec["provider"].is_object() &&
          spec["provider"].value("type", "") == provider_type && spec["provider"].contains("fields"))
        changed = rewrite(spec["provider"]["fields"]) || changed;
    };
    json spec = json::parse(spec_text, nullptr, false);
    json previous = json::parse(previous_text.empty() ? "{}" : previous_text, nullptr, false);
    fix(spec);
    if (previous.is_object() && previous.contains("spec")) fix(previous["spec"]);
    if (!changed) continue;
    Result<sql::Statement> up = database().Prepare("UPDATE clusters SET spec = ?2, previous = ?3 WHERE id = ?1");
    if (!up.ok()) return up.status();
    WEFT_RETURN_IF_ERROR(
        up->Bind(1, id).Bind(2, spec.dump()).Bind(3, previous_text.empty() ? std::string() : previous.dump()).Run());
  }
  return Status::Ok();
}

Status Store::PutPrincipal(const PrincipalRecord& p) {
  Result<sql::Statement> st = database().Prepare(
      "INSERT OR REPLACE INTO principals (public_key, kind, tenant, user, role, host_id, created_by, created_at_ms, "
      "expires_at_ms, revoked_at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)");
  if (!st.ok()) return st.status();
  return st->Bind(1, p.public_key)
      .Bind(2, p.kind)
      .Bind(3, p.tenant)
      .Bind(4, p.user)
      .Bind(5, p.role)
      .Bind(6, p.host_id)
      .Bind(7, p.created_by)
      .Bind(8, p.created_at_ms)
      .Bind(9, p.expires_at_ms)
      .Bind(10, p.revoked_at_ms)
      .Run();
}

Result<std::vector<PrincipalRecord>> Store::ListPrincipals() {
  return Select<PrincipalRecord>(database(),
                                 "SELECT public_key, kind, tenant, user, role, host_id, created_by, created_at_ms, "
                                 "expires_at_ms, revoked_at_ms FROM principals ORDER BY created_at_ms, public_key",
                                 [](const sql::Statement& r) {
                                   return PrincipalRecord{r.Text(0), r.Text(1), r.Text(2), r.Text(3), r.Text(4),
                                                          r.Text(5), r.Text(6), r.Int(7),  r.Int(8),  r.Int(9)};
                                 });
}

Status Store::PutTenant(const TenantRecord& t) {
  Result<sql::Statement> st = database().Prepare(
      "INSERT OR REPLACE INTO tenants (name, created_at_ms, max_clusters, max_nodes, max_workers) "
      "VALUES (?1, ?2, ?3, ?4, ?5)");
  if (!st.ok()) return st.status();
  return st->Bind(1, t.name).Bind(2, t.created_at_ms).Bind(3, t.max_clusters).Bind(4, t.max_nodes).Bind(5, t.max_workers).Run();
}

Status Store::DeleteTenant(std::string_view name) {
  Result<sql::Statement> st = database().Prepare("DELETE FROM tenants WHERE name = ?1");
  if (!st.ok()) return st.status();
  return st->Bind(1, name).Run();
}

Result<std::vector<TenantRecord>> Store::ListTenants() {
  return Select<TenantRecord>(database(),
                              "SELECT name, created_at_ms, max_clusters, max_nodes, max_workers FROM tenants ORDER BY name",
                              [](const sql::Statement& r) {
                                return TenantRecord{r.Text(0), r.Int(1), r.Int(2), r.Int(3), r.Int(4)};
                              });
}

Status Store::PutUser(const UserRecord& u) {
  Result<sql::Statement> st =
      database().Prepare("INSERT OR REPLACE INTO users (tenant, name, role, created_at_ms) VALUES (?1, ?2, ?3, ?4)");
  if (!st.ok()) return st.status();
  return st->Bind(1, u.tenant).Bind(2, u.name).Bind(3, u.role).Bind(4, u.created_at_ms).Run();
}

Status Store::DeleteUser(std::string_view tenant, std::string_view name) {
  Result<sql::Statement> st = database().Prepare("DELETE FROM users WHERE tenant = ?1 AND name = ?2");
  if (!st.ok()) return st.status();
  return st->Bind(1, tenant).Bind(2, name).Run();
}

Result<std::vector<UserRecord>> Store::ListUsers() {
  return Select<UserRecord>(database(), "SELECT tenant, name, role, created_at_ms FROM users ORDER BY tenant, name",
                            [](const sql::Statement& r) { return UserRecord{r.Text(0), r.Text(1), r.Text(2), r.Int(3)}; });
}

Status Store::PutHostRequest(const HostRequestRecord& h) {
  Result<sql::Statement> st = database().Prepare(
      "INSERT OR REPLACE INTO host_requests (host_id, public_key, address, requested_at_ms) VALUES (?1, ?2, ?3, ?4)");
  if (!st.ok()) return st.status();
  return st->Bind(1, h.host_id).Bind(2, h.public_key).Bind(3, h.address).Bind(4, h.requested_at_ms).Run();
}

Status Store::DeleteHostRequestKey(std::string_view public_key) {
  Result<sql::Statement> st = database().Prepare("DELETE FROM host_requests WHERE public_key = ?1");
  if (!st.ok()) return st.status();
  return st->Bind(1, public_key).Run();
}

Status Store::DeleteHostRequest(std::string_view host_id) {
  Result<sql::Statement> st = database().Prepare("DELETE FROM host_requests WHERE host_id = ?1");
  if (!st.ok()) return st.status();
  return st->Bind(1, host_id).Run();
}

Result<std::vector<HostRequestRecord>> Store::ListHostRequests() {
  return Select<HostRequestRecord>(
      database(), "SELECT host_id, public_key, address, requested_at_ms FROM host_requests ORDER BY host_id, requested_at_ms",
      [](const sql::Statement& r) { return HostRequestRecord{r.Text(0), r.Text(1), r.Text(2), r.Int(3)}; });
}

Status Store::DeleteHost(std::string_view host_id) {
  Result<sql::Statement> st = database().Prepare("DELETE FROM hosts WHERE id = ?1");
  if (!st.ok()) return st.status();
  return st->Bind(1, host_id).Run();
}

}  // namespace weft::store

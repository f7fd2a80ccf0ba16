// Principals, tenants, users and host requests in the store (migration 5);
// passwords, sessions and API tokens (migrations 9 and 24).
// All of it is small and read once at start (server/auth keeps it in memory),
// so statements are prepared per call.
#include <array>
#include <initializer_list>
#include <optional>
#include <cctype>
#include <string>
#include <utility>

#include "weft/server/store/database.hpp"
#include "weft/server/store/store.hpp"

namespace weft::store {
namespace {

template <typename Record, typename Read>
Result<std::vector<Record>> Select(sql::Database& db, std::string_view query, Read read) {
  WEFT_ASSIGN_OR_RETURN(sql::Statement st, db.Prepare(query));
  std::vector<Record> out;
  WEFT_RETURN_IF_ERROR(sql::ForEachRow(st, [&](sql::Statement& row) { out.push_back(read(row)); }));
  return out;
}

// INSERT OR REPLACE in words both SQLite and PostgreSQL accept: the row
// `columns` (the first `keys` of them its primary key) from ?1, ?2, ...,
// replacing every other column of a row with that key.
std::string Upsert(std::string_view table, std::initializer_list<std::string_view> columns, std::size_t keys) {
  std::string names, values, key, set;
  std::size_t i = 0;
  for (std::string_view c : columns) {
    names += (i ? ", " : "") + std::string(c);
    values += (i ? ", ?" : "?") + std::to_string(i + 1);
    if (i < keys) {
      key += (i ? ", " : "") + std::string(c);
    } else {
      set += (set.empty() ? "" : ", ") + std::string(c) + " = excluded." + std::string(c);
    }
    ++i;
  }
  return "INSERT INTO " + std::string(table) + " (" + names + ") VALUES (" + values + ") ON CONFLICT (" + key +
         ") DO UPDATE SET " + set;
}

// Sealed values are JSON strings "enc:v<N>:" + base64: no quote or backslash
// inside, so the text can be rewritten without parsing it. (A string that only
// starts like one but holds other characters is left alone.)
std::string Wipe(std::string text) {
  static const std::string kSealed = "\"enc:v";
  auto base64 = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/' || c == '=' || c == ':';
  };
  for (std::size_t at = text.find(kSealed); at != std::string::npos; at = text.find(kSealed, at + 1)) {
    std::size_t end = at + kSealed.size();
    while (end < text.size() && base64(text[end])) ++end;
    if (end >= text.size() || text[end] != '"') continue;
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
    hit += (hit.empty() ? "" : " OR ") + c + " LIKE '%enc:v%'";
  }
  WEFT_ASSIGN_OR_RETURN(sql::Statement st,
                        db.Prepare(select + " FROM " + table + " WHERE " + where + " AND (" + hit + ")"));
  st.Bind(1, value);
  std::vector<std::vector<std::string>> rows;
  WEFT_RETURN_IF_ERROR(sql::ForEachRow(st, [&](sql::Statement& r) {
    std::vector<std::string> row;
    for (std::size_t i = 0; i <= columns.size(); ++i) row.push_back(r.Text(static_cast<int>(i)));
    rows.push_back(std::move(row));
  }));
  for (const auto& row : rows) {
    std::string update = "UPDATE " + table + " SET ";
    for (std::size_t i = 0; i < columns.size(); ++i)
      update += (i ? ", " : "") + columns[i] + " = ?" + std::to_string(i + 3);
    WEFT_ASSIGN_OR_RETURN(sql::Statement up, db.Prepare(update + " WHERE " + where + " AND " + key_column + " = ?2"));
    up.Bind(1, value).Bind(2, row[0]);
    for (std::size_t i = 0; i < columns.size(); ++i) up.Bind(static_cast<int>(i + 3), Wipe(row[i + 1]));
    WEFT_RETURN_IF_ERROR(up.Run());
  }
  return Status::Ok();
}

}  // namespace

Status Store::WipeSealedValues(std::string_view cluster_id) {
  // A task's payload is in its task_specs row, which names the cluster; its result in its tasks row.
  WEFT_RETURN_IF_ERROR(WipeRows(database(), "task_specs", "id", {"payload"}, "cluster_id = ?1", cluster_id));
  WEFT_RETURN_IF_ERROR(WipeRows(database(), "tasks", "id", {"result"},
                                "id IN (SELECT id FROM task_specs WHERE cluster_id = ?1)", cluster_id));
  WEFT_RETURN_IF_ERROR(WipeRows(database(), "nodes", "id", {"results"}, "cluster_id = ?1", cluster_id));
  return WipeRows(database(), "clusters", "id", {"spec", "previous"}, "id = ?1", cluster_id);
}

Status Store::RewriteCatalogEntities(std::string_view kind, std::string_view containing,
                                     const std::function<bool(const std::string& tenant, nlohmann::json& entity)>& rewrite) {
  using json = nlohmann::json;
  WEFT_ASSIGN_OR_RETURN(
      sql::Statement st,
      database().Prepare(
          "SELECT tenant, name, version, json FROM catalog_entities WHERE kind = ?1 AND deleted = 0 AND json LIKE ?2"));
  st.Bind(1, kind).Bind(2, "%" + std::string(containing) + "%");
  struct Row {
    std::string tenant, name;
    std::int64_t version;
    std::string text;
  };
  std::vector<Row> rows;
  WEFT_RETURN_IF_ERROR(sql::ForEachRow(st, [&](sql::Statement& r) {
    rows.push_back({r.Text(0), r.Text(1), r.Int(2), r.Text(3)});
  }));
  for (Row& row : rows) {
    json entity = json::parse(row.text, nullptr, false);
    if (!entity.is_object() || !rewrite(row.tenant, entity)) continue;
    CatalogMayHaveChanged();
    WEFT_ASSIGN_OR_RETURN(
        sql::Statement up,
        database().Prepare(
            "UPDATE catalog_entities SET json = ?1 WHERE tenant = ?2 AND kind = ?3 AND name = ?4 AND version = ?5"));
    WEFT_RETURN_IF_ERROR(
        up.Bind(1, entity.dump()).Bind(2, row.tenant).Bind(3, kind).Bind(4, row.name).Bind(5, row.version).Run());
  }
  return Status::Ok();
}

Status Store::RewriteClusterSpecs(std::string_view containing,
                                  const std::function<bool(const std::string& tenant, nlohmann::json& spec)>& rewrite) {
  using json = nlohmann::json;
  WEFT_ASSIGN_OR_RETURN(
      sql::Statement cs,
      database().Prepare("SELECT id, tenant, spec, previous FROM clusters WHERE spec LIKE ?1 OR previous LIKE ?1"));
  cs.Bind(1, "%" + std::string(containing) + "%");
  std::vector<std::array<std::string, 4>> clusters;
  WEFT_RETURN_IF_ERROR(sql::ForEachRow(cs, [&](sql::Statement& r) {
    clusters.push_back({r.Text(0), r.Text(1), r.Text(2), r.Text(3)});
  }));
  for (auto& [id, tenant, spec_text, previous_text] : clusters) {
    bool changed = false;
    json spec = json::parse(spec_text, nullptr, false);
    json previous = json::parse(previous_text.empty() ? "{}" : previous_text, nullptr, false);
    if (spec.is_object()) changed = rewrite(tenant, spec);
    if (previous.is_object() && previous.contains("spec") && previous["spec"].is_object())
      changed = rewrite(tenant, previous["spec"]) || changed;
    if (!changed) continue;
    WEFT_ASSIGN_OR_RETURN(sql::Statement up,
                          database().Prepare("UPDATE clusters SET spec = ?2, previous = ?3 WHERE id = ?1"));
    WEFT_RETURN_IF_ERROR(
        up.Bind(1, id).Bind(2, spec.dump()).Bind(3, previous_text.empty() ? std::string() : previous.dump()).Run());
    ForgetClusterSummaries();  // a row stored before its summary columns is summarized from its spec
  }
  return Status::Ok();
}

Status Store::PutPrincipal(const PrincipalRecord& p) {
  WEFT_ASSIGN_OR_RETURN(
      sql::Statement st,
      database().Prepare(Upsert("principals",
                                {"public_key", "kind", "tenant", "\"user\"", "role", "host_id", "created_by",
                                 "created_at_ms", "expires_at_ms", "revoked_at_ms"},
                                1)));
  return st.Bind(1, p.public_key)
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
                                 "SELECT public_key, kind, tenant, \"user\", role, host_id, created_by, created_at_ms, "
                                 "expires_at_ms, revoked_at_ms FROM principals ORDER BY created_at_ms, public_key",
                                 [](const sql::Statement& r) {
                                   return PrincipalRecord{r.Text(0), r.Text(1), r.Text(2), r.Text(3), r.Text(4),
                                                          r.Text(5), r.Text(6), r.Int(7),  r.Int(8),  r.Int(9)};
                                 });
}

Status Store::PutTenant(const TenantRecord& t) {
  WEFT_ASSIGN_OR_RETURN(
      sql::Statement st,
      database().Prepare(
          Upsert("tenants", {"name", "created_at_ms", "max_clusters", "max_nodes", "max_workers"}, 1)));
  return st.Bind(1, t.name)
      .Bind(2, t.created_at_ms)
      .Bind(3, t.max_clusters)
      .Bind(4, t.max_nodes)
      .Bind(5, t.max_workers)
      .Run();
}

Status Store::DeleteTenant(std::string_view name) {
  WEFT_ASSIGN_OR_RETURN(sql::Statement st, database().Prepare("DELETE FROM tenants WHERE name = ?1"));
  return st.Bind(1, name).Run();
}

Result<std::vector<TenantRecord>> Store::ListTenants() {
  return Select<TenantRecord>(database(),
                              "SELECT name, created_at_ms, max_clusters, max_nodes, max_workers FROM tenants ORDER BY name",
                              [](const sql::Statement& r) {
                                return TenantRecord{r.Text(0), r.Int(1), r.Int(2), r.Int(3), r.Int(4)};
                              });
}

Status Store::PutUser(const UserRecord& u) {
  WEFT_ASSIGN_OR_RETURN(
      sql::Statement st,
      database().Prepare(Upsert("users", {"tenant", "name", "role", "created_at_ms"}, 2)));
  return st.Bind(1, u.tenant).Bind(2, u.name).Bind(3, u.role).Bind(4, u.created_at_ms).Run();
}

Status Store::DeleteUser(std::string_view tenant, std::string_view name) {
  WEFT_ASSIGN_OR_RETURN(sql::Statement st, database().Prepare("DELETE FROM users WHERE tenant = ?1 AND name = ?2"));
  return st.Bind(1, tenant).Bind(2, name).Run();
}

Result<std::vector<UserRecord>> Store::ListUsers() {
  return Select<UserRecord>(database(), "SELECT tenant, name, role, created_at_ms FROM users ORDER BY tenant, name",
                            [](const sql::Statement& r) { return UserRecord{r.Text(0), r.Text(1), r.Text(2), r.Int(3)}; });
}

Status Store::PutHostRequest(const HostRequestRecord& h) {
  WEFT_ASSIGN_OR_RETURN(sql::Statement st,
                        database().Prepare(
                            Upsert("host_requests", {"public_key", "host_id", "address", "requested_at_ms"}, 1)));
  return st.Bind(1, h.public_key).Bind(2, h.host_id).Bind(3, h.address).Bind(4, h.requested_at_ms).Run();
}

Status Store::DeleteHostRequestKey(std::string_view public_key) {
  WEFT_ASSIGN_OR_RETURN(sql::Statement st, database().Prepare("DELETE FROM host_requests WHERE public_key = ?1"));
  return st.Bind(1, public_key).Run();
}

Status Store::DeleteHostRequest(std::string_view host_id) {
  WEFT_ASSIGN_OR_RETURN(sql::Statement st, database().Prepare("DELETE FROM host_requests WHERE host_id = ?1"));
  return st.Bind(1, host_id).Run();
}

Result<std::vector<HostRequestRecord>> Store::ListHostRequests() {
  return Select<HostRequestRecord>(
      database(), "SELECT host_id, public_key, address, requested_at_ms FROM host_requests ORDER BY host_id, requested_at_ms",
      [](const sql::Statement& r) { return HostRequestRecord{r.Text(0), r.Text(1), r.Text(2), r.Int(3)}; });
}

Status Store::DeleteHost(std::string_view host_id) {
  WEFT_ASSIGN_OR_RETURN(sql::Statement st, database().Prepare("DELETE FROM hosts WHERE id = ?1"));
  return st.Bind(1, host_id).Run();
}

Status Store::PutPassword(const PasswordRecord& p) {
  WEFT_ASSIGN_OR_RETURN(sql::Statement st,
                        database().Prepare(Upsert("user_passwords", {"tenant", "\"user\"", "hash", "set_at_ms"}, 2)));
  return st.Bind(1, p.tenant).Bind(2, p.user).Bind(3, p.hash).Bind(4, p.set_at_ms).Run();
}

Result<std::optional<PasswordRecord>> Store::GetPassword(std::string_view tenant, std::string_view user) {
  WEFT_ASSIGN_OR_RETURN(
      sql::Statement st,
      database().Prepare(
          "SELECT tenant, \"user\", hash, set_at_ms FROM user_passwords WHERE tenant = ?1 AND \"user\" = ?2"));
  st.Bind(1, tenant).Bind(2, user);
  std::optional<PasswordRecord> out;
  WEFT_RETURN_IF_ERROR(sql::ForEachRow(
      st, [&](sql::Statement& r) { out = PasswordRecord{r.Text(0), r.Text(1), r.Text(2), r.Int(3)}; }));
  return out;
}

Status Store::ForgetLogins(std::string_view tenant, std::string_view user) {
  for (const char* table : {"user_passwords", "sessions", "api_tokens"}) {
    WEFT_ASSIGN_OR_RETURN(sql::Statement st, database().Prepare(std::string("DELETE FROM ") + table +
                                                                 " WHERE tenant = ?1 AND (?2 = '' OR \"user\" = ?2)"));
    WEFT_RETURN_IF_ERROR(st.Bind(1, tenant).Bind(2, user).Run());
  }
  return Status::Ok();
}

Status Store::PutSession(const SessionRecord& s) {
  WEFT_ASSIGN_OR_RETURN(
      sql::Statement st,
      database().Prepare(Upsert("sessions",
                                {"id_hash", "tenant", "\"user\"", "csrf_salt", "gateway", "client_addr", "created_at_ms",
                                 "last_used_ms", "expires_at_ms", "token_hash"},
                                1)));
  return st.Bind(1, s.id_hash)
      .Bind(2, s.tenant)
      .Bind(3, s.user)
      .Bind(4, s.csrf_salt)
      .Bind(5, s.gateway)
      .Bind(6, s.client_addr)
      .Bind(7, s.created_at_ms)
      .Bind(8, s.last_used_ms)
      .Bind(9, s.expires_at_ms)
      .Bind(10, s.token_hash)
      .Run();
}

Status Store::DeleteSession(std::string_view id_hash) {
  WEFT_ASSIGN_OR_RETURN(sql::Statement st, database().Prepare("DELETE FROM sessions WHERE id_hash = ?1"));
  return st.Bind(1, id_hash).Run();
}

Result<std::vector<SessionRecord>> Store::ListSessions() {
  return Select<SessionRecord>(database(),
                               "SELECT id_hash, tenant, \"user\", csrf_salt, gateway, client_addr, created_at_ms, "
                               "last_used_ms, expires_at_ms, token_hash FROM sessions",
                               [](const sql::Statement& r) {
                                 return SessionRecord{r.Text(0), r.Text(1), r.Text(2), r.Text(3), r.Text(4),
                                                      r.Text(5), r.Int(6),  r.Int(7),  r.Int(8), r.Text(9)};
                               });
}

Status Store::PutApiToken(const ApiTokenRecord& t) {
  WEFT_ASSIGN_OR_RETURN(
      sql::Statement st,
      database().Prepare(Upsert("api_tokens",
                                {"id", "secret_hash", "tenant", "\"user\"", "name", "created_at_ms", "expires_at_ms",
                                 "revoked_at_ms"},
                                1)));
  return st.Bind(1, t.id)
      .Bind(2, t.secret_hash)
      .Bind(3, t.tenant)
      .Bind(4, t.user)
      .Bind(5, t.name)
      .Bind(6, t.created_at_ms)
      .Bind(7, t.expires_at_ms)
      .Bind(8, t.revoked_at_ms)
      .Run();
}

Result<std::vector<ApiTokenRecord>> Store::ListApiTokens() {
  return Select<ApiTokenRecord>(database(),
                                "SELECT id, secret_hash, tenant, \"user\", name, created_at_ms, expires_at_ms, "
                                "revoked_at_ms FROM api_tokens ORDER BY created_at_ms, id",
                                [](const sql::Statement& r) {
                                  return ApiTokenRecord{r.Text(0), r.Text(1), r.Text(2), r.Text(3),
                                                        r.Text(4), r.Int(5),  r.Int(6),  r.Int(7)};
                                });
}

}  // namespace weft::store

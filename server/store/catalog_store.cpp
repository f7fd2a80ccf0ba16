// Catalog entities in the store: table `catalog_entities` (migration 2), one row
// per version. Not the hot path, so statements are prepared per call.
#include <limits>
#include <utility>

#include "weft/server/store/database.hpp"
#include "weft/server/store/store.hpp"

namespace weft::store {
namespace {

constexpr const char* kColumns = "tenant, kind, name, version, json, created_at_ms, deleted";

CatalogEntityRecord ReadEntity(const sql::Statement& s) {
  CatalogEntityRecord r;
  r.tenant = s.Text(0);
  r.kind = s.Text(1);
  r.name = s.Text(2);
  r.version = s.Int(3);
  r.json = s.Text(4);
  r.created_at_ms = s.Int(5);
  r.deleted = s.Int(6) != 0;
  return r;
}

// The highest version of an entity, tombstones included; 0 when it never existed.
Result<std::int64_t> MaxVersion(sql::Database& db, std::string_view tenant, std::string_view kind,
                                std::string_view name) {
  WEFT_ASSIGN_OR_RETURN(
      sql::Statement st,
      db.Prepare(
          "SELECT COALESCE(MAX(version), 0) FROM catalog_entities WHERE tenant = ?1 AND kind = ?2 AND name = ?3"));
  st.Bind(1, tenant).Bind(2, kind).Bind(3, name);
  WEFT_ASSIGN_OR_RETURN(bool row, st.Step());
  return row ? st.Int(0) : 0;
}

Status Insert(sql::Database& db, std::string_view tenant, std::string_view kind, std::string_view name,
              std::int64_t version, std::string_view json, std::int64_t now_ms, bool deleted) {
  WEFT_ASSIGN_OR_RETURN(
      sql::Statement st,
      db.Prepare("INSERT INTO catalog_entities (tenant, kind, name, version, json, created_at_ms, deleted) "
                 "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"));
  st.Bind(1, tenant)
      .Bind(2, kind)
      .Bind(3, name)
      .Bind(4, version)
      .Bind(5, json)
      .Bind(6, now_ms)
      .Bind(7, static_cast<std::int64_t>(deleted ? 1 : 0));
  return st.Run();
}

}  // namespace

Result<std::int64_t> Store::PutCatalogEntity(std::string_view tenant, std::string_view kind, std::string_view name,
                                             std::string_view json, std::int64_t now_ms) {
  WEFT_ASSIGN_OR_RETURN(std::int64_t max, MaxVersion(database(), tenant, kind, name));
  const std::int64_t version = max + 1;
  CatalogMayHaveChanged();
  WEFT_RETURN_IF_ERROR(Insert(database(), tenant, kind, name, version, json, now_ms, false));
  return version;
}

Result<std::optional<CatalogEntityRecord>> Store::GetCatalogEntity(std::string_view tenant, std::string_view kind,
                                                                   std::string_view name,
                                                                   std::optional<std::int64_t> version) {
  const std::string cols = kColumns;
  WEFT_ASSIGN_OR_RETURN(sql::Statement st,
                        version
                            ? database().Prepare("SELECT " + cols +
                                                 " FROM catalog_entities WHERE tenant = ?1 AND kind = ?2 AND name = ?3 "
                                                 "AND version = ?4")
                            : database().Prepare("SELECT " + cols +
                                                 " FROM catalog_entities WHERE tenant = ?1 AND kind = ?2 AND name = ?3 "
                                                 "ORDER BY version DESC LIMIT 1"));
  st.Bind(1, tenant).Bind(2, kind).Bind(3, name);
  if (version) st.Bind(4, *version);
  WEFT_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return std::optional<CatalogEntityRecord>();
  CatalogEntityRecord r = ReadEntity(st);
  if (r.deleted) return std::optional<CatalogEntityRecord>();
  return std::optional<CatalogEntityRecord>(std::move(r));
}

Result<std::vector<CatalogEntityRecord>> Store::ListCatalogEntities(std::string_view tenant, std::string_view kind,
                                                                   std::string_view after, std::int64_t limit) {
  const std::string cols = kColumns;
  WEFT_ASSIGN_OR_RETURN(
      sql::Statement st,
      database().Prepare(
          "SELECT " + cols +
          " FROM catalog_entities AS c WHERE tenant = ?1 AND kind = ?2 AND name > ?3 AND version = (SELECT "
          "MAX(version) "
          "FROM catalog_entities WHERE tenant = c.tenant AND kind = c.kind AND name = c.name) AND deleted = 0 "
          "ORDER BY name LIMIT ?4"));
  // A std::string, so an empty `after` binds '' (a null data pointer would bind NULL, which matches nothing).
  const std::string after_name(after);
  // No limit is the largest one: PostgreSQL refuses a negative LIMIT.
  st.Bind(1, tenant).Bind(2, kind).Bind(3, after_name).Bind(4, limit < 0 ? std::numeric_limits<std::int64_t>::max() : limit);
  std::vector<CatalogEntityRecord> out;
  WEFT_RETURN_IF_ERROR(sql::ForEachRow(st, [&](sql::Statement& row) { out.push_back(ReadEntity(row)); }));
  return out;
}

Result<std::optional<std::int64_t>> Store::DeleteCatalogEntity(std::string_view tenant, std::string_view kind,
                                                                std::string_view name, std::int64_t now_ms) {
  WEFT_ASSIGN_OR_RETURN(std::optional<CatalogEntityRecord> latest, GetCatalogEntity(tenant, kind, name));
  if (!latest.has_value()) return std::optional<std::int64_t>();
  const std::int64_t version = latest->version + 1;
  CatalogMayHaveChanged();
  WEFT_RETURN_IF_ERROR(Insert(database(), tenant, kind, name, version, "", now_ms, true));
  return std::optional<std::int64_t>(version);
}

}  // namespace weft::store

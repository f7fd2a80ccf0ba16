// Plugin resources in the store (migration 22): the rows behind
// server/resources' DatabaseResourceStore. Statements are prepared per call
// (the Database keeps them for the next call of the same text).
//
// Content is binary: written in the backend's binary form (SQLite: a blob;
// PostgreSQL: bytea), read on PostgreSQL as hex (results come as text) and
// decoded here.
#include <algorithm>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "weft/server/store/database.hpp"
#include "weft/server/store/store.hpp"

namespace weft::store {
namespace {

constexpr const char* kVersionColumns =
    "tenant, type, name, version, state, size_bytes, digest, created_at_ms, created_by, activated_at_ms, "
    "retired_at_ms, content_id";

ResourceVersionRecord ReadVersion(const sql::Statement& r) {
  ResourceVersionRecord v;
  v.tenant = r.Text(0);
  v.type = r.Text(1);
  v.name = r.Text(2);
  v.version = r.Int(3);
  v.state = r.Text(4);
  v.size_bytes = r.Int(5);
  v.digest = r.Text(6);
  v.created_at_ms = r.Int(7);
  v.created_by = r.Text(8);
  v.activated_at_ms = r.Int(9);
  v.retired_at_ms = r.Int(10);
  v.content_id = r.Text(11);
  return v;
}

// By type, name and version in byte order, whatever the database's collation
// (a PostgreSQL database's locale orders "a-b" and "a_b" its own way).
void SortVersions(std::vector<ResourceVersionRecord>& rows) {
  std::sort(rows.begin(), rows.end(), [](const ResourceVersionRecord& a, const ResourceVersionRecord& b) {
    return std::tie(a.type, a.name, a.version) < std::tie(b.type, b.name, b.version);
  });
}

// The content column as bytes: SQLite gives the blob; PostgreSQL the hex of encode(bytes, 'hex').
std::string ContentColumn(sql::Dialect dialect) {
  return dialect == sql::Dialect::kPostgres ? "encode(bytes, 'hex')" : "bytes";
}

Result<std::string> ContentBytes(sql::Dialect dialect, std::string text) {
  if (dialect != sql::Dialect::kPostgres) return text;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (text.size() % 2 != 0) return Status::Internal("PostgreSQL returned resource content that is not hex");
  std::string out(text.size() / 2, '\0');
  for (std::size_t i = 0; i < out.size(); ++i) {
    const int hi = nibble(text[2 * i]), lo = nibble(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return Status::Internal("PostgreSQL returned resource content that is not hex");
    out[i] = static_cast<char>(hi * 16 + lo);
  }
  return out;
}

}  // namespace

Result<std::vector<ResourceVersionRecord>> Store::ListResourceVersions(std::string_view tenant, std::string_view type,
                                                                       std::string_view name) {
  std::string query = std::string("SELECT ") + kVersionColumns + " FROM resource_versions WHERE tenant = ?1";
  if (!type.empty()) query += " AND type = ?2";
  if (!type.empty() && !name.empty()) query += " AND name = ?3";
  query += " ORDER BY type, name, version";
  WEFT_ASSIGN_OR_RETURN(sql::Statement st, database().Prepare(query));
  st.Bind(1, tenant);
  if (!type.empty()) st.Bind(2, type);
  if (!type.empty() && !name.empty()) st.Bind(3, name);
  std::vector<ResourceVersionRecord> out;
  WEFT_RETURN_IF_ERROR(sql::ForEachRow(st, [&](sql::Statement& r) { out.push_back(ReadVersion(r)); }));
  SortVersions(out);
  return out;
}

Result<std::vector<ResourceVersionRecord>> Store::ListActiveResourceVersions(std::string_view tenant) {
  WEFT_ASSIGN_OR_RETURN(sql::Statement st,
                        database().Prepare(std::string("SELECT ") + kVersionColumns +
                                           " FROM resource_versions WHERE tenant = ?1 AND state = 'active' "
                                           "ORDER BY type, name"));
  st.Bind(1, tenant);
  std::vector<ResourceVersionRecord> out;
  WEFT_RETURN_IF_ERROR(sql::ForEachRow(st, [&](sql::Statement& r) { out.push_back(ReadVersion(r)); }));
  SortVersions(out);
  return out;
}

Result<bool> Store::ResourceExists(std::string_view tenant, std::string_view type, std::string_view name) {
  WEFT_ASSIGN_OR_RETURN(
      sql::Statement st,
      database().Prepare("SELECT COUNT(*) FROM resource_names WHERE tenant = ?1 AND type = ?2 AND name = ?3 AND "
                         "deleted = 0"));
  st.Bind(1, tenant).Bind(2, type).Bind(3, name);
  WEFT_ASSIGN_OR_RETURN(bool row, st.Step());
  return row && st.Int(0) > 0;
}

Result<std::int64_t> Store::TakeResourceVersion(std::string_view tenant, std::string_view type,
                                                std::string_view name) {
  WEFT_ASSIGN_OR_RETURN(sql::Statement st,
                        database().Prepare("INSERT INTO resource_names (tenant, type, name, next_version) "
                                           "VALUES (?1, ?2, ?3, 2) ON CONFLICT (tenant, type, name) DO UPDATE "
                                           "SET next_version = resource_names.next_version + 1, deleted = 0 "
                                           "RETURNING next_version - 1"));
  st.Bind(1, tenant).Bind(2, type).Bind(3, name);
  return st.RunReturningId();
}

Result<std::int64_t> Store::ResourceNextVersion(std::string_view tenant, std::string_view type,
                                                std::string_view name) {
  WEFT_ASSIGN_OR_RETURN(
      sql::Statement st,
      database().Prepare("SELECT next_version FROM resource_names WHERE tenant = ?1 AND type = ?2 AND name = ?3"));
  st.Bind(1, tenant).Bind(2, type).Bind(3, name);
  WEFT_ASSIGN_OR_RETURN(bool row, st.Step());
  return row ? st.Int(0) : std::int64_t{1};
}

Status Store::RaiseResourceVersion(std::string_view tenant, std::string_view type, std::string_view name,
                                   std::int64_t next_version) {
  WEFT_ASSIGN_OR_RETURN(sql::Statement st,
                        database().Prepare("INSERT INTO resource_names (tenant, type, name, next_version) "
                                           "VALUES (?1, ?2, ?3, ?4) ON CONFLICT (tenant, type, name) DO UPDATE "
                                           "SET next_version = CASE WHEN resource_names.next_version > ?4 "
                                           "THEN resource_names.next_version ELSE ?4 END, deleted = 0"));
  return st.Bind(1, tenant).Bind(2, type).Bind(3, name).Bind(4, next_version).Run();
}

Result<std::vector<std::pair<std::pair<std::string, std::string>, std::int64_t>>> Store::ListDeletedResourceNames(
    std::string_view tenant) {
  WEFT_ASSIGN_OR_RETURN(sql::Statement st,
                        database().Prepare("SELECT type, name, next_version FROM resource_names WHERE tenant = ?1 AND "
                                           "deleted != 0"));
  st.Bind(1, tenant);
  std::vector<std::pair<std::pair<std::string, std::string>, std::int64_t>> out;
  WEFT_RETURN_IF_ERROR(
      sql::ForEachRow(st, [&](sql::Statement& r) { out.push_back({{r.Text(0), r.Text(1)}, r.Int(2)}); }));
  std::sort(out.begin(), out.end());  // in byte order, whatever the database's collation
  return out;
}

Status Store::KeepResourceNumbering(std::string_view tenant, std::string_view type, std::string_view name,
                                    std::int64_t next_version) {
  WEFT_ASSIGN_OR_RETURN(sql::Statement st,
                        database().Prepare("INSERT INTO resource_names (tenant, type, name, next_version, deleted) "
                                           "VALUES (?1, ?2, ?3, ?4, 1) ON CONFLICT (tenant, type, name) DO UPDATE "
                                           "SET next_version = CASE WHEN resource_names.next_version > ?4 "
                                           "THEN resource_names.next_version ELSE ?4 END"));
  return st.Bind(1, tenant).Bind(2, type).Bind(3, name).Bind(4, next_version).Run();
}

Status Store::InsertResourceVersion(const ResourceVersionRecord& v) {
  WEFT_ASSIGN_OR_RETURN(sql::Statement st,
                        database().Prepare(std::string("INSERT INTO resource_versions (") + kVersionColumns +
                                           ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"));
  return st.Bind(1, v.tenant)
      .Bind(2, v.type)
      .Bind(3, v.name)
      .Bind(4, v.version)
      .Bind(5, v.state)
      .Bind(6, v.size_bytes)
      .Bind(7, v.digest)
      .Bind(8, v.created_at_ms)
      .Bind(9, v.created_by)
      .Bind(10, v.activated_at_ms)
      .Bind(11, v.retired_at_ms)
      .Bind(12, v.content_id)
      .Run();
}

Status Store::UpdateResourceVersion(const ResourceVersionRecord& v) {
  WEFT_ASSIGN_OR_RETURN(sql::Statement st,
                        database().Prepare("UPDATE resource_versions SET state = ?5, activated_at_ms = ?6, "
                                           "retired_at_ms = ?7 WHERE tenant = ?1 AND type = ?2 AND name = ?3 AND "
                                           "version = ?4"));
  WEFT_RETURN_IF_ERROR(st.Bind(1, v.tenant)
                           .Bind(2, v.type)
                           .Bind(3, v.name)
                           .Bind(4, v.version)
                           .Bind(5, v.state)
                           .Bind(6, v.activated_at_ms)
                           .Bind(7, v.retired_at_ms)
                           .Run());
  if (database().Changes() != 1)
    return Status::Internal("version " + std::to_string(v.version) + " of resource " + v.type + "/" + v.name +
                            " of tenant '" + v.tenant + "' is not in the store");
  return Status::Ok();
}

Status Store::DeleteResourceVersion(const ResourceVersionRecord& v) {
  WEFT_ASSIGN_OR_RETURN(sql::Statement content,
                        database().Prepare("DELETE FROM resource_content WHERE content_id IN (SELECT content_id "
                                           "FROM resource_versions WHERE tenant = ?1 AND type = ?2 AND name = ?3 "
                                           "AND version = ?4)"));
  WEFT_RETURN_IF_ERROR(content.Bind(1, v.tenant).Bind(2, v.type).Bind(3, v.name).Bind(4, v.version).Run());
  WEFT_ASSIGN_OR_RETURN(sql::Statement st,
                        database().Prepare("DELETE FROM resource_versions WHERE tenant = ?1 AND type = ?2 AND "
                                           "name = ?3 AND version = ?4"));
  return st.Bind(1, v.tenant).Bind(2, v.type).Bind(3, v.name).Bind(4, v.version).Run();
}

Status Store::DeleteResource(std::string_view tenant, std::string_view type, std::string_view name) {
  const char* const statements[] = {
      "DELETE FROM resource_content WHERE content_id IN (SELECT content_id FROM resource_versions WHERE "
      "tenant = ?1 AND type = ?2 AND name = ?3)",
      "DELETE FROM resource_content WHERE content_id IN (SELECT id FROM resource_uploads WHERE tenant = ?1 AND "
      "type = ?2 AND name = ?3 AND version = 0)",
      "DELETE FROM resource_versions WHERE tenant = ?1 AND type = ?2 AND name = ?3",
      "DELETE FROM resource_uploads WHERE tenant = ?1 AND type = ?2 AND name = ?3",
      // Its counter stays (migration 25): a later upload of the name numbers on from it.
      "UPDATE resource_names SET deleted = 1 WHERE tenant = ?1 AND type = ?2 AND name = ?3",
  };
  for (const char* text : statements) {
    WEFT_ASSIGN_OR_RETURN(sql::Statement st, database().Prepare(text));
    WEFT_RETURN_IF_ERROR(st.Bind(1, tenant).Bind(2, type).Bind(3, name).Run());
  }
  return Status::Ok();
}

Result<std::optional<ResourceUploadRecord>> Store::GetResourceUpload(std::string_view id) {
  WEFT_ASSIGN_OR_RETURN(sql::Statement st,
                        database().Prepare("SELECT id, tenant, type, name, received, touched_ms, version, digest "
                                           "FROM resource_uploads WHERE id = ?1"));
  st.Bind(1, id);
  WEFT_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return std::optional<ResourceUploadRecord>();
  ResourceUploadRecord u;
  u.id = st.Text(0);
  u.tenant = st.Text(1);
  u.type = st.Text(2);
  u.name = st.Text(3);
  u.received = st.Int(4);
  u.touched_ms = st.Int(5);
  u.version = st.Int(6);
  u.digest = st.Text(7);
  WEFT_RETURN_IF_ERROR(st.Run());
  return std::optional<ResourceUploadRecord>(std::move(u));
}

Status Store::PutResourceUpload(const ResourceUploadRecord& u) {
  WEFT_ASSIGN_OR_RETURN(
      sql::Statement st,
      database().Prepare("INSERT INTO resource_uploads (id, tenant, type, name, received, touched_ms, version, digest) "
                         "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (id) DO UPDATE SET "
                         "tenant = excluded.tenant, type = excluded.type, name = excluded.name, "
                         "received = excluded.received, touched_ms = excluded.touched_ms, "
                         "version = excluded.version, digest = excluded.digest"));
  return st.Bind(1, u.id)
      .Bind(2, u.tenant)
      .Bind(3, u.type)
      .Bind(4, u.name)
      .Bind(5, u.received)
      .Bind(6, u.touched_ms)
      .Bind(7, u.version)
      .Bind(8, u.digest)
      .Run();
}

Status Store::DeleteResourceUpload(std::string_view id) {
  WEFT_ASSIGN_OR_RETURN(sql::Statement content,
                        database().Prepare("DELETE FROM resource_content WHERE content_id IN (SELECT id FROM "
                                           "resource_uploads WHERE id = ?1 AND version = 0)"));
  WEFT_RETURN_IF_ERROR(content.Bind(1, id).Run());
  WEFT_ASSIGN_OR_RETURN(sql::Statement st, database().Prepare("DELETE FROM resource_uploads WHERE id = ?1"));
  return st.Bind(1, id).Run();
}

Result<std::int64_t> Store::PruneResourceUploads(std::int64_t cutoff_ms) {
  WEFT_ASSIGN_OR_RETURN(sql::Statement content,
                        database().Prepare("DELETE FROM resource_content WHERE content_id IN (SELECT id FROM "
                                           "resource_uploads WHERE touched_ms < ?1 AND version = 0)"));
  WEFT_RETURN_IF_ERROR(content.Bind(1, cutoff_ms).Run());
  WEFT_ASSIGN_OR_RETURN(sql::Statement st, database().Prepare("DELETE FROM resource_uploads WHERE touched_ms < ?1"));
  WEFT_RETURN_IF_ERROR(st.Bind(1, cutoff_ms).Run());
  return static_cast<std::int64_t>(database().Changes());
}

Status Store::AppendResourceContent(std::string_view content_id, std::int64_t start, std::string_view bytes) {
  WEFT_ASSIGN_OR_RETURN(sql::Statement st,
                        database().Prepare("INSERT INTO resource_content (content_id, start, bytes) VALUES (?1, ?2, ?3)"));
  while (!bytes.empty()) {
    const std::size_t n = std::min(bytes.size(), static_cast<std::size_t>(kResourceRowBytes));
    WEFT_RETURN_IF_ERROR(st.Reset().Bind(1, content_id).Bind(2, start).BindBinary(3, bytes.substr(0, n)).Run());
    start += static_cast<std::int64_t>(n);
    bytes.remove_prefix(n);
  }
  return Status::Ok();
}

Result<std::string> Store::ReadResourceContent(std::string_view content_id, std::int64_t offset,
                                               std::int64_t length) {
  const sql::Dialect dialect = database().dialect();
  // A row holds at most kResourceRowBytes: only one that starts after
  // offset - kResourceRowBytes can hold the byte at `offset`.
  WEFT_ASSIGN_OR_RETURN(sql::Statement st,
                        database().Prepare("SELECT start, " + ContentColumn(dialect) +
                                           " FROM resource_content WHERE content_id = ?1 AND start > ?2 AND "
                                           "start < ?3 ORDER BY start"));
  st.Bind(1, content_id).Bind(2, offset - kResourceRowBytes).Bind(3, offset + length);
  std::string out;
  std::int64_t at = offset;  // the next byte wanted
  Status status = Status::Ok();
  bool gap = false;
  WEFT_RETURN_IF_ERROR(sql::ForEachRow(st, [&](sql::Statement& r) {
    if (!status.ok() || gap) return;
    const std::int64_t start = r.Int(0);
    if (start > at) {
      gap = true;
      return;
    }
    Result<std::string> bytes = ContentBytes(dialect, r.Text(1));
    if (!bytes.ok()) {
      status = bytes.status();
      return;
    }
    const std::int64_t end = start + static_cast<std::int64_t>(bytes->size());
    if (end <= at) return;
    const std::int64_t take = std::min(end, offset + length) - at;
    out.append(*bytes, static_cast<std::size_t>(at - start), static_cast<std::size_t>(take));
    at += take;
  }));
  WEFT_RETURN_IF_ERROR(status);
  return out;
}

Result<std::int64_t> Store::VisitResourceContent(std::string_view content_id,
                                                 const std::function<void(std::string_view)>& visit) {
  const sql::Dialect dialect = database().dialect();
  // A few rows at a time: a whole version (up to a GiB) is never in memory at once.
  WEFT_ASSIGN_OR_RETURN(sql::Statement st,
                        database().Prepare("SELECT start, " + ContentColumn(dialect) +
                                           " FROM resource_content WHERE content_id = ?1 AND start >= ?2 "
                                           "ORDER BY start LIMIT 8"));
  std::int64_t at = 0;
  while (true) {
    st.Reset().Bind(1, content_id).Bind(2, at);
    std::int64_t rows = 0;
    bool gap = false;
    Status status = Status::Ok();
    WEFT_RETURN_IF_ERROR(sql::ForEachRow(st, [&](sql::Statement& r) {
      ++rows;
      if (!status.ok() || gap) return;
      if (r.Int(0) != at) {
        gap = true;
        return;
      }
      Result<std::string> bytes = ContentBytes(dialect, r.Text(1));
      if (!bytes.ok()) {
        status = bytes.status();
        return;
      }
      visit(*bytes);
      at += static_cast<std::int64_t>(bytes->size());
    }));
    WEFT_RETURN_IF_ERROR(status);
    if (gap || rows < 8) return at;
  }
}

}  // namespace weft::store

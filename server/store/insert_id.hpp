// An INSERT that gives the new row's id, for the Store's sources: PostgreSQL
// returns it (`RETURNING id`); SQLite reads last_insert_rowid() after the
// insert, since a RETURNING clause costs it a temporary table per run (more
// than a third of the instructions of a task's insert).
#pragma once

#include <cstdint>
#include <string>

#include "weft/server/store/database.hpp"

namespace weft::store::sql {

// The text of `insert` (an INSERT of one row, without RETURNING) for `dialect`.
inline std::string InsertGivingId(Dialect dialect, std::string insert) {
  if (dialect == Dialect::kPostgres) insert += " RETURNING id";
  return insert;
}

// Runs a statement prepared from InsertGivingId's text; the new row's id.
inline Result<std::int64_t> RunInsert(Database& db, Statement& insert) {
  if (db.dialect() == Dialect::kPostgres) return insert.RunReturningId();
  WEFT_RETURN_IF_ERROR(insert.Run());
  WEFT_ASSIGN_OR_RETURN(Statement id, db.Prepare("SELECT last_insert_rowid()"));
  WEFT_ASSIGN_OR_RETURN(bool row, id.Step());
  if (!row) return Status::Internal("last_insert_rowid() returned no row");
  return id.Int(0);
}

}  // namespace weft::store::sql

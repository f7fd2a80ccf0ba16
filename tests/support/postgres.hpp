// A throwaway PostgreSQL server for tests and benches: its own data directory
// (a copy of a template initdb made once per machine, under a lock), reached
// only through a unix socket in that directory (no TCP port to collide on),
// with fsync and full_page_writes off: a test's data need not survive a power
// loss (a commit is written, not flushed, as in weftd's SQLite store). As root it runs as the `postgres` user. The
// server dies with the thread that started it (PR_SET_PDEATHSIG), so a
// crashed test leaves none behind; the object stops it when it dies. Binaries
// from WEFT_PG_BIN, else /usr/lib/postgresql/15/bin.
//
// Tests run their store on PostgreSQL when WEFT_TEST_STORE=postgres (tests/
// CMakeLists.txt registers the store, queue, jobs and security binaries a
// second time that way); Weftd then starts one of these beside its data.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <string>

#include "weft/common/status.hpp"

namespace weft::testing {

// True when WEFT_TEST_STORE is "postgres".
bool TestStoreIsPostgres();

class PostgresServer {
 public:
  // Starts a server on `dir` (its data directory), which initdb fills first if it is missing.
  static Result<std::unique_ptr<PostgresServer>> Start(const std::filesystem::path& dir);
  // A streaming standby of `primary` on `dir` (pg_basebackup -R -X stream), started.
  static Result<std::unique_ptr<PostgresServer>> StartStandby(const PostgresServer& primary,
                                                              const std::filesystem::path& dir);
  // Stops the server at once (an immediate shutdown); the data stay in dir().
  ~PostgresServer();
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  // A libpq connection string for database `dbname`.
  std::string conninfo(const std::string& dbname = "postgres") const;
  const std::filesystem::path& dir() const { return dir_; }
  pid_t pid() const { return pid_; }
  // What the server logged, for failure messages.
  std::string Log() const;

  // A fast shutdown (clients are disconnected, as by `pg_ctl restart -m fast`), then a start on the same socket.
  Status Restart();
  // A standby becomes a primary on a new timeline (pg_promote, which waits until it is done).
  Status Promote();
  // Runs `sql` (without results) as the superuser; its error message when it fails.
  Status Exec(const std::string& sql, const std::string& dbname = "postgres") const;
  // The first column of the first row of `query`, as text.
  Result<std::string> Query(const std::string& query, const std::string& dbname = "postgres") const;

 private:
  explicit PostgresServer(std::filesystem::path dir) : dir_(std::move(dir)) {}
  Status Launch();
  void Halt(int sig);

  std::filesystem::path dir_;
  pid_t pid_ = -1;
};

}  // namespace weft::testing

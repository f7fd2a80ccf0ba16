#include "support/postgres.hpp"

#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "support/temp_dir.hpp"

namespace weft::testing {

namespace fs = std::filesystem;

namespace {

fs::path Binary(const std::string& tool) {
  const char* env = std::getenv("WEFT_PG_BIN");
  return fs::path(env && *env ? env : "/usr/lib/postgresql/15/bin") / tool;
}

// Who the server runs as: root may not run it, so root switches to `postgres`.
struct RunAs {
  bool switch_user = false;
  uid_t uid = 0;
  gid_t gid = 0;
};

Result<RunAs> ServerUser() {
  if (geteuid() != 0) return RunAs{};
  const passwd* pw = getpwnam("postgres");
  if (!pw)
    return Status::Unavailable("running as root and there is no `postgres` user to run PostgreSQL as; "
                               "install postgresql-15 (scripts/install-deps.sh)");
  return RunAs{true, pw->pw_uid, pw->pw_gid};
}

// Everything is built before fork(): between fork and exec the child only
// makes system calls.
Result<pid_t> Spawn(const std::vector<std::string>& args, const fs::path& log, const RunAs& as, bool die_with_parent) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const std::string log_path = log.string();
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return Status::Internal(std::string("fork failed: ") + std::strerror(errno));
  if (pid > 0) return pid;
  const int out = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (out >= 0) {
    dup2(out, STDOUT_FILENO);
    dup2(out, STDERR_FILENO);
  }
  const int in = open("/dev/null", O_RDONLY);
  if (in >= 0) dup2(in, STDIN_FILENO);
  syscall(SYS_close_range, 3U, ~0U, 0U);  // the test's sockets are not the server's
  if (as.switch_user && (setgroups(0, nullptr) != 0 || setgid(as.gid) != 0 || setuid(as.uid) != 0)) _exit(126);
  // After setuid, which clears it. SIGQUIT: PostgreSQL's immediate shutdown.
  if (die_with_parent && (prctl(PR_SET_PDEATHSIG, SIGQUIT) != 0 || getppid() != parent)) _exit(125);
  execv(argv[0], argv.data());
  _exit(127);
}

Status RunToEnd(const std::vector<std::string>& args, const fs::path& log, const RunAs& as) {
  WEFT_ASSIGN_OR_RETURN(const pid_t pid, Spawn(args, log, as, false));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::Ok();
  return Status::Internal(args[0] + " failed (wait status " + std::to_string(status) + "); its log ends:\n" +
                          ReadFile(log).substr(0, 3000));
}

void GiveTo(const fs::path& path, const RunAs& as) {
  if (as.switch_user && chown(path.c_str(), as.uid, as.gid) != 0) {
    // initdb says what it cannot write; nothing to add here.
  }
}

// initdb once per machine and user (a few seconds on a busy machine); every
// server starts from a copy. Made under a lock, published by a rename.
Result<fs::path> Template(const RunAs& as) {
  const fs::path base = fs::temp_directory_path() / ("weft-postgres-template-v2-" + std::to_string(geteuid()));
  const fs::path ready = base / "data";
  if (fs::exists(ready / "PG_VERSION")) return ready;
  std::error_code ec;
  fs::create_directories(base, ec);
  if (ec) return Status::Internal("cannot create " + base.string() + ": " + ec.message());
  fs::permissions(base, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec, ec);
  GiveTo(base, as);
  const int lock = open((base / "lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock < 0) return Status::Internal("cannot open " + (base / "lock").string() + ": " + std::strerror(errno));
  flock(lock, LOCK_EX);
  Status made = Status::Ok();
  if (!fs::exists(ready / "PG_VERSION")) {
    const fs::path building = base / ("data.building-" + std::to_string(getpid()));
    fs::remove_all(building, ec);
    made = RunToEnd({Binary("initdb").string(), "-D", building.string(), "-U", "postgres", "--auth=trust",
                     "--no-locale", "-E", "UTF8", "--no-sync", "--no-instructions", "--wal-segsize=1"},
                    base / ("initdb-" + std::to_string(getpid()) + ".log"), as);
    if (made.ok()) fs::rename(building, ready, ec);
    if (made.ok() && ec) made = Status::Internal("cannot rename " + building.string() + ": " + ec.message());
  }
  close(lock);  // and with it the lock
  WEFT_RETURN_IF_ERROR(made);
  return ready;
}

std::int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

bool TestStoreIsPostgres() {
  const char* store = std::getenv("WEFT_TEST_STORE");
  return store && std::string(store) == "postgres";
}

Result<std::unique_ptr<PostgresServer>> PostgresServer::Start(const fs::path& dir) {
  WEFT_ASSIGN_OR_RETURN(const RunAs as, ServerUser());
  std::error_code ec;
  // The server's user must get through the directories above its own (a
  // test's temp directories are private to root): it may pass, not list.
  fs::create_directories(dir.parent_path(), ec);
  const fs::path top = fs::temp_directory_path();
  for (fs::path up = fs::absolute(dir).parent_path(); as.switch_user && up != top && up != up.root_path();
       up = up.parent_path()) {
    const fs::perms perms = fs::status(up, ec).permissions();
    if (ec || (perms & fs::perms::others_exec) != fs::perms::none) continue;
    fs::permissions(up, fs::perms::group_exec | fs::perms::others_exec, fs::perm_options::add, ec);
  }
  if (!fs::exists(dir / "PG_VERSION")) {
    WEFT_ASSIGN_OR_RETURN(const fs::path from, Template(as));
    fs::remove_all(dir, ec);
    // cp -a keeps the owner (postgres) when root copies.
    WEFT_RETURN_IF_ERROR(
        RunToEnd({"/bin/cp", "-a", from.string(), dir.string()}, dir.parent_path() / "postgres-copy.log", RunAs{}));
  }
  std::unique_ptr<PostgresServer> server(new PostgresServer(dir));
  WEFT_RETURN_IF_ERROR(server->Launch());
  return server;
}

Result<std::unique_ptr<PostgresServer>> PostgresServer::StartStandby(const PostgresServer& primary,
                                                                    const fs::path& dir) {
  WEFT_ASSIGN_OR_RETURN(const RunAs as, ServerUser());
  std::error_code ec;
  fs::remove_all(dir, ec);
  // An empty data directory of the server's user, which pg_basebackup fills;
  // the ones above it the server's user may pass (as in Start).
  fs::create_directories(dir, ec);
  if (ec) return Status::Internal("cannot create " + dir.string() + ": " + ec.message());
  fs::permissions(dir, fs::perms::owner_all, ec);
  GiveTo(dir, as);
  const fs::path top = fs::temp_directory_path();
  for (fs::path up = fs::absolute(dir).parent_path(); as.switch_user && up != top && up != up.root_path();
       up = up.parent_path()) {
    fs::permissions(up, fs::perms::group_exec | fs::perms::others_exec, fs::perm_options::add, ec);
  }
  WEFT_RETURN_IF_ERROR(RunToEnd({Binary("pg_basebackup").string(), "-h", primary.dir().string(), "-p", "5432", "-U",
                                 "postgres", "-D", dir.string(), "-R", "-X", "stream", "--no-sync"},
                                dir.parent_path() / (dir.filename().string() + "-basebackup.log"), as));
  // The primary's socket is in its data directory: the copy of its lock file is not the standby's.
  fs::remove(dir / ".s.PGSQL.5432.lock", ec);
  std::unique_ptr<PostgresServer> server(new PostgresServer(dir));
  WEFT_RETURN_IF_ERROR(server->Launch());
  return server;
}

Status PostgresServer::Promote() {
  Result<std::string> promoted = Query("SELECT pg_promote(true, 60)");
  WEFT_RETURN_IF_ERROR(promoted.status());
  if (*promoted != "t") return Status::Internal("pg_promote did not promote the standby in " + dir_.string());
  return Status::Ok();
}

PostgresServer::~PostgresServer() { Halt(SIGQUIT); }

std::string PostgresServer::conninfo(const std::string& dbname) const {
  return "host=" + dir_.string() + " port=5432 user=postgres dbname=" + dbname;
}

std::string PostgresServer::Log() const { return ReadFile(dir_.parent_path() / (dir_.filename().string() + ".log")); }

Status PostgresServer::Launch() {
  WEFT_ASSIGN_OR_RETURN(const RunAs as, ServerUser());
  // No TCP at all: the socket in the data directory is private to this server.
  // A commit writes its WAL and does not wait for a flush: SQLite's WAL with
  // synchronous=NORMAL, what weftd's own store does, which the dispatch bench
  // compares it with (synchronous_commit=off left the write to the WAL writer,
  // woken by a signal per commit: weaker, and more of the server's CPU).
  const std::vector<std::string> args = {Binary("postgres").string(),
                                         "-D", dir_.string(), "-k", dir_.string(),
                                         "-c", "listen_addresses=",
                                         "-c", "fsync=off",
                                         "-c", "synchronous_commit=on",
                                         "-c", "full_page_writes=off",
                                         "-c", "max_connections=30",
                                         "-c", "shared_buffers=16MB"};
  const fs::path log = dir_.parent_path() / (dir_.filename().string() + ".log");
  WEFT_ASSIGN_OR_RETURN(pid_, Spawn(args, log, as, true));
  const std::string ping = conninfo();
  const std::int64_t deadline = NowMs() + 60'000;
  while (NowMs() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return Status::Internal("PostgreSQL exited during start-up; its log ends:\n" + Log().substr(0, 3000));
    }
    if (PQping(ping.c_str()) == PQPING_OK) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Status::Timeout("PostgreSQL did not accept connections within 60 s; its log:\n" + Log().substr(0, 3000));
}

void PostgresServer::Halt(int sig) {
  if (pid_ <= 0) return;
  kill(pid_, sig);
  const std::int64_t deadline = NowMs() + 30'000;
  int status = 0;
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (NowMs() >= deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  pid_ = -1;
}

Status PostgresServer::Restart() {
  Halt(SIGINT);
  return Launch();
}

namespace {

Result<std::string> RunSql(const std::string& conninfo, const std::string& sql, bool want_value) {
  PGconn* conn = PQconnectdb(conninfo.c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string message = PQerrorMessage(conn);
    PQfinish(conn);
    return Status::Unavailable("cannot connect to the test PostgreSQL: " + message);
  }
  PQsetNoticeProcessor(conn, [](void*, const char*) {}, nullptr);
  PGresult* r = PQexec(conn, sql.c_str());
  const ExecStatusType status = PQresultStatus(r);
  Result<std::string> out = std::string();
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    out = Status::Internal(PQresultErrorMessage(r));
  } else if (want_value) {
    if (PQntuples(r) < 1 || PQnfields(r) < 1)
      out = Status::NotFound("the query returned no row");
    else
      out = std::string(PQgetvalue(r, 0, 0));
  }
  PQclear(r);
  PQfinish(conn);
  return out;
}

}  // namespace

Status PostgresServer::Exec(const std::string& sql, const std::string& dbname) const {
  return RunSql(conninfo(dbname), sql, false).status();
}

Result<std::string> PostgresServer::Query(const std::string& query, const std::string& dbname) const {
  return RunSql(conninfo(dbname), query, true);
}

}  // namespace weft::testing

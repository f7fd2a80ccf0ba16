// weft::store::Checkpointer: SQLite's WAL checkpoints, moved off the thread
// that commits. Private to server/store/.
//
// With wal_autocheckpoint, the commit that crosses the threshold copies the
// WAL into the database file and fsyncs both on the committing thread,
// weftd's reactor: a stall of tens of milliseconds every few thousand
// commits, during which no request is answered. Instead:
//  * the writer's connection reports the WAL's size after every commit
//    (sqlite3_wal_hook, which replaces the autocheckpoint);
//  * past `background_pages`, a thread with a connection of its own runs a
//    PASSIVE checkpoint: it syncs the WAL and copies everything committed so
//    far while the writer goes on committing, then syncs the database file
//    itself. SQLite syncs the database file only when a checkpoint reaches
//    the WAL's end, which under steady commits only the writer's step below
//    does: left to it, that sync would write back every page of the round on
//    the writer's thread. (The thread's connection reads once when it opens:
//    a connection that has not opened the WAL checkpoints nothing.);
//  * the writer's first commit after such a round checkpoints the frames
//    committed meanwhile itself (the WAL's and the database's syncs of those,
//    and the sync of the WAL's new header), so that the whole WAL is in the
//    database and the next write starts the WAL again from its beginning.
//    Without this step a steady writer would never leave the checkpointer a
//    moment with nothing new, and the WAL would grow forever;
//  * past `limit_pages` the writer checkpoints on its own, whatever the
//    thread is doing (a guard; the thread should never fall that far behind).
//
// Thread-safety: Start() and the destructor run on the writer's thread, which
// must not use its connection meanwhile; stats() may be called from any thread.
// The writer's connection must outlive the Checkpointer.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "weft/server/store/store.hpp"
#include "weft/common/status.hpp"

struct sqlite3;

namespace weft::store {

class Checkpointer {
 public:
  // Installs the hook on `writer` (a connection to `path` in WAL mode) and
  // starts the thread, which opens `path` itself.
  static Result<std::unique_ptr<Checkpointer>> Start(sqlite3* writer, const std::string& path,
                                                     CheckpointOptions options);
  // Removes the hook and stops the thread (a round in progress finishes first).
  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  CheckpointStats stats() const;

 private:
  Checkpointer(sqlite3* writer, CheckpointOptions options) : writer_(writer), options_(options) {}
  static int Hook(void* self, sqlite3* db, const char* schema, int pages);
  void OnCommit(sqlite3* db, int pages);
  void Run(sqlite3* own);
  // The thread's work when asked: up to kCatchUpRounds PASSIVE checkpoints,
  // each followed by a sync of the database file, until what was committed
  // meanwhile is at most kFewPages (what is left, the writer's step syncs) or
  // the WAL has reached twice `background_pages`. True if a checkpoint ran.
  bool CatchUp(sqlite3* own);
  // fdatasync of the database file, through `own`'s handle on it.
  bool SyncDatabase(sqlite3* own);
  // A PASSIVE checkpoint of `db`; logs failures other than "busy" once per kind.
  // `backfilled` (may be null): the WAL frames now in the database file.
  bool Checkpoint(sqlite3* db, const char* who, int* backfilled = nullptr);

  static constexpr int kCatchUpRounds = 3;
  static constexpr int kFewPages = 64;

  sqlite3* writer_;
  CheckpointOptions options_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool wanted_ = false;   // guarded by mu_: the writer asked for a round
  bool stopping_ = false;  // guarded by mu_
  bool busy_ = false;                    // writer's thread only: a round is asked for, running, or unfinished
  std::atomic<bool> round_done_{false};  // a round ended; the writer finishes it at its next commit
  std::atomic<std::int64_t> background_rounds_{0};
  std::atomic<std::int64_t> writer_rounds_{0};
  std::atomic<std::int64_t> wal_pages_{0};
  std::atomic<int> last_logged_rc_{0};
};

}  // namespace weft::store

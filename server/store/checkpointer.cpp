#include "weft/server/store/checkpointer.hpp"

#include <sqlite3.h>

#include "weft/common/log.hpp"

namespace weft::store {

Result<std::unique_ptr<Checkpointer>> Checkpointer::Start(sqlite3* writer, const std::string& path,
                                                          CheckpointOptions options) {
  sqlite3* own = nullptr;
  // A connection of its own, used only by the thread (hence NOMUTEX).
  int rc = sqlite3_open_v2(path.c_str(), &own, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = "cannot open a second connection to " + path + " for checkpoints: " +
                          (own ? sqlite3_errmsg(own) : sqlite3_errstr(rc));
    if (own) (void)sqlite3_close(own);
    return Status::Internal(message);
  }
  // A connection checkpoints only once it has opened the WAL, which it does at
  // its first read: before that sqlite3_wal_checkpoint_v2 copies nothing and
  // still returns SQLITE_OK. The thread's connection reads nothing else.
  rc = sqlite3_exec(own, "SELECT 1 FROM sqlite_schema LIMIT 1", nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = "cannot read " + path + " for checkpoints: " + sqlite3_errmsg(own);
    (void)sqlite3_close(own);
    return Status::Internal(message);
  }
  std::unique_ptr<Checkpointer> c(new Checkpointer(writer, options));
  c->thread_ = std::thread([raw = c.get(), own]() { raw->Run(own); });
  // From here on no commit checkpoints by itself (this replaces wal_autocheckpoint).
  sqlite3_wal_hook(writer, &Checkpointer::Hook, c.get());
  return c;
}

Checkpointer::~Checkpointer() {
  sqlite3_wal_hook(writer_, nullptr, nullptr);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

CheckpointStats Checkpointer::stats() const {
  return CheckpointStats{background_rounds_.load(), writer_rounds_.load(), wal_pages_.load()};
}

int Checkpointer::Hook(void* self, sqlite3* db, const char* /*schema*/, int pages) {
  static_cast<Checkpointer*>(self)->OnCommit(db, pages);
  return SQLITE_OK;  // what the hook returns becomes the commit's result: a checkpoint's trouble is not the commit's
}

void Checkpointer::OnCommit(sqlite3* db, int pages) {
  wal_pages_.store(pages, std::memory_order_relaxed);
  if (round_done_.exchange(false)) {
    // Only what was committed while the thread worked is left: a few pages.
    if (Checkpoint(db, "the writer")) ++writer_rounds_;
    busy_ = false;
    return;
  }
  if (pages >= options_.limit_pages) {
    // Busy (the thread is at it) is fine: PASSIVE never waits.
    if (Checkpoint(db, "the writer")) ++writer_rounds_;
    return;
  }
  if (pages < options_.background_pages || busy_) return;
  busy_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    wanted_ = true;
  }
  cv_.notify_one();
}

void Checkpointer::Run(sqlite3* own) {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return wanted_ || stopping_; });
      if (stopping_) break;
      wanted_ = false;
    }
    if (CatchUp(own)) ++background_rounds_;
    round_done_ = true;
  }
  // Closing a connection that is not the last one checkpoints nothing.
  (void)sqlite3_close(own);
}

bool Checkpointer::CatchUp(sqlite3* own) {
  bool copied = false;
  for (int round = 0; round < kCatchUpRounds; ++round) {
    int backfilled = 0;
    if (!Checkpoint(own, "the checkpoint thread", &backfilled)) break;
    copied = true;
    // SQLite syncs the database file only when a checkpoint reaches the WAL's
    // end, which under steady commits only the writer's finishing step does:
    // that sync would write back every page this round copied, on the
    // writer's thread. Synced here, it finds only the few the step copies.
    if (!SyncDatabase(own)) break;
    // What was committed during the round is for the next one, unless it is
    // little, or the WAL, which cannot start over meanwhile, is already large.
    const std::int64_t wal = wal_pages_.load(std::memory_order_relaxed);
    if (backfilled < 0 || wal - backfilled <= kFewPages || wal >= 2 * std::int64_t{options_.background_pages}) break;
  }
  return copied;
}

bool Checkpointer::SyncDatabase(sqlite3* own) {
  // Through SQLite's own file: a descriptor of ours, once closed, would drop
  // the process's POSIX locks on the file, SQLite's included.
  sqlite3_file* file = nullptr;
  int rc = sqlite3_file_control(own, "main", SQLITE_FCNTL_FILE_POINTER, &file);
  if (rc == SQLITE_OK && (file == nullptr || file->pMethods == nullptr)) rc = SQLITE_MISUSE;
  if (rc == SQLITE_OK) rc = file->pMethods->xSync(file, SQLITE_SYNC_NORMAL);
  if (rc == SQLITE_OK) return true;
  if (last_logged_rc_.exchange(rc) != rc) {
    WEFT_LOG(kWarn, "store") << "the checkpoint thread cannot sync the database file: " << sqlite3_errstr(rc)
                             << "; the next commit syncs it instead (logged once per kind of failure)";
  }
  return false;
}

bool Checkpointer::Checkpoint(sqlite3* db, const char* who, int* backfilled) {
  const int rc = sqlite3_wal_checkpoint_v2(db, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, backfilled);
  if (rc == SQLITE_OK) return true;
  // Busy: another checkpoint is running (the other side's); the next one catches up.
  if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) return false;
  if (last_logged_rc_.exchange(rc) != rc) {
    WEFT_LOG(kWarn, "store") << "a WAL checkpoint by " << who << " failed: " << sqlite3_errstr(rc)
                             << "; the WAL keeps growing until one succeeds (logged once per kind of failure)";
  }
  return false;
}

}  // namespace weft::store

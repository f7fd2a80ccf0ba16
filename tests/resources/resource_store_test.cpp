// Both resource stores: FileResourceStore (files) and DatabaseResourceStore
// (rows of the SQL store: SQLite, or PostgreSQL with WEFT_TEST_STORE=postgres),
// each case run on both ("(files)" and "(database)" in its name): versions,
// stage/sync/recall/delete, chunked uploads and their digest, and what a crash
// at any point leaves behind.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <utime.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "weft/server/resources/database_resource_store.hpp"
#include "weft/server/resources/resource_store.hpp"
#include "support/temp_dir.hpp"
#include "support/test_store.hpp"
#include "weft/common/digest.hpp"

namespace {

namespace fs = std::filesystem;
using weft::Code;
using weft::ManualClock;
using weft::resources::DatabaseResourceStore;
using weft::resources::FileResourceStore;
using weft::resources::FileStoreOptions;
using weft::resources::ResourceStore;
using weft::resources::UploadChunk;
using weft::resources::VersionState;
using weft::testing::ReadFile;
using weft::testing::TempDir;
using weft::testing::WriteFile;

// sha256("abc"), the FIPS 180-2 test vector.
constexpr const char* kAbcDigest = "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

std::string Digest(const std::string& bytes) {
  auto d = weft::digest::Sha256Of(bytes);
  REQUIRE(d.ok());
  return *d;
}

enum class Kind { kFiles, kDatabase };

// A store under test; for the database kind with its SQL store (declared
// first, so that it goes last).
struct Opened {
  std::unique_ptr<weft::store::Store> sql;
  std::unique_ptr<ResourceStore> store;
  FileResourceStore* files = nullptr;  // the files kind's
  ResourceStore* operator->() const { return store.get(); }
  ResourceStore& operator*() const { return *store; }
};

// The files kind under <dir>/resources, the database kind in <dir>/weft.db
// (or the PostgreSQL database standing in for it).
Opened OpenStore(Kind kind, const TempDir& dir, const weft::Clock& clock, FileStoreOptions options = {}) {
  Opened o;
  if (kind == Kind::kFiles) {
    auto store = FileResourceStore::Open(dir / "resources", clock, options);
    INFO(store.status().ToString());
    REQUIRE(store.ok());
    o.files = store->get();
    o.store = std::move(*store);
    return o;
  }
  auto sql = weft::testing::OpenStore(dir / "weft.db");
  INFO(sql.status().ToString());
  REQUIRE(sql.ok());
  o.sql = std::move(*sql);
  o.store = std::make_unique<DatabaseResourceStore>(*o.sql, clock, options);
  return o;
}

// The version's content, read back through the store.
std::string Content(ResourceStore& store, const std::string& type, const std::string& name, std::int64_t version,
                    const std::string& tenant = "default") {
  auto c = store.Read(tenant, type, name, version, 0, 1 << 30);
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  CHECK(c->eof);
  return c->bytes;
}

// A whole file in one request; returns the new version.
std::int64_t Put(ResourceStore& store, const std::string& type, const std::string& name,
                 const std::string& bytes, const std::string& tenant = "default") {
  UploadChunk c;
  c.tenant = tenant;
  c.type = type;
  c.name = name;
  c.bytes = bytes;
  c.final = true;
  c.digest = Digest(bytes);
  c.user = "test";
  auto r = store.Upload(c);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  REQUIRE(r->version.has_value());
  return r->version->version;
}

VersionState StateOf(ResourceStore& store, const std::string& type, const std::string& name, std::int64_t v,
                     const std::string& tenant = "default") {
  auto info = store.Get(tenant, type, name, v);
  INFO(info.status().ToString());
  REQUIRE(info.ok());
  return info->state;
}

std::int64_t RealNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// A case run on both stores: NAME with "(files)" and "(database)"; the body
// is a function of `kind`.
#define RESOURCE_STORE_CASE(NAME, FN)                                                                    \
  static void FN(Kind kind);                                                                             \
  TEST_CASE("resource store (files): " NAME, "[resources][files]") { FN(Kind::kFiles); }                 \
  TEST_CASE("resource store (database): " NAME, "[resources][database]") { FN(Kind::kDatabase); }        \
  static void FN(Kind kind)

RESOURCE_STORE_CASE("every upload is a new inactive version with its size and SHA-256", EveryUploadIsAVersion) {
  TempDir dir;
  ManualClock clock(5000);
  auto store = OpenStore(kind, dir, clock);
  CHECK(Put(*store, "shell", "install.sh", "abc") == 1);
  CHECK(Put(*store, "shell", "install.sh", "abcd") == 2);
  auto v1 = store->Get("default", "shell", "install.sh", 1);
  REQUIRE(v1.ok());
  CHECK(v1->state == VersionState::kInactive);
  CHECK(v1->size_bytes == 3);
  CHECK(v1->digest == kAbcDigest);
  CHECK(v1->created_at_ms == 5000);
  CHECK(v1->created_by == "test");
  CHECK(Content(*store, "shell", "install.sh", 1) == "abc");
  CHECK(Content(*store, "shell", "install.sh", 2) == "abcd");
  if (store.files) CHECK(ReadFile(store.files->VersionPath("default", "shell", "install.sh", 2)) == "abcd");
  // Nothing is active until staged and synced.
  auto active = store->Active("default", {"shell"});
  REQUIRE(active.ok());
  CHECK(active->empty());
  auto missing = store->Get("default", "shell", "install.sh", 3);
  CHECK(missing.status().code() == Code::kNotFound);
  CHECK(missing.status().message().find("versions 1, 2") != std::string::npos);
}

RESOURCE_STORE_CASE("stage then sync activates, retiring the version that was active", StageThenSync) {
  TempDir dir;
  ManualClock clock;
  auto store = OpenStore(kind, dir, clock);
  Put(*store, "shell", "a.sh", "one");
  Put(*store, "shell", "a.sh", "two");
  Put(*store, "shell", "b.sh", "bee");
  Put(*store, "shell", "a.sh", "other tenant", "acme");

  REQUIRE(store->Stage("default", "shell", "a.sh", 1).ok());
  CHECK(StateOf(*store, "shell", "a.sh", 1) == VersionState::kStaged);
  CHECK(store->Active("default", {}).value().empty());  // staged is not active yet

  auto synced = store->Sync("default");
  REQUIRE(synced.ok());
  REQUIRE(synced->size() == 1);
  CHECK((*synced)[0].name == "a.sh");
  CHECK((*synced)[0].version == 1);
  CHECK(!(*synced)[0].retired.has_value());
  CHECK(StateOf(*store, "shell", "a.sh", 1) == VersionState::kActive);

  // Version 2 and b.sh staged together; one sync makes both active.
  REQUIRE(store->Stage("default", "shell", "a.sh", 2).ok());
  REQUIRE(store->Stage("default", "shell", "b.sh", 1).ok());
  CHECK(StateOf(*store, "shell", "a.sh", 1) == VersionState::kActive);  // until the sync
  synced = store->Sync("default");
  REQUIRE(synced.ok());
  REQUIRE(synced->size() == 2);
  CHECK((*synced)[0].retired == std::optional<std::int64_t>(1));
  CHECK(StateOf(*store, "shell", "a.sh", 1) == VersionState::kRetired);
  CHECK(StateOf(*store, "shell", "a.sh", 2) == VersionState::kActive);
  auto active = store->Active("default", {"shell"});
  REQUIRE(active.ok());
  REQUIRE(active->size() == 2);
  CHECK((*active)[0].name == "a.sh");
  CHECK((*active)[0].version == 2);
  CHECK((*active)[0].digest == Digest("two"));
  CHECK((*active)[0].size_bytes == 3);
  CHECK((*active)[1].name == "b.sh");
  CHECK(store->Active("default", {"other-type"}).value().empty());

  // The other tenant's sync was never asked for.
  CHECK(StateOf(*store, "shell", "a.sh", 1, "acme") == VersionState::kInactive);
  CHECK(store->Active("acme", {}).value().empty());

  // Staging an active version is refused; a sync with nothing staged changes nothing.
  CHECK(store->Stage("default", "shell", "a.sh", 2).status().code() == Code::kConflict);
  CHECK(store->Sync("default").value().empty());
}

RESOURCE_STORE_CASE("one staged version per resource, an older one can be staged back", OneStaged) {
  TempDir dir;
  ManualClock clock;
  auto store = OpenStore(kind, dir, clock);
  for (const char* s : {"1", "2", "3"}) Put(*store, "shell", "a.sh", s);
  REQUIRE(store->Stage("default", "shell", "a.sh", 1).ok());
  REQUIRE(store->Sync("default").ok());
  REQUIRE(store->Stage("default", "shell", "a.sh", 2).ok());
  REQUIRE(store->Stage("default", "shell", "a.sh", 3).ok());  // replaces the staging of 2
  CHECK(StateOf(*store, "shell", "a.sh", 2) == VersionState::kInactive);
  CHECK(StateOf(*store, "shell", "a.sh", 3) == VersionState::kStaged);
  REQUIRE(store->Stage("default", "shell", "a.sh", 3).ok());  // twice is the same
  REQUIRE(store->Sync("default").ok());
  CHECK(StateOf(*store, "shell", "a.sh", 3) == VersionState::kActive);
  // Roll back to 1: staged again, and once unstaged it is retired again, not inactive.
  REQUIRE(store->Stage("default", "shell", "a.sh", 1).ok());
  REQUIRE(store->Stage("default", "shell", "a.sh", 2).ok());
  CHECK(StateOf(*store, "shell", "a.sh", 1) == VersionState::kRetired);
  REQUIRE(store->Stage("default", "shell", "a.sh", 1).ok());
  REQUIRE(store->Sync("default").ok());
  CHECK(StateOf(*store, "shell", "a.sh", 1) == VersionState::kActive);
  CHECK(StateOf(*store, "shell", "a.sh", 3) == VersionState::kRetired);
}

RESOURCE_STORE_CASE("recall retires the active version and nothing replaces it", RecallRetires) {
  TempDir dir;
  ManualClock clock;
  auto store = OpenStore(kind, dir, clock);
  Put(*store, "shell", "a.sh", "x");
  CHECK(store->Recall("default", "shell", "a.sh").status().code() == Code::kConflict);  // nothing active
  REQUIRE(store->Stage("default", "shell", "a.sh", 1).ok());
  REQUIRE(store->Sync("default").ok());
  auto recalled = store->Recall("default", "shell", "a.sh");
  REQUIRE(recalled.ok());
  CHECK(recalled->version == 1);
  CHECK(StateOf(*store, "shell", "a.sh", 1) == VersionState::kRetired);
  CHECK(store->Active("default", {}).value().empty());
  CHECK(store->Recall("default", "nope", "a.sh").status().code() == Code::kNotFound);
}

RESOURCE_STORE_CASE("delete removes inactive versions, never the active one", DeleteRemovesInactive) {
  TempDir dir;
  ManualClock clock;
  auto store = OpenStore(kind, dir, clock);
  Put(*store, "shell", "a.sh", "1");
  Put(*store, "shell", "a.sh", "2");
  REQUIRE(store->Stage("default", "shell", "a.sh", 2).ok());
  REQUIRE(store->Sync("default").ok());
  const fs::path v1 = store.files ? store.files->VersionPath("default", "shell", "a.sh", 1) : fs::path();
  const fs::path v2 = store.files ? store.files->VersionPath("default", "shell", "a.sh", 2) : fs::path();

  auto refused = store->Delete("default", "shell", "a.sh", 2);
  CHECK(refused.status().code() == Code::kConflict);
  CHECK(refused.status().message().find("recall it first") != std::string::npos);
  auto whole = store->Delete("default", "shell", "a.sh", std::nullopt);
  CHECK(whole.status().code() == Code::kConflict);
  if (store.files) CHECK(fs::exists(v2));
  CHECK(Content(*store, "shell", "a.sh", 2) == "2");

  auto one = store->Delete("default", "shell", "a.sh", 1);
  REQUIRE(one.ok());
  CHECK(*one == std::vector<std::int64_t>{1});
  if (store.files) CHECK(!fs::exists(v1));
  CHECK(store->Get("default", "shell", "a.sh", 1).status().code() == Code::kNotFound);
  // Numbers are never reused.
  CHECK(Put(*store, "shell", "a.sh", "3") == 3);

  REQUIRE(store->Recall("default", "shell", "a.sh").ok());
  auto all = store->Delete("default", "shell", "a.sh", std::nullopt);
  REQUIRE(all.ok());
  CHECK(*all == std::vector<std::int64_t>{2, 3});
  if (store.files) CHECK(!fs::exists(v2));
  if (store.sql) {
    CHECK(weft::testing::QueryStoreInt(dir / "weft.db", "SELECT COUNT(*) FROM resource_content") == 0);
    CHECK(weft::testing::QueryStoreInt(dir / "weft.db", "SELECT COUNT(*) FROM resource_versions") == 0);
  }
  CHECK(store->List("default", "").value().empty());
  CHECK(store->Delete("default", "shell", "a.sh", std::nullopt).status().code() == Code::kNotFound);
}

// A number hosts have seen (they cache versions by number) never names other
// content: a resource deleted whole and uploaded again goes on after the
// highest version the name ever had, a version deleted from the top included,
// and a reopened store knows it too.
RESOURCE_STORE_CASE("a resource deleted whole and uploaded again numbers on after the highest version it ever had",
                    DeletedWholeNumbersOn) {
  TempDir dir;
  ManualClock clock(3000);
  {
    auto store = OpenStore(kind, dir, clock);
    Put(*store, "shell", "a.sh", "one");
    Put(*store, "shell", "a.sh", "two");
    REQUIRE(Put(*store, "shell", "a.sh", "three") == 3);
    Put(*store, "shell", "other.sh", "other");
    REQUIRE(store->Delete("default", "shell", "a.sh", 3).ok());
    auto all = store->Delete("default", "shell", "a.sh", std::nullopt);
    REQUIRE(all.ok());
    CHECK(*all == std::vector<std::int64_t>{1, 2});
    // Deleted is deleted: not listed, not found, not deleted twice.
    auto listed = store->List("default", "shell");
    REQUIRE(listed.ok());
    REQUIRE(listed->size() == 1);
    CHECK((*listed)[0].name == "other.sh");
    CHECK(store->Get("default", "shell", "a.sh", 1).status().code() == Code::kNotFound);
    CHECK(store->Delete("default", "shell", "a.sh", std::nullopt).status().code() == Code::kNotFound);
    if (store.files) {
      CHECK(!fs::exists(store.files->VersionPath("default", "shell", "a.sh", 1)));
      CHECK(!fs::exists(store.files->VersionPath("default", "shell", "a.sh", 2)));
    }

    CHECK(Put(*store, "shell", "a.sh", "four") == 4);
    CHECK(Content(*store, "shell", "a.sh", 4) == "four");
    auto again = store->List("default", "shell");
    REQUIRE(again.ok());
    REQUIRE(again->size() == 2);
    REQUIRE((*again)[0].versions.size() == 1);
    CHECK((*again)[0].versions[0].version == 4);
    REQUIRE(store->Delete("default", "shell", "a.sh", std::nullopt).ok());
  }
  // Reopened (weftd restarted): the counter of the deleted name is still there.
  auto store = OpenStore(kind, dir, clock);
  CHECK(store->Get("default", "shell", "a.sh", 4).status().code() == Code::kNotFound);
  CHECK(store->List("default", "shell").value().size() == 1);
  CHECK(Put(*store, "shell", "a.sh", "five") == 5);
  CHECK(Put(*store, "shell", "other.sh", "other again") == 2);
  CHECK(Put(*store, "shell", "new.sh", "new") == 1);
}

RESOURCE_STORE_CASE("a chunked upload checks offsets and the digest of the whole", ChunkedUpload) {
  TempDir dir;
  ManualClock clock;
  auto store = OpenStore(kind, dir, clock);
  const std::string content = "first chunk|second chunk|third";
  UploadChunk c;
  c.tenant = "default";
  c.type = "shell";
  c.name = "big.tar";
  c.bytes = std::string_view(content).substr(0, 12);
  auto first = store->Upload(c);
  REQUIRE(first.ok());
  CHECK(first->received_bytes == 12);
  CHECK(!first->version);
  CHECK(store->List("default", "").value().empty());  // no version while in progress

  c.upload_id = first->upload_id;
  c.offset = 5;  // not where the upload is
  c.bytes = std::string_view(content).substr(12, 13);
  auto wrong = store->Upload(c);
  CHECK(wrong.status().code() == Code::kConflict);
  CHECK(wrong.status().message().find("offset 12") != std::string::npos);

  c.offset = 12;
  auto second = store->Upload(c);
  REQUIRE(second.ok());
  CHECK(second->received_bytes == 25);

  c.offset = 25;
  c.bytes = std::string_view(content).substr(25);
  c.final = true;
  c.digest = Digest(content);
  c.size_bytes = static_cast<std::int64_t>(content.size());
  auto last = store->Upload(c);
  INFO(last.status().ToString());
  REQUIRE(last.ok());
  REQUIRE(last->version);
  CHECK(last->version->version == 1);
  CHECK(last->version->digest == Digest(content));
  CHECK(Content(*store, "shell", "big.tar", 1) == content);

  // The final chunk repeated (its reply was lost) gets the same version, not a second one.
  auto again = store->Upload(c);
  REQUIRE(again.ok());
  REQUIRE(again->version);
  CHECK(again->version->version == 1);
  CHECK(store->List("default", "shell").value().at(0).versions.size() == 1);

  // Reading it back in pieces.
  auto chunk = store->Read("default", "shell", "big.tar", 1, 0, 10);
  REQUIRE(chunk.ok());
  CHECK(chunk->bytes == content.substr(0, 10));
  CHECK(!chunk->eof);
  chunk = store->Read("default", "shell", "big.tar", 1, 10, 1000);
  REQUIRE(chunk.ok());
  CHECK(chunk->bytes == content.substr(10));
  CHECK(chunk->eof);
  CHECK(chunk->digest == Digest(content));
  CHECK(store->Read("default", "shell", "big.tar", 1, 1000, 10).status().code() == Code::kInvalid);
}

RESOURCE_STORE_CASE("a digest mismatch discards the upload", DigestMismatch) {
  TempDir dir;
  ManualClock clock;
  auto store = OpenStore(kind, dir, clock);
  UploadChunk c;
  c.tenant = "default";
  c.type = "shell";
  c.name = "a.sh";
  c.bytes = "what arrived";
  c.final = true;
  c.digest = Digest("what was sent");
  auto r = store->Upload(c);
  CHECK(r.status().code() == Code::kInvalid);
  CHECK(r.status().message().find("digest mismatch") != std::string::npos);
  CHECK(store->List("default", "").value().empty());
  // No part file (no content row) is left behind.
  if (store.files) {
    std::size_t files = 0;
    for (auto it = fs::recursive_directory_iterator(dir / "resources"); it != fs::recursive_directory_iterator(); ++it)
      files += it->is_regular_file() ? 1 : 0;
    CHECK(files == 0);
  } else {
    CHECK(weft::testing::QueryStoreInt(dir / "weft.db", "SELECT COUNT(*) FROM resource_content") == 0);
    CHECK(weft::testing::QueryStoreInt(dir / "weft.db", "SELECT COUNT(*) FROM resource_uploads") == 0);
  }

  c.digest = "";  // a final chunk without a digest
  CHECK(store->Upload(c).status().code() == Code::kInvalid);
  c.digest = "sha256:xyz";
  CHECK(store->Upload(c).status().code() == Code::kInvalid);
  // The size the client announced must match too.
  c.digest = Digest("what arrived");
  c.size_bytes = 100;
  CHECK(store->Upload(c).status().code() == Code::kInvalid);
  c.size_bytes.reset();
  CHECK(store->Upload(c).ok());
}

RESOURCE_STORE_CASE("an interrupted upload never becomes a version, and is cleaned up", InterruptedUpload) {
  TempDir dir;
  ManualClock clock;
  std::string upload_id;
  {
    auto store = OpenStore(kind, dir, clock);
    Put(*store, "shell", "a.sh", "kept");
    UploadChunk c;
    c.tenant = "default";
    c.type = "shell";
    c.name = "a.sh";
    c.bytes = "half of the second vers";
    auto r = store->Upload(c);
    REQUIRE(r.ok());
    upload_id = r->upload_id;
    // weftd dies here: no final chunk.
  }
  const fs::path part = dir / "resources" / "default" / "shell" / "a.sh" / "uploads" / (upload_id + ".part");
  if (kind == Kind::kFiles) REQUIRE(fs::exists(part));
  {
    // Reopened soon: the upload may still be resumed, but it is no version.
    auto store = OpenStore(kind, dir, clock);
    auto list = store->List("default", "shell");
    REQUIRE(list.ok());
    REQUIRE(list->size() == 1);
    CHECK(list->at(0).versions.size() == 1);
    if (store.files) CHECK(fs::exists(part));
    // It can be finished after the restart (the digest is computed from the file, or the rows).
    UploadChunk c;
    c.tenant = "default";
    c.type = "shell";
    c.name = "a.sh";
    c.upload_id = upload_id;
    c.offset = 23;
    c.bytes = "ion";
    c.final = true;
    c.digest = Digest("half of the second version");
    auto r = store->Upload(c);
    INFO(r.status().ToString());
    REQUIRE(r.ok());
    CHECK(r->version->version == 2);
  }
  {
    // Another upload abandoned: a day later it is gone.
    auto store = OpenStore(kind, dir, clock);
    UploadChunk c;
    c.tenant = "default";
    c.type = "shell";
    c.name = "a.sh";
    c.bytes = "never finished";
    auto r = store->Upload(c);
    REQUIRE(r.ok());
    upload_id = r->upload_id;
  }
  const fs::path abandoned = dir / "resources" / "default" / "shell" / "a.sh" / "uploads" / (upload_id + ".part");
  if (kind == Kind::kFiles) REQUIRE(fs::exists(abandoned));
  ManualClock later(RealNowMs() + 25LL * 3600 * 1000);
  auto store = OpenStore(kind, dir, later);
  if (store.files) CHECK(!fs::exists(abandoned));
  if (store.sql) {
    // The store's: removed when the next upload starts (by then a day later).
    const fs::path db = dir / "weft.db";
    CHECK(weft::testing::QueryStoreInt(db, "SELECT COUNT(*) FROM resource_uploads WHERE version = 0") == 1);
    CHECK(Put(*store, "shell", "b.sh", "next") == 1);
    CHECK(weft::testing::QueryStoreInt(db, "SELECT COUNT(*) FROM resource_uploads WHERE version = 0") == 0);
    CHECK(weft::testing::QueryStoreInt(db, "SELECT COUNT(*) FROM resource_content WHERE content_id = '" + upload_id +
                                               "'") == 0);
  }
  CHECK(store->List("default", "shell").value().at(0).versions.size() == 2);
  CHECK(Content(*store, "shell", "a.sh", 2) == "half of the second version");
}

TEST_CASE("resource store (files): a crash between the data and the manifest leaves no version",
          "[resources][files]") {
  const Kind kind = Kind::kFiles;
  TempDir dir;
  ManualClock clock;
  const fs::path res = dir / "resources" / "default" / "shell" / "a.sh";
  {
    auto store = OpenStore(kind, dir, clock);
    Put(*store, "shell", "a.sh", "one");
  }
  // What a crash after the rename of the data and before the manifest leaves:
  // v2 without an entry, and a half-written temporary manifest.
  WriteFile(res / "v2", "orphan");
  WriteFile(res / ".manifest.json.tmp.1234", "{\"format\":1,\"vers");
  auto store = OpenStore(kind, dir, clock);
  CHECK(!fs::exists(res / "v2"));
  CHECK(!fs::exists(res / ".manifest.json.tmp.1234"));
  CHECK(store->Get("default", "shell", "a.sh", 2).status().code() == Code::kNotFound);
  CHECK(Put(*store, "shell", "a.sh", "two") == 2);
  CHECK(ReadFile(res / "v2") == "two");
}

RESOURCE_STORE_CASE("versions and states survive a reopen", SurviveReopen) {
  TempDir dir;
  ManualClock clock;
  {
    auto store = OpenStore(kind, dir, clock);
    Put(*store, "shell", "a.sh", "1");
    Put(*store, "shell", "a.sh", "2");
    Put(*store, "lua-plugin", "hello.lua", "return {}", "tenant with/slash");
    REQUIRE(store->Stage("default", "shell", "a.sh", 1).ok());
    REQUIRE(store->Sync("default").ok());
    REQUIRE(store->Stage("default", "shell", "a.sh", 2).ok());
  }
  auto store = OpenStore(kind, dir, clock);
  CHECK(StateOf(*store, "shell", "a.sh", 1) == VersionState::kActive);
  CHECK(StateOf(*store, "shell", "a.sh", 2) == VersionState::kStaged);
  CHECK(StateOf(*store, "lua-plugin", "hello.lua", 1, "tenant with/slash") == VersionState::kInactive);
  // The odd tenant name became one directory, not a path.
  if (store.files) CHECK(fs::exists(dir / "resources" / "tenant%20with%2Fslash" / "lua-plugin" / "hello.lua" / "v1"));
  CHECK(Content(*store, "lua-plugin", "hello.lua", 1, "tenant with/slash") == "return {}");
  CHECK(Put(*store, "shell", "a.sh", "3") == 3);
}

RESOURCE_STORE_CASE("names that are not plain file names are refused", NamesRefused) {
  TempDir dir;
  ManualClock clock;
  auto store = OpenStore(kind, dir, clock);
  UploadChunk c;
  c.tenant = "default";
  c.bytes = "x";
  c.final = true;
  c.digest = Digest("x");
  for (auto [type, name] : {std::pair{"shell", "../escape"}, std::pair{"shell", "a/b"}, std::pair{"shell", ".hidden"},
                            std::pair{"shell", ""}, std::pair{"Shell", "a"}, std::pair{"../x", "a"},
                            std::pair{"lua-plugin", "not-lua.sh"}}) {
    c.type = type;
    c.name = name;
    INFO(type << "/" << name);
    CHECK(store->Upload(c).status().code() == Code::kInvalid);
  }
  CHECK(!fs::exists(dir / "escape"));
  c.type = "lua-plugin";
  c.name = "hello.lua";
  CHECK(store->Upload(c).ok());
}

RESOURCE_STORE_CASE("a version larger than the limit is refused", TooLarge) {
  TempDir dir;
  ManualClock clock;
  weft::resources::FileStoreOptions options;
  options.max_size_bytes = 10;
  Opened opened = OpenStore(kind, dir, clock, options);
  auto& store = *opened;
  UploadChunk c;
  c.tenant = "default";
  c.type = "shell";
  c.name = "a.sh";
  c.bytes = "123456";
  auto first = store.Upload(c);
  REQUIRE(first.ok());
  c.upload_id = first->upload_id;
  c.offset = 6;
  auto over = store.Upload(c);
  CHECK(over.status().code() == Code::kTooLarge);
  // The upload is gone with it.
  c.offset = 6;
  c.bytes = "1";
  CHECK(store.Upload(c).status().code() == Code::kNotFound);
}

TEST_CASE("resource store (database): content is kept in rows of at most 1 MiB and read back by offset",
          "[resources][database]") {
  TempDir dir;
  ManualClock clock;
  auto store = OpenStore(Kind::kDatabase, dir, clock);
  const std::int64_t row = weft::store::Store::kResourceRowBytes;
  std::string content(static_cast<std::size_t>(row * 5 / 2 + 7), '\0');
  for (std::size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>((i * 131 + i / 997) & 0xFF);
  // Two chunks of 1.5 MiB and 1 MiB + 7 bytes: four rows.
  const std::size_t first_size = static_cast<std::size_t>(row * 3 / 2);
  UploadChunk c;
  c.tenant = "default";
  c.type = "shell";
  c.name = "big.tar";
  c.bytes = std::string_view(content).substr(0, first_size);
  auto first = store->Upload(c);
  REQUIRE(first.ok());
  c.upload_id = first->upload_id;
  c.offset = static_cast<std::int64_t>(first_size);
  c.bytes = std::string_view(content).substr(first_size);
  c.final = true;
  c.digest = Digest(content);
  auto last = store->Upload(c);
  INFO(last.status().ToString());
  REQUIRE(last.ok());
  REQUIRE(last->version);
  CHECK(last->version->size_bytes == static_cast<std::int64_t>(content.size()));
  const fs::path db = dir / "weft.db";
  CHECK(weft::testing::QueryStoreInt(db, "SELECT COUNT(*) FROM resource_content") == 4);
  CHECK(weft::testing::QueryStoreInt(db, "SELECT MAX(length(bytes)) FROM resource_content") == row);
  // Reads across the rows' edges, and the whole.
  for (auto [offset, length] : {std::pair<std::int64_t, std::int64_t>{0, 10}, {row - 3, 6}, {row * 7 / 5, row / 3},
                                {first_size - 1, row + 2}, {row * 5 / 2, 100}}) {
    INFO("offset " << offset << " length " << length);
    auto chunk = store->Read("default", "shell", "big.tar", 1, offset, length);
    REQUIRE(chunk.ok());
    CHECK(chunk->bytes == content.substr(static_cast<std::size_t>(offset), static_cast<std::size_t>(length)));
    CHECK(chunk->eof == (offset + static_cast<std::int64_t>(chunk->bytes.size()) ==
                         static_cast<std::int64_t>(content.size())));
  }
  CHECK(Content(*store, "shell", "big.tar", 1) == content);
}

TEST_CASE("resource store (database): two weftd on one database see the same resources, and an upload begun on one "
          "is finished on the other",
          "[resources][database]") {
  TempDir dir;
  ManualClock clock(7000);
  auto first = OpenStore(Kind::kDatabase, dir, clock);
  auto second = OpenStore(Kind::kDatabase, dir, clock);
  Put(*first, "lua-plugin", "hello.lua", "return {}");
  REQUIRE(first->Stage("default", "lua-plugin", "hello.lua", 1).ok());
  REQUIRE(first->Sync("default").ok());
  auto active = second->Active("default", {"lua-plugin"});
  REQUIRE(active.ok());
  REQUIRE(active->size() == 1);
  CHECK((*active)[0].digest == Digest("return {}"));
  CHECK(Content(*second, "lua-plugin", "hello.lua", 1) == "return {}");

  UploadChunk c;
  c.tenant = "default";
  c.type = "shell";
  c.name = "a.sh";
  c.bytes = "begun on the first, ";
  auto begun = first->Upload(c);
  REQUIRE(begun.ok());
  c.upload_id = begun->upload_id;
  c.offset = begun->received_bytes;
  c.bytes = "finished on the second";
  c.final = true;
  c.digest = Digest("begun on the first, finished on the second");
  auto finished = second->Upload(c);
  INFO(finished.status().ToString());
  REQUIRE(finished.ok());
  REQUIRE(finished->version);
  CHECK(finished->version->version == 1);
  CHECK(Content(*first, "shell", "a.sh", 1) == "begun on the first, finished on the second");
  // The first one's digest of the upload was left behind: a repeated final
  // chunk there gets the version the second one made.
  auto repeated = first->Upload(c);
  REQUIRE(repeated.ok());
  REQUIRE(repeated->version);
  CHECK(repeated->version->version == 1);
}

TEST_CASE("resource store (database): in the caller's transaction a rollback undoes the change, and the active "
          "versions kept in memory are forgotten",
          "[resources][database]") {
  TempDir dir;
  ManualClock clock;
  auto store = OpenStore(Kind::kDatabase, dir, clock);
  Put(*store, "shell", "a.sh", "one");
  REQUIRE(store.sql->Begin().ok());
  REQUIRE(store->Stage("default", "shell", "a.sh", 1).ok());
  REQUIRE(store->Sync("default").ok());
  CHECK(store->Active("default", {"shell"}).value().size() == 1);  // seen inside the transaction
  Put(*store, "shell", "a.sh", "two");
  REQUIRE(store.sql->Rollback().ok());
  // What weftd does after a rollback.
  store->ForgetCached();
  CHECK(store->Active("default", {"shell"}).value().empty());
  CHECK(StateOf(*store, "shell", "a.sh", 1) == VersionState::kInactive);
  CHECK(store->Get("default", "shell", "a.sh", 2).status().code() == Code::kNotFound);
  // The number the rolled-back upload took is free again: nothing was ever given it.
  CHECK(Put(*store, "shell", "a.sh", "two") == 2);
}

TEST_CASE("resource store (database): the files of a FileResourceStore are imported once, with their versions and "
          "states",
          "[resources][database]") {
  TempDir dir;
  ManualClock clock(9000);
  {
    auto files = OpenStore(Kind::kFiles, dir, clock);
    Put(*files, "shell", "a.sh", "one");
    Put(*files, "shell", "a.sh", "two");
    Put(*files, "lua-plugin", "hello.lua", "return {}", "acme");
    REQUIRE(files->Delete("default", "shell", "a.sh", 1).ok());
    Put(*files, "shell", "a.sh", "three");
    REQUIRE(files->Stage("default", "shell", "a.sh", 2).ok());
    REQUIRE(files->Sync("default").ok());
    REQUIRE(files->Stage("default", "shell", "a.sh", 3).ok());
    REQUIRE(files->Stage("acme", "lua-plugin", "hello.lua", 1).ok());
    REQUIRE(files->Sync("acme").ok());
    Put(*files, "shell", "kept.sh", "the files' kept.sh");
  }
  auto opened = OpenStore(Kind::kDatabase, dir, clock);
  auto& store = static_cast<DatabaseResourceStore&>(*opened);
  // The database has its own kept.sh: not replaced.
  Put(store, "shell", "kept.sh", "the database's kept.sh");

  auto imported = store.ImportFiles(dir / "resources");
  INFO(imported.status().ToString());
  REQUIRE(imported.ok());
  CHECK(imported->imported.size() == 2);
  REQUIRE(imported->skipped.size() == 1);
  CHECK(imported->skipped[0].find("shell/kept.sh") != std::string::npos);
  CHECK(imported->moved_to == dir / "resources.imported");
  CHECK(!fs::exists(dir / "resources"));
  CHECK(fs::exists(dir / "resources.imported" / "default" / "shell" / "a.sh" / "v2"));

  CHECK(store.Get("default", "shell", "a.sh", 1).status().code() == Code::kNotFound);
  CHECK(StateOf(store, "shell", "a.sh", 2) == VersionState::kActive);
  CHECK(StateOf(store, "shell", "a.sh", 3) == VersionState::kStaged);
  CHECK(store.Get("default", "shell", "a.sh", 2).value().created_at_ms == 9000);
  CHECK(Content(store, "shell", "a.sh", 3) == "three");
  CHECK(Content(store, "lua-plugin", "hello.lua", 1, "acme") == "return {}");
  auto active = store.Active("acme", {});
  REQUIRE(active.ok());
  REQUIRE(active->size() == 1);
  CHECK((*active)[0].digest == Digest("return {}"));
  CHECK(Content(store, "shell", "kept.sh", 1) == "the database's kept.sh");
  CHECK(Put(store, "shell", "a.sh", "four") == 4);

  // Once: the directory is gone, a second import has nothing to do.
  auto again = store.ImportFiles(dir / "resources");
  REQUIRE(again.ok());
  CHECK(again->imported.empty());
  CHECK(again->moved_to.empty());
}

// A version deleted from the top keeps its number: an export to files and an
// import back go on after the highest number the other side ever gave, not
// after the highest it still has, so no new version reuses a number that
// hosts, tasks or the audit log already saw with other content.
TEST_CASE("resource store (database): an export to files and an import back never reuse a version number deleted "
          "from the top",
          "[resources][database]") {
  ManualClock clock(9000);
  {
    TempDir dir;
    auto opened = OpenStore(Kind::kDatabase, dir, clock);
    auto& store = static_cast<DatabaseResourceStore&>(*opened);
    REQUIRE(opened.sql->PutTenant({.name = "default"}).ok());  // an export walks the store's tenants
    Put(store, "shell", "a.sh", "one");
    Put(store, "shell", "a.sh", "two");
    REQUIRE(Put(store, "shell", "a.sh", "three") == 3);
    REQUIRE(store.Delete("default", "shell", "a.sh", 3).ok());
    auto files = FileResourceStore::Open(dir / "exported", clock);
    REQUIRE(files.ok());
    auto exported = store.ExportFiles(**files);
    INFO(exported.status().ToString());
    REQUIRE(exported.ok());
    REQUIRE(exported->exported.size() == 1);
    CHECK(Put(**files, "shell", "a.sh", "four") == 4);
    // And after the files are read again.
    files->reset();
    auto reopened = FileResourceStore::Open(dir / "exported", clock);
    REQUIRE(reopened.ok());
    CHECK(Put(**reopened, "shell", "a.sh", "five") == 5);
  }
  {
    TempDir dir;
    {
      auto files = OpenStore(Kind::kFiles, dir, clock);
      Put(*files, "shell", "b.sh", "one");
      Put(*files, "shell", "b.sh", "two");
      REQUIRE(Put(*files, "shell", "b.sh", "three") == 3);
      REQUIRE(files->Delete("default", "shell", "b.sh", 3).ok());
    }
    auto opened = OpenStore(Kind::kDatabase, dir, clock);
    auto& store = static_cast<DatabaseResourceStore&>(*opened);
    auto imported = store.ImportFiles(dir / "resources");
    INFO(imported.status().ToString());
    REQUIRE(imported.ok());
    REQUIRE(imported->imported.size() == 1);
    CHECK(Put(store, "shell", "b.sh", "four") == 4);
  }
}

// A store from before migration 25, whose whole deletes dropped the name's
// counter: upgraded in place, each resource keeps its counter, and from then
// on one deleted whole numbers on after it.
TEST_CASE("resource store (database): a store from before the counter outlived a whole delete (migration 25) keeps "
          "every counter",
          "[resources][database]") {
  TempDir dir;
  ManualClock clock(4000);
  const fs::path path = dir / "weft.db";
  {
    auto opened = OpenStore(Kind::kDatabase, dir, clock);
    Put(*opened, "shell", "a.sh", "one");
    Put(*opened, "shell", "a.sh", "two");
    REQUIRE(opened->Delete("default", "shell", "a.sh", 2).ok());
    Put(*opened, "shell", "b.sh", "one");
  }
  REQUIRE(weft::testing::ExecStore(path, weft::testing::RewindFrom(25)) == "");
  REQUIRE(weft::testing::QueryStoreInt(path, "SELECT COUNT(*) FROM schema_migrations WHERE version = 25") == 0);
  auto opened = OpenStore(Kind::kDatabase, dir, clock);
  CHECK(opened.sql->schema_version() == weft::store::Store::LatestSchemaVersion());
  CHECK(weft::testing::QueryStoreInt(path, "SELECT COUNT(*) FROM resource_names WHERE deleted = 0") == 2);
  CHECK(opened->List("default", "shell").value().size() == 2);
  REQUIRE(opened->Delete("default", "shell", "a.sh", std::nullopt).ok());
  CHECK(Put(*opened, "shell", "a.sh", "three") == 3);
  CHECK(Put(*opened, "shell", "b.sh", "two") == 2);
}

// A resource deleted whole keeps its counter when weftd switches between the
// two stores: an export to files and an import back carry the names deleted
// whole, so an upload of one after the switch still numbers on.
TEST_CASE("resource store (database): an export to files and an import back keep the counter of a resource deleted "
          "whole",
          "[resources][database]") {
  ManualClock clock(9500);
  {
    TempDir dir;
    auto opened = OpenStore(Kind::kDatabase, dir, clock);
    auto& store = static_cast<DatabaseResourceStore&>(*opened);
    REQUIRE(opened.sql->PutTenant({.name = "default"}).ok());
    Put(store, "shell", "c.sh", "one");
    REQUIRE(Put(store, "shell", "c.sh", "two") == 2);
    REQUIRE(store.Delete("default", "shell", "c.sh", std::nullopt).ok());
    auto files = FileResourceStore::Open(dir / "exported", clock);
    REQUIRE(files.ok());
    auto exported = store.ExportFiles(**files);
    INFO(exported.status().ToString());
    REQUIRE(exported.ok());
    CHECK((*files)->List("default", "").value().empty());
    files->reset();
    auto reopened = FileResourceStore::Open(dir / "exported", clock);
    REQUIRE(reopened.ok());
    CHECK(Put(**reopened, "shell", "c.sh", "three") == 3);
  }
  {
    TempDir dir;
    {
      auto files = OpenStore(Kind::kFiles, dir, clock);
      Put(*files, "shell", "d.sh", "one");
      Put(*files, "shell", "d.sh", "two");
      REQUIRE(files->Delete("default", "shell", "d.sh", std::nullopt).ok());
      Put(*files, "shell", "e.sh", "one");
    }
    auto opened = OpenStore(Kind::kDatabase, dir, clock);
    auto& store = static_cast<DatabaseResourceStore&>(*opened);
    auto imported = store.ImportFiles(dir / "resources");
    INFO(imported.status().ToString());
    REQUIRE(imported.ok());
    REQUIRE(imported->imported.size() == 1);  // e.sh; d.sh is no resource
    CHECK(store.Get("default", "shell", "d.sh", 1).status().code() == Code::kNotFound);
    CHECK(store.List("default", "").value().size() == 1);
    CHECK(Put(store, "shell", "d.sh", "three") == 3);
  }
}

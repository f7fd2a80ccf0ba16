// Resources end to end: the real weftd, weft-host and weft CLI, the
// resource-echo fixture plugin (tests/resources/resource_echo.cpp) and Lua
// plugins that arrive as resources.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "support/fast.hpp"
#include "weft/common/digest.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using weft::testing::Host;
using weft::testing::HostIn;
using weft::testing::kBuild;
using weft::testing::ServerIn;
using weft::testing::Weftd;
using weft::testing::TempDir;
using weft::testing::WaitFor;
using namespace std::chrono_literals;

const fs::path kFixtures = kBuild / "plugins" / "resource-fixtures";
const fs::path kAutomators = kBuild / "plugins" / "automators";

std::string Digest(const std::string& bytes) { return weft::digest::Sha256Of(bytes).value(); }

// A weft-host whose state (resource cache, resource plugins) is under its dir()/state.
Host StartHost(const fs::path& dir, Weftd& server, const std::string& id = "h1") {
  return Host(HostIn(dir, id, server.provisioner(), {kFixtures, kAutomators}, 2, "resource_sync_ms = 300\n"));
}

bool HostHasPlugin(Weftd& server, const std::string& host_id, const std::string& type) {
  auto hosts = server.TryCall("host.list", json::object());
  if (!hosts.ok()) return false;
  for (const json& h : (*hosts)["hosts"]) {
    if (h["id"] != host_id || h["live"] != true) continue;
    for (const json& p : h["plugins"])
      if (p == type) return true;
  }
  return false;
}

// `weft --server <api> ARGS...`, which must succeed.
std::string Weft(Weftd& server, std::vector<std::string> args) {
  args.insert(args.begin(), {"--server", server.endpoints()["api"].get<std::string>()});
  weft::testing::RunResult r = weft::testing::Run(kBuild / "bin/weft", args, 60s);
  INFO("weft " << args[2] << ": exit " << r.exit_code << "\nstdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  return r.out;
}

// Uploads `content` as type/name through the CLI; returns the new version.
std::int64_t UploadWithCli(Weftd& server, const fs::path& dir, const std::string& type, const std::string& name,
                           const std::string& content) {
  const fs::path file = dir / ("upload-" + name);
  weft::testing::WriteFile(file, content);
  json reply = json::parse(Weft(server, {"-o", "json", "resource", "upload", type, name, file.string()}));
  CHECK(reply["digest"] == Digest(content));
  CHECK(reply["state"] == "inactive");
  return reply["version"].get<std::int64_t>();
}

void Activate(Weftd& server, const std::string& type, const std::string& name, std::int64_t version) {
  Weft(server, {"resource", "stage", type, name, std::to_string(version)});
  std::string out = Weft(server, {"resource", "sync"});
  CHECK(out.find("activated " + type + "/" + name + " version " + std::to_string(version)) != std::string::npos);
}

// Runs one resource-echo task to its end; returns its record.
json RunEcho(Weftd& server, const json& payload, const std::string& state = "succeeded") {
  std::int64_t id = server.Enqueue({{"plugin", "resource-echo"}, {"action", "INSTALL"}, {"max_attempts", 1},
                                    {"payload", payload}});
  return server.WaitTaskState(id, state, 60s);
}

json Seen(const json& task) {
  INFO(task.dump());
  REQUIRE(task["result"].contains("seen"));
  return task["result"]["seen"];
}

// A raw request with payload frames, for what the CLI never sends.
weft::Result<weft::wire::Reply> Raw(weft::client::Client& client, const std::string& op, const json& body,
                                    std::vector<std::string> blobs) {
  weft::wire::Request request;
  request.op = op;
  request.body = body;
  request.blobs = std::move(blobs);
  return client.CallRaw(request);
}

}  // namespace

TEST_CASE("resources: a task gets the active version's file, a running task keeps its version through a sync",
          "[integration][resources]") {
  TempDir dir;
  Weftd server(ServerIn(dir / "server"));
  Host host = StartHost(dir.path(), server);
  REQUIRE(WaitFor([&] { return HostHasPlugin(server, "h1", "resource-echo"); }, 30s));

  // Nothing uploaded: the task names no resources.
  CHECK(Seen(RunEcho(server, json::object())).empty());

  // Uploaded but not yet synced: still nothing.
  const std::int64_t v1 = UploadWithCli(server, dir.path(), "resource-echo", "hello.txt", "version one\n");
  CHECK(v1 == 1);
  CHECK(Seen(RunEcho(server, json::object())).empty());

  Activate(server, "resource-echo", "hello.txt", v1);
  json seen = Seen(RunEcho(server, json::object()));
  REQUIRE(seen.size() == 1);
  CHECK(seen[0]["name"] == "hello.txt");
  CHECK(seen[0]["version"] == 1);
  CHECK(seen[0]["digest"] == Digest("version one\n"));
  CHECK(seen[0]["content_start"] == "version one\n");
  const std::string v1_path = seen[0]["path"];
  CHECK(v1_path.rfind((host.dir() / "state" / "resources").string(), 0) == 0);  // in the host's cache

  // A long task on version 1, then version 2 becomes active while it runs.
  const std::int64_t slow = server.Enqueue({{"plugin", "resource-echo"},
                                            {"action", "INSTALL"},
                                            {"max_attempts", 1},
                                            {"payload", {{"fields", {{"wait_ms", 6000}}}}}});
  server.WaitTaskState(slow, "leased", 30s);
  const std::int64_t v2 = UploadWithCli(server, dir.path(), "resource-echo", "hello.txt", "version two\n");
  CHECK(v2 == 2);
  Activate(server, "resource-echo", "hello.txt", v2);
  CHECK(server.Task(slow)["state"] == "leased");  // the sync happened while it ran

  seen = Seen(RunEcho(server, json::object()));
  REQUIRE(seen.size() == 1);
  CHECK(seen[0]["version"] == 2);
  CHECK(seen[0]["content_start"] == "version two\n");
  CHECK(seen[0]["path"] != v1_path);

  json slow_seen = Seen(server.WaitTaskState(slow, "succeeded", 60s));
  REQUIRE(slow_seen.size() == 1);
  CHECK(slow_seen[0]["version"] == 1);
  CHECK(slow_seen[0]["path"] == v1_path);
  CHECK(slow_seen[0]["content_start"] == "version one\n");
  CHECK(slow_seen[0]["content_end"] == "version one\n");  // read after version 2 was active

  // A task that names its versions keeps them.
  seen = Seen(RunEcho(server, {{"resources", {{{"name", "hello.txt"}, {"version", 1}}}}}));
  REQUIRE(seen.size() == 1);
  CHECK(seen[0]["version"] == 1);
  CHECK(seen[0]["content_start"] == "version one\n");

  // The states as the CLI shows them.
  json list = json::parse(Weft(server, {"-o", "json", "resource", "list", "resource-echo"}));
  REQUIRE(list["resources"].size() == 1);
  CHECK(list["resources"][0]["active"] == 2);
  CHECK(list["resources"][0]["versions"][0]["state"] == "retired");
  CHECK(list["resources"][0]["versions"][1]["state"] == "active");

  // Recalled: new tasks get no version of it.
  Weft(server, {"resource", "recall", "resource-echo", "hello.txt"});
  CHECK(Seen(RunEcho(server, json::object())).empty());
}

TEST_CASE("resources: a digest mismatch is refused, on upload and on the host", "[integration][resources]") {
  TempDir dir;
  Weftd server(ServerIn(dir / "server"));
  zmq::context_t ctx;
  weft::client::Client api(ctx, {server.endpoints()["api"], 5000, {}, {}});

  // The server refuses bytes whose digest is not the one the client announced.
  auto refused = Raw(api, "resource.upload",
                     {{"type", "resource-echo"}, {"name", "a.txt"}, {"final", true}, {"digest", Digest("sent")}},
                     {"arrived"});
  REQUIRE(refused.ok());
  CHECK(!refused->ok);
  CHECK(refused->error.code == weft::Code::kInvalid);
  CHECK(refused->error.message.find("digest mismatch") != std::string::npos);
  CHECK(server.Call("resource.list", json::object())["resources"].empty());

  // The host refuses bytes whose digest is not the one the task names: the
  // server's copy is damaged after the upload (same size, other bytes).
  Host host = StartHost(dir.path(), server);
  REQUIRE(WaitFor([&] { return HostHasPlugin(server, "h1", "resource-echo"); }, 30s));
  const std::int64_t v = UploadWithCli(server, dir.path(), "resource-echo", "damaged.txt", "good bytes");
  const fs::path stored = dir / "server" / "data" / "resources" / "default" / "resource-echo" / "damaged.txt" /
                          ("v" + std::to_string(v));
  REQUIRE(fs::exists(stored));
  weft::testing::WriteFile(stored, "evil bytes");
  Activate(server, "resource-echo", "damaged.txt", v);
  json task = RunEcho(server, json::object(), "failed");
  INFO(task.dump());
  const std::string message = task["message"];
  CHECK(message.find("digest mismatch for resource resource-echo/damaged.txt version 1") != std::string::npos);
  CHECK(message.find("was not run") != std::string::npos);
  CHECK(!task["result"].contains("seen"));  // the plugin never ran
  // Nothing unverified is left in the cache. The host's background sync keeps
  // trying to pre-fetch the active (damaged) version, so a download in progress
  // may show as a hidden ".NAME.tmp.*" file for a moment; a cached version is a
  // file under its own name.
  std::size_t cached = 0;
  for (auto it = fs::recursive_directory_iterator(host.dir() / "state" / "resources");
       it != fs::recursive_directory_iterator(); ++it)
    cached += it->is_regular_file() && !it->path().filename().string().starts_with(".") ? 1 : 0;
  CHECK(cached == 0);
}

TEST_CASE("resources: the protocol checks frames, offsets, roles and serves chunks", "[integration][resources]") {
  TempDir dir;
  Weftd server(ServerIn(dir / "server"));
  zmq::context_t ctx;
  weft::client::Client api(ctx, {server.endpoints()["api"], 5000, {}, {}});
  weft::client::Client prov(ctx, {server.provisioner(), 5000, {}, {}});
  const std::string content = "0123456789abcdefghij";

  auto none = Raw(api, "resource.upload", {{"type", "shell"}, {"name", "a.sh"}}, {});
  REQUIRE(none.ok());
  CHECK(none->error.code == weft::Code::kInvalid);
  CHECK(none->error.message.find("exactly one payload frame") != std::string::npos);

  // Three chunks; a chunk at the wrong offset is a conflict and changes nothing.
  auto first = Raw(api, "resource.upload", {{"type", "shell"}, {"name", "a.sh"}}, {content.substr(0, 8)});
  REQUIRE(first.ok());
  REQUIRE(first->ok);
  const std::string id = first->body["upload_id"];
  auto wrong = Raw(api, "resource.upload", {{"type", "shell"}, {"name", "a.sh"}, {"upload_id", id}, {"offset", 4}},
                   {content.substr(8, 8)});
  REQUIRE(wrong.ok());
  CHECK(wrong->error.code == weft::Code::kConflict);
  auto second = Raw(api, "resource.upload", {{"type", "shell"}, {"name", "a.sh"}, {"upload_id", id}, {"offset", 8}},
                    {content.substr(8, 8)});
  REQUIRE(second.ok());
  CHECK(second->body["received"] == 16);
  auto last = Raw(api, "resource.upload",
                  {{"type", "shell"}, {"name", "a.sh"}, {"upload_id", id}, {"offset", 16}, {"final", true},
                   {"digest", Digest(content)}, {"size", content.size()}},
                  {content.substr(16)});
  REQUIRE(last.ok());
  INFO(last->body.dump() << last->error.message);
  REQUIRE(last->ok);
  CHECK(last->body["version"] == 1);

  // Hosts only: fetch and active are refused on the api endpoint, uploads on the provisioner one.
  auto denied = api.Call("resource.fetch", {{"tenant", "default"}, {"type", "shell"}, {"name", "a.sh"}, {"version", 1}});
  CHECK(denied.status().code() == weft::Code::kDenied);
  CHECK(api.Call("resource.active", json::object()).status().code() == weft::Code::kDenied);
  CHECK(prov.Call("resource.sync", json::object()).status().code() == weft::Code::kDenied);

  // Not active yet: resource.active is empty; then it lists version 1.
  auto active = prov.Call("resource.active", {{"tenant", "default"}, {"types", {"shell"}}});
  REQUIRE(active.ok());
  CHECK((*active)["resources"].empty());
  server.Call("resource.stage", {{"type", "shell"}, {"name", "a.sh"}, {"version", 1}});
  json synced = server.Call("resource.sync", json::object());
  CHECK(synced["activated"][0]["version"] == 1);
  active = prov.Call("resource.active", {{"tenant", "default"}, {"types", {"shell"}}});
  REQUIRE(active.ok());
  REQUIRE((*active)["resources"].size() == 1);
  CHECK((*active)["resources"][0]["digest"] == Digest(content));
  CHECK((*active)["resources"][0]["size"] == content.size());
  CHECK(prov.Call("resource.active", {{"tenant", "acme"}}).value()["resources"].empty());

  // Fetched back in 7-byte chunks.
  std::string assembled;
  bool eof = false;
  while (!eof) {
    auto chunk = Raw(prov, "resource.fetch",
                     {{"tenant", "default"}, {"type", "shell"}, {"name", "a.sh"}, {"version", 1},
                      {"offset", assembled.size()}, {"max_bytes", 7}},
                     {});
    REQUIRE(chunk.ok());
    REQUIRE(chunk->ok);
    REQUIRE(chunk->blobs.size() == 1);
    CHECK(chunk->body["digest"] == Digest(content));
    CHECK(chunk->blobs[0].size() <= 7);
    assembled += chunk->blobs[0];
    eof = chunk->body["eof"];
  }
  CHECK(assembled == content);
  auto missing = prov.Call("resource.fetch", {{"tenant", "default"}, {"type", "shell"}, {"name", "a.sh"}, {"version", 9}});
  CHECK(missing.status().code() == weft::Code::kNotFound);

  // An active version cannot be deleted; recalled, it can.
  CHECK(api.Call("resource.delete", {{"type", "shell"}, {"name", "a.sh"}}).status().code() == weft::Code::kConflict);
  server.Call("resource.recall", {{"type", "shell"}, {"name", "a.sh"}});
  json deleted = server.Call("resource.delete", {{"type", "shell"}, {"name", "a.sh"}});
  CHECK(deleted["deleted"] == json::array({1}));

  // Versions survive a restart of weftd.
  UploadWithCli(server, dir.path(), "shell", "b.sh", "echo b");
  server.process().Stop();
  Weftd again(ServerIn(dir / "server"));
  json list = again.Call("resource.list", json::object());
  REQUIRE(list["resources"].size() == 1);
  CHECK(list["resources"][0]["name"] == "b.sh");
}

#ifdef WEFT_TEST_LUA
TEST_CASE("resources: a Lua plugin uploaded as a resource becomes a plugin type on the host without a restart",
          "[integration][resources][lua]") {
  TempDir dir;
  Weftd server(ServerIn(dir / "server"));
  Host host = StartHost(dir.path(), server);
  REQUIRE(WaitFor([&] { return HostHasPlugin(server, "h1", "resource-echo"); }, 30s));
  const pid_t pid = host.process().pid();
  CHECK(!HostHasPlugin(server, "h1", "res-lua"));

  auto plugin = [](const std::string& said) {
    return "return {\n"
           "  type = \"res-lua\", kind = \"automator\", version = \"1\",\n"
           "  actions = { install = function(task) task:set_result(\"said\", \"" + said + "\") end },\n"
           "}\n";
  };
  auto run = [&](const std::string& state = "succeeded") {
    std::int64_t id = server.Enqueue({{"plugin", "res-lua"}, {"action", "INSTALL"}, {"max_attempts", 1}});
    return server.WaitTaskState(id, state, 60s);
  };

  const std::int64_t v1 = UploadWithCli(server, dir.path(), "lua-plugin", "res-lua.lua", plugin("version 1"));
  Activate(server, "lua-plugin", "res-lua.lua", v1);
  const bool loaded = WaitFor([&] { return HostHasPlugin(server, "h1", "res-lua"); }, 30s);
  INFO(host.Log());
  REQUIRE(loaded);
  CHECK(weft::testing::ReadFile(host.dir() / "state" / "plugins" / "default@res-lua.lua") == plugin("version 1"));
  CHECK(run()["result"]["said"] == "version 1");

  // A new version replaces it; the workers roll and the next tasks run it.
  const std::int64_t v2 = UploadWithCli(server, dir.path(), "lua-plugin", "res-lua.lua", plugin("version 2"));
  Activate(server, "lua-plugin", "res-lua.lua", v2);
  std::string said;
  CHECK(WaitFor(
      [&] {
        said = run()["result"]["said"];
        return said == "version 2";
      },
      60s));

  // Recalled: the plugin goes away again.
  Weft(server, {"resource", "recall", "lua-plugin", "res-lua.lua"});
  REQUIRE(WaitFor([&] { return !HostHasPlugin(server, "h1", "res-lua"); }, 30s));
  CHECK(!fs::exists(host.dir() / "state" / "plugins" / "default@res-lua.lua"));
  CHECK(host.process().pid() == pid);
  CHECK(host.process().running());
}
#endif

TEST_CASE("resources: a weftd switched to resources in the store imports its files once, and serves them",
          "[integration][resources]") {
  TempDir dir;
  Weftd server(ServerIn(dir / "server"));
  const std::int64_t v1 = UploadWithCli(server, dir.path(), "shell", "a.sh", "echo one\n");
  Activate(server, "shell", "a.sh", v1);
  CHECK(UploadWithCli(server, dir.path(), "shell", "a.sh", "echo two\n") == 2);
  REQUIRE(server.Stop() == 0);

  server.SetExtraToml("[store]\nresources = \"database\"\n");
  server.Restart();
  const std::string log = server.Log();
  INFO(weft::testing::Tail(log, 4000));
  CHECK(log.find("imported from " + (server.data() / "resources").string() +
                 " into the store: tenant 'default': shell/a.sh (2 version(s))") != std::string::npos);
  CHECK(!fs::exists(server.data() / "resources"));
  CHECK(fs::exists(server.data() / "resources.imported" / "default" / "shell" / "a.sh" / "v1"));

  json list = json::parse(Weft(server, {"-o", "json", "resource", "list", "shell"}));
  REQUIRE(list["resources"].size() == 1);
  CHECK(list["resources"][0]["active"] == 1);
  CHECK(list["resources"][0]["versions"].size() == 2);
  zmq::context_t ctx;
  weft::client::Client prov(ctx, {server.provisioner(), 5000, {}, {}});
  auto fetched = Raw(prov, "resource.fetch",
                     {{"tenant", "default"}, {"type", "shell"}, {"name", "a.sh"}, {"version", 2}}, {});
  REQUIRE(fetched.ok());
  INFO(fetched->error.message);
  REQUIRE(fetched->ok);
  REQUIRE(fetched->blobs.size() == 1);
  CHECK(fetched->blobs[0] == "echo two\n");
  CHECK(fetched->body["digest"] == Digest("echo two\n"));

  // Once: the next start imports nothing; the versions stay, numbering goes on.
  server.Restart();
  CHECK(server.Log().find("imported from") == std::string::npos);
  CHECK(UploadWithCli(server, dir.path(), "shell", "a.sh", "echo three\n") == 3);
}

namespace {

// What `server` serves of type/name: its versions as "vN state".
std::string Listed(Weftd& server, const std::string& type, const std::string& name) {
  json list = json::parse(Weft(server, {"-o", "json", "resource", "list", type}));
  std::string out;
  for (const json& r : list["resources"]) {
    if (r["name"] != name) continue;
    for (const json& v : r["versions"])
      out += (out.empty() ? "v" : ", v") + std::to_string(v["version"].get<std::int64_t>()) + " " +
             v["state"].get<std::string>();
  }
  return out;
}

// The content of a version as a host fetches it, with the digest weftd gives.
std::string Fetched(Weftd& server, const std::string& type, const std::string& name, std::int64_t version) {
  zmq::context_t ctx;
  weft::client::Client prov(ctx, {server.provisioner(), 5000, {}, {}});
  auto fetched = Raw(prov, "resource.fetch",
                     {{"tenant", "default"}, {"type", type}, {"name", name}, {"version", version}}, {});
  REQUIRE(fetched.ok());
  INFO(fetched->error.message);
  REQUIRE(fetched->ok);
  REQUIRE(fetched->blobs.size() == 1);
  CHECK(fetched->body["digest"] == Digest(fetched->blobs[0]));
  return fetched->blobs[0];
}

}  // namespace

// Switching from "database" back to "files" copied nothing back: every
// resource the store held was silently gone. Now both directions keep them.
TEST_CASE("resources: files to the store and back to files, and back again: nothing is lost",
          "[integration][resources]") {
  TempDir dir;
  Weftd server(ServerIn(dir / "server"));
  const fs::path files = server.data() / "resources";
  const std::int64_t v1 = UploadWithCli(server, dir.path(), "shell", "a.sh", "echo one\n");
  Activate(server, "shell", "a.sh", v1);
  CHECK(UploadWithCli(server, dir.path(), "shell", "a.sh", "echo two\n") == 2);
  REQUIRE(server.Stop() == 0);

  // Into the store; changed there: a third version made active, a new resource.
  server.SetExtraToml("[store]\nresources = \"database\"\n");
  server.Restart();
  CHECK(UploadWithCli(server, dir.path(), "shell", "a.sh", "echo three\n") == 3);
  Activate(server, "shell", "a.sh", 3);
  CHECK(UploadWithCli(server, dir.path(), "shell", "b.sh", "echo bee\n") == 1);
  const std::string in_store = Listed(server, "shell", "a.sh");
  CHECK(in_store == "v1 retired, v2 inactive, v3 active");
  REQUIRE(server.Stop() == 0);

  // Back to files: the store's resources are exported, each logged, once.
  server.SetExtraToml("[store]\nresources = \"files\"\n");
  server.Restart();
  {
    const std::string log = server.Log();
    INFO(weft::testing::Tail(log, 4000));
    CHECK(log.find("exported from the store into " + files.string() +
                   ": tenant 'default': shell/a.sh (3 version(s))") != std::string::npos);
    CHECK(log.find("exported from the store into " + files.string() +
                   ": tenant 'default': shell/b.sh (1 version(s))") != std::string::npos);
  }
  CHECK(fs::exists(files / "exported-from-database.json"));
  CHECK(Listed(server, "shell", "a.sh") == in_store);
  CHECK(Listed(server, "shell", "b.sh") == "v1 inactive");
  CHECK(Fetched(server, "shell", "a.sh", 1) == "echo one\n");
  CHECK(Fetched(server, "shell", "a.sh", 2) == "echo two\n");
  CHECK(Fetched(server, "shell", "a.sh", 3) == "echo three\n");
  CHECK(Fetched(server, "shell", "b.sh", 1) == "echo bee\n");

  // Changed as files; the next start compares nothing, so undoes nothing.
  CHECK(UploadWithCli(server, dir.path(), "shell", "a.sh", "echo four\n") == 4);
  Activate(server, "shell", "a.sh", 4);
  server.Restart();
  CHECK(server.Log().find("exported from") == std::string::npos);
  const std::string as_files = Listed(server, "shell", "a.sh");
  CHECK(as_files == "v1 retired, v2 inactive, v3 retired, v4 active");
  REQUIRE(server.Stop() == 0);

  // And into the store again: its copy of a.sh is an older one of the files', which replace it.
  server.SetExtraToml("[store]\nresources = \"database\"\n");
  server.Restart();
  {
    const std::string log = server.Log();
    INFO(weft::testing::Tail(log, 4000));
    CHECK(log.find("imported from " + files.string() + " into the store: tenant 'default': shell/a.sh (4 version(s)), "
                   "replacing the store's older copy (v1 retired, v2 inactive, v3 active)") != std::string::npos);
    CHECK(log.find("not imported from " + files.string() +
                   ", the store has it already (kept the store's): tenant 'default': shell/b.sh") != std::string::npos);
  }
  CHECK(Listed(server, "shell", "a.sh") == as_files);
  CHECK(Fetched(server, "shell", "a.sh", 4) == "echo four\n");
  CHECK(Fetched(server, "shell", "b.sh", 1) == "echo bee\n");
}

// Hosts cache versions by number: a resource deleted whole and uploaded again
// went back to version 1, a number that had named other content. Its counter
// now stays, across restarts and switches between the two stores.
TEST_CASE("resources: a resource deleted whole and uploaded again numbers on, across restarts and switches of store",
          "[integration][resources]") {
  TempDir dir;
  Weftd server(ServerIn(dir / "server"));
  auto delete_whole = [&](const std::string& versions) {
    const std::string out = Weft(server, {"resource", "delete", "shell", "a.sh"});
    CHECK(out.find("deleted shell/a.sh (versions " + versions + ")") != std::string::npos);
    CHECK(Listed(server, "shell", "a.sh").empty());
  };
  CHECK(UploadWithCli(server, dir.path(), "shell", "a.sh", "echo one\n") == 1);
  CHECK(UploadWithCli(server, dir.path(), "shell", "a.sh", "echo two\n") == 2);
  delete_whole("1, 2");
  CHECK(UploadWithCli(server, dir.path(), "shell", "a.sh", "echo three\n") == 3);
  CHECK(Listed(server, "shell", "a.sh") == "v3 inactive");
  CHECK(Fetched(server, "shell", "a.sh", 3) == "echo three\n");
  delete_whole("3");
  server.Restart();
  CHECK(UploadWithCli(server, dir.path(), "shell", "a.sh", "echo four\n") == 4);
  delete_whole("4");
  REQUIRE(server.Stop() == 0);

  // Into the store: the name deleted whole keeps its counter there.
  server.SetExtraToml("[store]\nresources = \"database\"\n");
  server.Restart();
  CHECK(UploadWithCli(server, dir.path(), "shell", "a.sh", "echo five\n") == 5);
  delete_whole("5");
  server.Restart();
  CHECK(UploadWithCli(server, dir.path(), "shell", "a.sh", "echo six\n") == 6);
  delete_whole("6");
  REQUIRE(server.Stop() == 0);

  // And back to files.
  server.SetExtraToml("[store]\nresources = \"files\"\n");
  server.Restart();
  CHECK(UploadWithCli(server, dir.path(), "shell", "a.sh", "echo seven\n") == 7);
  CHECK(Fetched(server, "shell", "a.sh", 7) == "echo seven\n");
}

// Two different copies of one resource, neither older: weftd does not choose.
TEST_CASE("resources: a weftd back on files whose directory and store hold different copies refuses to start, "
          "saying what to do",
          "[integration][resources]") {
  TempDir dir;
  Weftd server(ServerIn(dir / "server"));
  CHECK(UploadWithCli(server, dir.path(), "shell", "a.sh", "echo one\n") == 1);
  REQUIRE(server.Stop() == 0);
  server.SetExtraToml("[store]\nresources = \"database\"\n");
  server.Restart();
  CHECK(UploadWithCli(server, dir.path(), "shell", "a.sh", "echo two\n") == 2);
  REQUIRE(server.Stop() == 0);

  // Another data directory's files, whose version 2 is another file.
  {
    Weftd other(ServerIn(dir / "other"));
    CHECK(UploadWithCli(other, dir.path(), "shell", "a.sh", "echo one\n") == 1);
    CHECK(UploadWithCli(other, dir.path(), "shell", "a.sh", "echo other\n") == 2);
    REQUIRE(other.Stop() == 0);
    fs::copy(other.data() / "resources", server.data() / "resources", fs::copy_options::recursive);
  }
  const fs::path files = server.data() / "resources";
  server.SetExtraToml("[store]\nresources = \"files\"\n");
  std::string refusal;
  try {
    server.Restart();
  } catch (const std::exception& e) {
    refusal = e.what();
  }
  const std::string log = server.Log();
  INFO(refusal << "\n" << weft::testing::Tail(log, 4000));
  CHECK(!refusal.empty());
  CHECK(log.find("the store and the directory hold different copies of 1 resource(s), neither older than the "
                 "other: tenant 'default': shell/a.sh (the store: v1 inactive, v2 inactive; the directory: v1 "
                 "inactive, v2 inactive). weftd will not choose") != std::string::npos);
  CHECK(log.find("create the file " + (files / "exported-from-database.json").string()) != std::string::npos);
  CHECK(!fs::exists(files / "exported-from-database.json"));

  // Told to keep the directory's copies, it starts and serves them.
  weft::testing::WriteFile(files / "exported-from-database.json", "{}\n");
  server.Restart();
  CHECK(Fetched(server, "shell", "a.sh", 2) == "echo other\n");
}

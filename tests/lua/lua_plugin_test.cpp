// Lua plugins seen from the host: declarations become descriptors, runs reach
// the host services, bad files are refused with a sentence naming the file.
#include <atomic>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>
#include <vector>

#include "lua_test_util.hpp"

using namespace weft::lua_test;
using Catch::Contains;
using weft::host::lua::LoadLuaPlugin;
using weft::host::lua::LoadLuaPluginSource;

namespace {

std::string LoadError(const std::string& source, const std::string& name = "bad.lua") {
  auto r = LoadLuaPluginSource(name, source, TestLimits());
  if (r.ok()) return "(loaded)";
  CHECK(r.status().code() == weft::Code::kInvalid);
  return r.status().message();
}

const char* kHello = R"(
return {
  type = "hello-lua", kind = "automator", version = "1.2", description = "says hello",
  fields = {
    greeting = { label = "Greeting", type = "string", default = "hi" },
    times = { label = "Times", type = "integer", default = 2 },
    token = { label = "Token", type = "string", required = true, sensitive = true,
              description = "an API token" },
  },
  resource_types = { "scripts", "archives" },
  actions = {
    install = function(task)
      task:log("info", "installing on " .. task.json.node_id)
      task:log("warn", "careful")
      task:log("plain line")
      print("printed", 1, true)
      task:progress(50, "half way")
      task:progress(150)
      task:set_result("said", string.rep(task.fields.greeting, task.fields.times, " "))
      task:set_result("token_len", #task.fields.token)
      task:set_result("nested", { list = { 1, 2, 3 }, empty_list = weft.array({}), empty = {}, flag = false,
                                  pi = 3.5, none = weft.null })
      task:set_result("cancelled", task:cancelled())
    end,
    start = function(task) error("cannot start " .. task.json.service.name) end,
  },
}
)";

json HelloTask(json fields) {
  json t = DefaultTask();
  t["service"]["action"]["fields"] = std::move(fields);
  return t;
}

}  // namespace

TEST_CASE("lua: the declaration becomes a host-valid descriptor", "[lua]") {
  auto r = LoadLuaPluginSource("hello.lua", kHello, TestLimits());
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  const weft_plugin_descriptor& d = **r;
  CHECK(d.struct_size == sizeof(weft_plugin_descriptor));
  CHECK(d.abi_major == WEFT_ABI_MAJOR);
  CHECK(d.abi_minor == WEFT_ABI_MINOR);
  CHECK(d.kind == WEFT_KIND_AUTOMATOR);
  CHECK(std::string(d.type_name) == "hello-lua");
  CHECK(std::string(d.version) == "1.2");
  CHECK(std::string(d.description) == "says hello");
  CHECK(d.actions == (WEFT_ACTION_INSTALL | WEFT_ACTION_START));
  CHECK(d.init != nullptr);
  CHECK(d.run != nullptr);
  CHECK(d.destroy != nullptr);
  REQUIRE(d.field_count == 3);
  CHECK(d.field_size == sizeof(weft_field));
  // Sorted by name, so the order does not depend on Lua's table order.
  CHECK(std::string(d.fields[0].name) == "greeting");
  CHECK(std::string(d.fields[0].label) == "Greeting");
  CHECK(d.fields[0].type == WEFT_FIELD_STRING);
  CHECK(std::string(d.fields[0].default_json) == "\"hi\"");
  CHECK(d.fields[0].flags == 0);
  CHECK(std::string(d.fields[1].name) == "times");
  CHECK(d.fields[1].type == WEFT_FIELD_INTEGER);
  CHECK(std::string(d.fields[1].default_json) == "2");
  CHECK(std::string(d.fields[2].name) == "token");
  CHECK(d.fields[2].flags == (WEFT_FIELD_REQUIRED | WEFT_FIELD_SENSITIVE));
  CHECK(d.fields[2].default_json == nullptr);
  CHECK(std::string(d.fields[2].description) == "an API token");
  REQUIRE(d.resource_type_count == 2);
  CHECK(std::string(d.resource_types[0]) == "scripts");
  CHECK(std::string(d.resource_types[1]) == "archives");
  // Two loads are two independent descriptors (each with its own init).
  auto again = LoadLuaPluginSource("hello.lua", kHello, TestLimits());
  REQUIRE(again.ok());
  CHECK(*again != *r);
  CHECK((*again)->init != d.init);
}

TEST_CASE("lua: a well-behaved plugin's logs, progress and results reach the host", "[lua]") {
  Plugin p(kHello);
  RunResult r = p.Run(WEFT_ACTION_INSTALL, HelloTask({{"greeting", "yo"}, {"token", "s3cret"}}));
  INFO(r.err);
  REQUIRE(r.rc == WEFT_OK);
  CHECK(r.out == "installing on n1\nplain line\nprinted\t1\ttrue\n");
  CHECK(r.log_errors == "careful\n");
  REQUIRE(r.progress.size() == 2);
  CHECK(r.progress[0] == std::make_pair(50, std::string("half way")));
  CHECK(r.progress[1].first == 100);  // clamped
  CHECK(r.result["said"] == "yo yo");
  CHECK(r.result["token_len"] == 6);
  CHECK(r.result["nested"] == json::parse(R"({"list":[1,2,3],"empty_list":[],"empty":{},"flag":false,"pi":3.5,
                                              "none":null})"));
  CHECK(r.result["cancelled"] == false);
}

TEST_CASE("lua: fields get their defaults, a missing required field is an invalid task", "[lua]") {
  Plugin p(kHello);
  RunResult r = p.Run(WEFT_ACTION_INSTALL, HelloTask({{"token", "t"}}));
  INFO(r.err);
  REQUIRE(r.rc == WEFT_OK);
  CHECK(r.result["said"] == "hi hi");

  RunResult missing = p.Run(WEFT_ACTION_INSTALL, HelloTask(json::object()));
  CHECK(missing.rc == WEFT_ERR_INVALID);
  CHECK_THAT(missing.err, Contains("Lua plugin 'hello-lua': required field 'token' is missing"));

  // A value of another type than its field's is an invalid task too (the value is not shown: it may be secret).
  RunResult wrong = p.Run(WEFT_ACTION_INSTALL, HelloTask({{"token", 5}}));
  CHECK(wrong.rc == WEFT_ERR_INVALID);
  CHECK(wrong.err ==
        "Lua plugin 'hello-lua': field 'token' must be a string, not an integer; fix it in the task's "
        "service action fields");
}

TEST_CASE("lua: a provider reads provider.fields, task.json is the whole task", "[lua]") {
  Plugin p(R"(
    return { type = "prov", kind = "provider",
      fields = { zone = { type = "string", default = "z1" }, size = { type = "number" } },
      actions = { create = function(task)
        task:set_result("zone", task.fields.zone)
        task:set_result("size", task.fields.size)
        task:set_result("tags", task.json.provider.tags)
        task:set_result("tag_count", #task.json.provider.tags)
        task:set_result("second_is_null", task.json.provider.tags[2] == weft.null)
        task:set_result("id", task.json.task_id)
      end } })");
  json task = DefaultTask();
  task["provider"] = {{"providertype", "prov"}, {"fields", {{"size", 2.5}}}, {"tags", {"a", nullptr, "c"}}};
  RunResult r = p.Run(WEFT_ACTION_CREATE, task);
  INFO(r.err);
  REQUIRE(r.rc == WEFT_OK);
  CHECK(r.result["zone"] == "z1");
  CHECK(r.result["size"] == 2.5);
  CHECK(r.result["tags"] == json::parse(R"(["a", null, "c"])"));
  CHECK(r.result["tag_count"] == 3);
  CHECK(r.result["second_is_null"] == true);
  CHECK(r.result["id"] == 7);
}

TEST_CASE("lua: error() fails the task with the script's message and position", "[lua]") {
  Plugin p(kHello, TestLimits(), "hello.lua");
  RunResult r = p.Run(WEFT_ACTION_START, HelloTask({{"token", "t"}}));
  CHECK(r.rc == WEFT_ERR_FAILED);
  CHECK_THAT(r.err, Contains("Lua plugin 'hello-lua' failed during START: hello.lua:25: cannot start web"));
  CHECK(r.err.find("stack traceback") == std::string::npos);
  CHECK_THAT(r.out, Contains("stack traceback"));  // the traceback goes to the task's debug log
  // Its frames indented with spaces, not Lua's tabs.
  CHECK_THAT(r.out, Contains("stack traceback:\n  "));
  CHECK(r.out.find('\t') == std::string::npos);
}

TEST_CASE("lua: an action the plugin does not declare is unsupported", "[lua]") {
  Plugin p(kHello);
  RunResult r = p.Run(WEFT_ACTION_DELETE);
  CHECK(r.rc == WEFT_ERR_UNSUPPORTED);
  CHECK_THAT(r.err, Contains("does not implement DELETE; it implements INSTALL, START"));
  CHECK(p.Run(WEFT_ACTION_INSTALL | WEFT_ACTION_START).rc == WEFT_ERR_UNSUPPORTED);
}

TEST_CASE("lua: bad arguments to task methods fail the task with a sentence", "[lua]") {
  SECTION("a function as a result") {
    Plugin p(Automator("task:set_result('f', { cb = function() end })"));
    RunResult r = p.Run(WEFT_ACTION_INSTALL);
    CHECK(r.rc == WEFT_ERR_FAILED);
    CHECK_THAT(r.err, Contains("t.lua:3: task:set_result('f'): value.cb is a function, which JSON cannot hold"));
  }
  SECTION("a table that contains itself") {
    Plugin p(Automator("local t = {} t.me = t task:set_result('loop', t)"));
    CHECK_THAT(p.Run(WEFT_ACTION_INSTALL).err, Contains("nested deeper than 64 levels"));
  }
  SECTION("an unknown log level") {
    Plugin p(Automator("task:log('loud', 'x')"));
    CHECK_THAT(p.Run(WEFT_ACTION_INSTALL).err, Contains("level 'loud' is not one of debug, info, warn, error"));
  }
  SECTION("a method called with a dot") {
    Plugin p(Automator("task.log('info', 'x')"));
    CHECK_THAT(p.Run(WEFT_ACTION_INSTALL).err, Contains("must be called as task:log(...)"));
  }
  SECTION("invalid UTF-8") {
    Plugin p(Automator("task:set_result('bytes', '\\255\\254')"));
    CHECK_THAT(p.Run(WEFT_ACTION_INSTALL).err, Contains("is not valid UTF-8"));
  }
}

TEST_CASE("lua: a syntax error is a load error naming the file and the line", "[lua]") {
  std::string err = LoadError("return {\n  type = 'x',\n  kind = = 'automator',\n}", "broken.lua");
  CHECK_THAT(err, Contains("Lua plugin broken.lua does not compile: broken.lua:3:"));
  CHECK_THAT(err, Contains("fix the script"));
}

TEST_CASE("lua: bad declarations are refused with a sentence", "[lua]") {
  const std::string actions = "actions = { install = function(task) end }";
  CHECK_THAT(LoadError("return 42"), Contains("Lua plugin bad.lua: must return a table describing the plugin, not a "
                                              "number"));
  CHECK_THAT(LoadError("return { kind = 'automator', " + actions + " }"), Contains("has no `type`"));
  CHECK_THAT(LoadError("return { type = 'Bad Name', kind = 'automator', " + actions + " }"),
             Contains("type 'Bad Name' must match [a-z0-9][a-z0-9_.-]*"));
  CHECK_THAT(LoadError("return { type = 'x', " + actions + " }"), Contains("has no `kind`"));
  CHECK_THAT(LoadError("return { type = 'x', kind = 'robot', " + actions + " }"),
             Contains("kind 'robot' is neither \"provider\" nor \"automator\""));
  CHECK_THAT(LoadError("return { type = 'x', kind = 'automator' }"), Contains("declares no actions"));
  CHECK_THAT(LoadError("return { type = 'x', kind = 'automator', actions = { instal = function() end } }"),
             Contains("actions.instal is not an action"));
  CHECK_THAT(LoadError("return { type = 'x', kind = 'automator', actions = { install = 'yes' } }"),
             Contains("actions.install must be a function(task), not a string"));
  CHECK_THAT(LoadError("return { type = 'x', kind = 'automator', feilds = {}, " + actions + " }"),
             Contains("unknown key 'feilds'"));
  CHECK_THAT(LoadError("return { type = 'x', kind = 'automator', fields = { n = { type = 'float' } }, " + actions +
                       " }"),
             Contains("fields.n.type 'float' is not a field type"));
  CHECK_THAT(LoadError("return { type = 'x', kind = 'automator', fields = { n = { type = 'integer', default = 'a' } }, " +
                       actions + " }"),
             Contains("fields.n.default \"a\" is not an integer"));
  CHECK_THAT(LoadError("return { type = 'x', kind = 'automator', fields = { n = { lable = 'N' } }, " + actions + " }"),
             Contains("fields.n has an unknown key 'lable'"));
  CHECK_THAT(LoadError("return { type = 'x', kind = 'automator', fields = { n = { required = 'yes' } }, " + actions +
                       " }"),
             Contains("fields.n.required must be true or false"));
  CHECK_THAT(LoadError("return { type = 'x', kind = 'automator', resource_types = { 'a', '' }, " + actions + " }"),
             Contains("resource_types[2] is empty"));
  CHECK_THAT(LoadError("error('nope')"), Contains("Lua plugin bad.lua failed while loading") && Contains("bad.lua:1: nope"));
}

TEST_CASE("lua: LoadLuaPlugin reads a file and names it in errors", "[lua]") {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("weft-lua-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::path missing = dir / "missing.lua";
  auto r = LoadLuaPlugin(missing, TestLimits());
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == weft::Code::kNotFound);
  CHECK_THAT(r.status().message(), Contains(missing.string()));

  std::filesystem::path broken = dir / "broken.lua";
  std::ofstream(broken) << "return {\n\n  type = \n";
  auto b = LoadLuaPlugin(broken, TestLimits());
  REQUIRE_FALSE(b.ok());
  CHECK_THAT(b.status().message(), Contains("Lua plugin " + broken.string() + " does not compile: broken.lua:4:"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("lua: concurrent runs on one instance each get their own state", "[lua]") {
  Plugin p(R"(
    return { type = "busy", kind = "automator", actions = { install = function(task)
      inside = (inside or 0) + 1
      assert(inside == 1, "two runs shared a lua_State")
      local sum = 0
      for i = 1, 20000 do sum = sum + i end
      for i = 1, 3 do task:progress(i * 30) end
      inside = inside - 1
      task:set_result("sum", sum)
      task:set_result("node", task.json.node_id)
    end } })");
  constexpr int kThreads = 6;
  constexpr int kRunsEach = 15;
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRunsEach; ++i) {
        json task = DefaultTask();
        task["node_id"] = "n" + std::to_string(t) + "-" + std::to_string(i);
        RunResult r = p.Run(WEFT_ACTION_INSTALL, task);
        if (r.rc == WEFT_OK && r.result["sum"] == 200010000 && r.result["node"] == task["node_id"] &&
            r.progress.size() == 3) {
          ++good;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(good.load() == kThreads * kRunsEach);
}

TEST_CASE("lua: the example plugins in scripts/lua load and run", "[lua]") {
  const std::filesystem::path dir = WEFT_SOURCE_DIR "/scripts/lua";
  SECTION("hello.lua, an automator") {
    auto d = LoadLuaPlugin(dir / "hello.lua");
    INFO(d.status().ToString());
    REQUIRE(d.ok());
    CHECK((*d)->kind == WEFT_KIND_AUTOMATOR);
    Plugin p(*d);
    json task = DefaultTask();
    task["hostname"] = "web1.example.com";
    task["service"]["action"]["fields"] = {{"greeting", "hello"}};
    RunResult r = p.Run(WEFT_ACTION_INSTALL, task);
    INFO(r.err);
    REQUIRE(r.rc == WEFT_OK);
    CHECK(r.result["greeting"] == "hello, web1.example.com");
    CHECK_FALSE(r.progress.empty());
    CHECK_THAT(r.out, Contains("INSTALL"));
  }
  SECTION("pool.lua, a provider (CREATE needs no SSH; the rest is in lua_examples_test)") {
    auto d = LoadLuaPlugin(dir / "pool.lua");
    INFO(d.status().ToString());
    REQUIRE(d.ok());
    CHECK((*d)->kind == WEFT_KIND_PROVIDER);
    CHECK((*d)->actions == (WEFT_ACTION_CREATE | WEFT_ACTION_CONFIRM | WEFT_ACTION_DELETE));
    REQUIRE((*d)->field_count == 3);
    CHECK(std::string((*d)->fields[0].name) == "hosts");
    CHECK(((*d)->fields[0].flags & WEFT_FIELD_REQUIRED) != 0);
    CHECK(std::string((*d)->fields[2].name) == "ssh_key");
    CHECK(((*d)->fields[2].flags & WEFT_FIELD_SENSITIVE) != 0);
    Plugin p(*d);
    auto entry = [](const std::string& address) {
      return json{{"address", address}, {"host_keys", {"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + address}}};
    };
    json task = DefaultTask();
    task.erase("service");
    task["action"] = "CREATE";
    task["node_id"] = "n2";
    task["nodes"] = {{{"id", "n1"}, {"access_v4", ""}}, {{"id", "n2"}, {"access_v4", ""}}};
    task["provider"] = {{"type", "static-pool"},
                        {"fields",
                         {{"hosts", {entry("127.0.1.1"), entry("127.0.1.2"), entry("127.0.1.3")}},
                          {"ssh_key", "-----BEGIN OPENSSH PRIVATE KEY-----\nnot really\n"}}}};
    RunResult c = p.Run(WEFT_ACTION_CREATE, task);
    INFO(c.err);
    REQUIRE(c.rc == WEFT_OK);
    CHECK(c.result["provider_id"] == "static-pool:127.0.1.2:22");  // n2 is second of the waiting nodes
    CHECK(c.result["ssh_auth"]["user"] == "root");
    CHECK(c.result["access_v4"] == "127.0.1.2");
    CHECK(c.result["host_keys"] == json::array({"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI127.0.1.2"}));
    CHECK_THAT(c.out, !Contains("not really"));

    // The pool given as JSON text works the same; a bare address is refused.
    task["provider"]["fields"]["hosts"] = json::array({entry("127.0.1.1"), entry("127.0.1.2")}).dump();
    CHECK(p.Run(WEFT_ACTION_CREATE, task).result["provider_id"] == "static-pool:127.0.1.2:22");
    task["provider"]["fields"]["hosts"] = json::array({"127.0.1.1"});
    RunResult bare = p.Run(WEFT_ACTION_CREATE, task);
    CHECK(bare.rc == WEFT_ERR_FAILED);
    CHECK_THAT(bare.err, Contains("field 'hosts' entry 1 must be an object {address, port?, user?, host_keys}"));
    task["provider"]["fields"]["hosts"] = json::array({entry("127.0.1.1")});
    RunResult full = p.Run(WEFT_ACTION_CREATE, task);
    CHECK(full.rc == WEFT_ERR_FAILED);
    CHECK_THAT(full.err, Contains("static pool exhausted: its 1 machines cannot serve 2 more node(s)"));
    task["provider"]["fields"]["ssh_key"] = "hunter2";
    RunResult nokey = p.Run(WEFT_ACTION_CREATE, task);
    CHECK(nokey.rc == WEFT_ERR_FAILED);
    CHECK_THAT(nokey.err, Contains("field 'ssh_key' does not hold a private key") && !Contains("hunter2"));

    // DELETE of a node that never got a machine has nothing to do.
    task["action"] = "DELETE";
    RunResult del = p.Run(WEFT_ACTION_DELETE, task);
    INFO(del.err);
    CHECK(del.rc == WEFT_OK);
    CHECK_THAT(del.out, Contains("holds no machine; nothing to release"));
  }
  SECTION("shell.lua, an automator over SSH (run against real nodes in lua_examples_test)") {
    auto d = LoadLuaPlugin(dir / "shell.lua");
    INFO(d.status().ToString());
    REQUIRE(d.ok());
    CHECK((*d)->kind == WEFT_KIND_AUTOMATOR);
    CHECK(std::string((*d)->type_name) == "shell-lua");
    Plugin p(*d);
    RunResult both = p.Run(WEFT_ACTION_INSTALL);  // neither command nor script
    CHECK(both.rc == WEFT_ERR_FAILED);
    CHECK_THAT(both.err, Contains("give exactly one of the fields 'command' (a command line) and 'script'"));
  }
}

TEST_CASE("lua: limits must be positive, a huge time budget means no practical limit", "[lua]") {
  LuaLimits zero = TestLimits();
  zero.memory_bytes = 0;
  auto r = LoadLuaPluginSource("z.lua", Automator("return"), zero);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().message(), Contains("Lua limits must all be positive"));

  LuaLimits huge = TestLimits();
  huge.time_budget_ms = std::numeric_limits<std::int64_t>::max();
  Plugin p(Automator("task:set_result('ok', true)"), huge);
  RunResult run = p.Run(WEFT_ACTION_INSTALL);
  INFO(run.err);
  CHECK(run.rc == WEFT_OK);
  CHECK(run.result["ok"] == true);
}

TEST_CASE("lua: a memory cap too small for the sandbox itself is a load error", "[lua]") {
  LuaLimits tiny = TestLimits();
  tiny.memory_bytes = 4096;
  auto r = LoadLuaPluginSource("tiny.lua", Automator("return"), tiny);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().message(), Contains("Lua plugin tiny.lua exceeded its memory cap of 4 KiB while loading"));
}

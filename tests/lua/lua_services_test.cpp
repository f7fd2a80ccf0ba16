// The Lua side of the SSH services and the JSON helpers, where no node is
// needed: arguments are checked, with a sentence, before anything connects.
#include "lua_test_util.hpp"

using namespace weft::lua_test;
using Catch::Contains;

namespace {

// The error a one-line install body fails with.
std::string ErrorOf(const std::string& body) {
  Plugin p(Automator(body));
  RunResult r = p.Run(WEFT_ACTION_INSTALL);
  INFO(r.err);
  CHECK(r.rc != WEFT_OK);
  return r.err;
}

}  // namespace

TEST_CASE("lua services: SSH arguments are checked before connecting", "[lua]") {
  CHECK_THAT(ErrorOf("task:write('x', '/tmp/f', 0644)"),
             Contains("t.lua:3: task:write: the mode must be an octal string such as \"0644\" or \"0755\", not the "
                      "number 644 (Lua has no octal numbers"));
  CHECK_THAT(ErrorOf("task:write('x', '/tmp/f', '0986')"), Contains("the mode '0986' is not an octal file mode"));
  CHECK_THAT(ErrorOf("task:upload('/x', '/tmp/f', '4755')"),
             Contains("task:upload: the mode '4755' sets setuid, setgid or sticky bits, which SCP cannot carry"));
  CHECK_THAT(ErrorOf("task:write('x', '/tmp/f', '0644', { timeout = 5 })"),
             Contains("task:write: unknown option 'timeout'; the option is timeout_ms"));
  CHECK_THAT(ErrorOf("task:write({}, '/tmp/f')"), Contains("task:write: the text must be a string, not a table"));
  CHECK_THAT(ErrorOf("task:write(nil, '/tmp/f')"), Contains("task:write: the text must be a string, not nil"));
  CHECK_THAT(ErrorOf("task:exec('true', { timeout = 5 })"),
             Contains("task:exec: unknown option 'timeout'; the options are timeout_ms, on_stdout, on_stderr, "
                      "max_output_bytes"));
  CHECK_THAT(ErrorOf("task:exec('true', { timeout_ms = 1.5 })"),
             Contains("task:exec: timeout_ms must be a whole number of milliseconds such as 60000, not a float"));
  CHECK_THAT(ErrorOf("task:exec('true', { timeout_ms = 0 })"), Contains("timeout_ms must be from 1 to 86400000"));
  CHECK_THAT(ErrorOf("task:exec('true', { on_stdout = 'print' })"),
             Contains("task:exec: on_stdout must be a function(chunk), not a string"));
  CHECK_THAT(ErrorOf("task:exec('true', { max_output_bytes = 1000000000000 })"),
             Contains("max_output_bytes must be an integer from 0 to the plugin's memory cap (8 MiB)"));
  CHECK_THAT(ErrorOf("task:exec('')"), Contains("task:exec: the command is empty"));
  CHECK_THAT(ErrorOf("task.exec('true')"), Contains("task:exec must be called as task:exec(...)"));
  // The default task says nothing about its node: the SSH service's own sentence.
  CHECK_THAT(ErrorOf("task:exec('true')"), Contains("t.lua:3: the task for node n1 has no access_v4 address"));
}

TEST_CASE("lua services: upload takes only the task's resource files", "[lua]") {
  json task = DefaultTask();
  task["resources"] = json::array({{{"type", "scripts"}, {"name", "a.sh"}, {"path", "/var/cache/weft/r/1/a.sh"}}});
  Plugin p(Automator("task:upload(task.fields.from, '/tmp/x')"));
  for (const char* from : {"/etc/shadow", "/var/cache/weft/r/1/../../../../etc/shadow", "a.sh"}) {
    task["service"]["action"]["fields"] = {{"from", from}};
    RunResult r = p.Run(WEFT_ACTION_INSTALL, task);
    INFO(from);
    CHECK(r.rc == WEFT_ERR_FAILED);
    CHECK_THAT(r.err, Contains("broke a sandbox rule during INSTALL: t.lua:3: task:upload: the local file '" +
                               std::string(from) + "' is not one of this task's resources"));
  }
  // The resource's own path passes the rule (and the SSH service then looks for the file).
  task["service"]["action"]["fields"] = {{"from", "/var/cache/weft/r/1/a.sh"}};
  RunResult r = p.Run(WEFT_ACTION_INSTALL, task);
  CHECK(r.rc == WEFT_ERR_INVALID);
  CHECK_THAT(r.err, Contains("t.lua:3: ssh_upload: cannot read the local file /var/cache/weft/r/1/a.sh"));
  CHECK_THAT(r.err, !Contains("sandbox rule"));
}

TEST_CASE("lua services: weft.json_encode and weft.json_decode", "[lua]") {
  Plugin p(Automator(R"(
    task:set_result("text", weft.json_encode({ a = 1, list = weft.array({}), s = "x\"y" }))
    local v = weft.json_decode('{"n": 2, "l": [1, null, "z"], "o": {}}')
    task:set_result("n", v.n)
    task:set_result("l2", v.l[2] == weft.null)
    task:set_result("round", weft.json_encode(v.l))
    local ok, e = pcall(weft.json_decode, "{nope")
    task:set_result("bad", e)
    local ok2, e2 = pcall(weft.json_encode, { f = print })
    task:set_result("bad2", e2)
  )"));
  RunResult r = p.Run(WEFT_ACTION_INSTALL);
  INFO(r.err);
  REQUIRE(r.rc == WEFT_OK);
  CHECK(json::parse(r.result["text"].get<std::string>()) == json({{"a", 1}, {"list", json::array()}, {"s", "x\"y"}}));
  CHECK(r.result["n"] == 2);
  CHECK(r.result["l2"] == true);
  CHECK(r.result["round"] == "[1,null,\"z\"]");
  CHECK_THAT(r.result["bad"].get<std::string>(), Contains("weft.json_decode: the text is not valid JSON"));
  CHECK_THAT(r.result["bad2"].get<std::string>(), Contains("weft.json_encode: value.f is a function"));
}

TEST_CASE("lua services: task.action names the action being run", "[lua]") {
  Plugin p("return { type = 't', kind = 'automator', actions = {"
           " install = function(task) task:set_result('a', task.action) end,"
           " stop = function(task) task:set_result('a', task.action) end } }");
  CHECK(p.Run(WEFT_ACTION_INSTALL).result["a"] == "INSTALL");
  CHECK(p.Run(WEFT_ACTION_STOP).result["a"] == "STOP");  // whatever the task JSON's "action" says
}

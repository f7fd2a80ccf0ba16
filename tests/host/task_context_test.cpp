#include <catch2/catch.hpp>

#include <cstdio>
#include <thread>
#include <vector>

#include "weft/host/plugin_loader.hpp"
#include "weft/host/task_context.hpp"

using weft::host::TaskContext;

namespace {
const weft_host_services& Svc() { return *weft::host::HostServices(); }
}  // namespace

TEST_CASE("task context: the services table is a 1.1 table with the SSH services", "[host][task]") {
  CHECK(Svc().struct_size == sizeof(weft_host_services));
  CHECK(Svc().abi_major == WEFT_ABI_MAJOR);
  CHECK(Svc().abi_minor == WEFT_ABI_MINOR);
  CHECK(WEFT_HOST_HAS(&Svc(), cancelled));
  REQUIRE(WEFT_HOST_HAS(&Svc(), ssh_write));
  CHECK(Svc().ssh_exec != nullptr);
  CHECK(Svc().ssh_upload != nullptr);
  CHECK(Svc().ssh_write != nullptr);
}

TEST_CASE("task context: ssh_exec on a task that names no node is refused with a sentence", "[host][task]") {
  TaskContext ctx(R"({"node_id":"n1"})", nullptr);
  char err[256] = {0};
  int status = -1;
  CHECK(Svc().ssh_exec(ctx.handle(), "true", 1000, nullptr, nullptr, nullptr, &status, err, sizeof err) ==
        WEFT_ERR_INVALID);
  CHECK_THAT(std::string(err), Catch::Contains("access_v4"));
}

TEST_CASE("task context: set_result accepts JSON text and refuses anything else", "[host][task]") {
  TaskContext ctx("{}", nullptr);
  char err[256] = {0};
  CHECK(Svc().set_result(ctx.handle(), "provider_id", "\"i-123\"", err, sizeof err) == WEFT_OK);
  CHECK(Svc().set_result(ctx.handle(), "count", "3", err, sizeof err) == WEFT_OK);
  CHECK(Svc().set_result(ctx.handle(), "ssh_auth", "{\"user\":\"u\"}", err, sizeof err) == WEFT_OK);
  CHECK(ctx.result() == nlohmann::json({{"provider_id", "i-123"}, {"count", 3}, {"ssh_auth", {{"user", "u"}}}}));

  // An unquoted string is the classic mistake: refused, with a message, and the value is not echoed.
  CHECK(Svc().set_result(ctx.handle(), "password", "hunter2", err, sizeof err) == WEFT_ERR_INVALID);
  CHECK_THAT(std::string(err), Catch::Contains("'password'") && Catch::Contains("not valid JSON"));
  CHECK(std::string(err).find("hunter2") == std::string::npos);
  CHECK(Svc().set_result(ctx.handle(), "", "1", err, sizeof err) == WEFT_ERR_INVALID);
  CHECK(Svc().set_result(ctx.handle(), "k", nullptr, err, sizeof err) == WEFT_ERR_INVALID);
  CHECK(Svc().set_result(nullptr, "k", "1", err, sizeof err) == WEFT_ERR_INVALID);
  // A tiny buffer is never overrun.
  char small[8];
  CHECK(Svc().set_result(ctx.handle(), "k", "{", small, sizeof small) == WEFT_ERR_INVALID);
  CHECK(std::string(small).size() == 7);
  CHECK_FALSE(ctx.result().contains("password"));
}

TEST_CASE("task context: cancel sets the flag the plugin polls, the first reason wins", "[host][task]") {
  TaskContext ctx("{}", nullptr);
  CHECK(Svc().cancelled(ctx.handle()) == 0);
  std::thread other([&] { ctx.Cancel("host shutting down"); });
  other.join();
  CHECK(Svc().cancelled(ctx.handle()) != 0);
  ctx.Cancel("task timed out");
  CHECK(ctx.cancel_reason() == "host shutting down");
  CHECK(Svc().cancelled(nullptr) == 0);
}

TEST_CASE("task context: log lines go to capped output tails", "[host][task]") {
  TaskContext ctx("{}", nullptr, /*tail_bytes=*/32);
  Svc().log(ctx.handle(), WEFT_LOG_INFO, "first");
  Svc().log(ctx.handle(), WEFT_LOG_ERROR, "boom");
  CHECK(ctx.stdout_tail() == "first\n");
  CHECK(ctx.stderr_tail() == "boom\n");
  for (int i = 0; i < 10; ++i) Svc().log(ctx.handle(), WEFT_LOG_DEBUG, ("line " + std::to_string(i)).c_str());
  CHECK(ctx.stdout_tail().size() <= 32);
  CHECK_THAT(ctx.stdout_tail(), Catch::EndsWith("line 9\n"));
  CHECK(ctx.stdout_tail().find("first") == std::string::npos);
  Svc().log(ctx.handle(), WEFT_LOG_INFO, nullptr);  // ignored, not a crash
  Svc().log(nullptr, WEFT_LOG_DEBUG, "outside a task");
}

TEST_CASE("task context: the default tail cap is 64 KiB and never splits a UTF-8 character", "[host][task]") {
  TaskContext big("{}", nullptr);
  std::string line(1000, 'x');
  for (int i = 0; i < 100; ++i) Svc().log(big.handle(), WEFT_LOG_WARN, line.c_str());
  CHECK(big.stderr_tail().size() <= 64 * 1024);
  CHECK(big.stderr_tail().size() > 60 * 1024);

  TaskContext ctx("{}", nullptr, 5);
  Svc().log(ctx.handle(), WEFT_LOG_INFO, "\xC3\xA9\xC3\xA9\xC3\xA9");  // "ééé": 6 bytes + newline
  std::string tail = ctx.stdout_tail();
  CHECK(tail.size() <= 5);
  CHECK((static_cast<unsigned char>(tail[0]) & 0xC0) != 0x80);
}

TEST_CASE("task context: task_json and progress reach the host", "[host][task]") {
  std::vector<std::pair<int, std::string>> seen;
  TaskContext ctx(R"({"task_id":7})", [&](int p, const std::string& m) { seen.emplace_back(p, m); });
  CHECK(std::string(Svc().task_json(ctx.handle())) == R"({"task_id":7})");
  Svc().progress(ctx.handle(), 50, "halfway");
  Svc().progress(ctx.handle(), 250, nullptr);
  Svc().progress(ctx.handle(), -3, "x");
  REQUIRE(seen.size() == 3);
  CHECK(seen[0] == std::make_pair(50, std::string("halfway")));
  CHECK(seen[1] == std::make_pair(100, std::string()));
  CHECK(seen[2].first == 0);
}

TEST_CASE("task context: field_json and node_json find the plugin's fields and the node's facts", "[host][task]") {
  TaskContext ctx(R"({"hostname":"n1.c","access_v4":null,
      "provider":{"fields":{"state_dir":"/p","user":null}},
      "service":{"action":{"fields":{"command":"true"}}},
      "results":{"access_v4":"10.0.0.5","ssh_port":2222},
      "node":{"id":"n1","results":{"provider_id":"i-1","ssh_port":22}}})",
                  nullptr);
  ctx.SetPluginKind(WEFT_KIND_PROVIDER);
  REQUIRE(Svc().field_json(ctx.handle(), "state_dir") != nullptr);
  CHECK(std::string(Svc().field_json(ctx.handle(), "state_dir")) == "\"/p\"");
  CHECK(Svc().field_json(ctx.handle(), "user") == nullptr);     // null counts as absent
  CHECK(Svc().field_json(ctx.handle(), "command") == nullptr);  // an automator's field
  CHECK(std::string(Svc().node_json(ctx.handle(), "hostname")) == "\"n1.c\"");
  CHECK(std::string(Svc().node_json(ctx.handle(), "access_v4")) == "\"10.0.0.5\"");  // results, past the null
  CHECK(std::string(Svc().node_json(ctx.handle(), "ssh_port")) == "2222");            // results before node
  CHECK(std::string(Svc().node_json(ctx.handle(), "provider_id")) == "\"i-1\"");      // node.results
  CHECK(Svc().node_json(ctx.handle(), "host_keys") == nullptr);
  // The same question gets the same pointer: text handed out stays valid.
  CHECK(Svc().node_json(ctx.handle(), "hostname") == Svc().node_json(ctx.handle(), "hostname"));

  TaskContext automator(R"({"service":{"action":{"fields":{"command":"true"}}}})", nullptr);
  automator.SetPluginKind(WEFT_KIND_AUTOMATOR);
  CHECK(std::string(Svc().field_json(automator.handle(), "command")) == "\"true\"");
  TaskContext by_hand(R"({"fields":{"command":"true"}})", nullptr);
  CHECK(std::string(Svc().field_json(by_hand.handle(), "command")) == "\"true\"");
  CHECK(Svc().field_json(nullptr, "command") == nullptr);
}

namespace {

// A provider whose run reports what field_json gives it, as a native plugin sees it.
struct FieldProbe {
  static inline int runs = 0;
  static int Run(void*, const weft_host_services* host, weft_task* task, std::uint32_t, char*, std::size_t) {
    ++runs;
    for (const char* name : {"address", "zone", "port"}) {
      const char* v = host->field_json(task, name);
      if (v) host->set_result(task, name, v, nullptr, 0);
    }
    return WEFT_OK;
  }
};

const weft_field kProbeFields[] = {
    {"address", "Address", WEFT_FIELD_STRING, 0, "\"127.0.0.1\"", nullptr},
    {"zone", "Zone", WEFT_FIELD_STRING, WEFT_FIELD_REQUIRED, nullptr, nullptr},
    {"port", "Port", WEFT_FIELD_INTEGER, WEFT_FIELD_REQUIRED, "22", nullptr},
};

weft_plugin_descriptor ProbeDescriptor() {
  weft_plugin_descriptor d{};
  d.struct_size = sizeof d;
  d.abi_major = WEFT_ABI_MAJOR;
  d.abi_minor = WEFT_ABI_MINOR;
  d.kind = WEFT_KIND_PROVIDER;
  d.type_name = "probe";
  d.actions = WEFT_ACTION_CREATE | WEFT_ACTION_CONFIRM | WEFT_ACTION_DELETE;
  d.field_count = 3;
  d.field_size = sizeof(weft_field);
  d.fields = kProbeFields;
  d.run = &FieldProbe::Run;
  return d;
}

}  // namespace

TEST_CASE("task context: a native plugin's field_json gets the defaults it declares", "[host][task]") {
  const weft_plugin_descriptor d = ProbeDescriptor();
  TaskContext ctx(R"({"provider":{"fields":{"zone":"z1"}}})", nullptr);
  weft::host::ActionOutcome o =
      weft::host::RunAction(&d, nullptr, weft::host::HostServices(), ctx, WEFT_ACTION_CREATE, "probe", "CREATE");
  INFO(o.message);
  REQUIRE(o.succeeded);
  CHECK(ctx.result() == nlohmann::json::parse(R"({"address":"127.0.0.1","zone":"z1","port":22})"));

  // A value the task gives wins over the default; a null counts as left out.
  TaskContext given(R"({"provider":{"fields":{"zone":"z1","address":"10.1.1.1","port":null}}})", nullptr);
  REQUIRE(weft::host::RunAction(&d, nullptr, weft::host::HostServices(), given, WEFT_ACTION_CREATE, "probe", "CREATE")
              .succeeded);
  CHECK(given.result() == nlohmann::json::parse(R"({"address":"10.1.1.1","zone":"z1","port":22})"));
  // A string is passed on for an integer field (a macro expands to text); the plugin reads it.
  TaskContext text(R"({"provider":{"fields":{"zone":"z1","port":"2222"}}})", nullptr);
  REQUIRE(weft::host::RunAction(&d, nullptr, weft::host::HostServices(), text, WEFT_ACTION_CREATE, "probe", "CREATE")
              .succeeded);
  CHECK(text.result()["port"] == "2222");
}

TEST_CASE("task context: a native plugin's missing required field or wrong field type is an invalid task",
          "[host][task]") {
  const weft_plugin_descriptor d = ProbeDescriptor();
  FieldProbe::runs = 0;
  for (const char* fields : {R"({})", R"({"zone":null})"}) {
    TaskContext ctx(std::string(R"({"provider":{"fields":)") + fields + "}}", nullptr);
    weft::host::ActionOutcome o =
        weft::host::RunAction(&d, nullptr, weft::host::HostServices(), ctx, WEFT_ACTION_CREATE, "probe", "CREATE");
    CHECK_FALSE(o.succeeded);
    CHECK(o.code == "INVALID");
    CHECK(o.message ==
          "probe CREATE invalid task: required field 'zone' is missing from the task's provider fields; "
          "set it there");
  }
  TaskContext wrong(R"({"provider":{"fields":{"zone":5}}})", nullptr);
  weft::host::ActionOutcome o =
      weft::host::RunAction(&d, nullptr, weft::host::HostServices(), wrong, WEFT_ACTION_CREATE, "probe", "CREATE");
  CHECK(o.code == "INVALID");
  CHECK(
      o.message ==
      "probe CREATE invalid task: field 'zone' must be a string, not an integer; fix it in the task's provider fields");
  TaskContext fraction(R"({"provider":{"fields":{"zone":"z","port":22.5}}})", nullptr);
  o = weft::host::RunAction(&d, nullptr, weft::host::HostServices(), fraction, WEFT_ACTION_CREATE, "probe", "CREATE");
  CHECK(o.code == "INVALID");
  CHECK_THAT(o.message, Catch::Contains("field 'port' must be an integer, not a number"));
  CHECK(FieldProbe::runs == 0);  // the plugin's code never ran
}

TEST_CASE("task context: a native plugin failing on a result set_result refused names the result, not the task",
          "[host][task]") {
  weft_plugin_descriptor d = ProbeDescriptor();
  d.field_count = 0;
  d.fields = nullptr;
  // As the C++ SDK's SetResult does: the host's refusal, thrown and returned as INVALID.
  d.run = [](void*, const weft_host_services* host, weft_task* task, std::uint32_t, char* err,
             std::size_t err_len) -> int {
    char why[256] = {0};
    const int rc = host->set_result(task, "password", "hunter2", why, sizeof why);
    std::snprintf(err, err_len, "set_result('password'): %s", why);
    return rc;
  };
  TaskContext ctx("{}", nullptr);
  weft::host::ActionOutcome o =
      weft::host::RunAction(&d, nullptr, weft::host::HostServices(), ctx, WEFT_ACTION_CREATE, "probe", "CREATE");
  CHECK_FALSE(o.succeeded);
  CHECK(o.code == "INVALID");
  CHECK_THAT(o.message, Catch::StartsWith("probe CREATE invalid result: set_result('password'): ") &&
                            Catch::Contains("not valid JSON") && !Catch::Contains("invalid task") &&
                            !Catch::Contains("hunter2"));
}

#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "weft/host/plugin_loader.hpp"
#include "weft/host/task_context.hpp"
#include "weft/plugin.hpp"

namespace {

// What each test plugin's Run should do, chosen by the task JSON's "mode".
class Modal : public weft::sdk::Plugin {
 public:
  static weft::sdk::Info Describe() {
    weft::sdk::Info info;
    info.type_name = "modal";
    info.kind = WEFT_KIND_PROVIDER;
    info.version = "2.1";
    info.actions = {WEFT_ACTION_CREATE, WEFT_ACTION_DELETE};
    info.fields = {{"size", "Size", WEFT_FIELD_INTEGER, true, false, "3", "how many"},
                   {"password", "Password", WEFT_FIELD_STRING, false, true, "", ""}};
    info.resource_types = {"scripts", "archives"};
    return info;
  }
  void Run(weft_action action, weft::sdk::Task& task) override {
    std::string json(task.Json());
    if (json.find("sdk-error") != std::string::npos) throw weft::sdk::Error(WEFT_ERR_INVALID, "size must be > 0");
    if (json.find("std-error") != std::string::npos) throw std::runtime_error("disk full");
    if (json.find("weird-error") != std::string::npos) throw 42;
    if (json.find("zero-code") != std::string::npos) throw weft::sdk::Error(WEFT_OK, "claims ok");
    if (json.find("bad-result") != std::string::npos) task.SetResult("id", "not json");
    task.Info("running " + std::to_string(action));
    task.SetResultString("name", "a \"quoted\"\nname");
    task.Progress(40, "forty");
  }
};

class ThrowingCtor : public weft::sdk::Plugin {
 public:
  static weft::sdk::Info Describe() {
    weft::sdk::Info info;
    info.type_name = "throwing-ctor";
    info.actions = {WEFT_ACTION_START};
    return info;
  }
  ThrowingCtor() { throw std::runtime_error("no config file"); }
  void Run(weft_action, weft::sdk::Task&) override {}
};

class ThrowingDescribe : public weft::sdk::Plugin {
 public:
  static weft::sdk::Info Describe() { throw std::runtime_error("cannot describe"); }
  void Run(weft_action, weft::sdk::Task&) override {}
};

struct Ran {
  int rc;
  std::string err;
  nlohmann::json result;
};

Ran RunModal(const std::string& task_json) {
  char err[256] = {0};
  const weft_plugin_descriptor* d = weft::sdk::detail::Entry<Modal>(WEFT_ABI_MAJOR, WEFT_ABI_MINOR, err, sizeof err);
  REQUIRE(d != nullptr);
  void* instance = nullptr;
  REQUIRE(d->init(weft::host::HostServices(), &instance, err, sizeof err) == WEFT_OK);
  weft::host::TaskContext ctx(task_json, nullptr);
  int rc = d->run(instance, weft::host::HostServices(), ctx.handle(), WEFT_ACTION_CREATE, err, sizeof err);
  d->destroy(instance);
  return {rc, err, ctx.result()};
}

}  // namespace

// The one entry symbol of this test binary, made by the macro as a plugin would.
WEFT_PLUGIN(Modal)

TEST_CASE("sdk c++ layer: Describe becomes a valid 1.0 descriptor", "[sdk][cpp]") {
  char err[128] = {0};
  const weft_plugin_descriptor* d = weft_plugin_entry(WEFT_ABI_MAJOR, WEFT_ABI_MINOR, err, sizeof err);
  REQUIRE(d != nullptr);
  CHECK(d->struct_size == sizeof(weft_plugin_descriptor));
  CHECK(d->abi_major == WEFT_ABI_MAJOR);
  CHECK(d->abi_minor == WEFT_ABI_MINOR);
  CHECK(d->kind == WEFT_KIND_PROVIDER);
  CHECK(std::string(d->type_name) == "modal");
  CHECK(std::string(d->version) == "2.1");
  CHECK(d->description == nullptr);
  CHECK(d->actions == (WEFT_ACTION_CREATE | WEFT_ACTION_DELETE));
  REQUIRE(d->field_count == 2);
  CHECK(d->field_size == sizeof(weft_field));
  CHECK(std::string(d->fields[0].name) == "size");
  CHECK(d->fields[0].flags == WEFT_FIELD_REQUIRED);
  CHECK(std::string(d->fields[0].default_json) == "3");
  CHECK(d->fields[1].flags == WEFT_FIELD_SENSITIVE);
  CHECK(d->fields[1].default_json == nullptr);
  REQUIRE(d->resource_type_count == 2);
  CHECK(std::string(d->resource_types[1]) == "archives");
  CHECK(d->run != nullptr);
  // The same static descriptor every time.
  CHECK(weft_plugin_entry(WEFT_ABI_MAJOR, WEFT_ABI_MINOR, err, sizeof err) == d);
}

TEST_CASE("sdk c++ layer: a host with another major gets NULL and a sentence", "[sdk][cpp]") {
  char err[256] = {0};
  CHECK(weft_plugin_entry(WEFT_ABI_MAJOR + 1, 0, err, sizeof err) == nullptr);
  CHECK_THAT(std::string(err), Catch::Contains("plugin needs Weft plugin ABI 1.2") && Catch::Contains("offers 2.0"));
}

TEST_CASE("sdk c++ layer: a successful run sets results through the host", "[sdk][cpp]") {
  Ran r = RunModal("{}");
  CHECK(r.rc == WEFT_OK);
  CHECK(r.result == nlohmann::json({{"name", "a \"quoted\"\nname"}}));
}

TEST_CASE("sdk c++ layer: exceptions become codes and messages, never cross the ABI", "[sdk][cpp]") {
  Ran a = RunModal(R"({"mode":"sdk-error"})");
  CHECK(a.rc == WEFT_ERR_INVALID);
  CHECK(a.err == "size must be > 0");
  Ran b = RunModal(R"({"mode":"std-error"})");
  CHECK(b.rc == WEFT_ERR_FAILED);
  CHECK(b.err == "disk full");
  Ran c = RunModal(R"({"mode":"weird-error"})");
  CHECK(c.rc == WEFT_ERR_FAILED);
  CHECK_THAT(c.err, Catch::Contains("non-standard exception"));
  Ran d = RunModal(R"({"mode":"zero-code"})");
  CHECK(d.rc == WEFT_ERR_FAILED);  // an Error can never claim success
  Ran e = RunModal(R"({"mode":"bad-result"})");
  CHECK(e.rc == WEFT_ERR_INVALID);  // the host's refusal comes back as the run's code
  CHECK_THAT(e.err, Catch::Contains("set_result('id')") && Catch::Contains("not valid JSON"));
}

TEST_CASE("sdk c++ layer: a throwing constructor or Describe fails init or entry", "[sdk][cpp]") {
  char err[256] = {0};
  const weft_plugin_descriptor* d =
      weft::sdk::detail::Entry<ThrowingCtor>(WEFT_ABI_MAJOR, WEFT_ABI_MINOR, err, sizeof err);
  REQUIRE(d != nullptr);
  void* instance = reinterpret_cast<void*>(0x1);
  CHECK(d->init(weft::host::HostServices(), &instance, err, sizeof err) == WEFT_ERR_INTERNAL);
  CHECK(std::string(err) == "no config file");

  char err2[256] = {0};
  CHECK(weft::sdk::detail::Entry<ThrowingDescribe>(WEFT_ABI_MAJOR, WEFT_ABI_MINOR, err2, sizeof err2) == nullptr);
  CHECK(std::string(err2) == "cannot describe");
}

TEST_CASE("sdk c++ layer: Quote escapes what JSON needs", "[sdk][cpp]") {
  CHECK(weft::sdk::Task::Quote("a\"b\\c\n\x01") == R"("a\"b\\c\n\u0001")");
}

TEST_CASE("sdk c++ layer: OutputLines logs streamed chunks as whole lines and keeps the last ones",
          "[sdk][cpp]") {
  weft::host::TaskContext ctx("{}", nullptr);
  weft::sdk::Task task(weft::host::HostServices(), ctx.handle());
  std::vector<std::string> seen;
  weft::sdk::OutputLines err(task, WEFT_LOG_WARN, [&](const std::string& line) { seen.push_back(line); });
  // Lines split across chunks, empty lines, and a last line with no newline.
  for (std::string_view chunk : {"fir", "st\nsec", "ond\n\n", "thi", "rd"}) err.Add(chunk);
  CHECK(seen == std::vector<std::string>{"first", "second"});
  err.Flush();
  CHECK(seen == std::vector<std::string>{"first", "second", "third"});
  CHECK(ctx.stderr_tail() == "first\nsecond\nthird\n");
  CHECK(ctx.stdout_tail().empty());

  // A line longer than kMaxLineBytes comes in pieces of that size.
  seen.clear();
  const std::string long_line(weft::sdk::OutputLines::kMaxLineBytes * 2 + 10, 'x');
  err.Add(long_line.substr(0, 5000));
  err.Add(long_line.substr(5000) + "\n");
  REQUIRE(seen.size() == 3);
  CHECK(seen[0].size() == weft::sdk::OutputLines::kMaxLineBytes);
  CHECK(seen[1].size() == weft::sdk::OutputLines::kMaxLineBytes);
  CHECK(seen[2].size() == 10);

  // Only the last kKeptLines stay, oldest first.
  weft::sdk::OutputLines out(task, WEFT_LOG_INFO);
  for (int i = 0; i < 30; ++i) out.Add("line " + std::to_string(i) + "\n");
  REQUIRE(out.tail().size() == weft::sdk::OutputLines::kKeptLines);
  CHECK(out.tail().front() == "line 10");
  CHECK(out.tail().back() == "line 29");
  CHECK(ctx.stdout_tail().find("line 29\n") != std::string::npos);
}

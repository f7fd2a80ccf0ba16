#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "abi_c.h"
#include "weft/host/plugin_loader.hpp"
#include "weft/host/task_context.hpp"
#include "weft/plugin.h"

namespace {

struct Row {
  std::size_t offset;
  std::size_t size;
};

// The ABI as released, frozen: every member's offset and size on the LP64
// targets Weft builds for (x86-64, aarch64). A member moved, resized or
// inserted before another changes a number here and fails the test; a minor
// version only appends rows. Both compilers' views are checked against it.
const std::map<std::string, Row> kFrozen = {
    {"weft_field", {0, 40}},
    {"weft_field.name", {0, 8}},
    {"weft_field.label", {8, 8}},
    {"weft_field.type", {16, 4}},
    {"weft_field.flags", {20, 4}},
    {"weft_field.default_json", {24, 8}},
    {"weft_field.description", {32, 8}},
    {"weft_host_services", {0, 96}},           // 1.2; 1.1 ended at 80 (the row below)
    {"weft_host_services up to 1.1", {0, 80}},
    {"weft_host_services.struct_size", {0, 4}},
    {"weft_host_services.abi_major", {4, 4}},
    {"weft_host_services.abi_minor", {8, 4}},
    {"weft_host_services.log", {16, 8}},  // 1.0
    {"weft_host_services.progress", {24, 8}},
    {"weft_host_services.set_result", {32, 8}},
    {"weft_host_services.task_json", {40, 8}},
    {"weft_host_services.cancelled", {48, 8}},
    {"weft_host_services.ssh_exec", {56, 8}},  // 1.1
    {"weft_host_services.ssh_upload", {64, 8}},
    {"weft_host_services.ssh_write", {72, 8}},
    {"weft_host_services.field_json", {80, 8}},  // 1.2
    {"weft_host_services.node_json", {88, 8}},
    {"weft_plugin_descriptor", {0, 96}},
    {"weft_plugin_descriptor.struct_size", {0, 4}},
    {"weft_plugin_descriptor.abi_major", {4, 4}},
    {"weft_plugin_descriptor.abi_minor", {8, 4}},
    {"weft_plugin_descriptor.kind", {12, 4}},
    {"weft_plugin_descriptor.type_name", {16, 8}},
    {"weft_plugin_descriptor.version", {24, 8}},
    {"weft_plugin_descriptor.description", {32, 8}},
    {"weft_plugin_descriptor.actions", {40, 4}},
    {"weft_plugin_descriptor.field_count", {44, 4}},
    {"weft_plugin_descriptor.field_size", {48, 4}},
    {"weft_plugin_descriptor.resource_type_count", {52, 4}},
    {"weft_plugin_descriptor.fields", {56, 8}},
    {"weft_plugin_descriptor.resource_types", {64, 8}},
    {"weft_plugin_descriptor.init", {72, 8}},
    {"weft_plugin_descriptor.run", {80, 8}},
    {"weft_plugin_descriptor.destroy", {88, 8}},
    {"enum weft_plugin_kind", {0, 4}},
    {"enum weft_action", {0, 4}},
    {"enum weft_field_type", {0, 4}},
    {"enum weft_log_level", {0, 4}},
};

#define ROW(s, m) {#s "." #m, Row{offsetof(s, m), sizeof(((s*)nullptr)->m)}}

std::map<std::string, Row> CxxLayout() {
  return {
      {"weft_field", Row{0, sizeof(weft_field)}},
      ROW(weft_field, name),
      ROW(weft_field, label),
      ROW(weft_field, type),
      ROW(weft_field, flags),
      ROW(weft_field, default_json),
      ROW(weft_field, description),
      {"weft_host_services", Row{0, sizeof(weft_host_services)}},
      {"weft_host_services up to 1.1", Row{0, offsetof(weft_host_services, field_json)}},
      ROW(weft_host_services, struct_size),
      ROW(weft_host_services, abi_major),
      ROW(weft_host_services, abi_minor),
      ROW(weft_host_services, log),
      ROW(weft_host_services, progress),
      ROW(weft_host_services, set_result),
      ROW(weft_host_services, task_json),
      ROW(weft_host_services, cancelled),
      ROW(weft_host_services, ssh_exec),
      ROW(weft_host_services, ssh_upload),
      ROW(weft_host_services, ssh_write),
      ROW(weft_host_services, field_json),
      ROW(weft_host_services, node_json),
      {"weft_plugin_descriptor", Row{0, sizeof(weft_plugin_descriptor)}},
      ROW(weft_plugin_descriptor, struct_size),
      ROW(weft_plugin_descriptor, abi_major),
      ROW(weft_plugin_descriptor, abi_minor),
      ROW(weft_plugin_descriptor, kind),
      ROW(weft_plugin_descriptor, type_name),
      ROW(weft_plugin_descriptor, version),
      ROW(weft_plugin_descriptor, description),
      ROW(weft_plugin_descriptor, actions),
      ROW(weft_plugin_descriptor, field_count),
      ROW(weft_plugin_descriptor, field_size),
      ROW(weft_plugin_descriptor, resource_type_count),
      ROW(weft_plugin_descriptor, fields),
      ROW(weft_plugin_descriptor, resource_types),
      ROW(weft_plugin_descriptor, init),
      ROW(weft_plugin_descriptor, run),
      ROW(weft_plugin_descriptor, destroy),
      {"enum weft_plugin_kind", Row{0, sizeof(weft_plugin_kind)}},
      {"enum weft_action", Row{0, sizeof(weft_action)}},
      {"enum weft_field_type", Row{0, sizeof(weft_field_type)}},
      {"enum weft_log_level", Row{0, sizeof(weft_log_level)}},
  };
}

}  // namespace

TEST_CASE("sdk: the C and the C++ compiler both see the frozen ABI layout", "[sdk][abi]") {
  static_assert(sizeof(void*) == 8, "kFrozen describes LP64 targets");
  std::size_t count = 0;
  const weft_c_layout* rows = weft_c_layout_rows(&count);
  const auto cxx = CxxLayout();
  // Every member is in all three tables: a member added to plugin.h without a
  // frozen row (or the other way round) fails here.
  REQUIRE(cxx.size() == kFrozen.size());
  REQUIRE(count == kFrozen.size());
  for (const auto& [what, frozen] : kFrozen) {
    INFO(what);
    auto it = cxx.find(what);
    REQUIRE(it != cxx.end());
    CHECK(it->second.offset == frozen.offset);
    CHECK(it->second.size == frozen.size);
  }
  for (std::size_t i = 0; i < count; ++i) {
    INFO(rows[i].what);
    auto it = kFrozen.find(rows[i].what);
    REQUIRE(it != kFrozen.end());
    CHECK(rows[i].offset == it->second.offset);
    CHECK(rows[i].size == it->second.size);
  }
}

TEST_CASE("sdk: every table starts with struct_size, abi_major, abi_minor", "[sdk][abi]") {
  // The host reads these three before it trusts anything else in a descriptor.
  STATIC_REQUIRE(offsetof(weft_plugin_descriptor, struct_size) == 0);
  STATIC_REQUIRE(offsetof(weft_plugin_descriptor, abi_major) == 4);
  STATIC_REQUIRE(offsetof(weft_plugin_descriptor, abi_minor) == 8);
  STATIC_REQUIRE(offsetof(weft_host_services, struct_size) == 0);
  STATIC_REQUIRE(offsetof(weft_host_services, abi_major) == 4);
  STATIC_REQUIRE(offsetof(weft_host_services, abi_minor) == 8);
  STATIC_REQUIRE(WEFT_OK == 0);
  // Enums never use 0 as a valid value, so a zeroed struct is never valid by accident.
  STATIC_REQUIRE(WEFT_KIND_PROVIDER != 0 && WEFT_FIELD_STRING != 0 && WEFT_LOG_DEBUG != 0 && WEFT_ACTION_CREATE != 0);
  CHECK(weft_c_field_type_json() == WEFT_FIELD_JSON);
}

TEST_CASE("sdk: WEFT_HOST_HAS tells which members an older host's table has", "[sdk][abi]") {
  weft_host_services older{};
  older.struct_size = static_cast<std::uint32_t>(offsetof(weft_host_services, task_json));
  CHECK(WEFT_HOST_HAS(&older, set_result));
  CHECK_FALSE(WEFT_HOST_HAS(&older, task_json));
  CHECK_FALSE(WEFT_HOST_HAS(&older, cancelled));
  CHECK(WEFT_HOST_HAS(weft::host::HostServices(), cancelled));
}

TEST_CASE("sdk: a plugin written in C runs against the host's services", "[sdk][abi]") {
  char err[128] = {0};
  CHECK(weft_c_entry()(2, 0, err, sizeof err) == nullptr);
  const weft_plugin_descriptor* d = weft_c_entry()(WEFT_ABI_MAJOR, WEFT_ABI_MINOR, err, sizeof err);
  REQUIRE(d != nullptr);
  CHECK(d->struct_size == sizeof(weft_plugin_descriptor));
  CHECK(std::string(d->type_name) == "c-plugin");
  CHECK(std::string(d->resource_types[0]) == "scripts");
  weft::host::TaskContext ctx("{}", nullptr);
  CHECK(d->run(nullptr, weft::host::HostServices(), ctx.handle(), WEFT_ACTION_CREATE, err, sizeof err) == WEFT_OK);
  CHECK(ctx.result() == nlohmann::json({{"lang", "c"}}));
  CHECK(ctx.stdout_tail() == "from C\n");
}

TEST_CASE("sdk: weft_action_name names each action bit the same for C and C++", "[sdk][abi]") {
  const char* const names[] = {"CREATE",     "CONFIRM", "BOOTSTRAP", "INSTALL", "CONFIGURE",
                               "INITIALIZE", "START",   "STOP",      "REMOVE",  "DELETE"};
  std::uint32_t bit = WEFT_ACTION_CREATE;
  for (const char* name : names) {
    INFO(name);
    REQUIRE(weft_action_name(bit) != nullptr);
    CHECK(std::string(weft_action_name(bit)) == name);
    CHECK(std::string(weft_c_action_name(bit)) == name);
    bit <<= 1;
  }
  CHECK(bit == WEFT_ACTION_ALL + 1);
  CHECK(weft_action_name(0) == nullptr);
  CHECK(weft_action_name(WEFT_ACTION_START | WEFT_ACTION_STOP) == nullptr);
  CHECK(weft_c_action_name(1u << 10) == nullptr);
}

#include <catch2/catch.hpp>

#include <cstddef>
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
      ROW(weft_host_services, struct_size),
      ROW(weft_host_services, abi_major),
      ROW(weft_host_services, abi_minor),
      ROW(weft_host_services, log),
      ROW(weft_host_services, progress),
      ROW(weft_host_services, set_result),
      ROW(weft_host_services, task_json),
      ROW(weft_host_services, cancelled),
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

TEST_CASE("sdk: C and C++ compilers agree on every ABI struct's size and offsets", "[sdk][abi]") {
  std::size_t count = 0;
  const weft_c_layout* rows = weft_c_layout_rows(&count);
  const auto cxx = CxxLayout();
  REQUIRE(count == cxx.size());
  for (std::size_t i = 0; i < count; ++i) {
    INFO(rows[i].what);
    auto it = cxx.find(rows[i].what);
    REQUIRE(it != cxx.end());
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

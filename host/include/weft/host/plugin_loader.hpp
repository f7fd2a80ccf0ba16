// Loads native plugins (.so files built against sdk/include/weft/plugin.h) and,
// when weft-host is built with the Lua runtime (weft_lua), Lua plugins (.lua
// files, turned into an ordinary descriptor by weft::host::lua::LoadLuaPlugin
// and then checked exactly like a native one).
//
// Every *.so in the plugin directories is opened with Boost.DLL (rtld_now |
// rtld_local), its descriptor is validated field by field, and its init is
// called. A plugin that fails any check is refused with one log line that
// names the file and the reason; loading goes on with the others.
//
// Lifetime: a library, once opened, is NEVER closed, not even when it was
// refused (its static constructors may have run) and not when the PluginSet
// dies: every library is parked in a process-wide keeper until exit. So a
// descriptor or instance a plugin made can never outlive its code.
//
// Thread-safety: LoadPlugins is not reentrant with itself on the same set; a
// loaded PluginSet is read-only afterwards and may be read from any thread.
// Calling a plugin's run from several threads at once is allowed by the ABI.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/plugin.h"

namespace weft::host {

// What each Lua plugin's states may use (docs/lua-plugins.md, "Limits"):
// weft-host.toml's lua_memory_mb and lua_instructions.
struct LuaBudget {
  // The ranges weft-host.toml, the probe and `weft-host run` accept.
  static constexpr int kMinMemoryMb = 1, kMaxMemoryMb = 4096;
  static constexpr std::int64_t kMinInstructions = 1'000'000, kMaxInstructions = 1'000'000'000'000;

  int memory_mb = 64;                          // per lua_State
  std::int64_t instructions = 2'000'000'000;  // Lua VM instructions per run
};

// One plugin that passed every check.
struct LoadedPlugin {
  std::string type_name;
  // Empty: a host-wide plugin (the operator's plugin directories), for every
  // tenant's tasks. Otherwise the tenant whose resources it came from: it runs
  // that tenant's tasks only.
  std::string tenant;
  std::filesystem::path file;
  const weft_plugin_descriptor* descriptor = nullptr;  // owned by the library (static storage)
  void* instance = nullptr;                            // made by init; freed by destroy at ~PluginSet
  nlohmann::json info;                                 // as host.register wants it (docs/protocol.md)
};

// True for a file the loader takes: *.so (and *.lua when weft_lua is built in).
bool IsPluginFile(const std::filesystem::path& file);
// Every plugin file (see IsPluginFile) of the directories, directories in order,
// files sorted by name within one. Missing or unreadable directories are logged
// (once per call) and skipped.
std::vector<std::filesystem::path> ListPluginFiles(const std::vector<std::filesystem::path>& dirs);
// Why this process must not load `file`, or "" when it may: a plugin runs as
// the host's user (root, for the local provider), so no one else may be able
// to change the file or a directory above it (OthersMayChange).
std::string UnsafePluginPath(const std::filesystem::path& file);
// True when this build loads *.lua plugins (see docs/host.md).
bool LuaPluginsSupported();

// A tenant's Lua plugin resource "<type>.lua" is installed in the resource
// plugin directory as "<tenant>@<type>.lua" ('@' is in neither name), so the
// file tells whose it is and which type it must declare.
std::string TenantPluginFileName(const std::string& tenant, const std::string& resource_name);
struct TenantPluginFile {
  std::string tenant;
  std::string type;  // the type the file's name promises
};
// The parts of such a file name; nullopt when `file` is not named that way.
std::optional<TenantPluginFile> ParseTenantPluginFile(const std::filesystem::path& file);

// A plugin the host would not use.
struct Refusal {
  std::filesystem::path file;
  std::string reason;  // a sentence; the log line is "<file>: <reason>"
};

// The host's services table handed to plugins (init and run). Static storage.
const weft_host_services* HostServices();

class PluginSet {
 public:
  PluginSet() = default;
  ~PluginSet();  // calls each plugin's destroy; the libraries stay loaded
  PluginSet(const PluginSet&) = delete;
  PluginSet& operator=(const PluginSet&) = delete;

  // false: the "loaded plugin" lines are written at debug level (workers,
  // which load what the master already probed and logged).
  void set_log_loaded(bool on) { log_loaded_ = on; }
  // The budget of the Lua plugins loaded after this call.
  void set_lua_budget(const LuaBudget& budget) { lua_budget_ = budget; }

  // Loads every plugin file (see IsPluginFile) of each directory (directories in the given order, files
  // sorted by name within one). A missing directory is logged and skipped.
  void LoadDirectories(const std::vector<std::filesystem::path>& dirs);
  // Loads one file; returns false (and records a refusal) when refused. A
  // non-empty `tenant` makes it that tenant's plugin; it is refused when a
  // host-wide plugin of its type is loaded already.
  bool LoadFile(const std::filesystem::path& file, const std::string& tenant = {});

  const std::vector<LoadedPlugin>& plugins() const { return plugins_; }
  const std::vector<Refusal>& refusals() const { return refusals_; }
  // The plugin that runs a task of `tenant` and this type: the tenant's own,
  // else a host-wide one; nullptr when there is none. An empty `tenant` finds
  // host-wide plugins only.
  const LoadedPlugin* Find(std::string_view type_name, std::string_view tenant = {}) const;
  // [LoadedPlugin.info...] for host.register.
  nlohmann::json RegisterJson() const;

 private:
  void Refuse(const std::filesystem::path& file, std::string reason);
  // Validates a descriptor (native or Lua), calls init, keeps it; false when refused.
  bool Accept(const std::filesystem::path& file, const weft_plugin_descriptor* d, const std::string& tenant);

  std::vector<LoadedPlugin> plugins_;
  std::vector<Refusal> refusals_;
  bool log_loaded_ = true;
  LuaBudget lua_budget_;
};

// A dlopen error as the load refusal says it: a C++ symbol in "undefined
// symbol: _Z16forgotten_helperv" is demangled ("forgotten_helper() (_Z16...)").
std::string ReadableLoadError(std::string message);

// "CREATE" for WEFT_ACTION_CREATE, "" for anything that is not one action bit.
std::string_view ActionName(std::uint32_t action);
// The action bit for a name like "CREATE", or 0.
std::uint32_t ActionFromName(std::string_view name);

}  // namespace weft::host

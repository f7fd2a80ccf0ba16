#include "weft/host/plugin_loader.hpp"

#include <cxxabi.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <system_error>

#include <boost/dll/shared_library.hpp>

#include "weft/common/file_trust.hpp"
#include "weft/common/log.hpp"
#ifdef WEFT_HOST_HAVE_LUA
#include "weft/lua/lua_plugin.hpp"
#endif

namespace weft::host {
namespace {

using json = nlohmann::json;

// The descriptor size a given 1.x minor defines. A new minor that appends
// members to the descriptor or to weft_field adds its size here; 1.1 and 1.2
// grew only weft_host_services, so their descriptor and field are 1.0's.
constexpr std::uint32_t kDescriptorSize_1_0 = sizeof(weft_plugin_descriptor);
constexpr std::uint32_t kFieldSize_1_0 = sizeof(weft_field);
// Fields we read from a descriptor before we know its size is sane.
constexpr std::uint32_t kDescriptorHeaderSize = 3 * sizeof(std::uint32_t);

std::uint32_t DescriptorSizeForMinor(std::uint32_t minor) {
  switch (minor) {
    case 0:
    case 1:
    case 2: return kDescriptorSize_1_0;
    default: return 0;
  }
}
std::uint32_t FieldSizeForMinor(std::uint32_t minor) {
  switch (minor) {
    case 0:
    case 1:
    case 2: return kFieldSize_1_0;
    default: return 0;
  }
}

// Libraries are never closed (see the header): they live here until exit. The
// keeper is deliberately leaked so no static destructor closes them either.
struct LibraryKeeper {
  std::mutex mu;
  std::vector<std::unique_ptr<boost::dll::shared_library>> libraries;
};
LibraryKeeper& Keeper() {
  static LibraryKeeper* keeper = new LibraryKeeper();
  return *keeper;
}


bool ValidTypeName(const char* name) {
  std::size_t n = std::strlen(name);
  if (n == 0 || n > 64) return false;
  for (std::size_t i = 0; i < n; ++i) {
    char c = name[i];
    bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && (i == 0 || (c != '_' && c != '.' && c != '-'))) return false;
  }
  return true;
}

const char* FieldTypeName(std::uint32_t type) {
  switch (type) {
    case WEFT_FIELD_STRING: return "string";
    case WEFT_FIELD_INTEGER: return "integer";
    case WEFT_FIELD_NUMBER: return "number";
    case WEFT_FIELD_BOOLEAN: return "boolean";
    case WEFT_FIELD_JSON: return "json";
    default: return nullptr;
  }
}

bool DefaultMatches(std::uint32_t type, const json& v) {
  switch (type) {
    case WEFT_FIELD_STRING: return v.is_string();
    case WEFT_FIELD_INTEGER: return v.is_number_integer();
    case WEFT_FIELD_NUMBER: return v.is_number();
    case WEFT_FIELD_BOOLEAN: return v.is_boolean();
    default: return true;
  }
}

std::string Str(const char* s) { return s ? std::string(s) : std::string(); }

// Validates fields and builds their JSON; returns a reason on failure.
std::optional<std::string> CheckFields(const weft_plugin_descriptor& d, json* out) {
  *out = json::array();
  if (d.field_count == 0) return std::nullopt;
  if (d.fields == nullptr) return "field_count is " + std::to_string(d.field_count) + " but fields is NULL";
  if (d.field_count > 1024) return "field_count " + std::to_string(d.field_count) + " is more than 1024";
  std::vector<std::string> names;
  for (std::uint32_t i = 0; i < d.field_count; ++i) {
    // Elements are field_size apart: a newer minor may have made weft_field longer.
    const auto* f = reinterpret_cast<const weft_field*>(reinterpret_cast<const char*>(d.fields) +
                                                        static_cast<std::size_t>(i) * d.field_size);
    std::string at = "fields[" + std::to_string(i) + "]";
    if (!f->name || f->name[0] == '\0') return at + " has no name";
    std::string name = f->name;
    at += " '" + name + "'";
    if (std::find(names.begin(), names.end(), name) != names.end()) return at + " is declared twice";
    names.push_back(name);
    const char* type = FieldTypeName(f->type);
    if (!type) return at + " has unknown type " + std::to_string(f->type) + " (1 to 5 are defined)";
    if (f->flags & ~static_cast<std::uint32_t>(WEFT_FIELD_REQUIRED | WEFT_FIELD_SENSITIVE)) {
      return at + " has unknown flag bits";
    }
    json field = {{"name", name},
                  {"label", f->label ? f->label : name},
                  {"type", type},
                  {"required", (f->flags & WEFT_FIELD_REQUIRED) != 0},
                  {"sensitive", (f->flags & WEFT_FIELD_SENSITIVE) != 0},
                  {"description", Str(f->description)}};
    if (f->default_json) {
      json def = json::parse(f->default_json, nullptr, /*allow_exceptions=*/false);
      if (def.is_discarded()) return at + " default_json is not valid JSON: " + f->default_json;
      if (!DefaultMatches(f->type, def)) {
        return at + " default " + std::string(f->default_json) + " does not have the field's type (" + type + ")";
      }
      // A secret's default is still a secret: it never leaves the host.
      if (!(f->flags & WEFT_FIELD_SENSITIVE)) field["default"] = def;
    }
    out->push_back(std::move(field));
  }
  return std::nullopt;
}

}  // namespace

std::string ReadableLoadError(std::string message) {
  static constexpr std::string_view kUndefined = "undefined symbol: ";
  std::size_t at = message.find(kUndefined);
  if (at == std::string::npos) return message;
  const std::size_t start = at + kUndefined.size();
  std::size_t end = start;
  while (end < message.size() && message[end] != ' ' && message[end] != ',' && message[end] != '\n' &&
         message[end] != '\t')
    ++end;
  // dlerror may add the version ("_Z3fooi, version FOO"): only the name is demangled.
  const std::string symbol = message.substr(start, end - start);
  if (symbol.rfind("_Z", 0) != 0) return message;
  int status = -1;
  char* demangled = abi::__cxa_demangle(symbol.c_str(), nullptr, nullptr, &status);
  if (status == 0 && demangled) {
    message.replace(start, end - start, std::string(demangled) + " (" + symbol + ")");
  }
  std::free(demangled);
  return message;
}

std::string_view ActionName(std::uint32_t action) {
  const char* name = weft_action_name(action);
  return name ? std::string_view(name) : std::string_view();
}

std::uint32_t ActionFromName(std::string_view name) {
  for (std::uint32_t bit = WEFT_ACTION_CREATE; bit & WEFT_ACTION_ALL; bit <<= 1) {
    if (name == weft_action_name(bit)) return bit;
  }
  return 0;
}

bool LuaPluginsSupported() {
#ifdef WEFT_HOST_HAVE_LUA
  return true;
#else
  return false;
#endif
}

bool IsPluginFile(const std::filesystem::path& file) {
  const auto ext = file.extension();
  return ext == ".so" || (ext == ".lua" && LuaPluginsSupported());
}

PluginSet::~PluginSet() {
  for (LoadedPlugin& p : plugins_) {
    if (p.descriptor->destroy && p.instance) {
      try {
        p.descriptor->destroy(p.instance);
      } catch (...) {
        WEFT_LOG(kError, "host") << p.file.string() << ": destroy threw a C++ exception; exceptions must not "
                                                       "cross the plugin ABI";
      }
    }
  }
}

void PluginSet::Refuse(const std::filesystem::path& file, std::string reason) {
  WEFT_LOG(kWarn, "host") << "refused plugin " << file.string() << ": " << reason;
  refusals_.push_back({file, std::move(reason)});
}

std::vector<std::filesystem::path> ListPluginFiles(const std::vector<std::filesystem::path>& dirs) {
  std::vector<std::filesystem::path> out;
  for (const std::filesystem::path& dir : dirs) {
    std::error_code ec;
    std::vector<std::filesystem::path> files;
    for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      if (IsPluginFile(it->path()) && it->is_regular_file(ec)) files.push_back(it->path());
    }
    if (ec) {
      WEFT_LOG(kWarn, "host") << "cannot read plugin directory " << dir.string() << ": " << ec.message();
      continue;
    }
    std::sort(files.begin(), files.end(),
              [](const auto& a, const auto& b) { return a.filename().string() < b.filename().string(); });
    out.insert(out.end(), files.begin(), files.end());
  }
  return out;
}

std::string UnsafePluginPath(const std::filesystem::path& file) {
  const std::string problem = OthersMayChange(file);
  if (problem.empty()) return "";
  const uid_t self = geteuid();
  return "not loaded: weft-host runs as " + (self == 0 ? std::string("root") : "uid " + std::to_string(self)) +
         " and loads plugin code only from files and directories that " +
         (self == 0 ? std::string("only root") : "only root and its user") + " can change, but " + problem;
}

void PluginSet::LoadDirectories(const std::vector<std::filesystem::path>& dirs) {
  for (const auto& f : ListPluginFiles(dirs)) LoadFile(f);
}

bool PluginSet::LoadFile(const std::filesystem::path& file, const std::string& tenant) {
  if (file.extension() == ".lua") {
#ifdef WEFT_HOST_HAVE_LUA
    lua::LuaLimits limits;
    limits.memory_bytes = static_cast<std::size_t>(lua_budget_.memory_mb) << 20;
    limits.instruction_budget = static_cast<std::uint64_t>(lua_budget_.instructions);
    Result<const weft_plugin_descriptor*> d = lua::LoadLuaPlugin(file, limits);
    if (!d.ok()) {
      Refuse(file, "cannot load the Lua plugin: " + d.status().message());
      return false;
    }
    return Accept(file, *d, tenant);
#else
    Refuse(file, "this weft-host was built without the Lua runtime (weft_lua); Lua plugins are not supported");
    return false;
#endif
  }
  auto library = std::make_unique<boost::dll::shared_library>();
  boost::system::error_code ec;
  library->load(boost::dll::fs::path(file.string()),
                boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local, ec);
  if (ec) {
    // Boost.DLL reports every dlopen failure as "bad file descriptor"; the
    // loader's own text (missing dependency, wrong ELF class...) is in dlerror.
    const char* why = dlerror();
    Refuse(file, "cannot load the library: " + ReadableLoadError(why ? why : ec.message()));
    return false;
  }
  // From here on the library stays loaded, whatever the verdict.
  boost::dll::shared_library* lib = library.get();
  {
    std::lock_guard<std::mutex> lock(Keeper().mu);
    Keeper().libraries.push_back(std::move(library));
  }
  if (!lib->has(WEFT_PLUGIN_ENTRY_SYMBOL)) {
    Refuse(file, "no entry symbol '" WEFT_PLUGIN_ENTRY_SYMBOL "'; is it a Weft plugin built with WEFT_PLUGIN(...) "
                 "or WEFT_PLUGIN_EXPORT?");
    return false;
  }
  auto entry = lib->get<std::remove_pointer_t<weft_plugin_entry_fn>>(WEFT_PLUGIN_ENTRY_SYMBOL);

  char err[512] = {0};
  const weft_plugin_descriptor* d = nullptr;
  try {
    d = entry(WEFT_ABI_MAJOR, WEFT_ABI_MINOR, err, sizeof err - 1);
  } catch (...) {
    Refuse(file, "weft_plugin_entry threw a C++ exception; exceptions must not cross the plugin ABI");
    return false;
  }
  err[sizeof err - 1] = '\0';
  if (!d) {
    Refuse(file, std::string("the plugin declined to load: ") + (err[0] ? err : "(no message)"));
    return false;
  }
  return Accept(file, d, tenant);
}

bool PluginSet::Accept(const std::filesystem::path& file, const weft_plugin_descriptor* d, const std::string& tenant) {
  char err[512] = {0};
  const std::string host_version = std::to_string(WEFT_ABI_MAJOR) + "." + std::to_string(WEFT_ABI_MINOR);
  const std::string built_for = std::to_string(d->abi_major) + "." + std::to_string(d->abi_minor);
  if (d->struct_size < kDescriptorHeaderSize) {
    Refuse(file, "descriptor struct_size " + std::to_string(d->struct_size) + " is too small to be a descriptor");
    return false;
  }
  if (d->abi_major != WEFT_ABI_MAJOR) {
    Refuse(file, "built for plugin ABI " + built_for + "; this host supports " + host_version +
                     " (a different major version is incompatible; rebuild the plugin against this host's SDK)");
    return false;
  }
  if (d->abi_minor > WEFT_ABI_MINOR) {
    Refuse(file, "built for plugin ABI " + built_for + "; this host supports up to " + host_version +
                     " (upgrade weft-host or rebuild the plugin against the older SDK)");
    return false;
  }
  if (d->struct_size < kDescriptorSize_1_0) {
    Refuse(file, "descriptor struct_size " + std::to_string(d->struct_size) + " is smaller than the ABI 1.0 descriptor (" +
                     std::to_string(kDescriptorSize_1_0) + " bytes)");
    return false;
  }
  if (d->struct_size > DescriptorSizeForMinor(d->abi_minor)) {
    Refuse(file, "oversized descriptor: struct_size " + std::to_string(d->struct_size) + " but ABI " + built_for +
                     " defines " + std::to_string(DescriptorSizeForMinor(d->abi_minor)) + " bytes");
    return false;
  }
  if (d->kind != WEFT_KIND_PROVIDER && d->kind != WEFT_KIND_AUTOMATOR) {
    Refuse(file, "kind " + std::to_string(d->kind) + " is neither WEFT_KIND_PROVIDER (1) nor WEFT_KIND_AUTOMATOR (2)");
    return false;
  }
  if (!d->type_name || !ValidTypeName(d->type_name)) {
    Refuse(file, "type_name " + (d->type_name ? "'" + std::string(d->type_name) + "'" : std::string("NULL")) +
                     " must match [a-z0-9][a-z0-9_.-]* and be at most 64 bytes");
    return false;
  }
  const std::string type = d->type_name;
  if (!d->run) {
    Refuse(file, "plugin '" + type + "' has no run callback (run is required)");
    return false;
  }
  if (d->actions == 0 || (d->actions & ~WEFT_ACTION_ALL)) {
    Refuse(file, "plugin '" + type + "' declares actions 0x" + [&] {
      char b[16];
      std::snprintf(b, sizeof b, "%x", d->actions);
      return std::string(b);
    }() + "; it must name at least one action and only WEFT_ACTION_* bits");
    return false;
  }
  if (d->kind == WEFT_KIND_PROVIDER) {
    // weftd sends a provider all three: DELETE undoes a failed CREATE or CONFIRM
    // and deletes the cluster, so one without it leaves machines nobody can delete.
    std::string missing;
    for (std::uint32_t bit : {WEFT_ACTION_CREATE, WEFT_ACTION_CONFIRM, WEFT_ACTION_DELETE}) {
      if (!(d->actions & bit)) missing += (missing.empty() ? "" : ", ") + std::string(weft_action_name(bit));
    }
    if (!missing.empty()) {
      Refuse(file, "provider '" + type + "' does not declare " + missing +
                       "; a provider declares all of CREATE, CONFIRM and DELETE (DELETE also undoes a failed CREATE)");
      return false;
    }
  }
  if (d->field_count > 0 && (d->field_size < kFieldSize_1_0 || d->field_size > FieldSizeForMinor(d->abi_minor))) {
    Refuse(file, "plugin '" + type + "' field_size " + std::to_string(d->field_size) + " does not match ABI " +
                     built_for + " (" + std::to_string(FieldSizeForMinor(d->abi_minor)) + " bytes)");
    return false;
  }
  json fields;
  if (auto why = CheckFields(*d, &fields)) {
    Refuse(file, "plugin '" + type + "' " + *why);
    return false;
  }
  json resource_types = json::array();
  if (d->resource_type_count > 0) {
    if (!d->resource_types) {
      Refuse(file, "plugin '" + type + "' resource_type_count is nonzero but resource_types is NULL");
      return false;
    }
    for (std::uint32_t i = 0; i < d->resource_type_count; ++i) {
      if (!d->resource_types[i] || d->resource_types[i][0] == '\0') {
        Refuse(file, "plugin '" + type + "' resource_types[" + std::to_string(i) + "] is empty");
        return false;
      }
      resource_types.push_back(d->resource_types[i]);
    }
  }
  for (const LoadedPlugin& other : plugins_) {
    if (other.type_name != type) continue;
    if (other.tenant == tenant) {
      Refuse(file, "duplicate type name '" + type + "'" + (tenant.empty() ? "" : " for tenant '" + tenant + "'") +
                       ": already loaded from " + other.file.string());
      return false;
    }
    if (other.tenant.empty()) {
      Refuse(file, "type '" + type + "' is a host-wide plugin of this host (" + other.file.string() +
                       "); tenant '" + tenant + "' cannot have a Lua plugin of that type");
      return false;
    }
  }

  void* instance = nullptr;
  if (d->init) {
    std::memset(err, 0, sizeof err);
    int rc = WEFT_OK;
    try {
      rc = d->init(HostServices(), &instance, err, sizeof err - 1);
    } catch (...) {
      Refuse(file, "plugin '" + type + "': init threw a C++ exception; exceptions must not cross the plugin ABI");
      return false;
    }
    if (rc != WEFT_OK) {
      Refuse(file, "plugin '" + type + "': init failed with code " + std::to_string(rc) + ": " +
                       (err[0] ? err : "(no message)"));
      return false;
    }
  }

  LoadedPlugin p;
  p.type_name = type;
  p.tenant = tenant;
  p.file = file;
  p.descriptor = d;
  p.instance = instance;
  json actions = json::array();
  for (std::uint32_t bit = WEFT_ACTION_CREATE; bit & WEFT_ACTION_ALL; bit <<= 1) {
    if (d->actions & bit) actions.push_back(weft_action_name(bit));
  }
  p.info = {{"type", type},
            {"kind", d->kind == WEFT_KIND_PROVIDER ? "provider" : "automator"},
            {"version", Str(d->version)},
            {"description", Str(d->description)},
            {"actions", std::move(actions)},
            {"fields", std::move(fields)},
            {"resource_types", std::move(resource_types)}};
  if (!tenant.empty()) p.info["tenant"] = tenant;
  // Workers load what the master already probed and logged: debug there.
  const log::Level level = log_loaded_ ? log::Level::kInfo : log::Level::kDebug;
  if (level >= log::CurrentLevel()) {
    log::Line(level, "host") << "loaded plugin '" << type << "' (" << p.info["kind"].get<std::string>() << ", ABI "
                             << built_for << ") from " << file.string();
  }
  plugins_.push_back(std::move(p));
  return true;
}

const LoadedPlugin* PluginSet::Find(std::string_view type_name, std::string_view tenant) const {
  const LoadedPlugin* host_wide = nullptr;
  for (const LoadedPlugin& p : plugins_) {
    if (p.type_name != type_name) continue;
    if (!tenant.empty() && p.tenant == tenant) return &p;
    if (p.tenant.empty()) host_wide = &p;
  }
  return host_wide;
}

std::string TenantPluginFileName(const std::string& tenant, const std::string& resource_name) {
  return tenant + "@" + resource_name;
}

std::optional<TenantPluginFile> ParseTenantPluginFile(const std::filesystem::path& file) {
  const std::string name = file.filename().string();
  const auto at = name.find('@');
  if (at == std::string::npos || at == 0 || file.extension() != ".lua") return std::nullopt;
  const std::string type = name.substr(at + 1, name.size() - at - 1 - 4);
  if (type.empty()) return std::nullopt;
  return TenantPluginFile{name.substr(0, at), type};
}

nlohmann::json PluginSet::RegisterJson() const {
  json out = json::array();
  for (const LoadedPlugin& p : plugins_) out.push_back(p.info);
  return out;
}

}  // namespace weft::host

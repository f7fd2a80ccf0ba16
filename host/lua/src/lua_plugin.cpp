#include "weft/lua/lua_plugin.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <utility>
#include <vector>

#include "lua_json.hpp"
#include "sandbox.hpp"
#include "weft/ssh/task_view.hpp"

namespace weft::host::lua {
namespace {

using json = nlohmann::json;

constexpr std::size_t kMaxSourceBytes = 16u << 20;

// The key of an action in a Lua plugin's `actions` table: its name in lower case.
std::string LuaActionName(std::uint32_t bit) {
  std::string name = weft_action_name(bit);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

struct FieldDecl {
  std::string name;
  std::string label;
  std::string description;
  std::uint32_t type = WEFT_FIELD_STRING;
  bool required = false;
  bool sensitive = false;
  bool has_default = false;
  json default_value;
  std::string default_json;
};

// Everything a loaded Lua plugin is; never freed (the descriptor points into it).
struct Definition {
  std::string display;  // the file, for messages about the file
  std::string chunk_name;
  std::string source;
  LuaLimits limits;
  std::string label;  // "Lua plugin 'hello-lua'", for messages about runs
  std::string type_name;
  std::string version;
  std::string description;
  std::uint32_t kind = 0;
  std::uint32_t actions = 0;
  std::vector<FieldDecl> fields;
  std::vector<weft_field> c_fields;
  std::vector<std::string> resource_types;
  std::vector<const char*> c_resource_types;
  weft_plugin_descriptor descriptor{};
};

// ---- reading the declaration (API calls that never raise; errors are C++) ---

class DeclarationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "a string", "a table", "nil": a Lua value's type as a message says it.
std::string TypeOf(lua_State* L, int i) {
  if (lua_isnoneornil(L, i)) return "nil";
  return std::string("a ") + lua_typename(L, lua_type(L, i));
}

std::string StringValue(lua_State* L, int i, const std::string& what) {
  if (lua_type(L, i) != LUA_TSTRING) throw DeclarationError(what + " must be a string, not " + TypeOf(L, i));
  std::size_t n = 0;
  const char* s = lua_tolstring(L, i, &n);
  return std::string(s, n);
}

bool BoolValue(lua_State* L, int i, const std::string& what) {
  if (lua_type(L, i) != LUA_TBOOLEAN) throw DeclarationError(what + " must be true or false, not " + TypeOf(L, i));
  return lua_toboolean(L, i) != 0;
}

// Calls fn(key) for each string key of the table at `t`, value on top.
template <typename Fn>
void ForEachKey(lua_State* L, int t, const std::string& what, Fn fn) {
  t = lua_absindex(L, t);
  if (!lua_checkstack(L, 4)) throw DeclarationError(what + " is nested too deeply");
  lua_pushnil(L);
  while (lua_next(L, t)) {
    if (lua_type(L, -2) != LUA_TSTRING) {
      std::string key = lua_type(L, -2) == LUA_TNUMBER ? "a number" : TypeOf(L, -2);
      throw DeclarationError(what + " has " + key + " as a key; its keys must be names (strings)");
    }
    std::size_t n = 0;
    const char* s = lua_tolstring(L, -2, &n);
    fn(std::string(s, n));
    lua_pop(L, 1);
  }
}

bool ValidTypeName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && (i == 0 || (c != '_' && c != '.' && c != '-'))) return false;
  }
  return true;
}

std::uint32_t FieldTypeFromName(const std::string& name) {
  if (name == "string") return WEFT_FIELD_STRING;
  if (name == "integer") return WEFT_FIELD_INTEGER;
  if (name == "number") return WEFT_FIELD_NUMBER;
  if (name == "boolean") return WEFT_FIELD_BOOLEAN;
  if (name == "json") return WEFT_FIELD_JSON;
  return 0;
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

FieldDecl ReadField(lua_State* L, int t, const std::string& name) {
  const std::string at = "fields." + name;
  if (lua_type(L, t) != LUA_TTABLE) {
    throw DeclarationError(at + " must be a table like { label = \"...\", type = \"string\" }, not " + TypeOf(L, t));
  }
  FieldDecl f;
  f.name = name;
  f.label = name;
  std::string type_name = "string";
  ForEachKey(L, t, at, [&](const std::string& key) {
    if (key == "label") {
      f.label = StringValue(L, -1, at + ".label");
    } else if (key == "type") {
      type_name = StringValue(L, -1, at + ".type");
    } else if (key == "description") {
      f.description = StringValue(L, -1, at + ".description");
    } else if (key == "required") {
      f.required = BoolValue(L, -1, at + ".required");
    } else if (key == "sensitive") {
      f.sensitive = BoolValue(L, -1, at + ".sensitive");
    } else if (key == "default") {
      try {
        f.default_value = ToJson(L, -1, at + ".default");
      } catch (const std::runtime_error& e) {
        throw DeclarationError(e.what());
      }
      f.has_default = true;
    } else {
      throw DeclarationError(at + " has an unknown key '" + key +
                             "'; a field knows label, type, default, required, sensitive, description");
    }
  });
  f.type = FieldTypeFromName(type_name);
  if (f.type == 0) {
    throw DeclarationError(at + ".type '" + type_name + "' is not a field type; use string, integer, number, "
                           "boolean or json");
  }
  if (f.has_default) {
    if (!DefaultMatches(f.type, f.default_value)) {
      throw DeclarationError(at + ".default " + f.default_value.dump() + " is not " +
                             (type_name == "integer" ? "an " : "a ") + type_name + " (the field's type)");
    }
    f.default_json = f.default_value.dump();
  }
  return f;
}

void ReadDeclaration(lua_State* L, int t, Definition* def) {
  t = lua_absindex(L, t);
  if (lua_type(L, t) != LUA_TTABLE) {
    throw DeclarationError("must return a table describing the plugin, not " + TypeOf(L, t) +
                           "; end the file with return { type = \"...\", kind = \"automator\", actions = { ... } }");
  }
  bool has_type = false;
  bool has_kind = false;
  bool has_actions = false;
  ForEachKey(L, t, "the plugin table", [&](const std::string& key) {
    if (key == "type") {
      def->type_name = StringValue(L, -1, "type");
      has_type = true;
    } else if (key == "kind") {
      std::string kind = StringValue(L, -1, "kind");
      if (kind == "provider") {
        def->kind = WEFT_KIND_PROVIDER;
      } else if (kind == "automator") {
        def->kind = WEFT_KIND_AUTOMATOR;
      } else {
        throw DeclarationError("kind '" + kind + "' is neither \"provider\" nor \"automator\"");
      }
      has_kind = true;
    } else if (key == "version") {
      def->version = StringValue(L, -1, "version");
    } else if (key == "description") {
      def->description = StringValue(L, -1, "description");
    } else if (key == "fields") {
      if (lua_type(L, -1) != LUA_TTABLE) throw DeclarationError("fields must be a table, not " + TypeOf(L, -1));
      ForEachKey(L, -1, "fields", [&](const std::string& name) {
        if (name.empty()) throw DeclarationError("fields has an empty name");
        def->fields.push_back(ReadField(L, -1, name));
      });
    } else if (key == "resource_types") {
      if (lua_type(L, -1) != LUA_TTABLE) {
        throw DeclarationError("resource_types must be a list of strings, not " + TypeOf(L, -1));
      }
      lua_Unsigned n = lua_rawlen(L, -1);
      std::size_t count = 0;
      lua_pushnil(L);
      while (lua_next(L, -2)) {
        ++count;
        lua_pop(L, 1);
      }
      if (count != n) throw DeclarationError("resource_types must be a list like { \"scripts\" }, without holes or names");
      for (lua_Unsigned i = 1; i <= n; ++i) {
        lua_rawgeti(L, -1, static_cast<lua_Integer>(i));
        std::string rt = StringValue(L, -1, "resource_types[" + std::to_string(i) + "]");
        if (rt.empty()) throw DeclarationError("resource_types[" + std::to_string(i) + "] is empty");
        def->resource_types.push_back(std::move(rt));
        lua_pop(L, 1);
      }
    } else if (key == "actions") {
      if (lua_type(L, -1) != LUA_TTABLE) throw DeclarationError("actions must be a table, not " + TypeOf(L, -1));
      has_actions = true;
      ForEachKey(L, -1, "actions", [&](const std::string& name) {
        std::uint32_t found = 0;
        for (std::uint32_t bit = WEFT_ACTION_CREATE; bit & WEFT_ACTION_ALL; bit <<= 1) {
          if (name == LuaActionName(bit)) found = bit;
        }
        if (!found) {
          throw DeclarationError("actions." + name + " is not an action; the actions are create, confirm, bootstrap, "
                                 "install, configure, initialize, start, stop, remove, delete (lower case)");
        }
        if (lua_type(L, -1) != LUA_TFUNCTION) {
          throw DeclarationError("actions." + name + " must be a function(task), not " + TypeOf(L, -1));
        }
        def->actions |= found;
      });
    } else {
      throw DeclarationError("the plugin table has an unknown key '" + key +
                             "'; it knows type, kind, version, description, fields, resource_types, actions");
    }
  });
  if (!has_type) throw DeclarationError("the plugin table has no `type` (its unique name, e.g. type = \"hello-lua\")");
  if (!ValidTypeName(def->type_name)) {
    throw DeclarationError("type '" + def->type_name + "' must match [a-z0-9][a-z0-9_.-]* and be at most 64 bytes");
  }
  if (!has_kind) throw DeclarationError("the plugin table has no `kind` (\"provider\" or \"automator\")");
  if (!has_actions || def->actions == 0) {
    throw DeclarationError("the plugin declares no actions; add actions = { install = function(task) ... end }");
  }
  std::sort(def->fields.begin(), def->fields.end(),
            [](const FieldDecl& a, const FieldDecl& b) { return a.name < b.name; });
}

// ---- instances: a pool of sandboxes per init ---------------------------------

class Instance {
 public:
  explicit Instance(const Definition& def) : def_(def) {}

  const Definition& def() const { return def_; }

  // A sandbox for one run: an idle one, or a fresh one.
  Result<std::unique_ptr<Sandbox>> Acquire(const std::string& when) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!idle_.empty()) {
        std::unique_ptr<Sandbox> box = std::move(idle_.back());
        idle_.pop_back();
        return box;
      }
    }
    SandboxSpec spec{def_.chunk_name, &def_.source, def_.limits};
    return Sandbox::Create(spec, def_.label, when);
  }

  void Release(std::unique_ptr<Sandbox> box) {
    std::lock_guard<std::mutex> lock(mu_);
    idle_.push_back(std::move(box));
  }

 private:
  const Definition& def_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Sandbox>> idle_;
};

void WriteErr(char* err, std::size_t err_len, const std::string& message) {
  if (!err || err_len == 0) return;
  std::snprintf(err, err_len, "%s", message.c_str());
}

int Run(Instance& instance, const weft_host_services* host, weft_task* task, std::uint32_t action, char* err,
        std::size_t err_len) {
  const Definition& def = instance.def();
  const char* name = weft_action_name(action);
  if (!name || !(def.actions & action)) {
    std::string have;
    for (std::uint32_t bit = WEFT_ACTION_CREATE; bit & WEFT_ACTION_ALL; bit <<= 1) {
      if (def.actions & bit) have += (have.empty() ? "" : ", ") + std::string(weft_action_name(bit));
    }
    WriteErr(err, err_len,
             def.label + " does not implement " + (name ? name : "action " + std::to_string(action)) +
                 "; it implements " + have);
    return WEFT_ERR_UNSUPPORTED;
  }
  if (!host || !task) {
    WriteErr(err, err_len, def.label + ": run needs the host services and the task");
    return WEFT_ERR_INVALID;
  }
  const char* text = host->task_json(task);
  json task_json = json::parse(text ? text : "{}", nullptr, /*allow_exceptions=*/false);
  if (task_json.is_discarded() || !task_json.is_object()) {
    WriteErr(err, err_len, def.label + " got a task that is not a JSON object; this is a host bug");
    return WEFT_ERR_INVALID;
  }
  // The same defaults and checks as weft-host applies for native plugins (RunAction).
  ResolvedFields resolved = ResolvePluginFields(task_json, def.descriptor);
  if (!resolved.error.empty()) {
    WriteErr(err, err_len, def.label + ": " + resolved.error);
    return WEFT_ERR_INVALID;
  }
  json& fields = resolved.fields;

  const std::string when = std::string("during ") + name;
  Result<std::unique_ptr<Sandbox>> box = instance.Acquire("while starting a Lua state for " + std::string(name));
  if (!box.ok()) {
    WriteErr(err, err_len, box.status().message());
    return WEFT_ERR_FAILED;
  }
  RunScope scope{host, task, nullptr};
  Outcome o = (*box)->RunAction(LuaActionName(action).c_str(), task_json, fields, &scope, def.label, when);
  if (!o.traceback.empty()) host->log(task, WEFT_LOG_DEBUG, o.traceback.c_str());
  if (o.poisoned) {
    box->reset();  // closed, never reused
  } else {
    instance.Release(std::move(*box));
  }
  if (o.code != WEFT_OK) WriteErr(err, err_len, o.message);
  return o.code;
}

// ---- the C callbacks ----------------------------------------------------------

int InitFor(const Definition* def, void** instance, char* err, std::size_t err_len) noexcept {
  try {
    if (!def || !instance) {
      WriteErr(err, err_len, "Lua plugin init called without a plugin (host bug)");
      return WEFT_ERR_INTERNAL;
    }
    auto inst = std::make_unique<Instance>(*def);
    // One warm state: proves the script starts in a fresh state and saves the first task the work.
    Result<std::unique_ptr<Sandbox>> box = inst->Acquire("while starting its first Lua state");
    if (!box.ok()) {
      WriteErr(err, err_len, box.status().message());
      return WEFT_ERR_FAILED;
    }
    inst->Release(std::move(*box));
    *instance = inst.release();
    return WEFT_OK;
  } catch (const std::exception& e) {
    WriteErr(err, err_len, std::string("Lua plugin init failed: ") + e.what());
    return WEFT_ERR_INTERNAL;
  } catch (...) {
    WriteErr(err, err_len, "Lua plugin init failed with an unknown exception");
    return WEFT_ERR_INTERNAL;
  }
}

int RunCallback(void* instance, const weft_host_services* host, weft_task* task, std::uint32_t action, char* err,
                std::size_t err_len) noexcept {
  try {
    if (!instance) {
      WriteErr(err, err_len, "Lua plugin run called without an instance; call init first (host bug)");
      return WEFT_ERR_INTERNAL;
    }
    return Run(*static_cast<Instance*>(instance), host, task, action, err, err_len);
  } catch (const std::exception& e) {
    WriteErr(err, err_len, std::string("Lua plugin run failed in the host: ") + e.what());
    return WEFT_ERR_INTERNAL;
  } catch (...) {
    WriteErr(err, err_len, "Lua plugin run failed with an unknown exception");
    return WEFT_ERR_INTERNAL;
  }
}

void DestroyCallback(void* instance) noexcept { delete static_cast<Instance*>(instance); }

// init gets no pointer back to its descriptor, so each loaded plugin gets its
// own init function: slot I's init reads the definition in slot I.
std::array<std::atomic<const Definition*>, kMaxLuaPlugins> g_slots;
std::atomic<std::size_t> g_next_slot{0};

using InitFn = int (*)(const weft_host_services*, void**, char*, std::size_t);

template <std::size_t I>
int InitSlot(const weft_host_services*, void** instance, char* err, std::size_t err_len) {
  return InitFor(g_slots[I].load(std::memory_order_acquire), instance, err, err_len);
}

template <std::size_t... I>
constexpr std::array<InitFn, sizeof...(I)> MakeInits(std::index_sequence<I...>) {
  return {&InitSlot<I>...};
}
constexpr std::array<InitFn, kMaxLuaPlugins> kInits = MakeInits(std::make_index_sequence<kMaxLuaPlugins>{});

Result<const weft_plugin_descriptor*> Load(const std::string& display, const std::string& chunk_name,
                                           std::string source, const LuaLimits& limits) {
  const std::string label = "Lua plugin " + display;
  if (!source.empty() && source[0] == LUA_SIGNATURE[0]) {
    return Status::Invalid(label + " is a precompiled (binary) chunk; only Lua source text is accepted, so ship the "
                                   ".lua file itself");
  }
  if (limits.memory_bytes == 0 || limits.instruction_budget == 0 || limits.time_budget_ms <= 0) {
    return Status::Invalid(label + ": the Lua limits must all be positive (memory, instructions, time)");
  }
  auto def = std::make_unique<Definition>();
  def->display = display;
  def->chunk_name = chunk_name;
  def->source = std::move(source);
  def->limits = limits;

  SandboxSpec spec{def->chunk_name, &def->source, limits};
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Sandbox> box, Sandbox::Create(spec, label, "while loading"));
  lua_State* L = box->state();
  box->PushPlugin();
  try {
    ReadDeclaration(L, -1, def.get());
  } catch (const DeclarationError& e) {
    lua_settop(L, 0);
    return Status::Invalid(label + ": " + e.what());
  }
  lua_settop(L, 0);
  box.reset();

  def->label = "Lua plugin '" + def->type_name + "'";
  // Pointers into def from here on: nothing below may grow its vectors or strings.
  for (const FieldDecl& f : def->fields) {
    weft_field c{};
    c.name = f.name.c_str();
    c.label = f.label.c_str();
    c.type = f.type;
    c.flags = (f.required ? WEFT_FIELD_REQUIRED : 0u) | (f.sensitive ? WEFT_FIELD_SENSITIVE : 0u);
    c.default_json = f.has_default ? f.default_json.c_str() : nullptr;
    c.description = f.description.empty() ? nullptr : f.description.c_str();
    def->c_fields.push_back(c);
  }
  for (const std::string& rt : def->resource_types) def->c_resource_types.push_back(rt.c_str());

  std::size_t slot = g_next_slot.fetch_add(1);
  if (slot >= kMaxLuaPlugins) {
    return Status::TooLarge(label + ": this process already loaded " + std::to_string(kMaxLuaPlugins) +
                            " Lua plugins, the most it can; restart it to load more");
  }
  weft_plugin_descriptor& d = def->descriptor;
  d.struct_size = sizeof(weft_plugin_descriptor);
  d.abi_major = WEFT_ABI_MAJOR;
  d.abi_minor = WEFT_ABI_MINOR;
  d.kind = def->kind;
  d.type_name = def->type_name.c_str();
  d.version = def->version.empty() ? nullptr : def->version.c_str();
  d.description = def->description.empty() ? nullptr : def->description.c_str();
  d.actions = def->actions;
  d.field_count = static_cast<std::uint32_t>(def->c_fields.size());
  d.field_size = sizeof(weft_field);
  d.resource_type_count = static_cast<std::uint32_t>(def->c_resource_types.size());
  d.fields = def->c_fields.empty() ? nullptr : def->c_fields.data();
  d.resource_types = def->c_resource_types.empty() ? nullptr : def->c_resource_types.data();
  d.init = kInits[slot];
  d.run = &RunCallback;
  d.destroy = &DestroyCallback;
  // The slot keeps the definition reachable until exit (never freed, like a loaded library).
  const Definition* kept = def.release();
  g_slots[slot].store(kept, std::memory_order_release);
  return &kept->descriptor;
}

}  // namespace

Result<const weft_plugin_descriptor*> LoadLuaPlugin(const std::filesystem::path& file, const LuaLimits& limits) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    return Status::NotFound("Lua plugin " + file.string() + " cannot be read: " + std::strerror(errno) +
                            "; check the path and its permissions");
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::Unavailable("Lua plugin " + file.string() + " could not be read to the end");
  std::string source = std::move(text).str();
  if (source.size() > kMaxSourceBytes) {
    return Status::TooLarge("Lua plugin " + file.string() + " is " + FormatBytes(source.size()) + "; the most a "
                            "Lua plugin may be is " + FormatBytes(kMaxSourceBytes));
  }
  try {
    return Load(file.string(), file.filename().string(), std::move(source), limits);
  } catch (const std::exception& e) {
    return Status::Internal("Lua plugin " + file.string() + " could not be loaded: " + e.what());
  }
}

Result<const weft_plugin_descriptor*> LoadLuaPluginSource(const std::string& chunk_name, const std::string& source,
                                                          const LuaLimits& limits) {
  if (source.size() > kMaxSourceBytes) {
    return Status::TooLarge("Lua plugin " + chunk_name + " is " + FormatBytes(source.size()) +
                            "; the most a Lua plugin may be is " + FormatBytes(kMaxSourceBytes));
  }
  try {
    return Load(chunk_name, chunk_name, source, limits);
  } catch (const std::exception& e) {
    return Status::Internal("Lua plugin " + chunk_name + " could not be loaded: " + e.what());
  }
}

}  // namespace weft::host::lua

#include "lua_json.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace weft::host::lua {

const char kArrayMetaKey = 0;
const char kNullSentinel = 0;

namespace {

using json = nlohmann::json;

constexpr int kMaxDepth = 64;

// PushJson keeps iterators on the C stack while Lua may longjmp over it.
static_assert(std::is_trivially_destructible_v<json::const_iterator>,
              "PushJson relies on json iterators having no destructor");

[[noreturn]] void Fail(const std::string& what, const std::string& path, const std::string& why) {
  throw std::runtime_error(what + ": " + (path.empty() ? "the value" : "value" + path) + " " + why);
}

bool IsArrayMarked(lua_State* L, int t) {
  if (!lua_getmetatable(L, t)) return false;
  lua_rawgetp(L, LUA_REGISTRYINDEX, &kArrayMetaKey);
  bool marked = lua_rawequal(L, -1, -2) != 0;
  lua_pop(L, 2);
  return marked;
}

std::string KeyText(lua_State* L, int key) {
  if (lua_type(L, key) == LUA_TSTRING) {
    std::size_t n = 0;
    const char* s = lua_tolstring(L, key, &n);
    return std::string(s, n);
  }
  int is_int = 0;
  lua_Integer i = lua_tointegerx(L, key, &is_int);
  if (is_int) return std::to_string(i);
  return std::string("<") + lua_typename(L, lua_type(L, key)) + ">";
}

json Convert(lua_State* L, int index, const std::string& what, const std::string& path, int depth) {
  index = lua_absindex(L, index);
  switch (lua_type(L, index)) {
    case LUA_TNIL: return nullptr;
    case LUA_TBOOLEAN: return lua_toboolean(L, index) != 0;
    case LUA_TNUMBER: {
      if (lua_isinteger(L, index)) return static_cast<std::int64_t>(lua_tointegerx(L, index, nullptr));
      double d = lua_tonumberx(L, index, nullptr);
      if (!std::isfinite(d)) Fail(what, path, "is not a finite number; JSON has no NaN or infinity");
      return d;
    }
    case LUA_TSTRING: {
      std::size_t n = 0;
      const char* s = lua_tolstring(L, index, &n);  // a string already: no conversion, no allocation
      std::string out(s, n);
      if (!ValidUtf8(out)) Fail(what, path, "is not valid UTF-8 text; JSON strings must be UTF-8");
      return out;
    }
    case LUA_TLIGHTUSERDATA:
      if (lua_touserdata(L, index) == &kNullSentinel) return nullptr;
      break;
    case LUA_TTABLE: {
      if (depth >= kMaxDepth) {
        Fail(what, path, "is nested deeper than " + std::to_string(kMaxDepth) + " levels (does a table contain itself?)");
      }
      if (!lua_checkstack(L, 4)) Fail(what, path, "is nested too deeply for the Lua stack");
      if (IsArrayMarked(L, index)) {
        json out = json::array();
        lua_Unsigned n = lua_rawlen(L, index);
        for (lua_Unsigned i = 1; i <= n; ++i) {
          lua_rawgeti(L, index, static_cast<lua_Integer>(i));
          out.push_back(Convert(L, -1, what, path + "[" + std::to_string(i) + "]", depth + 1));
          lua_pop(L, 1);
        }
        return out;
      }
      // Classify: keys exactly 1..n make an array.
      std::size_t count = 0;
      lua_Integer max_key = 0;
      bool all_positive_integers = true;
      lua_pushnil(L);
      while (lua_next(L, index)) {
        ++count;
        int is_int = 0;
        lua_Integer k = lua_type(L, -2) == LUA_TNUMBER ? lua_tointegerx(L, -2, &is_int) : 0;
        if (!is_int || k < 1) {
          all_positive_integers = false;
        } else if (k > max_key) {
          max_key = k;
        }
        lua_pop(L, 1);
      }
      if (count > 0 && all_positive_integers && static_cast<std::size_t>(max_key) == count) {
        json out = json::array();
        for (lua_Integer i = 1; i <= max_key; ++i) {
          lua_rawgeti(L, index, i);
          out.push_back(Convert(L, -1, what, path + "[" + std::to_string(i) + "]", depth + 1));
          lua_pop(L, 1);
        }
        return out;
      }
      json out = json::object();
      lua_pushnil(L);
      while (lua_next(L, index)) {
        int key_type = lua_type(L, -2);
        bool integer_key = key_type == LUA_TNUMBER && lua_isinteger(L, -2);
        if (key_type != LUA_TSTRING && !integer_key) {
          Fail(what, path, std::string("has a key of type ") + lua_typename(L, key_type) +
                               "; JSON object keys are strings (or integers, which become strings)");
        }
        std::string key = KeyText(L, -2);
        if (!ValidUtf8(key)) Fail(what, path, "has a key that is not valid UTF-8");
        out[key] = Convert(L, -1, what, path + "." + key, depth + 1);
        lua_pop(L, 1);
      }
      return out;
    }
    default: break;
  }
  Fail(what, path, std::string("is a ") + lua_typename(L, lua_type(L, index)) + ", which JSON cannot hold");
}

void Push(lua_State* L, const json& value, int depth) {
  if (depth >= 200) luaL_error(L, "JSON value nested deeper than 200 levels");
  luaL_checkstack(L, 3, "JSON value nested too deeply");
  switch (value.type()) {
    case json::value_t::null: lua_pushnil(L); return;
    case json::value_t::boolean: lua_pushboolean(L, value.get<bool>() ? 1 : 0); return;
    case json::value_t::number_integer:
      lua_pushinteger(L, static_cast<lua_Integer>(value.get<std::int64_t>()));
      return;
    case json::value_t::number_unsigned: {
      std::uint64_t u = value.get<std::uint64_t>();
      if (u <= static_cast<std::uint64_t>(std::numeric_limits<lua_Integer>::max())) {
        lua_pushinteger(L, static_cast<lua_Integer>(u));
      } else {
        lua_pushnumber(L, static_cast<lua_Number>(u));
      }
      return;
    }
    case json::value_t::number_float: lua_pushnumber(L, value.get<double>()); return;
    case json::value_t::string: {
      const std::string& s = value.get_ref<const std::string&>();
      lua_pushlstring(L, s.data(), s.size());
      return;
    }
    case json::value_t::array: {
      lua_createtable(L, static_cast<int>(value.size()), 0);
      lua_rawgetp(L, LUA_REGISTRYINDEX, &kArrayMetaKey);
      lua_setmetatable(L, -2);
      lua_Integer i = 1;
      for (auto it = value.cbegin(); it != value.cend(); ++it, ++i) {
        if (it->is_null()) {
          lua_pushlightuserdata(L, const_cast<char*>(&kNullSentinel));
        } else {
          Push(L, *it, depth + 1);
        }
        lua_rawseti(L, -2, i);
      }
      return;
    }
    case json::value_t::object: {
      lua_createtable(L, 0, static_cast<int>(value.size()));
      for (auto it = value.cbegin(); it != value.cend(); ++it) {
        if (it->is_null()) continue;
        const std::string& key = it.key();
        lua_pushlstring(L, key.data(), key.size());
        Push(L, it.value(), depth + 1);
        lua_rawset(L, -3);
      }
      return;
    }
    default: lua_pushnil(L); return;  // binary and discarded values do not come from JSON text
  }
}

}  // namespace

json ToJson(lua_State* L, int index, const std::string& what) { return Convert(L, index, what, "", 0); }

void PushJson(lua_State* L, const json& value) { Push(L, value, 0); }

bool ValidUtf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    std::size_t len;
    std::uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (std::size_t k = 1; k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += len;
  }
  return true;
}

}  // namespace weft::host::lua

#include "weft/planner/macros.hpp"

#include <algorithm>
#include <cctype>
#include <optional>

namespace weft::planner {
namespace {

using json = nlohmann::json;
using List = std::vector<std::string>;

// What join() and map() may produce for one config (or one string), all macros
// together. Nested maps multiply: a 200-byte string of ten maps with eight '$'
// each would otherwise ask for gigabytes.
constexpr std::size_t kMaxExpandedBytes = 8u << 20;

bool IsNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; }

// Macro-shaped: "word.word..." (with an optional [i]) or join(...)/map(...).
bool LooksLikeMacro(std::string_view s) {
  if (s.rfind("join(", 0) == 0 || s.rfind("map(", 0) == 0) return true;
  std::size_t i = 0;
  while (i < s.size() && std::islower(static_cast<unsigned char>(s[i]))) ++i;
  if (i == 0 || i >= s.size() || s[i] != '.') return false;
  for (; i < s.size(); ++i) {
    char c = s[i];
    if (!(IsNameChar(c) || c == '.' || c == '[' || c == ']')) return false;
  }
  return true;
}

class Evaluator {
 public:
  // context == nullptr: check names and syntax only. join() and map() take what
  // they produce from *budget.
  Evaluator(const MacroContext* context, std::size_t* budget) : ctx_(context), budget_(budget) {}

  Result<std::string> Macro(std::string_view expr) {
    std::size_t pos = 0;
    WEFT_ASSIGN_OR_RETURN(List list, Expr(expr, pos));
    if (pos != expr.size()) return Error(expr, "unexpected text '" + std::string(expr.substr(pos)) + "'");
    std::string out;
    for (std::size_t k = 0; k < list.size(); ++k) out += (k ? "," : "") + list[k];
    return out;
  }

 private:
  static Status Error(std::string_view expr, const std::string& why) {
    return Status::Invalid("config macro %" + std::string(expr) + "%: " + why);
  }
  static Status TooLarge(std::string_view expr) {
    return Error(expr, "join() and map() would produce more than " + std::to_string(kMaxExpandedBytes >> 20) +
                           " MiB for this config; nest fewer map()s");
  }
  bool Spend(std::size_t bytes) {
    if (bytes > *budget_) return false;
    *budget_ -= bytes;
    return true;
  }

  static bool Eat(std::string_view s, std::size_t& pos, std::string_view token) {
    if (s.substr(pos, token.size()) != token) return false;
    pos += token.size();
    return true;
  }

  // 'text' with no escapes.
  static std::optional<std::string> Quoted(std::string_view s, std::size_t& pos) {
    if (pos >= s.size() || s[pos] != '\'') return std::nullopt;
    std::size_t end = s.find('\'', pos + 1);
    if (end == std::string_view::npos) return std::nullopt;
    std::string text(s.substr(pos + 1, end - pos - 1));
    pos = end + 1;
    return text;
  }

  Result<List> Expr(std::string_view s, std::size_t& pos) {
    if (Eat(s, pos, "join(")) {
      WEFT_ASSIGN_OR_RETURN(List inner, Expr(s, pos));
      auto sep = Eat(s, pos, ",") ? Quoted(s, pos) : std::nullopt;
      if (!sep || !Eat(s, pos, ")")) return Error(s, "expected join(LIST,'separator')");
      std::size_t size = inner.empty() ? 0 : (inner.size() - 1) * sep->size();
      for (const auto& item : inner) size += item.size();  // items are within the budget: no overflow
      if (!Spend(size)) return TooLarge(s);
      std::string joined;
      for (std::size_t k = 0; k < inner.size(); ++k) joined += (k ? *sep : "") + inner[k];
      return List{joined};
    }
    if (Eat(s, pos, "map(")) {
      WEFT_ASSIGN_OR_RETURN(List inner, Expr(s, pos));
      auto fmt = Eat(s, pos, ",") ? Quoted(s, pos) : std::nullopt;
      if (!fmt || !Eat(s, pos, ")")) return Error(s, "expected map(LIST,'format with $')");
      const std::size_t dollars = static_cast<std::size_t>(std::count(fmt->begin(), fmt->end(), '$'));
      std::size_t size = 0;
      for (const auto& item : inner) {
        size += fmt->size() - dollars + dollars * item.size();
        if (size > *budget_) break;  // and so never overflows
      }
      if (!Spend(size)) return TooLarge(s);
      List out;
      for (const auto& item : inner) {
        std::string r;
        for (char c : *fmt) r += c == '$' ? item : std::string(1, c);
        out.push_back(r);
      }
      return out;
    }
    return Path(s, pos);
  }

  Result<List> Path(std::string_view s, std::size_t& pos) {
    std::size_t start = pos;
    while (pos < s.size() && (IsNameChar(s[pos]) || s[pos] == '.')) ++pos;
    std::string path(s.substr(start, pos - start));
    std::optional<std::size_t> index;
    if (pos < s.size() && s[pos] == '[') {
      std::size_t close = s.find(']', pos);
      std::string digits(s.substr(pos + 1, close == std::string_view::npos ? 0 : close - pos - 1));
      if (close == std::string_view::npos || digits.empty() || digits.size() > 6 ||
          digits.find_first_not_of("0123456789") != std::string::npos)
        return Error(s, "an index must be [N] with N a whole number");
      index = std::stoul(digits);
      pos = close + 1;
    }
    auto values = Lookup(s, path);
    if (!values.ok() || !index) return values;
    if (!ctx_) return List{};
    if (*index >= values->size())
      return Error(s, "index [" + std::to_string(*index) + "] but '" + path + "' has " +
                          std::to_string(values->size()) + " value(s)");
    return List{(*values)[*index]};
  }

  Result<List> Lookup(std::string_view expr, const std::string& path) {
    auto service_of = [&](std::string_view prefix) -> std::optional<std::string> {
      if (path.rfind(prefix, 0) != 0 || path.size() == prefix.size()) return std::nullopt;
      std::string name = path.substr(prefix.size());
      if (name.find('.') != std::string::npos) return std::nullopt;
      return name;
    };
    auto per_node = [&](auto field) -> Result<List> {
      List out;
      if (!ctx_) return out;
      for (const auto& n : ctx_->nodes)
        if (n.id == ctx_->self) out.push_back(field(n));
      if (out.empty()) return Error(expr, "node '" + ctx_->self + "' is not in the layout");
      return out;
    };
    auto with_service = [&](const std::string& service, auto field) -> List {
      List out;
      if (!ctx_) return out;
      for (const auto& n : ctx_->nodes)
        for (const auto& s : n.services)
          if (s == service) out.push_back(field(n));
      return out;
    };
    auto host = [](const MacroNode& n) { return n.hostname; };
    auto bind = [](const MacroNode& n) { return n.bind_v4.empty() ? n.access_v4 : n.bind_v4; };
    auto access = [](const MacroNode& n) { return n.access_v4; };

    if (path == "host.self") return per_node(host);
    if (path == "ip.self" || path == "ip.bind_v4.self") return per_node(bind);
    if (path == "ip.access_v4.self") return per_node(access);
    if (path == "cluster.owner") return List{ctx_ ? ctx_->owner : ""};
    if (auto s = service_of("host.service.")) return with_service(*s, host);
    if (auto s = service_of("ip.bind_v4.service.")) return with_service(*s, bind);
    if (auto s = service_of("ip.access_v4.service.")) return with_service(*s, access);
    if (auto s = service_of("num.service.")) return List{std::to_string(with_service(*s, host).size())};
    if (auto s = service_of("instance.self.service.")) {
      if (!ctx_) return List{};
      std::size_t k = 0;
      for (const auto& n : ctx_->nodes)
        for (const auto& svc : n.services)
          if (svc == *s) {
            ++k;
            if (n.id == ctx_->self) return List{std::to_string(k)};
          }
      return Error(expr, "node '" + ctx_->self + "' does not run service '" + *s + "'");
    }
    return Error(expr, "unknown macro '" + path +
                           "'; known: host.self, ip.self, ip.bind_v4.self, ip.access_v4.self, host.service.S, "
                           "ip.bind_v4.service.S, ip.access_v4.service.S, num.service.S, "
                           "instance.self.service.S, cluster.owner, join(...), map(...)");
  }

  const MacroContext* ctx_;
  std::size_t* budget_;
};

Result<std::string> Expand(std::string_view text, const MacroContext* context, std::size_t& budget) {
  std::string out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t open = text.find('%', pos);
    if (open == std::string_view::npos) break;
    std::size_t close = text.find('%', open + 1);
    if (close == std::string_view::npos) break;
    std::string_view inside = text.substr(open + 1, close - open - 1);
    if (!LooksLikeMacro(inside)) {
      out.append(text.substr(pos, close - pos));  // keep the first '%' as text; the second may open a macro
      pos = close;
      continue;
    }
    WEFT_ASSIGN_OR_RETURN(std::string value, Evaluator(context, &budget).Macro(inside));
    out.append(text.substr(pos, open - pos));
    out += value;
    pos = close + 1;
  }
  out.append(text.substr(pos));
  return out;
}

Result<json> Walk(const json& value, const MacroContext* context, const std::string& path, std::size_t& budget) {
  if (value.is_string()) {
    auto s = Expand(value.get_ref<const std::string&>(), context, budget);
    if (!s.ok()) return s.status().WithContext("config" + path);
    return json(*s);
  }
  if (value.is_object()) {
    json out = json::object();
    for (const auto& [k, v] : value.items()) {
      WEFT_ASSIGN_OR_RETURN(out[k], Walk(v, context, path + "." + k, budget));
    }
    return out;
  }
  if (value.is_array()) {
    json out = json::array();
    for (std::size_t i = 0; i < value.size(); ++i) {
      WEFT_ASSIGN_OR_RETURN(json item, Walk(value[i], context, path + "[" + std::to_string(i) + "]", budget));
      out.push_back(std::move(item));
    }
    return out;
  }
  return value;
}

}  // namespace

Status CheckMacros(const json& config) {
  std::size_t budget = kMaxExpandedBytes;
  return Walk(config, nullptr, "", budget).status();
}

Result<json> ExpandMacros(const json& config, const MacroContext& context) {
  std::size_t budget = kMaxExpandedBytes;
  return Walk(config, &context, "", budget);
}

Result<std::string> ExpandString(std::string_view text, const MacroContext& context) {
  std::size_t budget = kMaxExpandedBytes;
  return Expand(text, &context, budget);
}

}  // namespace weft::planner

#include "weft/catalog/entities.hpp"

#include <algorithm>
#include <cctype>
#include <climits>
#include <initializer_list>
#include <set>

#include "weft/common/json_fields.hpp"

namespace weft::catalog {
namespace {

std::string JoinPath(std::string_view path, std::string_view key) {
  std::string p(path);
  if (!p.empty()) p += '.';
  p += key;
  return p;
}

std::string IndexPath(std::string_view path, std::size_t i) {
  return std::string(path) + "[" + std::to_string(i) + "]";
}

const json* Field(const json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(std::string(key));
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

// Collects the problems and warnings found while parsing one entity.
class Ctx {
 public:
  Ctx(Kind kind, const json& doc) : kind_(kind) {
    if (const json* n = Field(doc, "name"); n && n->is_string()) name_ = n->get<std::string>();
  }

  void Error(std::string_view path, const std::string& what) {
    errors_.push_back(Prefix() + ": " + (path.empty() ? std::string() : std::string(path) + ": ") + what);
  }
  void Warn(std::string_view path, const std::string& what) {
    warnings_.push_back(Prefix() + ": " + std::string(path) + ": " + what);
  }
  bool failed() const { return !errors_.empty(); }
  Status ToStatus() const {
    std::string msg;
    for (const auto& e : errors_) msg += (msg.empty() ? "" : "; ") + e;
    return Status::Invalid(msg);
  }
  std::vector<std::string> TakeWarnings() { return std::move(warnings_); }

  // Warns about keys of `obj` not in `known` (they stay in `original`).
  void CheckKeys(const json& obj, std::string_view path, std::initializer_list<std::string_view> known) {
    if (!obj.is_object()) return;
    for (const auto& [key, value] : obj.items()) {
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        Warn(JoinPath(path, key), "unknown field, kept as is but not used");
      }
    }
  }

  // An optional object member; errors when present but not an object.
  const json* Object(const json& obj, std::string_view key, std::string_view path) {
    const json* v = Field(obj, key);
    if (!v) return nullptr;
    if (!v->is_object()) {
      Error(JoinPath(path, key), "must be a JSON object, got " + jsonf::Brief(*v));
      return nullptr;
    }
    return v;
  }

  std::string String(const json& obj, std::string_view key, std::string_view path, bool required) {
    const json* v = Field(obj, key);
    std::string p = JoinPath(path, key);
    if (!v) {
      if (required) Error(p, "is required (a non-empty string)");
      return {};
    }
    if (!v->is_string()) {
      Error(p, "must be a string, got " + jsonf::Brief(*v));
      return {};
    }
    std::string s = v->get<std::string>();
    if (required && s.empty()) Error(p, "must not be empty");
    return s;
  }

  std::string Name(const json& doc) {
    std::string name = String(doc, "name", "", true);
    if (!name.empty() && !IsValidName(name)) {
      Error("name", "'" + name +
                        "' is not a valid name; use 1 to 128 letters, digits, '.', '_' or '-', starting with a "
                        "letter or digit");
    }
    return name;
  }

  // A list of non-empty strings (names).
  std::vector<std::string> StringList(const json& obj, std::string_view key, std::string_view path) {
    std::vector<std::string> out;
    const json* v = Field(obj, key);
    std::string p = JoinPath(path, key);
    if (!v) return out;
    if (!v->is_array()) {
      Error(p, "must be a list of names, got " + jsonf::Brief(*v));
      return out;
    }
    for (std::size_t i = 0; i < v->size(); ++i) {
      const json& e = (*v)[i];
      if (!e.is_string() || e.get<std::string>().empty()) {
        Error(IndexPath(p, i), "must be a non-empty string, got " + jsonf::Brief(e));
        continue;
      }
      out.push_back(e.get<std::string>());
    }
    return out;
  }

  // An optional count: an integer or a numeric string, at least `min`.
  std::optional<std::int64_t> Count(const json& obj, std::string_view key, std::string_view path, std::int64_t min) {
    const json* v = Field(obj, key);
    if (!v) return std::nullopt;
    std::string p = JoinPath(path, key);
    std::optional<std::int64_t> n;
    if (v->is_number_integer()) {
      n = v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)
              ? INT64_MAX
              : v->get<std::int64_t>();
    } else if (v->is_string()) {
      const std::string s = v->get<std::string>();
      if (!s.empty() && s.size() < 19 && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); })) {
        n = std::stoll(s);
      }
    }
    if (!n || *n < min) {
      Error(p, "must be an integer of at least " + std::to_string(min) + ", got " + jsonf::Brief(*v));
      return std::nullopt;
    }
    return n;
  }

  std::string Prefix() const {
    return std::string(KindName(kind_)) + (name_.empty() ? std::string(" (unnamed)") : " '" + name_ + "'");
  }

 private:
  Kind kind_;
  std::string name_;
  std::vector<std::string> errors_;
  std::vector<std::string> warnings_;
};

std::map<std::string, ProviderMapping> ParseProviderMap(Ctx& ctx, const json& doc, std::string_view value_key) {
  std::map<std::string, ProviderMapping> out;
  const json* pm = ctx.Object(doc, "providermap", "");
  if (!pm) {
    if (!Field(doc, "providermap")) ctx.Error("providermap", "is required (an object: provider name -> {\"" +
                                                                  std::string(value_key) + "\": ...})");
    return out;
  }
  for (const auto& [provider, entry] : pm->items()) {
    std::string p = "providermap." + provider;
    if (!entry.is_object()) {
      ctx.Error(p, "must be a JSON object, got " + jsonf::Brief(entry));
      continue;
    }
    ProviderMapping m;
    m.original = entry;
    if (value_key == "flavor") {
      m.flavor = ctx.String(entry, "flavor", p, true);
    } else {
      m.image = ctx.String(entry, "image", p, true);
      m.sshuser = ctx.String(entry, "sshuser", p, false);
    }
    out.emplace(provider, std::move(m));
  }
  return out;
}

json ProviderMapToJson(const std::map<std::string, ProviderMapping>& map) {
  json out = json::object();
  for (const auto& [provider, m] : map) {
    json e = json::object();
    if (!m.flavor.empty()) e["flavor"] = m.flavor;
    if (!m.image.empty()) e["image"] = m.image;
    if (!m.sshuser.empty()) e["sshuser"] = m.sshuser;
    out[provider] = e;
  }
  return out;
}

std::optional<std::int64_t> LooseInt(const json& v) {
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (!s.empty() && s.size() < 19 && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); }))
      return std::stoll(s);
  }
  return std::nullopt;
}

// Two spellings of the same value: 3 and "3", 86400000 and "1d".
bool Equivalent(const json& original, const json& canonical) {
  if (original == canonical) return true;
  if (!canonical.is_number_integer()) return false;
  const std::int64_t want = canonical.get<std::int64_t>();
  if (auto n = LooseInt(original); n && *n == want) return true;
  if (original.is_string()) {
    if (auto d = ParseDurationMs(original); d && *d == want) return true;
  }
  return false;
}

// The canonical rendering laid over the original document, so that unknown fields
// and the original spelling of equivalent values survive.
json Overlay(const json& original, const json& canonical) {
  if (original.is_null()) return canonical;
  if (canonical.is_object() && original.is_object()) {
    json out = original;
    for (const auto& [key, value] : canonical.items()) {
      auto it = original.find(key);
      out[key] = it == original.end() ? value : Overlay(*it, value);
    }
    return out;
  }
  if (canonical.is_array() && original.is_array() && canonical.size() == original.size()) {
    json out = json::array();
    for (std::size_t i = 0; i < canonical.size(); ++i) out.push_back(Overlay(original[i], canonical[i]));
    return out;
  }
  return Equivalent(original, canonical) ? original : canonical;
}

void PutIfNotEmpty(json& obj, const char* key, const std::string& value) {
  if (!value.empty()) obj[key] = value;
}
void PutIfNotEmpty(json& obj, const char* key, const std::vector<std::string>& value) {
  if (!value.empty()) obj[key] = value;
}

bool Contains(const std::vector<std::string>& list, const std::string& name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

std::string ListText(const std::vector<std::string>& list) {
  std::string out = "[";
  for (std::size_t i = 0; i < list.size(); ++i) out += (i ? ", " : "") + list[i];
  return out + "]";
}

}  // namespace

std::string_view KindName(Kind kind) {
  switch (kind) {
    case Kind::kProvider: return "provider";
    case Kind::kHardwareType: return "hardwaretype";
    case Kind::kImageType: return "imagetype";
    case Kind::kService: return "service";
    case Kind::kClusterTemplate: return "clustertemplate";
  }
  return "entity";
}

std::string_view KindDirectory(Kind kind) {
  switch (kind) {
    case Kind::kProvider: return "providers";
    case Kind::kHardwareType: return "hardwaretypes";
    case Kind::kImageType: return "imagetypes";
    case Kind::kService: return "services";
    case Kind::kClusterTemplate: return "clustertemplates";
  }
  return "entities";
}

std::optional<Kind> KindFromName(std::string_view name) {
  for (Kind k : kAllKinds) {
    if (name == KindName(k) || name == KindDirectory(k)) return k;
  }
  return std::nullopt;
}

bool IsValidName(std::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  if (!std::isalnum(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '.' || c == '_' || c == '-';
  });
}

std::optional<std::int64_t> ParseDurationMs(const json& value) {
  if (value.is_number_integer()) {
    if (value.is_number_unsigned() && value.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
      return std::nullopt;
    std::int64_t n = value.get<std::int64_t>();
    if (n < 0) return std::nullopt;
    return n;
  }
  if (!value.is_string()) return std::nullopt;
  const std::string s = value.get<std::string>();
  if (s.empty()) return std::nullopt;
  std::int64_t total = 0;
  std::size_t i = 0;
  bool any_unit = false;
  while (i < s.size()) {
    std::size_t start = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    if (i == start || i - start > 15) return std::nullopt;
    std::int64_t n = std::stoll(s.substr(start, i - start));
    std::size_t ustart = i;
    while (i < s.size() && std::isalpha(static_cast<unsigned char>(s[i]))) ++i;
    std::string unit = s.substr(ustart, i - ustart);
    std::int64_t mult = 0;
    if (unit.empty()) {
      if (any_unit || i != s.size() || start != 0) return std::nullopt;  // bare number: milliseconds
      mult = 1;
    } else if (unit == "ms") {
      mult = 1;
    } else if (unit == "s") {
      mult = 1000;
    } else if (unit == "m") {
      mult = 60'000;
    } else if (unit == "h") {
      mult = 3'600'000;
    } else if (unit == "d") {
      mult = 86'400'000;
    } else if (unit == "w") {
      mult = 7 * 86'400'000LL;
    } else {
      return std::nullopt;
    }
    any_unit = any_unit || !unit.empty();
    if (n > (INT64_MAX - total) / mult) return std::nullopt;
    total += n * mult;
  }
  return total;
}

Result<json> ParseJsonText(std::string_view text, std::string_view what) {
  if (jsonf::NestsDeeperThan(text, jsonf::kMaxDepth))
    return Status::Invalid(std::string(what) + ": JSON nests arrays and objects more than " +
                           std::to_string(jsonf::kMaxDepth) + " levels deep; flatten it and retry");
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number like 1e999
    std::string reason = e.what();
    // nlohmann prefixes "[json.exception.parse_error.101] "; the byte offset says enough.
    if (auto pos = reason.find("] "); pos != std::string::npos) reason = reason.substr(pos + 2);
    return Status::Invalid(std::string(what) + ": malformed JSON: " + reason + "; fix the file and retry");
  }
}

Result<Parsed<Provider>> ParseProvider(const json& doc) {
  Ctx ctx(Kind::kProvider, doc);
  if (!doc.is_object()) return Status::Invalid("provider: the document must be a JSON object, got " + jsonf::Brief(doc));
  Provider p;
  p.original = doc;
  p.name = ctx.Name(doc);
  p.description = ctx.String(doc, "description", "", false);
  p.providertype = ctx.String(doc, "providertype", "", true);
  if (const json* prov = ctx.Object(doc, "provisioner", "")) p.provisioner = *prov;
  ctx.CheckKeys(doc, "", {"name", "description", "icon", "providertype", "provisioner"});
  if (ctx.failed()) return ctx.ToStatus();
  return Parsed<Provider>{std::move(p), ctx.TakeWarnings()};
}

Result<Parsed<HardwareType>> ParseHardwareType(const json& doc) {
  Ctx ctx(Kind::kHardwareType, doc);
  if (!doc.is_object())
    return Status::Invalid("hardwaretype: the document must be a JSON object, got " + jsonf::Brief(doc));
  HardwareType h;
  h.original = doc;
  h.name = ctx.Name(doc);
  h.description = ctx.String(doc, "description", "", false);
  h.providermap = ParseProviderMap(ctx, doc, "flavor");
  ctx.CheckKeys(doc, "", {"name", "description", "icon", "providermap"});
  if (ctx.failed()) return ctx.ToStatus();
  return Parsed<HardwareType>{std::move(h), ctx.TakeWarnings()};
}

Result<Parsed<ImageType>> ParseImageType(const json& doc) {
  Ctx ctx(Kind::kImageType, doc);
  if (!doc.is_object()) return Status::Invalid("imagetype: the document must be a JSON object, got " + jsonf::Brief(doc));
  ImageType im;
  im.original = doc;
  im.name = ctx.Name(doc);
  im.description = ctx.String(doc, "description", "", false);
  im.providermap = ParseProviderMap(ctx, doc, "image");
  ctx.CheckKeys(doc, "", {"name", "description", "icon", "providermap"});
  if (ctx.failed()) return ctx.ToStatus();
  return Parsed<ImageType>{std::move(im), ctx.TakeWarnings()};
}

Result<Parsed<Service>> ParseService(const json& doc) {
  Ctx ctx(Kind::kService, doc);
  if (!doc.is_object()) return Status::Invalid("service: the document must be a JSON object, got " + jsonf::Brief(doc));
  Service s;
  s.original = doc;
  s.name = ctx.Name(doc);
  s.description = ctx.String(doc, "description", "", false);
  if (const json* deps = ctx.Object(doc, "dependencies", "")) {
    auto& d = s.dependencies;
    d.conflicts = ctx.StringList(*deps, "conflicts", "dependencies");
    d.provides = ctx.StringList(*deps, "provides", "dependencies");
    for (auto [key, list] : {std::pair{"install", &d.install}, std::pair{"runtime", &d.runtime}}) {
      std::string p = JoinPath("dependencies", key);
      if (const json* dl = ctx.Object(*deps, key, "dependencies")) {
        list->required = ctx.StringList(*dl, "requires", p);
        list->used = ctx.StringList(*dl, "uses", p);
        ctx.CheckKeys(*dl, p, {"requires", "uses"});
      }
    }
    ctx.CheckKeys(*deps, "dependencies", {"conflicts", "install", "runtime", "provides"});
    if (Contains(d.conflicts, s.name)) ctx.Error("dependencies.conflicts", "a service cannot conflict with itself");
  }
  if (const json* prov = ctx.Object(doc, "provisioner", "")) {
    if (const json* actions = ctx.Object(*prov, "actions", "provisioner")) {
      for (const auto& [action, body] : actions->items()) {
        std::string p = "provisioner.actions." + action;
        if (std::find(std::begin(kServiceActions), std::end(kServiceActions), action) == std::end(kServiceActions)) {
          ctx.Warn(p, "unknown action (known: install, configure, initialize, start, stop, remove), kept but never run");
        }
        if (!body.is_object()) {
          ctx.Error(p, "must be a JSON object {\"type\": ..., \"fields\": {...}}, got " + jsonf::Brief(body));
          continue;
        }
        ServiceAction a;
        a.type = ctx.String(body, "type", p, true);
        if (const json* f = ctx.Object(body, "fields", p)) a.fields = *f;
        ctx.CheckKeys(body, p, {"type", "fields"});
        s.actions.emplace(action, std::move(a));
      }
    }
    ctx.CheckKeys(*prov, "provisioner", {"actions"});
  }
  ctx.CheckKeys(doc, "", {"name", "description", "icon", "dependencies", "provisioner"});
  if (ctx.failed()) return ctx.ToStatus();
  return Parsed<Service>{std::move(s), ctx.TakeWarnings()};
}

Result<Parsed<ClusterTemplate>> ParseClusterTemplate(const json& doc) {
  Ctx ctx(Kind::kClusterTemplate, doc);
  if (!doc.is_object())
    return Status::Invalid("clustertemplate: the document must be a JSON object, got " + jsonf::Brief(doc));
  ClusterTemplate t;
  t.original = doc;
  t.name = ctx.Name(doc);
  t.description = ctx.String(doc, "description", "", false);

  auto& compat = t.compatibility;
  const json* c = ctx.Object(doc, "compatibility", "");
  if (c) {
    compat.hardwaretypes = ctx.StringList(*c, "hardwaretypes", "compatibility");
    compat.imagetypes = ctx.StringList(*c, "imagetypes", "compatibility");
    compat.services = ctx.StringList(*c, "services", "compatibility");
    ctx.CheckKeys(*c, "compatibility", {"hardwaretypes", "imagetypes", "services"});
  }
  if (compat.services.empty())
    ctx.Error("compatibility.services", "is required (the list of services a cluster of this template may run)");

  // Names checked against a compatibility list (an empty hardware/image list allows any).
  auto check_in = [&](const std::vector<std::string>& allowed, const std::string& name, const std::string& path,
                      const char* list_name, bool empty_allows_any) {
    if (allowed.empty() && empty_allows_any) return;
    if (!Contains(allowed, name)) {
      ctx.Error(path, "'" + name + "' is not in compatibility." + list_name + " " + ListText(allowed) + "; add it there");
    }
  };

  auto& def = t.defaults;
  if (const json* d = ctx.Object(doc, "defaults", "")) {
    def.services = ctx.StringList(*d, "services", "defaults");
    def.provider = ctx.String(*d, "provider", "defaults", true);
    def.hardwaretype = ctx.String(*d, "hardwaretype", "defaults", false);
    def.imagetype = ctx.String(*d, "imagetype", "defaults", false);
    def.dns_suffix = ctx.String(*d, "dnsSuffix", "defaults", false);
    if (const json* cfg = ctx.Object(*d, "config", "defaults")) def.config = *cfg;
    ctx.CheckKeys(*d, "defaults", {"services", "provider", "hardwaretype", "imagetype", "dnsSuffix", "config"});
    for (std::size_t i = 0; i < def.services.size(); ++i)
      check_in(compat.services, def.services[i], IndexPath("defaults.services", i), "services", false);
    if (!def.hardwaretype.empty())
      check_in(compat.hardwaretypes, def.hardwaretype, "defaults.hardwaretype", "hardwaretypes", true);
    // Coopr accepted a default image type outside the compatible ones, and such
    // templates are in its public catalog: kept with a warning, and a cluster
    // that does not name an image type fails to plan (see the solver).
    if (!def.imagetype.empty() && !compat.imagetypes.empty() && !Contains(compat.imagetypes, def.imagetype))
      ctx.Warn("defaults.imagetype", "'" + def.imagetype + "' is not in compatibility.imagetypes " +
                                         ListText(compat.imagetypes) +
                                         "; a cluster must name one of those (--imagetype) until it is added there");
  } else {
    ctx.Error("defaults", "is required (at least {\"provider\": ..., \"services\": [...]})");
  }

  auto& con = t.constraints;
  if (const json* cs = ctx.Object(doc, "constraints", "")) {
    if (const json* size = ctx.Object(*cs, "size", "constraints")) {
      con.size_min = ctx.Count(*size, "min", "constraints.size", 0);
      con.size_max = ctx.Count(*size, "max", "constraints.size", 1);
      if (con.size_min && con.size_max && *con.size_min > *con.size_max) {
        ctx.Error("constraints.size", "min " + std::to_string(*con.size_min) + " is more than max " +
                                          std::to_string(*con.size_max));
      }
      ctx.CheckKeys(*size, "constraints.size", {"min", "max"});
    }
    if (const json* layout = ctx.Object(*cs, "layout", "constraints")) {
      for (auto [key, groups] : {std::pair{"mustcoexist", &con.mustcoexist}, std::pair{"cantcoexist", &con.cantcoexist}}) {
        const json* g = Field(*layout, key);
        std::string p = JoinPath("constraints.layout", key);
        if (!g) continue;
        if (!g->is_array()) {
          ctx.Error(p, "must be a list of lists of service names, got " + jsonf::Brief(*g));
          continue;
        }
        for (std::size_t i = 0; i < g->size(); ++i) {
          std::string gp = IndexPath(p, i);
          if (!(*g)[i].is_array()) {
            ctx.Error(gp, "must be a list of service names, got " + jsonf::Brief((*g)[i]));
            continue;
          }
          std::vector<std::string> names;
          for (std::size_t j = 0; j < (*g)[i].size(); ++j) {
            const json& e = (*g)[i][j];
            if (!e.is_string() || e.get<std::string>().empty()) {
              ctx.Error(IndexPath(gp, j), "must be a non-empty string, got " + jsonf::Brief(e));
              continue;
            }
            names.push_back(e.get<std::string>());
            check_in(compat.services, names.back(), IndexPath(gp, j), "services", false);
          }
          std::set<std::string> unique(names.begin(), names.end());
          if (unique.size() < 2) {
            ctx.Error(gp, std::string("needs at least 2 different services, got ") + ListText(names));
          }
          groups->push_back(std::move(names));
        }
      }
      ctx.CheckKeys(*layout, "constraints.layout", {"mustcoexist", "cantcoexist"});
    }
    if (const json* svcs = ctx.Object(*cs, "services", "constraints")) {
      for (const auto& [svc, body] : svcs->items()) {
        std::string p = "constraints.services." + svc;
        check_in(compat.services, svc, p, "services", false);
        if (!body.is_object()) {
          ctx.Error(p, "must be a JSON object, got " + jsonf::Brief(body));
          continue;
        }
        ServiceConstraint sc;
        sc.hardwaretypes = ctx.StringList(body, "hardwaretypes", p);
        sc.imagetypes = ctx.StringList(body, "imagetypes", p);
        for (std::size_t i = 0; i < sc.hardwaretypes.size(); ++i)
          check_in(compat.hardwaretypes, sc.hardwaretypes[i], IndexPath(p + ".hardwaretypes", i), "hardwaretypes",
                   true);
        for (std::size_t i = 0; i < sc.imagetypes.size(); ++i)
          check_in(compat.imagetypes, sc.imagetypes[i], IndexPath(p + ".imagetypes", i), "imagetypes", true);
        if (const json* q = ctx.Object(body, "quantities", p)) {
          std::string qp = p + ".quantities";
          sc.quantities.min = ctx.Count(*q, "min", qp, 0);
          sc.quantities.max = ctx.Count(*q, "max", qp, 1);
          if (sc.quantities.min && sc.quantities.max && *sc.quantities.min > *sc.quantities.max) {
            ctx.Error(qp, "min " + std::to_string(*sc.quantities.min) + " is more than max " +
                              std::to_string(*sc.quantities.max));
          }
          ctx.CheckKeys(*q, qp, {"min", "max"});
        }
        ctx.CheckKeys(body, p, {"hardwaretypes", "imagetypes", "quantities"});
        con.services.emplace(svc, std::move(sc));
      }
    }
    ctx.CheckKeys(*cs, "constraints", {"size", "layout", "services"});
  }

  if (const json* admin = ctx.Object(doc, "administration", "")) {
    if (const json* lease = ctx.Object(*admin, "leaseduration", "administration")) {
      LeaseDuration ld;
      for (auto [key, out] : {std::pair{"initial", &ld.initial_ms}, std::pair{"max", &ld.max_ms},
                              std::pair{"step", &ld.step_ms}}) {
        const json* v = Field(*lease, key);
        if (!v) continue;
        auto ms = ParseDurationMs(*v);
        if (!ms) {
          ctx.Error(JoinPath("administration.leaseduration", key),
                    "cannot read " + jsonf::Brief(*v) +
                        " as a duration; use milliseconds (86400000 or \"86400000\") or a duration such as \"30m\", "
                        "\"12h\", \"1d\" (0 means no limit)");
          continue;
        }
        *out = *ms;
      }
      if (ld.max_ms > 0 && ld.initial_ms > ld.max_ms) {
        ctx.Error("administration.leaseduration", "initial " + std::to_string(ld.initial_ms) +
                                                      " ms is more than max " + std::to_string(ld.max_ms) + " ms");
      }
      ctx.CheckKeys(*lease, "administration.leaseduration", {"initial", "max", "step"});
      t.lease = ld;
    }
    ctx.CheckKeys(*admin, "administration", {"leaseduration"});
  }

  if (const json* links = Field(doc, "links")) {
    if (!links->is_array()) {
      ctx.Error("links", "must be a list of {\"label\", \"url\"} objects, got " + jsonf::Brief(*links));
    } else {
      t.links = *links;
    }
  }
  ctx.CheckKeys(doc, "",
                {"name", "description", "icon", "compatibility", "defaults", "constraints", "administration", "links"});
  if (ctx.failed()) return ctx.ToStatus();
  return Parsed<ClusterTemplate>{std::move(t), ctx.TakeWarnings()};
}

json ToJson(const Provider& p) {
  json out = {{"name", p.name}, {"providertype", p.providertype}};
  PutIfNotEmpty(out, "description", p.description);
  if (!p.provisioner.empty()) out["provisioner"] = p.provisioner;
  return Overlay(p.original, out);
}

json ToJson(const HardwareType& h) {
  json out = {{"name", h.name}, {"providermap", ProviderMapToJson(h.providermap)}};
  PutIfNotEmpty(out, "description", h.description);
  return Overlay(h.original, out);
}

json ToJson(const ImageType& im) {
  json out = {{"name", im.name}, {"providermap", ProviderMapToJson(im.providermap)}};
  PutIfNotEmpty(out, "description", im.description);
  return Overlay(im.original, out);
}

json ToJson(const Service& s) {
  json out = {{"name", s.name}};
  PutIfNotEmpty(out, "description", s.description);
  const auto& d = s.dependencies;
  json deps = json::object();
  PutIfNotEmpty(deps, "conflicts", d.conflicts);
  PutIfNotEmpty(deps, "provides", d.provides);
  for (auto [key, list] : {std::pair{"install", &d.install}, std::pair{"runtime", &d.runtime}}) {
    json dl = json::object();
    PutIfNotEmpty(dl, "requires", list->required);
    PutIfNotEmpty(dl, "uses", list->used);
    if (!dl.empty()) deps[key] = dl;
  }
  if (!deps.empty()) out["dependencies"] = deps;
  if (!s.actions.empty()) {
    json actions = json::object();
    for (const auto& [name, a] : s.actions) {
      json body = {{"type", a.type}};
      if (!a.fields.empty()) body["fields"] = a.fields;
      actions[name] = body;
    }
    out["provisioner"] = {{"actions", actions}};
  }
  return Overlay(s.original, out);
}

json ToJson(const ClusterTemplate& t) {
  json out = {{"name", t.name}};
  PutIfNotEmpty(out, "description", t.description);
  json compat = json::object();
  PutIfNotEmpty(compat, "hardwaretypes", t.compatibility.hardwaretypes);
  PutIfNotEmpty(compat, "imagetypes", t.compatibility.imagetypes);
  PutIfNotEmpty(compat, "services", t.compatibility.services);
  out["compatibility"] = compat;
  json def = json::object();
  PutIfNotEmpty(def, "services", t.defaults.services);
  PutIfNotEmpty(def, "provider", t.defaults.provider);
  PutIfNotEmpty(def, "hardwaretype", t.defaults.hardwaretype);
  PutIfNotEmpty(def, "imagetype", t.defaults.imagetype);
  PutIfNotEmpty(def, "dnsSuffix", t.defaults.dns_suffix);
  if (!t.defaults.config.empty()) def["config"] = t.defaults.config;
  out["defaults"] = def;
  const auto& c = t.constraints;
  json cons = json::object();
  json size = json::object();
  if (c.size_min) size["min"] = *c.size_min;
  if (c.size_max) size["max"] = *c.size_max;
  if (!size.empty()) cons["size"] = size;
  json layout = json::object();
  if (!c.mustcoexist.empty()) layout["mustcoexist"] = c.mustcoexist;
  if (!c.cantcoexist.empty()) layout["cantcoexist"] = c.cantcoexist;
  if (!layout.empty()) cons["layout"] = layout;
  if (!c.services.empty()) {
    json svcs = json::object();
    for (const auto& [name, sc] : c.services) {
      json body = json::object();
      PutIfNotEmpty(body, "hardwaretypes", sc.hardwaretypes);
      PutIfNotEmpty(body, "imagetypes", sc.imagetypes);
      json q = json::object();
      if (sc.quantities.min) q["min"] = *sc.quantities.min;
      if (sc.quantities.max) q["max"] = *sc.quantities.max;
      if (!q.empty()) body["quantities"] = q;
      svcs[name] = body;
    }
    cons["services"] = svcs;
  }
  if (!cons.empty()) out["constraints"] = cons;
  if (t.lease) {
    // Zero ("no limit") is the default, so it is only written when the original had it.
    json lease = json::object();
    if (t.lease->initial_ms) lease["initial"] = t.lease->initial_ms;
    if (t.lease->max_ms) lease["max"] = t.lease->max_ms;
    if (t.lease->step_ms) lease["step"] = t.lease->step_ms;
    out["administration"] = {{"leaseduration", lease}};
  }
  if (!t.links.empty()) out["links"] = t.links;
  return Overlay(t.original, out);
}

}  // namespace weft::catalog

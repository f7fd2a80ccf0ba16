#include "weft/catalog/catalog.hpp"

#include <algorithm>
#include <set>
#include <tuple>

namespace weft::catalog {
namespace {

template <typename M>
const typename M::mapped_type* FindIn(const M& map, std::string_view name) {
  auto it = map.find(std::string(name));
  return it == map.end() ? nullptr : &it->second;
}

template <typename M>
std::vector<std::string> KeysOf(const M& map) {
  std::vector<std::string> out;
  out.reserve(map.size());
  for (const auto& [name, e] : map) out.push_back(name);
  return out;
}

template <typename M>
bool SameJson(const M& a, const M& b) {
  if (a.size() != b.size()) return false;
  for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib) {
    if (ia->first != ib->first || ToJson(ia->second) != ToJson(ib->second)) return false;
  }
  return true;
}

template <typename M>
Result<json> JsonOf(const M& map, Kind kind, std::string_view name) {
  if (const auto* e = FindIn(map, name)) return ToJson(*e);
  return Status::NotFound(std::string(KindName(kind)) + " '" + std::string(name) +
                          "' is not in the catalog; list the " + std::string(KindDirectory(kind)) + " to see what is");
}

template <typename T>
Result<std::string> PutParsed(Catalog& c, Result<Parsed<T>> result, std::vector<std::string>* warnings) {
  WEFT_ASSIGN_OR_RETURN(Parsed<T> parsed, std::move(result));
  if (warnings) warnings->insert(warnings->end(), parsed.warnings.begin(), parsed.warnings.end());
  std::string name = parsed.entity.name;
  c.Put(std::move(parsed.entity));
  return name;
}

}  // namespace

const Provider* Catalog::FindProvider(std::string_view n) const { return FindIn(providers, n); }
const HardwareType* Catalog::FindHardwareType(std::string_view n) const { return FindIn(hardwaretypes, n); }
const ImageType* Catalog::FindImageType(std::string_view n) const { return FindIn(imagetypes, n); }
const Service* Catalog::FindService(std::string_view n) const { return FindIn(services, n); }
const ClusterTemplate* Catalog::FindClusterTemplate(std::string_view n) const { return FindIn(clustertemplates, n); }

Result<std::string> Catalog::PutJson(Kind kind, const json& doc, std::vector<std::string>* warnings) {
  switch (kind) {
    case Kind::kProvider: return PutParsed(*this, ParseProvider(doc), warnings);
    case Kind::kHardwareType: return PutParsed(*this, ParseHardwareType(doc), warnings);
    case Kind::kImageType: return PutParsed(*this, ParseImageType(doc), warnings);
    case Kind::kService: return PutParsed(*this, ParseService(doc), warnings);
    case Kind::kClusterTemplate: return PutParsed(*this, ParseClusterTemplate(doc), warnings);
  }
  return Status::Internal("unknown entity kind");
}

std::vector<std::string> Catalog::Names(Kind kind) const {
  switch (kind) {
    case Kind::kProvider: return KeysOf(providers);
    case Kind::kHardwareType: return KeysOf(hardwaretypes);
    case Kind::kImageType: return KeysOf(imagetypes);
    case Kind::kService: return KeysOf(services);
    case Kind::kClusterTemplate: return KeysOf(clustertemplates);
  }
  return {};
}

Result<json> Catalog::GetJson(Kind kind, std::string_view name) const {
  switch (kind) {
    case Kind::kProvider: return JsonOf(providers, kind, name);
    case Kind::kHardwareType: return JsonOf(hardwaretypes, kind, name);
    case Kind::kImageType: return JsonOf(imagetypes, kind, name);
    case Kind::kService: return JsonOf(services, kind, name);
    case Kind::kClusterTemplate: return JsonOf(clustertemplates, kind, name);
  }
  return Status::Internal("unknown entity kind");
}

bool Catalog::Erase(Kind kind, std::string_view name) {
  std::string n(name);
  switch (kind) {
    case Kind::kProvider: return providers.erase(n) > 0;
    case Kind::kHardwareType: return hardwaretypes.erase(n) > 0;
    case Kind::kImageType: return imagetypes.erase(n) > 0;
    case Kind::kService: return services.erase(n) > 0;
    case Kind::kClusterTemplate: return clustertemplates.erase(n) > 0;
  }
  return false;
}

std::size_t Catalog::size() const {
  return providers.size() + hardwaretypes.size() + imagetypes.size() + services.size() + clustertemplates.size();
}

bool Catalog::operator==(const Catalog& o) const {
  return SameJson(providers, o.providers) && SameJson(hardwaretypes, o.hardwaretypes) &&
         SameJson(imagetypes, o.imagetypes) && SameJson(services, o.services) &&
         SameJson(clustertemplates, o.clustertemplates);
}

std::vector<DanglingReference> CheckReferences(const Catalog& c) {
  std::vector<DanglingReference> out;
  std::set<std::string> service_names;
  for (const auto& [name, s] : c.services) {
    service_names.insert(name);
    for (const auto& p : s.dependencies.provides) service_names.insert(p);
  }
  auto add = [&](Kind kind, const std::string& name, std::string path, Kind target_kind, const std::string& target,
                 const std::string& hint) {
    std::string msg = std::string(KindName(kind)) + " '" + name + "': " + path + " names " +
                      std::string(KindName(target_kind)) + " '" + target + "', which is not in the catalog; " + hint;
    out.push_back({kind, name, std::move(path), target_kind, target, std::move(msg)});
  };
  auto list = [&](Kind kind, const std::string& name, const std::string& path, const std::vector<std::string>& names,
                  Kind target_kind, auto exists, const std::string& hint) {
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (!exists(names[i])) add(kind, name, path + "[" + std::to_string(i) + "]", target_kind, names[i], hint);
    }
  };
  auto has_service = [&](const std::string& n) { return service_names.count(n) > 0; };
  auto has_hw = [&](const std::string& n) { return c.FindHardwareType(n) != nullptr; };
  auto has_img = [&](const std::string& n) { return c.FindImageType(n) != nullptr; };
  auto has_provider = [&](const std::string& n) { return c.FindProvider(n) != nullptr; };

  for (const auto& [name, h] : c.hardwaretypes) {
    for (const auto& [p, m] : h.providermap) {
      if (!has_provider(p))
        add(Kind::kHardwareType, name, "providermap." + p, Kind::kProvider, p, "import that provider or drop the entry");
    }
  }
  for (const auto& [name, im] : c.imagetypes) {
    for (const auto& [p, m] : im.providermap) {
      if (!has_provider(p))
        add(Kind::kImageType, name, "providermap." + p, Kind::kProvider, p, "import that provider or drop the entry");
    }
  }
  const std::string svc_hint = "import a service of that name or one that provides it";
  for (const auto& [name, s] : c.services) {
    const auto& d = s.dependencies;
    list(Kind::kService, name, "dependencies.conflicts", d.conflicts, Kind::kService, has_service, svc_hint);
    list(Kind::kService, name, "dependencies.install.requires", d.install.required, Kind::kService, has_service,
         svc_hint);
    list(Kind::kService, name, "dependencies.install.uses", d.install.used, Kind::kService, has_service, svc_hint);
    list(Kind::kService, name, "dependencies.runtime.requires", d.runtime.required, Kind::kService, has_service,
         svc_hint);
    list(Kind::kService, name, "dependencies.runtime.uses", d.runtime.used, Kind::kService, has_service, svc_hint);
  }
  for (const auto& [name, t] : c.clustertemplates) {
    auto real_service = [&](const std::string& n) { return c.FindService(n) != nullptr; };
    const std::string hint = "import it or remove it from the template";
    list(Kind::kClusterTemplate, name, "compatibility.services", t.compatibility.services, Kind::kService,
         real_service, hint);
    list(Kind::kClusterTemplate, name, "compatibility.hardwaretypes", t.compatibility.hardwaretypes,
         Kind::kHardwareType, has_hw, hint);
    list(Kind::kClusterTemplate, name, "compatibility.imagetypes", t.compatibility.imagetypes, Kind::kImageType,
         has_img, hint);
    if (!t.defaults.provider.empty() && !has_provider(t.defaults.provider))
      add(Kind::kClusterTemplate, name, "defaults.provider", Kind::kProvider, t.defaults.provider, hint);
    if (!t.defaults.hardwaretype.empty() && !has_hw(t.defaults.hardwaretype))
      add(Kind::kClusterTemplate, name, "defaults.hardwaretype", Kind::kHardwareType, t.defaults.hardwaretype, hint);
    if (!t.defaults.imagetype.empty() && !has_img(t.defaults.imagetype))
      add(Kind::kClusterTemplate, name, "defaults.imagetype", Kind::kImageType, t.defaults.imagetype, hint);
  }
  std::sort(out.begin(), out.end(), [](const DanglingReference& a, const DanglingReference& b) {
    return std::tie(a.kind, a.name, a.path) < std::tie(b.kind, b.name, b.path);
  });
  return out;
}

std::map<std::string, std::vector<std::string>> ProviderTypesInUse(const Catalog& c) {
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& [name, p] : c.providers) out[p.providertype].push_back("provider '" + name + "'");
  return out;
}

std::map<std::string, std::vector<std::string>> AutomatorTypesInUse(const Catalog& c) {
  std::map<std::string, std::map<std::string, std::vector<std::string>>> by_type;  // type -> service -> actions
  for (const auto& [name, s] : c.services)
    for (const auto& [action, a] : s.actions) by_type[a.type][name].push_back(action);
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& [type, services] : by_type) {
    for (const auto& [service, actions] : services) {
      std::string who = "service '" + service + "' (";
      for (std::size_t i = 0; i < actions.size(); ++i) who += (i ? ", " : "") + actions[i];
      out[type].push_back(who + ")");
    }
  }
  return out;
}

}  // namespace weft::catalog

// A Catalog is the set of entities of one tenant, as plain values: the store loads
// them, the solver and the checks read them. No storage, no versions here.
// A Catalog is a value (copyable, thread-compatible: concurrent reads are safe).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "weft/catalog/entities.hpp"

namespace weft::catalog {

struct Catalog {
  std::map<std::string, Provider> providers;
  std::map<std::string, HardwareType> hardwaretypes;
  std::map<std::string, ImageType> imagetypes;
  std::map<std::string, Service> services;
  std::map<std::string, ClusterTemplate> clustertemplates;

  // Lookups by name; nullptr when absent. The pointer lives as long as the map entry.
  const Provider* FindProvider(std::string_view name) const;
  const HardwareType* FindHardwareType(std::string_view name) const;
  const ImageType* FindImageType(std::string_view name) const;
  const Service* FindService(std::string_view name) const;
  const ClusterTemplate* FindClusterTemplate(std::string_view name) const;

  // Adds or replaces the entity of its name.
  void Put(Provider e) { std::string n = e.name; providers.insert_or_assign(n, std::move(e)); }
  void Put(HardwareType e) { std::string n = e.name; hardwaretypes.insert_or_assign(n, std::move(e)); }
  void Put(ImageType e) { std::string n = e.name; imagetypes.insert_or_assign(n, std::move(e)); }
  void Put(Service e) { std::string n = e.name; services.insert_or_assign(n, std::move(e)); }
  void Put(ClusterTemplate e) { std::string n = e.name; clustertemplates.insert_or_assign(n, std::move(e)); }

  // Parses `doc` as an entity of `kind` and puts it; returns its name, and appends the
  // parse warnings to `warnings` when given.
  Result<std::string> PutJson(Kind kind, const json& doc, std::vector<std::string>* warnings = nullptr);

  // Names of the entities of one kind, sorted.
  std::vector<std::string> Names(Kind kind) const;
  // The Coopr JSON of one entity; NotFound when there is none of that name.
  Result<json> GetJson(Kind kind, std::string_view name) const;
  // Removes one entity; false when there was none.
  bool Erase(Kind kind, std::string_view name);

  std::size_t size() const;
  bool operator==(const Catalog& other) const;  // same entities with the same JSON
};

// A name that one entity uses and that no entity of the target kind answers to.
struct DanglingReference {
  Kind kind;               // the entity holding the reference
  std::string name;
  std::string path;        // JSON path of the reference, e.g. "compatibility.services[2]"
  Kind target_kind;
  std::string target;      // the missing name
  std::string message;     // a sentence naming both and the fix
};

// Every dangling reference, sorted by kind, name and path: template -> services,
// hardware types, image types, provider; hardware/image type providermap -> providers;
// service requires/uses/conflicts -> a service of that name or one that `provides` it.
// References may be imported in any order, so these are findings, not parse errors.
std::vector<DanglingReference> CheckReferences(const Catalog& catalog);

// Plugin types the catalog needs, each with who needs it ("provider 'fake'",
// "service 'nginx' (install, start)"), so `weft catalog check` can list the types no
// registered host can run.
std::map<std::string, std::vector<std::string>> ProviderTypesInUse(const Catalog& catalog);
std::map<std::string, std::vector<std::string>> AutomatorTypesInUse(const Catalog& catalog);

}  // namespace weft::catalog

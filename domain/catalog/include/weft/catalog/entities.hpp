// Catalog entities: providers, hardware types, image types, services and cluster
// templates, in the JSON format of Coopr catalogs (docs/catalog.md).
//
// Each entity is a plain value struct: copyable, no shared state, thread-compatible.
// Parsing validates and returns every problem as one Status whose sentences name the
// entity, the JSON path and what is wrong. Fields this code does not know are kept
// (in `original`) and reported as warnings, so ToJson gives back the JSON that was
// parsed: Parse(x) then ToJson gives x again, field for field.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/common/status.hpp"

namespace weft::catalog {

using json = nlohmann::json;

enum class Kind : int {
  kProvider = 1,
  kHardwareType,
  kImageType,
  kService,
  kClusterTemplate,
};

// All kinds, in the order a catalog is best imported and listed.
inline constexpr Kind kAllKinds[] = {Kind::kProvider, Kind::kHardwareType, Kind::kImageType, Kind::kService,
                                     Kind::kClusterTemplate};

// "provider", "hardwaretype", ... (the api's kind names).
std::string_view KindName(Kind kind);
// "providers", "hardwaretypes", ... (the Coopr directory layout).
std::string_view KindDirectory(Kind kind);
// Accepts the singular or the plural form; nullopt for anything else.
std::optional<Kind> KindFromName(std::string_view name);

// The service actions Coopr knows, in execution order.
inline constexpr std::string_view kServiceActions[] = {"install", "configure", "initialize",
                                                       "start",   "stop",      "remove"};

struct Provider {
  std::string name;
  std::string description;
  std::string providertype;  // the provider plugin type, e.g. "fake-provider"
  json provisioner = json::object();  // plugin fields, free-form
  json original;  // the parsed JSON (unknown fields live here); null when built in code
};

// One entry of a hardware/image type's providermap.
struct ProviderMapping {
  std::string flavor;   // hardware types
  std::string image;    // image types
  std::string sshuser;  // image types, optional
  json original;        // other provider-specific keys are kept here
};

struct HardwareType {
  std::string name;
  std::string description;
  std::map<std::string, ProviderMapping> providermap;  // provider name -> flavor
  json original;
};

struct ImageType {
  std::string name;
  std::string description;
  std::map<std::string, ProviderMapping> providermap;  // provider name -> image, sshuser
  json original;
};

struct DependencyLists {
  std::vector<std::string> required;  // JSON "requires": must be on the cluster
  std::vector<std::string> used;      // JSON "uses": orders only
};

struct ServiceDependencies {
  std::vector<std::string> conflicts;
  DependencyLists install;
  DependencyLists runtime;
  std::vector<std::string> provides;
};

struct ServiceAction {
  std::string type;  // automator type, e.g. "shell"
  json fields = json::object();
};

struct Service {
  std::string name;
  std::string description;
  ServiceDependencies dependencies;
  std::map<std::string, ServiceAction> actions;  // "install", "start", ...
  json original;
};

struct Quantities {
  std::optional<std::int64_t> min;
  std::optional<std::int64_t> max;
};

struct ServiceConstraint {
  std::vector<std::string> hardwaretypes;  // empty: any compatible
  std::vector<std::string> imagetypes;     // empty: any compatible
  Quantities quantities;
};

// Coopr lease durations in milliseconds; 0 means "no limit". Parsed from numbers,
// numeric strings ("0") or durations ("30m", "12h", "1d", "1d12h").
struct LeaseDuration {
  std::int64_t initial_ms = 0;
  std::int64_t max_ms = 0;
  std::int64_t step_ms = 0;
};

struct ClusterTemplate {
  struct Compatibility {
    std::vector<std::string> hardwaretypes;
    std::vector<std::string> imagetypes;
    std::vector<std::string> services;
  };
  struct Defaults {
    std::vector<std::string> services;
    std::string provider;
    std::string hardwaretype;  // optional
    std::string imagetype;     // optional
    std::string dns_suffix;    // JSON "dnsSuffix", optional
    json config = json::object();
  };
  struct Constraints {
    std::optional<std::int64_t> size_min;
    std::optional<std::int64_t> size_max;
    std::vector<std::vector<std::string>> mustcoexist;
    std::vector<std::vector<std::string>> cantcoexist;
    std::map<std::string, ServiceConstraint> services;
  };

  std::string name;
  std::string description;
  Compatibility compatibility;
  Defaults defaults;
  Constraints constraints;
  std::optional<LeaseDuration> lease;  // JSON administration.leaseduration
  json links = json::array();
  json original;
};

// A parsed entity and the warnings about it (unknown fields, unknown actions).
template <typename T>
struct Parsed {
  T entity;
  std::vector<std::string> warnings;
};

// Parse and validate one entity. On failure the Status (kInvalid) lists every problem,
// each as "<kind> '<name>': <json path>: <what is wrong>", joined by "; ".
Result<Parsed<Provider>> ParseProvider(const json& doc);
Result<Parsed<HardwareType>> ParseHardwareType(const json& doc);
Result<Parsed<ImageType>> ParseImageType(const json& doc);
Result<Parsed<Service>> ParseService(const json& doc);
Result<Parsed<ClusterTemplate>> ParseClusterTemplate(const json& doc);

// JSON text to a document; malformed text gives "<what>: malformed JSON: <reason>".
Result<json> ParseJsonText(std::string_view text, std::string_view what);

// Back to Coopr JSON. Fields kept from `original` (unknown ones, and the spelling of
// numbers such as "0" or "1d") are preserved; clear `original` to get the canonical form.
json ToJson(const Provider& provider);
json ToJson(const HardwareType& hardwaretype);
json ToJson(const ImageType& imagetype);
json ToJson(const Service& service);
json ToJson(const ClusterTemplate& clustertemplate);

// Durations: a non-negative integer (milliseconds), a numeric string, or a sequence
// of <number><unit> with units ms, s, m, h, d, w ("1d12h"). Nullopt when it does not parse.
std::optional<std::int64_t> ParseDurationMs(const json& value);

// Names of entities: 1 to 128 characters from [A-Za-z0-9._-], starting with a letter
// or digit, so that they are safe as file names in the directory layout.
bool IsValidName(std::string_view name);

}  // namespace weft::catalog

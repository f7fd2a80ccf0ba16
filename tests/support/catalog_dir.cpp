#include "support/catalog_dir.hpp"

#include "support/temp_dir.hpp"

namespace weft::testing {

namespace fs = std::filesystem;
using json = nlohmann::json;

CatalogDir::CatalogDir(fs::path dir) : dir_(std::move(dir)) {
  fs::create_directories(dir_);
  fs::copy(fs::path(WEFT_SOURCE_DIR) / "examples" / "catalog", dir_, fs::copy_options::recursive);
}

json CatalogDir::Get(const std::string& kind, const std::string& name) const {
  return json::parse(ReadFile(dir_ / kind / (name + ".json")));
}

void CatalogDir::Put(const std::string& kind, const json& doc) const {
  WriteFile(dir_ / kind / (doc["name"].get<std::string>() + ".json"), doc.dump(2));
}

void CatalogDir::PatchActions(const std::string& service, const std::string& action, const json& patch) const {
  for (const char* s : {"fake-base", "fake-haproxy", "fake-nginx", "fake-redis", "fake-monitoring"}) {
    if (!service.empty() && service != s) continue;
    json doc = Get("services", s);
    for (auto& [name, def] : doc["provisioner"]["actions"].items())
      if (action.empty() || action == name) def["fields"].merge_patch(patch);
    Put("services", doc);
  }
}

void CatalogDir::PatchProvider(const json& patch) const {
  json doc = Get("providers", "fake");
  doc["provisioner"].merge_patch(patch);
  Put("providers", doc);
}

void CatalogDir::DeriveTemplate(const std::string& name, const json& patch) const {
  json doc = Get("clustertemplates", "web-fake");
  doc.merge_patch(patch);
  doc["name"] = name;
  Put("clustertemplates", doc);
}

}  // namespace weft::testing

// A copy of examples/catalog that a test changes before importing it, so each
// test gets fake services and a fake provider with the knobs it needs.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace weft::testing {

class CatalogDir {
 public:
  explicit CatalogDir(std::filesystem::path dir);
  const std::filesystem::path& path() const { return dir_; }

  nlohmann::json Get(const std::string& kind, const std::string& name) const;
  void Put(const std::string& kind, const nlohmann::json& doc) const;
  // Merges `patch` into the fields of `action` ("" = every action) of `service`
  // ("" = every fake-* service).
  void PatchActions(const std::string& service, const std::string& action, const nlohmann::json& patch) const;
  // Merges `patch` into the fake provider's provisioner fields.
  void PatchProvider(const nlohmann::json& patch) const;
  // A copy of web-fake named `name` with `patch` merged in.
  void DeriveTemplate(const std::string& name, const nlohmann::json& patch) const;

 private:
  std::filesystem::path dir_;
};

}  // namespace weft::testing

// A cluster's layout: its nodes, each with its hardware, image and services. The
// solver makes one from the catalog; weftd keeps it as JSON in the cluster's state;
// the CLI reads it back to print the plan.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/common/status.hpp"

namespace weft::catalog {

struct LayoutNode {
  std::string hostname;
  std::string hardwaretype;
  std::string imagetype;
  std::string flavor;   // providermap[provider].flavor of the hardware type
  std::string image;    // providermap[provider].image of the image type
  std::string sshuser;  // providermap[provider].sshuser of the image type (may be empty)
  std::vector<std::string> services;  // sorted
  bool operator==(const LayoutNode&) const = default;
};

struct Layout {
  std::vector<LayoutNode> nodes;  // sorted by hostname, in NaturalLess order
  bool operator==(const Layout&) const = default;
};

// The order of hostnames in a layout: "web-2" before "web-10" (digit runs compare
// as numbers, leading zeros aside).
bool NaturalLess(const std::string& a, const std::string& b);

// {"nodes":[{"hostname","hardwaretype","imagetype","flavor","image","sshuser","services":[...]}]}
nlohmann::json LayoutToJson(const Layout& layout);
Result<Layout> LayoutFromJson(const nlohmann::json& doc);

// Identical nodes grouped for tables: "3 × medium debian12 [base, nginx]", largest
// groups last, one line each.
std::vector<std::string> LayoutSummary(const Layout& layout);

}  // namespace weft::catalog

#include "weft/catalog/layout.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <map>
#include <tuple>
#include <utility>

namespace weft::catalog {
namespace {

using json = nlohmann::json;

// "[base, nginx]", as the solver's messages print lists.
std::string ListText(const std::vector<std::string>& list) {
  std::string out = "[";
  for (std::size_t i = 0; i < list.size(); ++i) out += (i ? ", " : "") + list[i];
  return out + "]";
}

}  // namespace

bool NaturalLess(const std::string& a, const std::string& b) {
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) && std::isdigit(static_cast<unsigned char>(b[j]))) {
      std::size_t i2 = i, j2 = j;
      while (i2 < a.size() && std::isdigit(static_cast<unsigned char>(a[i2]))) ++i2;
      while (j2 < b.size() && std::isdigit(static_cast<unsigned char>(b[j2]))) ++j2;
      std::size_t za = i, zb = j;  // skip leading zeros, then longer means larger
      while (za + 1 < i2 && a[za] == '0') ++za;
      while (zb + 1 < j2 && b[zb] == '0') ++zb;
      if (i2 - za != j2 - zb) return i2 - za < j2 - zb;
      for (; za < i2; ++za, ++zb)
        if (a[za] != b[zb]) return a[za] < b[zb];
      i = i2;
      j = j2;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

nlohmann::json LayoutToJson(const Layout& layout) {
  json nodes = json::array();
  for (const auto& n : layout.nodes) {
    nodes.push_back({{"hostname", n.hostname},
                     {"hardwaretype", n.hardwaretype},
                     {"imagetype", n.imagetype},
                     {"flavor", n.flavor},
                     {"image", n.image},
                     {"sshuser", n.sshuser},
                     {"services", n.services}});
  }
  return {{"nodes", std::move(nodes)}};
}

Result<Layout> LayoutFromJson(const nlohmann::json& doc) {
  if (!doc.is_object() || !doc.contains("nodes") || !doc["nodes"].is_array())
    return Status::Invalid("layout must be an object {\"nodes\": [...]}");
  Layout out;
  for (std::size_t i = 0; i < doc["nodes"].size(); ++i) {
    const json& n = doc["nodes"][i];
    std::string path = "layout.nodes[" + std::to_string(i) + "]";
    if (!n.is_object()) return Status::Invalid(path + " must be an object");
    LayoutNode node;
    for (auto [key, field] : {std::pair{"hostname", &node.hostname}, std::pair{"hardwaretype", &node.hardwaretype},
                              std::pair{"imagetype", &node.imagetype}, std::pair{"flavor", &node.flavor},
                              std::pair{"image", &node.image}, std::pair{"sshuser", &node.sshuser}}) {
      if (!n.contains(key)) continue;
      if (!n[key].is_string()) return Status::Invalid(path + "." + key + " must be a string");
      *field = n[key].get<std::string>();
    }
    if (node.hostname.empty()) return Status::Invalid(path + ".hostname is required");
    if (n.contains("services")) {
      if (!n["services"].is_array()) return Status::Invalid(path + ".services must be a list of names");
      for (const auto& s : n["services"]) {
        if (!s.is_string()) return Status::Invalid(path + ".services must be a list of names");
        node.services.push_back(s.get<std::string>());
      }
    }
    std::sort(node.services.begin(), node.services.end());
    out.nodes.push_back(std::move(node));
  }
  return out;
}

std::vector<std::string> LayoutSummary(const Layout& layout) {
  std::map<std::tuple<std::string, std::string, std::vector<std::string>>, std::int64_t> groups;
  for (const auto& n : layout.nodes) ++groups[{n.hardwaretype, n.imagetype, n.services}];
  std::vector<std::pair<std::int64_t, std::string>> lines;
  for (const auto& [key, count] : groups) {
    lines.emplace_back(count, std::to_string(count) + " × " + std::get<0>(key) + " " + std::get<1>(key) + " " +
                                  ListText(std::get<2>(key)));
  }
  std::stable_sort(lines.begin(), lines.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (auto& l : lines) out.push_back(std::move(l.second));
  return out;
}

}  // namespace weft::catalog

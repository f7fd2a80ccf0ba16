// Fuzzes the planner's config macros (weft/planner/macros.hpp). Cluster config
// strings come from templates and from users creating clusters, and weftd expands
// them before every task. Input: one config string; when it is also JSON text,
// that document is walked as a whole config too.
//
// Checks: what expands against a layout also passes CheckMacros (which runs before
// a job starts, so a job never fails on a macro the check let through), and
// ExpandMacros keeps the shape of the config.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_util.hpp"
#include "weft/planner/macros.hpp"

using weft::fuzz::Require;
namespace planner = weft::planner;
using nlohmann::json;

namespace {

const planner::MacroContext& Layout() {
  static const planner::MacroContext c = [] {
    planner::MacroContext m;
    m.nodes = {{"n1", "zk-1.example", "10.0.0.1", "192.168.0.1", {"zookeeper", "base"}},
               {"n2", "zk-2.example", "10.0.0.2", "192.168.0.2", {"zookeeper", "base", "kafka"}},
               {"n3", "web-1.example", "10.0.0.3", "", {"base", "nginx"}}};
    m.self = "n2";
    m.owner = "alice";
    return m;
  }();
  return c;
}

bool SameShape(const json& a, const json& b) {
  if (a.type() != b.type()) return false;
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib)
      if (ia.key() != ib.key() || !SameShape(*ia, *ib)) return false;
  }
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (!SameShape(a[i], b[i])) return false;
  }
  return a.is_string() || a.is_structured() || a == b;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(weft::fuzz::Bytes(data, size));

  auto expanded = planner::ExpandString(text, Layout());
  weft::Status checked = planner::CheckMacros(json(text));
  if (expanded.ok()) Require(checked.ok(), "a string that expands passes CheckMacros", checked.ToString());
  if (!checked.ok()) Require(checked.message().rfind("config: config macro %", 0) == 0, "errors name the macro",
                             checked.message());
  if (!text.empty() && text.find('%') == std::string::npos)
    Require(expanded.ok() && *expanded == text, "text without '%' stays as it is");

  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return 0;
  auto config = planner::ExpandMacros(doc, Layout());
  weft::Status config_checked = planner::CheckMacros(doc);
  if (config.ok()) {
    Require(config_checked.ok(), "a config that expands passes CheckMacros", config_checked.ToString());
    Require(SameShape(doc, *config), "expansion keeps the config's shape");
  }
  return 0;
}

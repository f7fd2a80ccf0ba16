// Config macros: strings in a cluster's config may name
// facts of the layout, expanded per node just before a task is handed out.
//
//   %host.self%  %ip.self%  %ip.bind_v4.self%  %ip.access_v4.self%
//   %host.service.S%  %ip.bind_v4.service.S%  %ip.access_v4.service.S%
//                      (comma-separated, in layout order; `[i]` picks one)
//   %num.service.S%  %instance.self.service.S% (1-based)  %cluster.owner%
//   %join(map(host.service.S,'$:2181'),',')%  (also join(LIST,'sep') without map)
//
// A `%...%` whose inside is not macro-shaped ("100% of 50%") stays as text;
// a macro-shaped one with an unknown name is an error, found before a job
// starts by CheckMacros. join() and map() may produce at most 8 MiB per config
// (or string); more is an error, so nested maps cannot exhaust memory.
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/common/status.hpp"

namespace weft::planner {

struct MacroNode {
  std::string id;
  std::string hostname;
  std::string access_v4;
  std::string bind_v4;
  std::vector<std::string> services;
};

struct MacroContext {
  std::vector<MacroNode> nodes;  // layout order
  std::string self;              // id of the node the task runs on
  std::string owner;             // the cluster's owner
};

// Checks every macro in every string of `config` for syntax and known names.
Status CheckMacros(const nlohmann::json& config);

// Expands every macro in every string of `config` (recursively, keys untouched).
Result<nlohmann::json> ExpandMacros(const nlohmann::json& config, const MacroContext& context);

Result<std::string> ExpandString(std::string_view text, const MacroContext& context);

}  // namespace weft::planner

// weft::wire::Parse: JSON text parsed by the fast parser of wire headers when
// it can, for documents parsed often (a task's result, a job's lists).
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

namespace weft::wire {

// `text` parsed as JSON, the same value nlohmann::json::parse gives, read by
// the fast parser of headers when it can (most small documents: about four
// times faster; any depth). Not JSON: a discarded value (is_discarded()).
// Never throws.
nlohmann::json Parse(std::string_view text);

}  // namespace weft::wire

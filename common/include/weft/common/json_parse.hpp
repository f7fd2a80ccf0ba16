// weft::wire::Parse: JSON text parsed by the fast parser of wire headers when
// it can, for documents parsed often (a task's result, a job's lists); and
// ParseBody, for a gateway that reads a request's body before weftd does.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "weft/common/status.hpp"

namespace weft::wire {

// `text` parsed as JSON, the same value nlohmann::json::parse gives, read by
// the fast parser of headers when it can (most small documents: about four
// times faster; any depth). Not JSON: a discarded value (is_discarded()).
// Never throws.
nlohmann::json Parse(std::string_view text);

// `text` parsed as Parse does, as a request's body (or, with `field`, as the
// value of the body's member of that name) that a gateway reads and sends on
// re-serialised: an object that names a key twice is refused, INVALID with
// the sentence weftd's DecodeRequest gives for such a body, found the same
// way (`body field "tasks[0].plugin" appears twice; name each field once
// ...`), since the gateway's tree keeps one of the two and weftd would never
// see the other. Not JSON: a discarded value, as Parse. Never throws.
Result<nlohmann::json> ParseBody(std::string_view text, std::string_view field = {});

}  // namespace weft::wire

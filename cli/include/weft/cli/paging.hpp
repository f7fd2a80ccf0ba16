// Reading a list op page by page (docs/protocol.md, "Paging"): each reply's
// `next` is given back as the next request's `after` until a reply has none,
// or until the rows wanted are read.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

#include "weft/cli/command.hpp"
#include "weft/cli/context.hpp"

namespace weft::cli {

// The rows of a list op a CLI command asks for.
struct PageRequest {
  std::string op;        // "job.list"
  json body;             // its filters; limit and after are set here
  std::string rows;      // the reply's list: "jobs"
  std::optional<std::int64_t> want;  // at most this many rows; nullopt: every row
  std::int64_t page = 1000;          // rows asked for per request
  // The server's pages go back in time while each holds its rows oldest first
  // (audit.list): the rows are put together oldest first.
  bool pages_go_back = false;
};

// `--limit N` (1..max) as a number; nullopt when the flag is not given.
inline Result<std::optional<std::int64_t>> LimitFlag(Context& ctx, const ParsedArgs& args, std::int64_t max) {
  if (!args.Has("--limit")) return std::optional<std::int64_t>();
  const std::string text = args.Get("--limit");
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || n < 1 || n > max)
    return ctx.UsageError("--limit needs a number from 1 to " + std::to_string(max) + ", got '" + text + "'");
  return std::optional<std::int64_t>(n);
}

// The rows a command's `--limit N` and `--all` ask for: N; every row (nullopt)
// with --all; `fallback` with neither. Both flags at once are a usage error.
inline Result<std::optional<std::int64_t>> LimitOrAll(Context& ctx, const ParsedArgs& args, std::int64_t fallback,
                                                      std::int64_t max = 100000) {
  WEFT_ASSIGN_OR_RETURN(std::optional<std::int64_t> limit, LimitFlag(ctx, args, max));
  if (limit && args.Has("--all")) return ctx.UsageError("--limit and --all contradict each other; give one");
  if (args.Has("--all")) return std::optional<std::int64_t>();
  return std::optional<std::int64_t>(limit.value_or(fallback));
}

// Every page up to `want` rows, as one reply: {rows: [...]}, with "next" when
// rows were left unread (a script can go on from there with the API).
inline Result<json> ReadPages(Context& ctx, PageRequest req) {
  json rows = json::array();
  std::string next;
  for (;;) {
    json body = req.body;
    std::int64_t ask = req.page;
    if (req.want) ask = std::min(ask, *req.want - static_cast<std::int64_t>(rows.size()));
    body["limit"] = ask;
    if (!next.empty()) body["after"] = next;
    WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call(req.op, std::move(body)));
    json got = reply.contains(req.rows) && reply[req.rows].is_array() ? std::move(reply[req.rows]) : json::array();
    if (req.pages_go_back) {
      for (json& r : rows) got.push_back(std::move(r));
      rows = std::move(got);
    } else {
      for (json& r : got) rows.push_back(std::move(r));
    }
    next = reply.contains("next") && reply["next"].is_string() ? reply["next"].get<std::string>() : "";
    if (next.empty() || (req.want && static_cast<std::int64_t>(rows.size()) >= *req.want)) break;
  }
  json out = {{req.rows, std::move(rows)}};
  if (!next.empty()) out["next"] = next;
  return out;
}

}  // namespace weft::cli

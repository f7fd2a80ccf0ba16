// The command table. Each command is a row: noun, verb, help text, the flags and
// arguments it takes, and a handler. `weft NOUN VERB ...` finds its row; help and
// usage errors are generated from the rows, so a new command is one Add() call in
// its noun's file under commands/ (see weft/cli/commands.hpp).
// Built once at start-up, then read-only; not thread-safe while being built.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "weft/cli/args.hpp"
#include "weft/common/status.hpp"

namespace weft::cli {

class Context;

// Returns ok, or the error to show (one sentence). A usage problem the handler
// finds itself is returned through Context::UsageError so it exits with 2.
using Handler = Status (*)(Context& ctx, const ParsedArgs& args);

struct Command {
  std::string noun;         // "host"
  std::string verb;         // "list"; empty for a one-word command such as "status"
  std::string summary;      // one line for `weft help`
  std::string description;  // a paragraph for `weft host list --help`
  std::vector<FlagSpec> flags;
  std::vector<ArgSpec> args;
  Handler handler = nullptr;

  // "host list", or "status".
  std::string Name() const { return verb.empty() ? noun : noun + " " + verb; }
};

class CommandTable {
 public:
  void Add(Command command);

  // The command named by noun and verb (verb empty for one-word commands).
  const Command* Find(std::string_view noun, std::string_view verb) const;
  bool HasNoun(std::string_view noun) const;
  std::vector<const Command*> ForNoun(std::string_view noun) const;
  const std::vector<Command>& commands() const { return commands_; }

  // Resolves the words after the global options to a command; `*consumed` is how
  // many of them named it (1 or 2). A non-ok Status is a usage error.
  Result<const Command*> Resolve(const std::vector<std::string>& words, std::size_t* consumed) const;

  // `weft help`, `weft help NOUN` and `weft NOUN VERB --help`.
  void PrintOverview(std::ostream& out) const;
  void PrintNounHelp(std::ostream& out, std::string_view noun) const;
  static void PrintCommandHelp(std::ostream& out, const Command& command);

 private:
  std::vector<Command> commands_;  // in the order added, which is the order of `weft help`
};

}  // namespace weft::cli

#include "app.hpp"

#include "command.hpp"
#include "commands/commands.hpp"
#include "context.hpp"
#include "weft/common/version.hpp"

namespace weft::cli {
namespace {

// One sentence on stderr, prefixed so it is clear which program speaks.
void PrintError(std::ostream& err, const std::string& message) {
  std::string line = message;
  while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.pop_back();
  err << "weft: " << line << '\n';
}

}  // namespace

int RunCli(const std::vector<std::string>& argv, const EnvLookup& env, std::ostream& out, std::ostream& err) {
  CommandTable table;
  RegisterAllCommands(table);

  std::vector<std::string> words;
  Result<GlobalOptions> opts = ParseGlobalOptions(argv, env, &words);
  if (!opts.ok()) {
    PrintError(err, opts.status().message());
    return kExitUsage;
  }
  if (opts->version) {
    out << "weft " << WEFT_VERSION << " (protocol 1)\n";
    return kExitOk;
  }

  // `weft help [NOUN [VERB]]` is the same as `weft [NOUN [VERB]] --help`.
  bool help = opts->help;
  if (!words.empty() && words[0] == "help") {
    help = true;
    words.erase(words.begin());
  }
  if (help) {
    if (words.empty()) {
      table.PrintOverview(out);
      return kExitOk;
    }
    std::size_t consumed = 0;
    Result<const Command*> cmd = table.Resolve(words, &consumed);
    if (cmd.ok()) {
      CommandTable::PrintCommandHelp(out, **cmd);
      return kExitOk;
    }
    if (table.HasNoun(words[0]) && words.size() == 1) {
      table.PrintNounHelp(out, words[0]);
      return kExitOk;
    }
    PrintError(err, cmd.status().message());
    return kExitUsage;
  }
  if (words.empty()) {
    table.PrintOverview(err);
    return kExitUsage;
  }

  std::size_t consumed = 0;
  Result<const Command*> cmd = table.Resolve(words, &consumed);
  if (!cmd.ok()) {
    PrintError(err, cmd.status().message());
    return kExitUsage;
  }
  const Command& command = **cmd;
  std::vector<std::string> rest(words.begin() + static_cast<std::ptrdiff_t>(consumed), words.end());
  Result<ParsedArgs> args = ParseCommandArgs(rest, command.flags, command.args, command.Name());
  if (!args.ok()) {
    PrintError(err, args.status().message());
    return kExitUsage;
  }

  Context ctx(*opts, out, err);
  Status st = command.handler(ctx, *args);
  out.flush();
  if (st.ok()) return kExitOk;
  PrintError(err, st.message());
  return ctx.usage_error() ? kExitUsage : kExitFailed;
}

}  // namespace weft::cli

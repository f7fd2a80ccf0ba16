#include "weft/cli/app.hpp"

#include "weft/cli/command.hpp"
#include "weft/cli/commands.hpp"
#include "weft/cli/context.hpp"
#include "weft/common/version.hpp"

namespace weft::cli {
namespace {

// One sentence on stderr, prefixed so it is clear which program speaks.
void PrintError(std::ostream& err, const std::string& message) {
  std::string line = message;
  while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.pop_back();
  err << "weft: " << line << '\n';
}

// With -o json, a failure is also one JSON object on one line of stdout for scripts:
// {"error":{"code":"NOT_FOUND","message":...,"details":{...}}}; `details` is the
// server's (a CONFLICT's cluster_id, ...), empty when the error is not its.
void PrintJsonError(std::ostream& out, Code code, const std::string& message, const nlohmann::json& details) {
  const nlohmann::json doc = {
      {"error", {{"code", std::string(CodeName(code))}, {"message", message}, {"details", details}}}};
  out << doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
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

  const bool json_output = opts->output == OutputFormat::kJson;
  std::size_t consumed = 0;
  Result<const Command*> cmd = table.Resolve(words, &consumed);
  if (!cmd.ok()) {
    if (json_output) PrintJsonError(out, Code::kInvalid, cmd.status().message(), nlohmann::json::object());
    PrintError(err, cmd.status().message());
    return kExitUsage;
  }
  const Command& command = **cmd;
  std::vector<std::string> rest(words.begin() + static_cast<std::ptrdiff_t>(consumed), words.end());
  Result<ParsedArgs> args = ParseCommandArgs(rest, command.flags, command.args, command.Name());
  if (!args.ok()) {
    if (json_output) PrintJsonError(out, Code::kInvalid, args.status().message(), nlohmann::json::object());
    PrintError(err, args.status().message());
    return kExitUsage;
  }

  Context ctx(*opts, out, err);
  Status st = command.handler(ctx, *args);
  if (!st.ok() && json_output && !ctx.printed_json())
    PrintJsonError(out, st.code(), st.message(), ctx.ErrorDetails(st));
  out.flush();
  if (st.ok()) return kExitOk;
  PrintError(err, st.message());
  return ctx.usage_error() ? kExitUsage : kExitFailed;
}

}  // namespace weft::cli

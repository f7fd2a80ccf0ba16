#include "weft/cli/command.hpp"

#include <algorithm>
#include <ostream>

#include "weft/cli/format.hpp"
#include "weft/cli/table.hpp"

namespace weft::cli {
namespace {

std::string Usage(const Command& c) {
  std::string usage = "weft [global options] ";
  usage += c.Name();
  if (!c.flags.empty()) usage += " [options]";
  for (const ArgSpec& a : c.args) usage += a.required ? " " + a.name : " [" + a.name + "]";
  return usage;
}

// " did you mean 'list'?" when `word` looks like a typo of one of `names`.
std::string DidYouMean(std::string_view word, const std::vector<std::string>& names) {
  const std::string match = ClosestMatch(word, names);
  return match.empty() ? "" : "; did you mean '" + match + "'?";
}

// Verbs people bring from other tools, and the ones here they mean. They are
// suggested before a spelling match, which could name another verb, even a
// destructive one ('show' is one letter from 'stop').
std::string MeantVerb(std::string_view word, const std::vector<std::string>& names) {
  static const std::pair<std::string_view, std::string_view> kMeant[] = {
      {"show", "get"},    {"describe", "get"}, {"info", "get"},      {"inspect", "get"}, {"ls", "list"},
      {"rm", "delete"},   {"remove", "delete"}, {"destroy", "delete"}, {"new", "create"}, {"add", "create"}};
  for (const auto& [said, meant] : kMeant)
    if (word == said && std::find(names.begin(), names.end(), meant) != names.end())
      return "; did you mean '" + std::string(meant) + "'?";
  return DidYouMean(word, names);
}

std::string VerbList(const std::vector<const Command*>& commands) {
  std::string list;
  for (const Command* c : commands) {
    if (!list.empty()) list += ", ";
    list += c->verb.empty() ? c->noun : c->verb;
  }
  return list;
}

}  // namespace

void CommandTable::Add(Command command) { commands_.push_back(std::move(command)); }

const Command* CommandTable::Find(std::string_view noun, std::string_view verb) const {
  for (const Command& c : commands_) {
    if (c.noun == noun && c.verb == verb) return &c;
  }
  return nullptr;
}

bool CommandTable::HasNoun(std::string_view noun) const { return !ForNoun(noun).empty(); }

std::vector<const Command*> CommandTable::ForNoun(std::string_view noun) const {
  std::vector<const Command*> out;
  for (const Command& c : commands_) {
    if (c.noun == noun) out.push_back(&c);
  }
  return out;
}

Result<const Command*> CommandTable::Resolve(const std::vector<std::string>& words, std::size_t* consumed) const {
  if (words.empty()) return Status::Invalid("no command given; run 'weft help' for the list");
  const std::string& noun = words[0];
  if (!HasNoun(noun)) {
    std::vector<std::string> nouns = {"help"};
    for (const Command& c : commands_) nouns.push_back(c.noun);
    return Status::Invalid("unknown command '" + noun + "'" + DidYouMean(noun, nouns) +
                           " (run 'weft help' for the list)");
  }
  if (words.size() >= 3) {
    // Two-word verbs: `weft host token create`.
    if (const Command* c = Find(noun, words[1] + " " + words[2])) {
      *consumed = 3;
      return c;
    }
  }
  if (words.size() >= 2) {
    if (const Command* c = Find(noun, words[1])) {
      *consumed = 2;
      return c;
    }
  }
  if (const Command* c = Find(noun, "")) {
    *consumed = 1;
    return c;
  }
  std::vector<const Command*> verbs = ForNoun(noun);
  if (words.size() < 2) {
    return Status::Invalid("'weft " + noun + "' needs a command: " + VerbList(verbs) + "; run 'weft help " + noun +
                           "' for details");
  }
  std::vector<std::string> names;
  for (const Command* c : verbs) names.push_back(c->verb);
  return Status::Invalid("'weft " + noun + "' has no command '" + words[1] + "'" + MeantVerb(words[1], names) +
                         " (it has: " + VerbList(verbs) + "); run 'weft help " + noun + "' for details");
}

void CommandTable::PrintOverview(std::ostream& out) const {
  out << "weft: the command-line client of the Weft cluster manager\n\n"
         "usage: weft [global options] COMMAND [arguments]\n\n"
         "commands:\n";
  Table table({"", ""});
  for (const Command& c : commands_) table.AddRow({c.Name(), c.summary});
  table.AddRow({"help [COMMAND]", "Show this overview, or the help of one command."});
  table.HideHeader();
  table.Print(out, "  ");
  out << "\n"
         "global options (anywhere on the line):\n"
         "  --server ENDPOINT    weftd's api endpoint; default $WEFT_SERVER, else the credential's\n"
         "                       endpoint, else " << kDefaultServer << "\n"
         "  --credentials FILE   who to connect as; default $WEFT_CREDENTIALS, else\n"
         "                       ~/.config/weft/credentials.json, else the local weftd's\n"
         "                       <$WEFT_DATA_DIR or " << kDefaultDataDir << ">/credentials/superadmin.json;\n"
         "                       these two only for the weftd they were made for (with\n"
         "                       --server naming another, weft sends neither)\n"
         "  --no-credentials     send no credential at all, not even $WEFT_CREDENTIALS: see\n"
         "                       what an anonymous client gets\n"
         "  -o, --output FORMAT  table (default, for people) or json (the reply body, for scripts)\n"
         "  --timeout MS         how long to wait for each answer (default " << kDefaultTimeoutMs << ")\n"
         "  --tenant TENANT      the tenant to act in (default: the server's 'default')\n"
         "  -h, --help           show help; after a command, that command's help\n"
         "  --version            print weft's version\n\n"
         "exit status: 0 done, 1 the request failed (one sentence on stderr), 2 usage error.\n"
         "Run 'weft COMMAND --help' for a command's arguments.\n";
}

void CommandTable::PrintNounHelp(std::ostream& out, std::string_view noun) const {
  std::vector<const Command*> commands = ForNoun(noun);
  if (commands.size() == 1 && commands[0]->verb.empty()) {
    PrintCommandHelp(out, *commands[0]);
    return;
  }
  out << "usage: weft [global options] " << noun << " COMMAND [arguments]\n\ncommands:\n";
  Table table({"", ""});
  for (const Command* c : commands) table.AddRow({c->Name(), c->summary});
  table.HideHeader();
  table.Print(out, "  ");
  out << "\nRun 'weft " << noun << " COMMAND --help' for a command's arguments.\n";
}

void CommandTable::PrintCommandHelp(std::ostream& out, const Command& c) {
  out << "usage: " << Usage(c) << "\n\n" << c.summary << "\n";
  if (!c.description.empty()) out << "\n" << c.description << "\n";
  if (!c.args.empty()) {
    out << "\narguments:\n";
    KeyValues kv;
    for (const ArgSpec& a : c.args) kv.Add(a.name, a.help);
    kv.Print(out, "  ");
  }
  if (!c.flags.empty()) {
    out << "\noptions:\n";
    KeyValues kv;
    for (const FlagSpec& f : c.flags) kv.Add(f.value_name.empty() ? f.name : f.name + " " + f.value_name, f.help);
    kv.Print(out, "  ");
  }
  out << "\nGlobal options (--server, --credentials, --no-credentials, -o, --timeout, --tenant) work here too; "
         "see 'weft help'.\n";
}

}  // namespace weft::cli

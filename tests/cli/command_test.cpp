// The command table and the whole CLI run in-process, for everything that needs
// no server: help, versions and usage errors.
#include <algorithm>
#include <sstream>

#include <catch2/catch.hpp>

#include "weft/cli/app.hpp"
#include "weft/cli/command.hpp"
#include "weft/cli/commands.hpp"

namespace weft::cli {
namespace {

struct Ran {
  int code;
  std::string out;
  std::string err;
};

Ran RunIt(std::vector<std::string> argv) {
  std::ostringstream out, err;
  auto env = [](std::string_view) -> std::optional<std::string> { return std::nullopt; };
  int code = RunCli(argv, env, out, err);
  return {code, out.str(), err.str()};
}

std::size_t Lines(const std::string& s) { return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n')); }

}  // namespace

TEST_CASE("cli commands: the table resolves one- and two-word commands", "[cli]") {
  CommandTable table;
  RegisterAllCommands(table);
  std::size_t consumed = 0;
  auto status = table.Resolve({"status"}, &consumed);
  REQUIRE(status.ok());
  CHECK((*status)->Name() == "status");
  CHECK(consumed == 1);
  auto hosts = table.Resolve({"host", "list", "--x"}, &consumed);
  REQUIRE(hosts.ok());
  CHECK((*hosts)->Name() == "host list");
  CHECK(consumed == 2);
  auto bad_verb = table.Resolve({"host", "frob"}, &consumed);
  REQUIRE_FALSE(bad_verb.ok());
  CHECK_THAT(bad_verb.status().message(), Catch::Contains("it has: list"));
  auto no_verb = table.Resolve({"plugin"}, &consumed);
  REQUIRE_FALSE(no_verb.ok());
  CHECK_THAT(no_verb.status().message(), Catch::Contains("needs a command: list"));
}

TEST_CASE("cli commands: every command has help text and a handler", "[cli]") {
  CommandTable table;
  RegisterAllCommands(table);
  REQUIRE(table.commands().size() >= 3);
  for (const Command& c : table.commands()) {
    INFO(c.Name());
    CHECK(c.handler != nullptr);
    CHECK_FALSE(c.summary.empty());
    CHECK(table.Find(c.noun, c.verb) == &c);
  }
}

TEST_CASE("cli: help lists every command and exits 0", "[cli]") {
  for (auto argv : {std::vector<std::string>{"help"}, std::vector<std::string>{"--help"},
                    std::vector<std::string>{"-h"}}) {
    Ran r = RunIt(argv);
    CHECK(r.code == 0);
    CHECK_THAT(r.out, Catch::Contains("status") && Catch::Contains("host list") && Catch::Contains("plugin list"));
    CHECK_THAT(r.out, Catch::Contains("--server ENDPOINT"));
    CHECK(r.err.empty());
  }
}

TEST_CASE("cli: COMMAND --help and help COMMAND show that command's usage", "[cli]") {
  Ran a = RunIt({"plugin", "list", "--help"});
  CHECK(a.code == 0);
  CHECK_THAT(a.out, Catch::StartsWith("usage: weft [global options] plugin list"));
  CHECK_THAT(a.out, Catch::Contains("--type TYPE"));
  Ran b = RunIt({"help", "plugin", "list"});
  CHECK(b.code == 0);
  CHECK(b.out == a.out);
  Ran noun = RunIt({"host", "--help"});
  CHECK(noun.code == 0);
  CHECK_THAT(noun.out, Catch::Contains("host list"));
  Ran status = RunIt({"help", "status"});
  CHECK(status.code == 0);
  CHECK_THAT(status.out, Catch::StartsWith("usage: weft [global options] status"));
}

TEST_CASE("cli: job show --help promises output only where the table shows it", "[cli]") {
  Ran r = RunIt({"job", "show", "--help"});
  CHECK(r.code == 0);
  // The table has no output column: only failed tasks' output follows it; -o json has everyone's.
  CHECK_THAT(r.out, !Catch::Contains("timing and output"));
  CHECK_THAT(r.out, Catch::Contains("Failed tasks are followed by the last lines") &&
                        Catch::Contains("-o json has every task's output"));
}

TEST_CASE("cli: --version prints the version and exits 0", "[cli]") {
  Ran r = RunIt({"--version"});
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::StartsWith("weft 0."));
}

TEST_CASE("cli: usage errors exit 2 with one line that carries a hint", "[cli]") {
  for (auto argv : {std::vector<std::string>{"frobnicate"}, std::vector<std::string>{"host", "frob"},
                    std::vector<std::string>{"status", "extra"}, std::vector<std::string>{"status", "--bogus"},
                    std::vector<std::string>{"--timeout", "x", "status"}, std::vector<std::string>{"help", "nope"}}) {
    INFO(argv[0]);
    Ran r = RunIt(argv);
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    CHECK(Lines(r.err) == 1);
    CHECK_THAT(r.err, Catch::StartsWith("weft: "));
    CHECK_THAT(r.err, Catch::Contains("run 'weft") || Catch::Contains("json or table") ||
                          Catch::Contains("milliseconds"));
  }
}

TEST_CASE("cli: no command prints the overview to stderr and exits 2", "[cli]") {
  Ran r = RunIt({});
  CHECK(r.code == 2);
  CHECK(r.out.empty());
  CHECK_THAT(r.err, Catch::Contains("usage: weft"));
}

TEST_CASE("cli commands: a verb from other tools gets the verb it means here, not the nearest spelling", "[cli]") {
  CommandTable table;
  RegisterAllCommands(table);
  std::size_t consumed = 0;
  auto show = table.Resolve({"cluster", "show", "web"}, &consumed);
  REQUIRE_FALSE(show.ok());
  CHECK_THAT(show.status().message(), Catch::Contains("no command 'show'; did you mean 'get'?"));
  auto rm = table.Resolve({"cluster", "rm", "web"}, &consumed);
  REQUIRE_FALSE(rm.ok());
  CHECK_THAT(rm.status().message(), Catch::Contains("did you mean 'delete'?"));
  // Where 'show' is a verb, it is that verb.
  auto job = table.Resolve({"job", "show", "1"}, &consumed);
  REQUIRE(job.ok());
  CHECK((*job)->Name() == "job show");
}

TEST_CASE("cli: a failed task's message of several lines prints each on a line of its own", "[cli]") {
  const nlohmann::json task = {{"id", 36},
                               {"key", "demo-2/START/nginx"},
                               {"attempt", 3},
                               {"host_id", "h1"},
                               {"message", "exited with status 1; last output:\n  nginx: [emerg] bind() failed\n"
                                           "  nginx: configuration file test failed"}};
  std::ostringstream out;
  PrintFailedTask(out, task, "");
  const std::string text = out.str();
  CHECK(text.find('?') == std::string::npos);
  CHECK_THAT(text, Catch::StartsWith("failed: task 36 demo-2/START/nginx (attempt 3 on host h1): exited with status "
                                     "1; last output:\n"));
  CHECK_THAT(text, Catch::Contains("\n      nginx: [emerg] bind() failed\n      nginx: configuration file test failed\n"));
  std::ostringstream empty;
  PrintFailedTask(empty, {{"id", 1}, {"key", "k"}, {"attempt", 1}, {"host_id", "h"}}, "");
  CHECK(empty.str() == "failed: task 1 k (attempt 1 on host h): \n");
}

TEST_CASE("cli: a failed task's output lines that its message repeats are printed once, under the output",
          "[cli]") {
  const nlohmann::json task = {{"id", 4},
                               {"key", "n1/INSTALL/x"},
                               {"attempt", 1},
                               {"host_id", "h1"},
                               {"message", "exited with status 3; last output:\n  first complaint\n  last complaint"},
                               {"stdout", "to stdout\n"},
                               {"stderr", "first complaint\nlast complaint\n"}};
  std::ostringstream out;
  PrintFailedTask(out, task, "");
  CHECK(out.str() ==
        "failed: task 4 n1/INSTALL/x (attempt 1 on host h1): exited with status 3; last output:\n"
        "  --- stdout (last lines) ---\n  to stdout\n"
        "  --- stderr (last lines) ---\n  first complaint\n  last complaint\n");
}

}  // namespace weft::cli

#include <map>

#include <catch2/catch.hpp>

#include "weft/cli/args.hpp"

namespace weft::cli {
namespace {

EnvLookup NoEnv() {
  return [](std::string_view) -> std::optional<std::string> { return std::nullopt; };
}

EnvLookup EnvWith(std::string server) {
  return [server](std::string_view name) -> std::optional<std::string> {
    if (name == "WEFT_SERVER") return server;
    return std::nullopt;
  };
}

EnvLookup EnvOf(std::map<std::string, std::string> vars) {
  return [vars](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace

TEST_CASE("cli args: global options are found anywhere and removed from the words", "[cli]") {
  std::vector<std::string> rest;
  auto opts = ParseGlobalOptions({"host", "-o", "json", "list", "--timeout=250", "--tenant", "acme"}, NoEnv(), &rest);
  REQUIRE(opts.ok());
  CHECK(opts->output == OutputFormat::kJson);
  CHECK(opts->timeout_ms == 250);
  CHECK(opts->tenant == "acme");
  CHECK(opts->server == kDefaultServer);
  CHECK(rest == std::vector<std::string>{"host", "list"});
}

TEST_CASE("cli args: -ojson and --output=table forms", "[cli]") {
  std::vector<std::string> rest;
  auto a = ParseGlobalOptions({"-ojson", "status"}, NoEnv(), &rest);
  REQUIRE(a.ok());
  CHECK(a->output == OutputFormat::kJson);
  auto b = ParseGlobalOptions({"--output=table", "status"}, NoEnv(), &rest);
  REQUIRE(b.ok());
  CHECK(b->output == OutputFormat::kTable);
}

TEST_CASE("cli args: --server beats WEFT_SERVER, which beats the default", "[cli]") {
  std::vector<std::string> rest;
  auto from_env = ParseGlobalOptions({"status"}, EnvWith("tcp://10.0.0.1:1"), &rest);
  REQUIRE(from_env.ok());
  CHECK(from_env->server == "tcp://10.0.0.1:1");
  auto from_flag = ParseGlobalOptions({"--server", "tcp://10.0.0.2:2", "status"}, EnvWith("tcp://10.0.0.1:1"), &rest);
  REQUIRE(from_flag.ok());
  CHECK(from_flag->server == "tcp://10.0.0.2:2");
  auto empty_env = ParseGlobalOptions({"status"}, EnvWith(""), &rest);
  REQUIRE(empty_env.ok());
  CHECK(empty_env->server == kDefaultServer);
}

TEST_CASE("cli args: bad global values are usage errors that say what is accepted", "[cli]") {
  std::vector<std::string> rest;
  auto bad_format = ParseGlobalOptions({"-o", "yaml"}, NoEnv(), &rest);
  REQUIRE_FALSE(bad_format.ok());
  CHECK_THAT(bad_format.status().message(), Catch::Contains("json or table"));
  auto bad_timeout = ParseGlobalOptions({"--timeout", "soon"}, NoEnv(), &rest);
  REQUIRE_FALSE(bad_timeout.ok());
  CHECK_THAT(bad_timeout.status().message(), Catch::Contains("milliseconds"));
  auto zero_timeout = ParseGlobalOptions({"--timeout", "0"}, NoEnv(), &rest);
  CHECK_FALSE(zero_timeout.ok());
  auto missing = ParseGlobalOptions({"status", "--server"}, NoEnv(), &rest);
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.status().message(), Catch::Contains("--server needs"));
  auto not_endpoint = ParseGlobalOptions({"--server", "localhost:7420"}, NoEnv(), &rest);
  REQUIRE_FALSE(not_endpoint.ok());
  CHECK_THAT(not_endpoint.status().message(), Catch::Contains("tcp://"));
  auto bad_env = ParseGlobalOptions({"status"}, EnvWith("localhost"), &rest);
  REQUIRE_FALSE(bad_env.ok());
  CHECK_THAT(bad_env.status().message(), Catch::Contains("WEFT_SERVER"));
}

TEST_CASE("cli args: words after -- are never taken as options", "[cli]") {
  std::vector<std::string> rest;
  auto opts = ParseGlobalOptions({"status", "--", "--tenant"}, NoEnv(), &rest);
  REQUIRE(opts.ok());
  CHECK(opts->tenant.empty());
  CHECK(rest == std::vector<std::string>{"status", "--", "--tenant"});
}

TEST_CASE("cli args: a command's flags and positionals", "[cli]") {
  std::vector<FlagSpec> flags = {{"--state", "STATE", "only tasks in this state"}, {"--all", "", "everything"}};
  std::vector<ArgSpec> args = {{"NAME", true, "the name"}, {"SIZE", false, "how many"}};

  auto ok = ParseCommandArgs({"--state=queued", "web", "--all", "3"}, flags, args, "thing make");
  REQUIRE(ok.ok());
  CHECK(ok->Get("--state") == "queued");
  CHECK(ok->Has("--all"));
  CHECK(ok->positionals == std::vector<std::string>{"web", "3"});

  auto unknown = ParseCommandArgs({"--colour", "web"}, flags, args, "thing make");
  REQUIRE_FALSE(unknown.ok());
  CHECK_THAT(unknown.status().message(), Catch::Contains("has no option '--colour'"));
  CHECK_THAT(unknown.status().message(), Catch::Contains("weft thing make --help"));

  auto missing = ParseCommandArgs({}, flags, args, "thing make");
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.status().message(), Catch::Contains("needs NAME"));

  auto extra = ParseCommandArgs({"a", "b", "c"}, flags, args, "thing make");
  REQUIRE_FALSE(extra.ok());
  CHECK_THAT(extra.status().message(), Catch::Contains("does not take 'c'"));

  auto no_value = ParseCommandArgs({"web", "--state"}, flags, args, "thing make");
  REQUIRE_FALSE(no_value.ok());
  CHECK_THAT(no_value.status().message(), Catch::Contains("--state needs a value"));

  auto dash = ParseCommandArgs({"--", "--all"}, flags, args, "thing make");
  REQUIRE(dash.ok());
  CHECK_FALSE(dash->Has("--all"));
  CHECK(dash->positionals == std::vector<std::string>{"--all"});
}

TEST_CASE("cli args: --version is weft's own only before the command words", "[cli]") {
  std::vector<std::string> rest;
  auto global = ParseGlobalOptions({"--version"}, NoEnv(), &rest);
  REQUIRE(global.ok());
  CHECK(global->version);
  auto command_flag = ParseGlobalOptions({"provider", "get", "p", "--version", "2"}, NoEnv(), &rest);
  REQUIRE(command_flag.ok());
  CHECK_FALSE(command_flag->version);
  CHECK(rest == std::vector<std::string>{"provider", "get", "p", "--version", "2"});
}

TEST_CASE("cli args: --no-credentials beats WEFT_CREDENTIALS and contradicts --credentials", "[cli]") {
  std::vector<std::string> rest;
  const EnvLookup env = EnvOf({{"WEFT_CREDENTIALS", "/tmp/alice.json"}});
  auto from_env = ParseGlobalOptions({"status"}, env, &rest);
  REQUIRE(from_env.ok());
  CHECK(from_env->credentials == "/tmp/alice.json");
  CHECK_FALSE(from_env->no_credentials);
  auto none = ParseGlobalOptions({"status", "--no-credentials"}, env, &rest);
  REQUIRE(none.ok());
  CHECK(none->no_credentials);
  CHECK(none->credentials.empty());
  CHECK(rest == std::vector<std::string>{"status"});
  auto both = ParseGlobalOptions({"--credentials", "/tmp/bob.json", "--no-credentials", "status"}, NoEnv(), &rest);
  REQUIRE_FALSE(both.ok());
  CHECK_THAT(both.status().message(), Catch::Contains("--credentials and --no-credentials contradict each other"));
}

TEST_CASE("cli args: WEFT_DATA_DIR names the local weftd's data directory", "[cli]") {
  std::vector<std::string> rest;
  auto plain = ParseGlobalOptions({"status"}, NoEnv(), &rest);
  REQUIRE(plain.ok());
  CHECK(plain->data_dir == "/var/lib/weft");
  auto moved = ParseGlobalOptions({"status"}, EnvOf({{"WEFT_DATA_DIR", "/srv/weft"}}), &rest);
  REQUIRE(moved.ok());
  CHECK(moved->data_dir == "/srv/weft");
}

TEST_CASE("cli args: SameWeftd tells whether --server reaches the weftd a credential is for", "[cli]") {
  // The same endpoint, however it is written.
  CHECK(SameWeftd("tcp://127.0.0.1:7420", "tcp://127.0.0.1:7420"));
  CHECK(SameWeftd("tcp://127.0.0.1:7420", "tcp://localhost:7420"));
  CHECK(SameWeftd("tcp://localhost:7420", "tcp://127.0.0.1:7420"));
  CHECK(SameWeftd("tcp://[::1]:7420", "tcp://[::1]:7420"));
  CHECK(SameWeftd("ipc:///run/weft/api", "ipc:///run/weft/api"));
  // A weftd bound to every interface is reached at any address of this machine.
  CHECK(SameWeftd("tcp://0.0.0.0:7420", "tcp://127.0.0.1:7420"));
  CHECK(SameWeftd("tcp://0.0.0.0:7420", "tcp://localhost:7420"));
  CHECK_FALSE(SameWeftd("tcp://0.0.0.0:7420", "tcp://192.0.2.7:7420"));  // TEST-NET-1: not this machine
  // Several weftd on one database are one server: one endpoint in common is enough.
  CHECK(SameWeftd("tcp://127.0.0.1:7420", "tcp://192.0.2.7:7420,tcp://localhost:7420"));
  CHECK(SameWeftd("tcp://192.0.2.7:7420,tcp://127.0.0.1:7420", "tcp://127.0.0.1:7420"));
  // Another port, another host, another transport, no endpoint at all: another weftd.
  CHECK_FALSE(SameWeftd("tcp://127.0.0.1:7420", "tcp://127.0.0.1:7421"));
  CHECK_FALSE(SameWeftd("tcp://127.0.0.1:7420", "tcp://192.0.2.7:7420"));
  CHECK_FALSE(SameWeftd("tcp://127.0.0.1:7420", "ipc:///run/weft/api"));
  CHECK_FALSE(SameWeftd("ipc:///run/weft/api", "ipc:///run/other/api"));
  CHECK_FALSE(SameWeftd("", "tcp://127.0.0.1:7420"));
}

}  // namespace weft::cli

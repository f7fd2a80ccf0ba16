// Which credential the real `weft` sends, against real weftd processes: the ones it
// finds by itself (~/.config/weft/credentials.json, the local weftd's superadmin
// credential) only to the weftd they were made for, and none with --no-credentials.
// HOME and WEFT_DATA_DIR point into the tests' own directories, so a credential of
// this machine's own weftd (/var/lib/weft) never plays a part.
#include <filesystem>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "support/weftd.hpp"

namespace weft {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::BuildPath;
using testing::RunResult;
using testing::TempDir;

// `weft ARGS...` with the environment `env` ("KEY=VALUE", the rest of the
// environment left out but PATH), to the end.
RunResult WeftWith(const std::vector<std::string>& env, const std::vector<std::string>& args) {
  std::vector<std::string> all = {"-i", "PATH=/usr/bin:/bin"};
  all.insert(all.end(), env.begin(), env.end());
  all.push_back(BuildPath("bin/weft").string());
  all.insert(all.end(), args.begin(), args.end());
  return testing::Run("/usr/bin/env", all);
}

// tcp://127.0.0.1:PORT as tcp://localhost:PORT.
std::string ByName(const std::string& endpoint) {
  const std::string numeric = "tcp://127.0.0.1:";
  REQUIRE(endpoint.rfind(numeric, 0) == 0);
  return "tcp://localhost:" + endpoint.substr(numeric.size());
}

}  // namespace

TEST_CASE("weft: a credential it finds by itself goes only to the weftd it was made for", "[cli][integration]") {
  // `local` is this machine's weftd with CurveZMQ (its data directory as WEFT_DATA_DIR);
  // `plain` another without, `guarded` another with it.
  testing::Weftd local(testing::WeftdOptions{.name = "weft-cred-local", .curve = true});
  testing::Weftd plain(testing::WeftdOptions{.name = "weft-cred-plain"});
  testing::Weftd guarded(testing::WeftdOptions{.name = "weft-cred-guarded", .curve = true});
  TempDir home("weft-cred-home");
  const std::string root = local.superadmin().string();
  const std::vector<std::string> as_root = {"HOME=" + home.path().string(), "WEFT_DATA_DIR=" + local.data().string()};

  // With no server named, the local weftd's credential and its endpoint: the superadmin
  // (only the superadmin is shown the data directory).
  RunResult found = WeftWith(as_root, {"-o", "json", "status"});
  INFO(found.out << found.err << local.Log());
  REQUIRE(found.exit_code == 0);
  CHECK(json::parse(found.out)["data_dir"] == local.data().string());
  // The same weftd named, however it is written: still the superadmin.
  for (const std::string& same : {local.api(), ByName(local.api()), plain.api() + "," + local.api()}) {
    RunResult named = WeftWith(as_root, {"-o", "json", "--server", same, "status"});
    INFO(same << ": " << named.out << named.err);
    REQUIRE(named.exit_code == 0);
    CHECK(json::parse(named.out)["data_dir"] == local.data().string());
  }
  std::vector<std::string> env_named = as_root;
  env_named.push_back("WEFT_SERVER=" + local.api());
  RunResult via_env = WeftWith(env_named, {"-o", "json", "status"});
  INFO(via_env.out << via_env.err);
  REQUIRE(via_env.exit_code == 0);
  CHECK(json::parse(via_env.out)["data_dir"] == local.data().string());

  // Another weftd, without CurveZMQ: asked as an anonymous client, not with the local
  // superadmin's keys (which a weftd without CurveZMQ cannot even take).
  RunResult other = WeftWith(as_root, {"-o", "json", "--server", plain.api(), "status"});
  INFO(other.out << other.err << plain.Log());
  REQUIRE(other.exit_code == 0);
  CHECK(json::parse(other.out)["endpoints"]["api"] == plain.api());
  env_named.back() = "WEFT_SERVER=" + plain.api();
  CHECK(WeftWith(env_named, {"status"}).exit_code == 0);

  // Another weftd with CurveZMQ: nothing sent, and weft says why and how to give one.
  RunResult refused = WeftWith(as_root, {"--timeout", "2000", "--server", guarded.api(), "status"});
  INFO(refused.out << refused.err);
  CHECK(refused.exit_code == 1);
  CHECK_THAT(refused.err, Catch::Contains("weftd at " + guarded.api() + " needs a credential (weft did not send " +
                                          root + ", which is for the weftd at " + local.api() +
                                          "): pass --credentials FILE or set WEFT_CREDENTIALS"));
  // ...and the credential it names is the way in.
  RunResult given = WeftWith(as_root, {"--server", guarded.api(), "--credentials", guarded.superadmin().string(),
                                       "-o", "json", "status"});
  INFO(given.out << given.err);
  CHECK(given.exit_code == 0);

}

TEST_CASE("weft: a credential in ~/.config/weft goes only to the weftd it was made for", "[cli][integration]") {
  testing::Weftd mine(testing::WeftdOptions{.name = "weft-cred-mine", .curve = true});
  testing::Weftd plain(testing::WeftdOptions{.name = "weft-cred-other"});
  TempDir home("weft-cred-home");
  fs::create_directories(home.path() / ".config/weft");
  fs::copy_file(mine.superadmin(), home.path() / ".config/weft/credentials.json");
  const std::vector<std::string> as_user = {"HOME=" + home.path().string(),
                                            "WEFT_DATA_DIR=" + (home.path() / "no-weftd").string()};
  RunResult own = WeftWith(as_user, {"-o", "json", "status"});
  INFO(own.out << own.err);
  REQUIRE(own.exit_code == 0);
  CHECK(json::parse(own.out)["data_dir"] == mine.data().string());
  RunResult named = WeftWith(as_user, {"-o", "json", "--server", ByName(mine.api()), "status"});
  INFO(named.out << named.err);
  REQUIRE(named.exit_code == 0);
  CHECK(json::parse(named.out)["data_dir"] == mine.data().string());
  // Another weftd, without CurveZMQ: asked anonymously, not with keys it cannot take.
  RunResult elsewhere = WeftWith(as_user, {"-o", "json", "--timeout", "2000", "--server", plain.api(), "status"});
  INFO(elsewhere.out << elsewhere.err);
  REQUIRE(elsewhere.exit_code == 0);
  CHECK(json::parse(elsewhere.out)["endpoints"]["api"] == plain.api());
}

TEST_CASE("weft --no-credentials: requests go without any credential", "[cli][integration]") {
  testing::Weftd guarded(testing::WeftdOptions{.name = "weft-nocred-guarded", .curve = true});
  testing::Weftd plain(testing::WeftdOptions{.name = "weft-nocred-plain"});
  TempDir home("weft-nocred-home");
  // Every credential there is: $WEFT_CREDENTIALS and the local weftd's.
  const std::vector<std::string> env = {"HOME=" + home.path().string(),
                                        "WEFT_DATA_DIR=" + guarded.data().string(),
                                        "WEFT_CREDENTIALS=" + guarded.superadmin().string()};
  RunResult with = WeftWith(env, {"-o", "json", "--server", guarded.api(), "status"});
  INFO(with.out << with.err);
  REQUIRE(with.exit_code == 0);

  // What an anonymous client gets from a weftd with CurveZMQ: no way in, said plainly.
  RunResult anonymous = WeftWith(env, {"--no-credentials", "--timeout", "2000", "--server", guarded.api(), "status"});
  INFO(anonymous.out << anonymous.err);
  CHECK(anonymous.exit_code == 1);
  CHECK_THAT(anonymous.err, Catch::Contains("weftd at " + guarded.api() +
                                            " needs a credential, and --no-credentials sends none"));
  // From one without: its answer (the superadmin credential would not even connect).
  RunResult open = WeftWith(env, {"--server", plain.api(), "status", "--no-credentials", "-o", "json"});
  INFO(open.out << open.err);
  REQUIRE(open.exit_code == 0);
  CHECK(json::parse(open.out)["endpoints"]["api"] == plain.api());

  // Both at once is a usage error; the help names it.
  RunResult both = WeftWith(env, {"--credentials", guarded.superadmin().string(), "--no-credentials", "status"});
  CHECK(both.exit_code == 2);
  CHECK_THAT(both.err, Catch::Contains("--credentials and --no-credentials contradict each other"));
  RunResult help = WeftWith(env, {"--help"});
  CHECK(help.exit_code == 0);
  CHECK_THAT(help.out, Catch::Contains("--no-credentials     send no credential at all"));
}

}  // namespace weft

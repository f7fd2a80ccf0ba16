// The puppet automator's field checks, through `weft-host run` (the real
// weft-host loading the real plugin in a child process, no weftd): a service
// whose fields are wrong fails before anything reaches a node, with a sentence
// that names the field. Needs neither root nor puppet.
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/fast.hpp"
#include "support/temp_dir.hpp"

using json = nlohmann::json;
using weft::testing::kBuild;
using weft::testing::TempDir;

namespace {

// Runs CONFIGURE of a puppet service with `fields` and returns what weft-host says.
weft::testing::RunResult Configure(const TempDir& dir, const json& fields) {
  const json task = {{"hostname", "n1.weft.test"},
                     {"service", {{"name", "web"}, {"action", {{"type", "puppet"}, {"fields", fields}}}}}};
  const auto file = dir / "task.json";
  weft::testing::WriteFile(file, task.dump());
  return weft::testing::Run(kBuild / "bin/weft-host",
                            {"run", (kBuild / "plugins/automators/puppet_automator.so").string(), "CONFIGURE",
                             "--task", file.string()});
}

}  // namespace

TEST_CASE("puppet: wrong fields fail the task before it reaches the node, naming the field", "[puppet]") {
  TempDir dir("weft-puppet-fields");
  const struct {
    json fields;
    std::string says;
  } cases[] = {
      {{{"class", "web; exec { 'x': command => '/bin/true' }"}}, "the field 'class' must be a Puppet class name"},
      {{{"class", "Web::Server"}}, "the field 'class' must be a Puppet class name"},
      {{{"class", "web"}, {"manifest", "site.pp"}}, "give one of the fields 'class' and 'manifest', not both"},
      {{{"manifest", "../../etc/site.pp"}}, "the field 'manifest' is a path inside the module tree"},
      {{{"class", "web"}, {"data", json::array({1})}}, "the field 'data' must be a JSON object of Hiera keys"},
      {{{"class", "web"}, {"install_puppet", "yes"}}, "the field 'install_puppet' must be true or false"},
      {{{"class", "web"}, {"timeout_ms", 0}}, "the field 'timeout_ms' must be an integer from 1 to 86400000"},
  };
  for (const auto& c : cases) {
    const auto r = Configure(dir, c.fields);
    INFO("fields " << c.fields.dump() << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.out, Catch::Contains("failed: puppet CONFIGURE invalid task: puppet: " + c.says));
  }
}

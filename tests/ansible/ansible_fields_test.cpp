// The ansible automator's checks of its fields and of the node, through
// `weft-host run` (the real weft-host loading the real plugin in a child
// process, no weftd): a task that cannot run fails before ansible-playbook
// starts, with a sentence that names what is wrong. Needs neither root nor
// Ansible.
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/fast.hpp"
#include "support/temp_dir.hpp"

using json = nlohmann::json;
using weft::testing::kBuild;
using weft::testing::TempDir;

namespace {

const json kReachable = {
    {"access_v4", "127.0.0.1"},
    {"ssh_port", 2022},
    {"ssh_auth", {{"user", "root"}, {"private_key", "not used: nothing reaches the node"}}},
    {"host_keys", {"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMnEOjRMoigz42mwK8T2ZaqA4dmkiDLTAGjqcafgBhsZ"}}};

// Runs CONFIGURE of an ansible service with `fields` on a node with `results`; what weft-host says.
weft::testing::RunResult Configure(const TempDir& dir, const json& fields, const json& results = kReachable) {
  const json task = {{"hostname", "n1.weft.test"},
                     {"results", results},
                     {"resources", json::array()},
                     {"service", {{"name", "web"}, {"action", {{"type", "ansible"}, {"fields", fields}}}}}};
  const auto file = dir / "task.json";
  weft::testing::WriteFile(file, task.dump());
  return weft::testing::Run(
      kBuild / "bin/weft-host",
      {"run", (kBuild / "plugins/automators/ansible_automator.so").string(), "CONFIGURE", "--task", file.string()});
}

}  // namespace

TEST_CASE("ansible: wrong fields or a node without what SSH needs fail the task before Ansible runs", "[ansible]") {
  TempDir dir("weft-ansible-fields");
  json no_keys = kReachable;
  no_keys.erase("host_keys");
  const struct {
    json fields;
    json results;
    std::string says;
    std::string who = "ansible: ";  // the plugin; "" where weft-host's check of declared types answers first
  } cases[] = {
      {json::object(), kReachable, "give the field 'playbook' (the playbook to run)"},
      {{{"playbook", 5}},
       kReachable,
       "field 'playbook' must be a string, not an integer; fix it in the task's service action fields",
       ""},
      {{{"playbook", "site.yml"}, {"extra_vars", json::array({1})}},
       kReachable,
       "field 'extra_vars' must be a JSON object"},
      {{{"playbook", "site.yml"}, {"timeout_ms", 0}}, kReachable, "timeout_ms must be an integer from 1 to 86400000"},
      {{{"playbook", "site.yml"}},
       no_keys,
       "node n1.weft.test has no host keys from its provider, so its identity cannot be checked"},
      {{{"playbook", "site.yml"}},
       kReachable,
       "no active ansible resource is named 'site.yml' (the task has none); upload it with `weft resource upload "
       "ansible site.yml FILE`, then stage and sync it"},
      {{{"resource", "roles.zip"}, {"playbook", "site.yml"}},
       kReachable,
       "the resource 'roles.zip' must be a .tar.gz, .tgz or .tar archive"},
      {{{"resource", "web.tar.gz"}, {"playbook", "../../etc/site.yml"}},
       kReachable,
       "field 'playbook' must be a relative path inside the resource, got '../../etc/site.yml'"},
  };
  for (const auto& c : cases) {
    const auto r = Configure(dir, c.fields, c.results);
    INFO("fields " << c.fields.dump() << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.out, Catch::Contains("failed: ansible CONFIGURE invalid task: " + c.who + c.says));
  }
}

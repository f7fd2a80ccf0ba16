// The catalog through the real `weft` CLI against the real weftd on ephemeral
// loopback ports: import examples/catalog, export, re-import, check, plan.
// Hosts are mostly registered with a raw host.register call; the check of plugin
// fields runs against a real weft-host's registration.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/host.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "support/weftd.hpp"

namespace weft {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::RunResult;
using testing::TempDir;

const fs::path kExamples = fs::path(WEFT_SOURCE_DIR) / "examples" / "catalog";



// Every regular file under `dir`, by relative path, with its bytes.
std::map<std::string, std::string> Files(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out[fs::relative(e.path(), dir).string()] = testing::ReadFile(e.path());
  return out;
}

void Import(const testing::Weftd& server, const fs::path& dir) {
  RunResult r = server.Weft({"catalog", "import", dir.string()});
  INFO(r.out << r.err << server.Log());
  REQUIRE(r.exit_code == 0);
}

bool Has(const json& list, const std::string& item) {
  return std::find(list.begin(), list.end(), json(item)) != list.end();
}

}  // namespace

TEST_CASE("weft catalog: import, export and re-import of examples/catalog round-trip unchanged",
          "[catalog][cli][integration]") {
  testing::Weftd server("weft-catalog-cli-test");
  const std::size_t entities = Files(kExamples).size();
  REQUIRE(entities >= 10);

  RunResult first = server.Weft({"catalog", "import", kExamples.string()});
  INFO(first.out << first.err << server.Log());
  REQUIRE(first.exit_code == 0);
  CHECK_THAT(first.out, Catch::Contains("imported clustertemplate 'web-fake' (version 1)"));
  CHECK_THAT(first.out,
             Catch::Contains(std::to_string(entities) + " entities imported, 0 unchanged, 0 files skipped, 0 refused"));

  const fs::path one = server.Path("export-1");
  RunResult exported = server.Weft({"catalog", "export", one.string()});
  INFO(exported.err);
  REQUIRE(exported.exit_code == 0);
  const auto first_export = Files(one);
  // The examples are written in the exporter's own form, so the export is the examples.
  CHECK(first_export == Files(kExamples));

  Import(server, one);
  json services = server.WeftJson({"service", "list"});
  REQUIRE(services["entities"].size() > 0);
  for (const json& s : services["entities"]) CHECK(s["version"] == 1);  // unchanged: no new version

  const fs::path two = server.Path("export-2");
  REQUIRE(server.Weft({"catalog", "export", two.string()}).exit_code == 0);
  CHECK(Files(two) == first_export);  // byte-identical
}

TEST_CASE("weft catalog import: reports skipped and refused files and exits 1 when something was refused",
          "[catalog][cli][integration]") {
  testing::Weftd server("weft-catalog-cli-test");
  TempDir dir("weft-catalog-import");
  fs::create_directories(dir.path() / "providers");
  fs::create_directories(dir.path() / "services");
  testing::WriteFile(dir.path() / "providers" / "fake.json", testing::ReadFile(kExamples / "providers" / "fake.json"));
  testing::WriteFile(dir.path() / "providers" / "README.md", "notes\n");
  testing::WriteFile(dir.path() / "services" / "broken.json", R"({"name":"broken","dependencies":{"conflicts":"x"}})");
  RunResult r = server.Weft({"catalog", "import", dir.path().string()});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.out, Catch::Contains("imported provider 'fake' (version 1)"));
  CHECK_THAT(r.out, Catch::Contains("skipped providers/README.md: not a .json file"));
  CHECK_THAT(r.out, Catch::Contains("refused services/broken.json"));
  CHECK_THAT(r.out, Catch::Contains("dependencies.conflicts"));
  CHECK_THAT(r.err, Catch::Contains("1 file was refused"));
  // What was valid is in.
  CHECK(server.WeftJson({"provider", "list"})["entities"].size() == 1);
}

TEST_CASE("weft catalog check: a planted dangling reference, types no live host runs, provider fields",
          "[catalog][cli][integration]") {
  testing::Weftd server("weft-catalog-cli-test");
  Import(server, kExamples);
  // A host runs the local provider (which needs a `pool` field) and the examples'
  // automators, but not fake-provider, aws nor openstack.
  server.RegisterHost("check-host",
               json::array({{{"type", "local"},
                             {"kind", "provider"},
                             {"fields",
                              json::array({{{"name", "pool"}, {"type", "string"}, {"required", true}},
                                           {{"name", "region"}, {"type", "string"}, {"required", true},
                                            {"default", "here"}}})}},
                            {{"type", "shell"}, {"kind", "automator"}},
                            {{"type", "ansible"}, {"kind", "automator"}},
                            {{"type", "fake-automator"}, {"kind", "automator"}},
                            {{"type", "puppet"}, {"kind", "automator"}}}));
  // Planted: a service that requires one nobody has, and a provider with a field the plugin lacks.
  testing::WriteFile(server.Path("orphan.json"),
                     R"({"name":"orphan","dependencies":{"install":{"requires":["ghost-service"]}}})");
  REQUIRE(server.Weft({"service", "put", server.Path("orphan.json").string()}).exit_code == 0);
  testing::WriteFile(server.Path("local2.json"),
                     R"({"name":"local2","providertype":"local","provisioner":{"pool":"p1","bogus":1}})");
  REQUIRE(server.Weft({"provider", "put", server.Path("local2.json").string()}).exit_code == 0);

  RunResult table = server.Weft({"catalog", "check"});
  INFO(table.out << table.err << server.Log());
  CHECK(table.exit_code == 1);
  CHECK_THAT(table.out, Catch::Contains("ghost-service"));
  CHECK_THAT(table.out, Catch::Contains("provider type 'fake-provider'"));
  CHECK_THAT(table.out, !Catch::Contains("automator type 'shell'"));
  CHECK_THAT(table.out, Catch::Contains("provisioner.pool is required"));
  CHECK_THAT(table.out, Catch::Contains("provisioner.bogus is not a field"));
  CHECK_THAT(table.out, Catch::Contains("provider type 'aws'"));
  CHECK_THAT(table.out, Catch::Contains("provider type 'openstack'"));
  CHECK_THAT(table.err, Catch::Contains("catalog check found 6 problems"));

  RunResult as_json = server.Weft({"-o", "json", "catalog", "check"});
  CHECK(as_json.exit_code == 1);
  json body = json::parse(as_json.out, nullptr, false);
  REQUIRE(body.is_object());
  REQUIRE(body["dangling"].size() == 1);
  CHECK(body["dangling"][0]["name"] == "orphan");
  CHECK(body["dangling"][0]["target"] == "ghost-service");
  CHECK(body["dangling"][0]["path"] == "dependencies.install.requires[0]");
  REQUIRE(body["unrunnable"].size() == 3);
  std::set<std::string> unrunnable;
  for (const json& u : body["unrunnable"]) {
    unrunnable.insert(u["type"].get<std::string>());
    CHECK(u["kind"] == "provider");
  }
  CHECK(unrunnable == std::set<std::string>{"aws", "fake-provider", "openstack"});
  REQUIRE(body["fields"].size() == 2);  // local: pool missing (region has a default); local2: bogus unknown
  std::set<std::string> problems;
  for (const json& f : body["fields"]) problems.insert(f["provider"].get<std::string>() + ":" + f["field"].get<std::string>() + ":" + f["problem"].get<std::string>());
  CHECK(problems == std::set<std::string>{"local:pool:missing", "local2:bogus:unknown"});

  // Fixing what was planted leaves only the provider types nobody runs.
  REQUIRE(server.Weft({"service", "delete", "orphan"}).exit_code == 0);
  REQUIRE(server.Weft({"provider", "delete", "local2"}).exit_code == 0);
  json after = json::parse(server.Weft({"-o", "json", "catalog", "check"}).out, nullptr, false);
  CHECK(after["dangling"].empty());
  CHECK(after["problems"] == 4);
}

// The problems of one kind in a catalog.check reply's list, as "name:field:problem".
std::set<std::string> Findings(const json& list) {
  std::set<std::string> out;
  for (const json& f : list)
    out.insert(f.value("name", "") + ":" + f.value("field", "") + ":" + f.value("problem", ""));
  return out;
}

TEST_CASE("weft catalog check: fields against the schemas a real weft-host registered, and the resources they name",
          "[catalog][cli][integration]") {
  testing::Weftd server("weft-catalog-cli-test");
  // Before any host: the check cannot know the aws plugin's fields, and says so.
  testing::WriteFile(server.Path("cloud1.json"), R"({"name":"cloud1","providertype":"aws","provisioner":{
      "api_user":"AKIAEXAMPLE","api_password":"not-a-real-secret","aws_ebs_size":"big","confirm_timeout_s":"600",
      "security_groups":["web","ssh"],"ssh_key_resource":"absent-key"}})");
  REQUIRE(server.Weft({"provider", "put", server.Path("cloud1.json").string()}).exit_code == 0);
  json early = json::parse(server.Weft({"-o", "json", "catalog", "check"}).out, nullptr, false);
  REQUIRE(early.is_object());
  CHECK(early["fields"].empty());
  CHECK(Findings(early["warnings"]) == std::set<std::string>{"cloud1::unchecked"});
  RunResult early_table = server.Weft({"catalog", "check"});
  CHECK_THAT(early_table.out, Catch::Contains("no host has registered plugin 'aws' yet"));

  // A real weft-host registers the plugins that ship, with their field schemas.
  testing::Host host(testing::HostOptions{.dir = server.dir(), .id = "h1", .server = server.provisioner()});
  REQUIRE(testing::WaitFor([&] { return server.HostLive("h1"); }, std::chrono::seconds(30)));
  testing::WriteFile(server.Path("db.json"), R"({"name":"db","provisioner":{"actions":{
      "install":{"type":"ansible","fields":{"playbook":"site.yml","resource":"no-playbooks.tar.gz","timeout_ms":"soon"}},
      "configure":{"type":"shell","fields":{"command":"true","args":{"port":1}}},
      "start":{"type":"puppet","fields":{"modules":"no-modules.tar.gz","class":"db","install_puppet":"yes"}},
      "stop":{"type":"no-such-automator","fields":{"x":1}}}}})");
  // The put itself warns of what the check below finds in its fields, and still stores it.
  RunResult put = server.Weft({"service", "put", server.Path("db.json").string()});
  REQUIRE(put.exit_code == 0);
  CHECK_THAT(put.err, Catch::Contains("weft: warning: service 'db' (action install): "
                                      "provisioner.actions.install.fields.timeout_ms is \"soon\", but plugin "
                                      "'ansible' expects a whole number"));
  CHECK_THAT(put.err, Catch::Contains("provisioner.actions.configure.fields.args"));
  // A provider put again after the host registered: its unknown field is named at once.
  testing::WriteFile(server.Path("cloud2.json"), R"({"name":"cloud2","providertype":"aws","provisioner":{
      "api_user":"AKIAEXAMPLE","api_password":"not-a-real-secret","aws_region":"us-east-1","ssh_keypair":"k",
      "aws_regoin":"eu-west-1"}})");
  RunResult put2 = server.Weft({"provider", "put", server.Path("cloud2.json").string()});
  REQUIRE(put2.exit_code == 0);
  CHECK_THAT(put2.err, Catch::Contains("provider 'cloud2': provisioner.aws_regoin is not a field of plugin 'aws'"));
  REQUIRE(server.Weft({"provider", "delete", "cloud2"}).exit_code == 0);

  RunResult table = server.Weft({"catalog", "check"});
  INFO(table.out << table.err << host.Log());
  CHECK(table.exit_code == 1);
  CHECK_THAT(table.out, Catch::Contains("provider 'cloud1': provisioner.aws_ebs_size is \"big\", but plugin 'aws' "
                                        "expects a whole number"));
  CHECK_THAT(table.out, Catch::Contains("provider 'cloud1': provisioner.aws_region is required by plugin 'aws'"));
  CHECK_THAT(table.out, Catch::Contains("provisioner.ssh_key_resource names the resource 'absent-key', but tenant "
                                        "'default' has no resource of type aws by that name"));
  CHECK_THAT(table.out, Catch::Contains("service 'db' (action install): provisioner.actions.install.fields.timeout_ms "
                                        "is \"soon\", but plugin 'ansible' expects a whole number"));

  json body = json::parse(server.Weft({"-o", "json", "catalog", "check"}).out, nullptr, false);
  REQUIRE(body.is_object());
  CHECK(Findings(body["fields"]) == std::set<std::string>{
                                        "cloud1:aws_ebs_size:type",
                                        "cloud1:aws_region:missing",
                                        "cloud1:ssh_key_resource:resource",
                                        "db:resource:resource",       // ansible's archive
                                        "db:timeout_ms:type",
                                        "db:args:type",               // shell takes a list
                                        "db:modules:resource",        // puppet's modules
                                        "db:install_puppet:type",
                                    });
  for (const json& f : body["fields"]) {
    if (f["field"] == "aws_ebs_size") CHECK(f["expected"] == "a whole number");
    if (f["field"] == "args") CHECK(f["expected"] == "a list");
  }
  // Coopr's numbers as strings work with the cloud providers: a warning, not a problem; and
  // a plugin no host has: its fields are unchecked (and the type is unrunnable).
  CHECK(Findings(body["warnings"]) ==
        std::set<std::string>{"cloud1:confirm_timeout_s:string", "db::unchecked"});
  CHECK(body["problems"] == 9);  // the eight above and no-such-automator, which no host runs

  // An uploaded resource that is not active yet is still a problem; once synced it is fine.
  testing::WriteFile(server.Path("key.pem"), "-----BEGIN OPENSSH PRIVATE KEY-----\nfake\n");
  REQUIRE(server.Weft({"resource", "upload", "aws", "idle-key", server.Path("key.pem").string()}).exit_code == 0);
  testing::WriteFile(server.Path("cloud1.json"), R"({"name":"cloud1","providertype":"aws","provisioner":{
      "api_user":"AKIAEXAMPLE","api_password":"not-a-real-secret","aws_region":"us-east-1","aws_ebs_size":20,
      "ssh_keypair":"mine","ssh_key_resource":"idle-key"}})");
  REQUIRE(server.Weft({"provider", "put", server.Path("cloud1.json").string()}).exit_code == 0);
  RunResult idle = server.Weft({"catalog", "check"});
  CHECK_THAT(idle.out, Catch::Contains("names the resource 'idle-key' (type aws), which has no active version"));
  REQUIRE(server.Weft({"resource", "stage", "aws", "idle-key", "1"}).exit_code == 0);
  REQUIRE(server.Weft({"resource", "sync"}).exit_code == 0);
  json fixed = json::parse(server.Weft({"-o", "json", "catalog", "check"}).out, nullptr, false);
  REQUIRE(fixed.is_object());
  for (const json& f : fixed["fields"]) CHECK(f["name"] != "cloud1");
}

TEST_CASE("weft cluster plan: a layout that meets web-fake's constraints and a plan whose ids all exist",
          "[catalog][cli][integration]") {
  testing::Weftd server("weft-catalog-cli-test");
  Import(server, kExamples);
  json reply = server.WeftJson({"cluster", "plan", "shop", "--template", "web-fake", "--size", "6", "--services",
                                "fake-base,fake-haproxy,fake-nginx,fake-redis,fake-monitoring"});
  REQUIRE(reply.contains("layout"));
  const json& nodes = reply["layout"]["nodes"];
  REQUIRE(nodes.size() == 6);
  std::map<std::string, int> count;
  std::set<std::string> hostnames;
  for (const json& n : nodes) {
    INFO(n.dump());
    hostnames.insert(n["hostname"].get<std::string>());
    CHECK_THAT(n["hostname"].get<std::string>(), Catch::StartsWith("shop-") && Catch::EndsWith(".weft.test"));
    CHECK((n["hardwaretype"] == "small" || n["hardwaretype"] == "medium"));
    CHECK(n["imagetype"] == "debian12");
    CHECK(n["flavor"] == (n["hardwaretype"] == "small" ? "fake-small" : "fake-medium"));
    CHECK(n["image"] == "fake-debian12");
    const json& s = n["services"];
    REQUIRE_FALSE(s.empty());
    for (const json& name : s) ++count[name.get<std::string>()];
    CHECK(Has(s, "fake-base"));                                          // unconstrained: every node
    CHECK_FALSE((Has(s, "fake-haproxy") && Has(s, "fake-nginx")));       // cantcoexist
    CHECK(Has(s, "fake-nginx") == Has(s, "fake-monitoring"));            // mustcoexist
    if (Has(s, "fake-redis")) CHECK(n["hardwaretype"] == "medium");      // per-service hardware
  }
  CHECK(hostnames.size() == 6);
  CHECK(count["fake-haproxy"] == 1);
  CHECK(count["fake-redis"] == 1);
  CHECK(count["fake-nginx"] >= 2);

  // Tasks: unique ids, every `after` names a task, every node is created.
  REQUIRE(reply["tasks"].is_array());
  std::set<std::string> ids;
  for (const json& t : reply["tasks"]) CHECK(ids.insert(t["id"].get<std::string>()).second);
  for (const json& t : reply["tasks"])
    for (const json& a : t["after"]) {
      INFO(t["id"] << " after " << a);
      CHECK(ids.count(a.get<std::string>()) == 1);
    }
  std::size_t creates = 0;
  for (const json& t : reply["tasks"]) creates += t["action"] == "CREATE" ? 1 : 0;
  CHECK(creates == 6);
  REQUIRE(reply["stages"].is_array());
  REQUIRE_FALSE(reply["stages"].empty());
  for (const json& stage : reply["stages"])
    for (const json& id : stage) CHECK(ids.count(id.get<std::string>()) == 1);

  // The table groups identical nodes and counts tasks and stages.
  RunResult table = server.Weft({"cluster", "plan", "shop", "--template", "web-fake", "--size", "6", "--services",
                                 "fake-base,fake-haproxy,fake-nginx,fake-redis,fake-monitoring"});
  INFO(table.err);
  REQUIRE(table.exit_code == 0);
  CHECK_THAT(table.out, Catch::Contains("cluster 'shop' from template 'web-fake': 6 nodes"));
  int web_nodes = 0;
  for (const json& n : nodes)
    web_nodes += n["hardwaretype"] == "small" &&
                 n["services"] == json::array({"fake-base", "fake-monitoring", "fake-nginx"});
  REQUIRE(web_nodes >= 2);
  CHECK_THAT(table.out, Catch::Contains("  " + std::to_string(web_nodes) +
                                        " × small debian12 [fake-base, fake-monitoring, fake-nginx]\n"));
  CHECK_THAT(table.out, Catch::Contains("plan: " + std::to_string(reply["tasks"].size()) + " tasks in " +
                                        std::to_string(reply["stages"].size()) + " stages"));
}

TEST_CASE("weft cluster plan: the table asks only for the summary, so a plan larger than a message still shows",
          "[catalog][cli][integration]") {
  // Messages of at most 32 KiB: the full reply of a 20-node plan is larger.
  testing::Weftd server(testing::WeftdOptions{
      .name = "weft-catalog-cli-test",
      .extra_toml = "[limits]\nmax_header_bytes = 32768\nmax_message_bytes = 32768\n"});
  Import(server, kExamples);
  const std::vector<std::string> plan = {"cluster", "plan", "big", "--template", "web-fake", "--size", "20"};
  std::vector<std::string> as_json = {"-o", "json"};
  as_json.insert(as_json.end(), plan.begin(), plan.end());
  RunResult full = server.Weft(as_json);
  CHECK(full.exit_code == 1);
  CHECK_THAT(full.err, Catch::Contains("more than a message may be"));

  as_json.push_back("--summary");
  json summary = server.WeftJson(std::vector<std::string>(as_json.begin() + 2, as_json.end()));
  INFO(summary.dump());
  CHECK(summary["summary"] == true);
  CHECK_FALSE(summary.contains("tasks"));
  CHECK_FALSE(summary.contains("layout"));
  CHECK(summary["nodes"] == 20);
  CHECK(summary["actions"]["CREATE"] == 20);
  CHECK(summary["actions"]["CONFIRM"] == 20);
  std::int64_t tasks = 0;
  for (const auto& [action, n] : summary["actions"].items()) tasks += n.get<std::int64_t>();
  CHECK(summary["task_count"] == tasks);
  REQUIRE(summary["layout_summary"].is_array());
  CHECK_FALSE(summary["layout_summary"].empty());

  RunResult table = server.Weft(plan);
  INFO(table.err);
  REQUIRE(table.exit_code == 0);
  CHECK_THAT(table.out, Catch::Contains("cluster 'big' from template 'web-fake': 20 nodes"));
  CHECK_THAT(table.out, Catch::Contains("  " + summary["layout_summary"][0].get<std::string>() + "\n"));
  CHECK_THAT(table.out, Catch::Contains("plan: " + std::to_string(tasks) + " tasks in " +
                                        std::to_string(summary["stage_count"].get<std::int64_t>()) + " stages"));
}

TEST_CASE("weft cluster plan: an unsolvable request exits 1 with the solver's sentence", "[catalog][cli][integration]") {
  testing::Weftd server("weft-catalog-cli-test");
  Import(server, kExamples);
  RunResult small_only = server.Weft({"cluster", "plan", "shop", "--template", "web-fake", "--size", "4",
                                      "--hardwaretype", "small"});
  CHECK(small_only.exit_code == 1);
  CHECK(small_only.out.empty());
  CHECK_THAT(small_only.err,
             Catch::Contains("service 'fake-redis' may only run on hardwaretypes [medium]"));

  RunResult too_small = server.Weft({"cluster", "plan", "shop", "--template", "web-fake", "--size", "2"});
  CHECK(too_small.exit_code == 1);
  CHECK_THAT(too_small.err, Catch::Contains("size 2 is outside constraints.size (min 3, max 20)"));

  RunResult unknown = server.Weft({"cluster", "plan", "shop", "--template", "nope", "--size", "2"});
  CHECK(unknown.exit_code == 1);
  CHECK_THAT(unknown.err, Catch::Contains("clustertemplate 'nope' does not exist"));

  RunResult usage = server.Weft({"cluster", "plan", "shop", "--size", "2"});
  CHECK(usage.exit_code == 2);
}

TEST_CASE("weft provider put|get|list|delete: validation names the JSON path, versions, tombstones, tenants",
          "[catalog][cli][integration]") {
  testing::Weftd server("weft-catalog-cli-test");
  testing::WriteFile(server.Path("bad.json"), R"({"name":"bad","providertype":5,"provisioner":[]})");
  RunResult bad = server.Weft({"provider", "put", server.Path("bad.json").string()});
  CHECK(bad.exit_code == 1);
  CHECK_THAT(bad.err, Catch::Contains("provider 'bad': providertype: must be a string"));
  CHECK_THAT(bad.err, Catch::Contains("provider 'bad': provisioner: must be a JSON object"));

  testing::WriteFile(server.Path("broken.json"), R"({"name": )");
  RunResult broken = server.Weft({"provider", "put", server.Path("broken.json").string()});
  CHECK(broken.exit_code == 1);
  CHECK_THAT(broken.err, Catch::Contains("malformed JSON"));

  testing::WriteFile(server.Path("p1.json"), R"({"name":"p","providertype":"fake-provider","provisioner":{}})");
  testing::WriteFile(server.Path("p2.json"),
                     R"({"name":"p","providertype":"fake-provider","provisioner":{"a":1},"colour":"blue"})");
  RunResult v1 = server.Weft({"provider", "put", server.Path("p1.json").string()});
  CHECK_THAT(v1.out, Catch::Contains("provider 'p' saved as version 1"));
  RunResult v2 = server.Weft({"provider", "put", server.Path("p2.json").string()});
  REQUIRE(v2.exit_code == 0);
  CHECK_THAT(v2.out, Catch::Contains("version 2"));
  CHECK_THAT(v2.err, Catch::Contains("warning:"));
  CHECK_THAT(v2.err, Catch::Contains("colour"));

  json latest = server.WeftJson({"provider", "get", "p"});
  CHECK(latest["version"] == 2);
  CHECK(latest["entity"]["colour"] == "blue");  // unknown fields are kept
  json first = server.WeftJson({"provider", "get", "p", "--version=1"});
  CHECK(first["version"] == 1);
  CHECK(first["entity"]["provisioner"] == json::object());

  // Other tenants see nothing of it.
  REQUIRE(server.Weft({"tenant", "create", "globex"}).exit_code == 0);
  json other = server.WeftJson({"--tenant", "globex", "provider", "list"});
  CHECK(other["entities"].empty());
  CHECK(server.Weft({"--tenant", "globex", "provider", "get", "p"}).exit_code == 1);

  REQUIRE(server.Weft({"provider", "delete", "p"}).exit_code == 0);
  RunResult gone = server.Weft({"provider", "get", "p"});
  CHECK(gone.exit_code == 1);
  CHECK_THAT(gone.err, Catch::Contains("provider 'p' does not exist"));
  CHECK(server.WeftJson({"provider", "list"})["entities"].empty());
  CHECK(server.WeftJson({"provider", "get", "p", "--version", "2"})["entity"]["colour"] == "blue");
  RunResult again = server.Weft({"provider", "put", server.Path("p1.json").string()});
  CHECK_THAT(again.out, Catch::Contains("version 4"));  // 3 is the deletion
}

TEST_CASE("weft catalog export: a catalog of more entities than the rate limit lets one connection ask for is "
          "exported in pages",
          "[catalog][cli][integration]") {
  // One connection may make 40 requests at once, then 5 a second.
  testing::Weftd server("weft-catalog-cli-test", "[security]\ncurve = false\napi_rate_per_s = 5\napi_burst = 40\n");
  // 38 imports of 16 providers each: every weft is a connection of its own, well within the burst.
  std::map<std::string, std::string> wanted;
  for (int part = 0; part < 38; ++part) {
    const fs::path dir = server.Path("part-" + std::to_string(part));
    fs::create_directories(dir / "providers");
    for (int i = 0; i < 16; ++i) {
      char name[16];
      std::snprintf(name, sizeof name, "p%04d", part * 16 + i);
      const std::string text =
          json{{"name", name}, {"providertype", "fake-provider"}, {"provisioner", {{"index", part * 16 + i}}}}.dump(2) +
          "\n";
      testing::WriteFile(dir / "providers" / (std::string(name) + ".json"), text);
      wanted["providers/" + std::string(name) + ".json"] = text;
    }
    Import(server, dir);
  }
  REQUIRE(wanted.size() == 608);

  const fs::path out = server.Path("export");
  RunResult r = server.Weft({"catalog", "export", out.string()});
  INFO(r.err << server.Log());
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("608 entities exported"));
  CHECK(Files(out) == wanted);
}

}  // namespace weft

// The aws provider end to end: the real weftd and weft-host loading the built
// plugin, against moto_server (AWS's API simulator) on a loopback port with
// signature checking on: every request after the first three (which make the
// IAM user whose key the provider gets) must be signed with that key.
// Between the plugin and moto sits tests/aws/ec2_fault_proxy.py, which logs
// each call and puts in the faults EC2 shows (5xx, throttling, an instance
// that stays pending). What the plugin made is checked through moto's API
// with boto3 (tests/aws/moto_tool.py), not through the plugin's own client
// (support/moto.hpp runs all three).
//
// Without moto_server every case says so in one line and exits 77, which
// ctest reports as skipped (SKIP_RETURN_CODE), never as passed.
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/catalog_dir.hpp"
#include "support/fast.hpp"
#include "support/host.hpp"
#include "support/moto.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "support/weftd.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using weft::testing::CatalogDir;
using weft::testing::Moto;
using weft::testing::MotoTools;
using weft::testing::Host;
using weft::testing::RunResult;
using weft::testing::Tail;
using weft::testing::TempDir;
using weft::testing::WaitFor;
using weft::testing::Weftd;

constexpr int kSkipped = 77;  // SKIP_RETURN_CODE in CMakeLists.txt

// ---- moto_server, found or the case skipped ----------------------------------------

MotoTools MotoOrSkip() {
  static const std::optional<MotoTools> tools = weft::testing::FindMoto();
  if (!tools) {
    std::cout << "SKIPPED: moto_server (with a Python that imports moto and boto3) is not installed, so the aws "
                 "provider cannot be run against an EC2 simulator; `pip install 'moto[server]'` to run this test"
              << std::endl;
    std::exit(kSkipped);
  }
  return *tools;
}

int Count(const std::vector<std::string>& calls, const std::string& line) {
  int n = 0;
  for (const std::string& c : calls) n += c == line;
  return n;
}

std::map<std::string, json> ByNode(const json& state, const std::string& cluster_id, const std::string& status) {
  std::map<std::string, json> out;
  for (const json& i : state["instances"]) {
    if (i["tags"].value("weft:cluster-id", "") == cluster_id && (status.empty() || i["state"] == status))
      out[i["tags"].value("weft:node", "")] = i;
  }
  return out;
}

// ---- weftd, hosts and the catalog ------------------------------------------------

const std::string kFast =
    "[tasks]\nlease_ms = 1500\n[jobs]\nretry_backoff_ms = 50\njanitor_interval_ms = 100\n"
    "[hosts]\nheartbeat_ms = 200\nsilent_after_ms = 1000\n";

class Env {
 public:
  Env(const std::string& name, int host_count)
      : weftd_(weft::testing::WeftdOptions{.name = name, .extra_toml = kFast, .cli_timeout = 180s}) {
    for (int i = 1; i <= host_count; ++i) {
      hosts_.push_back(std::make_unique<Host>(weft::testing::HostOptions{.dir = weftd_.dir(),
                                                                        .id = "h" + std::to_string(i),
                                                                        .server = weftd_.provisioner(),
                                                                        .capacity = 4,
                                                                        .workers = 1,
                                                                        .shutdown_grace_ms = 1000}));
    }
    for (const auto& h : hosts_) REQUIRE(WaitFor([&] { return weftd_.HostLive(h->id()); }, 30s));
  }
  Weftd& weftd() { return weftd_; }
  Host& host(std::size_t i) { return *hosts_.at(i); }
  fs::path Path(const std::string& name) const { return weftd_.Path(name); }
  std::string Logs() const {
    std::string out = Tail(weftd_.Log(), 3000);
    for (const auto& h : hosts_) out += "--- host " + h->id() + " ---\n" + Tail(h->Log(), 3000);
    return out;
  }
  // The web template on an aws provider named aws-moto with `fields`, fake services.
  void ImportCatalog(const json& fields, const std::string& ami) {
    CatalogDir catalog(Path("catalog"));
    catalog.Put("providers", {{"name", "aws-moto"},
                              {"description", "EC2 as moto simulates it"},
                              {"providertype", "aws"},
                              {"provisioner", fields}});
    for (const auto& [hw, flavor] : {std::pair{"small", "t2.micro"}, std::pair{"medium", "t3.medium"}}) {
      json doc = catalog.Get("hardwaretypes", hw);
      doc["providermap"]["aws-moto"] = {{"flavor", flavor}};
      catalog.Put("hardwaretypes", doc);
    }
    json image = catalog.Get("imagetypes", "debian12");
    image["providermap"]["aws-moto"] = {{"image", ami}, {"sshuser", "admin"}};
    catalog.Put("imagetypes", image);
    catalog.DeriveTemplate("web-aws", {{"defaults", {{"provider", "aws-moto"}}}});
    const RunResult r = weftd_.Weft({"catalog", "import", catalog.path().string()});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
  }
  // `weft ARGS... --wait`, which must succeed; the job.
  json RunJob(std::vector<std::string> args, const Moto& moto) {
    args.insert(args.begin(), {"-o", "json"});
    args.push_back("--wait");
    const RunResult r = weftd_.Weft(args);
    INFO("weft " << args[2] << " " << args[3] << ": " << r.out << r.err << Logs() << moto.Logs());
    REQUIRE(r.exit_code == 0);
    const json job = json::parse(r.out)["job"];  // -o json with --wait: {"job"}
    json done = weftd_.WaitJob(job["id"].get<std::string>(), 180s);
    INFO(done.dump(1).substr(0, 6000));
    REQUIRE(done["status"] == "succeeded");
    return done;
  }

 private:
  Weftd weftd_;
  std::vector<std::unique_ptr<Host>> hosts_;
};

std::set<std::string> Hostnames(const json& cluster) {
  std::set<std::string> out;
  for (const json& n : cluster["nodes"]) out.insert(n["hostname"].get<std::string>());
  return out;
}

}  // namespace

TEST_CASE("aws provider: a 3-node cluster is made, scaled and deleted on moto, its instances tagged, then "
          "terminated",
          "[aws][moto]") {
  TempDir tmp("weft-aws-cluster");
  Moto moto(MotoOrSkip(), tmp / "moto");
  Env env("weft-aws-cluster", 1);
  json fields = moto.Fields();
  fields["aws_ebs_size"] = 20;
  fields["security_group_ids"] = moto.security_group();
  fields["subnet_id"] = moto.subnet();
  env.ImportCatalog(fields, moto.image());

  env.RunJob({"cluster", "create", "shop", "--template", "web-aws", "--size", "3"}, moto);
  json cluster = env.weftd().Call("cluster.get", {{"cluster", "shop"}})["cluster"];
  const std::string cid = cluster["id"];
  json state = moto.State();
  INFO(state.dump(1));
  std::map<std::string, json> live = ByNode(state, cid, "running");
  REQUIRE(live.size() == 3);
  CHECK(state["instances"].size() == 3);  // nothing more was made
  for (const json& n : cluster["nodes"]) {
    const std::string hostname = n["hostname"];
    REQUIRE(live.count(hostname) == 1);
    const json& i = live[hostname];
    CHECK(i["tags"]["Name"] == hostname);
    CHECK(i["tags"]["weft:cluster"] == "shop");
    CHECK(i["tags"]["weft:tenant"] == "default");
    CHECK(i["key_name"] == "weft-default-" + cid + "-" + hostname);
    CHECK(i["image"] == moto.image());
    CHECK(i["security_groups"] == json::array({moto.security_group()}));
    CHECK(i["subnet"] == moto.subnet());
    CHECK(i["volume_sizes"] == json::array({20}));
    CHECK((i["type"] == "t2.micro" || i["type"] == "t3.medium"));
    CHECK(n["results"].value("provider_id", "") == i["id"]);
    CHECK(n["results"]["ssh_auth"]["user"] == "admin");  // the image type's sshuser
    CHECK(!n["results"].value("access_v4", "").empty());
  }
  // Every node's key pair is in EC2.
  std::set<std::string> key_names;
  for (const json& k : state["key_pairs"]) key_names.insert(k["name"].get<std::string>());
  for (const auto& [hostname, i] : live) CHECK(key_names.count(i["key_name"].get<std::string>()) == 1);

  // Grow by one, then shrink back: the removed node's instance is terminated.
  env.RunJob({"cluster", "scale", "shop", "--size", "4"}, moto);
  cluster = env.weftd().Call("cluster.get", {{"cluster", "shop"}})["cluster"];
  state = moto.State();
  CHECK(ByNode(state, cid, "running").size() == 4);
  CHECK(Hostnames(cluster).size() == 4);
  env.RunJob({"cluster", "scale", "shop", "--size", "3"}, moto);
  cluster = env.weftd().Call("cluster.get", {{"cluster", "shop"}})["cluster"];
  state = moto.State();
  live = ByNode(state, cid, "running");
  CHECK(live.size() == 3);
  CHECK(ByNode(state, cid, "terminated").size() == 1);
  std::set<std::string> running_nodes;
  for (const auto& [hostname, i] : live) running_nodes.insert(hostname);
  CHECK(running_nodes == Hostnames(cluster));

  env.RunJob({"cluster", "delete", "shop"}, moto);
  state = moto.State();
  CHECK(ByNode(state, cid, "running").empty());
  CHECK(ByNode(state, cid, "terminated").size() == 4);
  CHECK(state["key_pairs"].empty());

  // What the three jobs cost in EC2 calls, for the record.
  const std::vector<std::string> calls = moto.Calls();
  std::cout << "aws provider against moto: " << calls.size() << " EC2 calls for create 3, grow 1, shrink 1, delete 4 "
            << "(RunInstances " << Count(calls, "RunInstances 200") << ")" << std::endl;
  CHECK(Count(calls, "RunInstances 200") == 4);
}

TEST_CASE("aws provider: a host killed while RunInstances is answered leaks no instance: the CREATE run again "
          "finds it",
          "[aws][moto]") {
  TempDir tmp("weft-aws-kill");
  Moto moto(MotoOrSkip(), tmp / "moto");
  // moto makes each instance at once, then the proxy holds the answer 20 s: long enough to see the instance
  // through moto's API (a Python process, slow on a busy machine) and kill the host meanwhile.
  moto.Faults(json::array({{{"action", "RunInstances"}, {"delay_ms", 20000}, {"times", 3}}}));
  Env env("weft-aws-kill", 2);
  env.ImportCatalog(moto.Fields(), moto.image());

  const json started =
      env.weftd().Call("cluster.create", {{"name", "leak"}, {"template", "web-aws"}, {"size", 3}});
  const std::string job_id = started["job"]["id"];
  const std::string cid = started["cluster"]["id"];
  // Wait until a host holds a CREATE whose instance moto has made (its answer is held), then kill that host.
  std::string victim;
  REQUIRE(WaitFor(
      [&] {
        const std::map<std::string, json> made = ByNode(moto.State(), cid, "");
        const json now = env.weftd().Job(job_id);  // after the slow look at moto: still held now
        for (const json& t : now["tasks"]) {
          if (t["action"] == "CREATE" && t["state"] == "leased" && made.count(t.value("node", "")) == 1) {
            victim = t.value("host_id", "");
            return true;
          }
        }
        return false;
      },
      60s));
  Host& killed = env.host(victim == "h1" ? 0 : 1);
  killed.process().Signal(SIGKILL);
  REQUIRE(killed.process().Wait(10s).has_value());

  const json job = env.weftd().WaitJob(job_id, 180s);
  INFO(job.dump(1).substr(0, 8000) << env.Logs() << moto.Logs());
  REQUIRE(job["status"] == "succeeded");
  int reused = 0;
  for (const json& t : job["tasks"]) {
    if (t["action"] == "CREATE" && t["stdout"].get<std::string>().find("reuses instance") != std::string::npos)
      ++reused;
  }
  CHECK(reused >= 1);
  const json state = moto.State();
  INFO(state.dump(1));
  CHECK(state["instances"].size() == 3);  // one per node, never a second
  CHECK(ByNode(state, cid, "running").size() == 3);
}

namespace {

// A raw task in the shape the job engine hands a provider.
json NodeTaskJson(const json& fields, const std::string& ami, const std::string& action, const std::string& node,
                  const json& results = json::object()) {
  const std::string hostname = node + ".c1.weft";
  return {{"plugin", "aws"},
          {"action", action},
          {"cluster_id", "c1"},
          {"node_id", node},
          {"job_id", "job-c1"},
          {"max_attempts", 1},
          {"payload",
           {{"hostname", hostname},
            {"cluster", {{"id", "c1"}, {"name", "errors"}}},
            {"provider", {{"name", "aws-moto"}, {"type", "aws"}, {"fields", fields}}},
            {"node",
             {{"id", node}, {"hostname", hostname}, {"flavor", "t2.micro"}, {"image", ami},
              {"results", results}}},
            {"results", results}}}};
}

}  // namespace

TEST_CASE("aws provider: retries 5xx and throttling, names the field of a refused credential, times out a CONFIRM, "
          "and a DELETE of what is gone succeeds",
          "[aws][moto]") {
  TempDir tmp("weft-aws-errors");
  Moto moto(MotoOrSkip(), tmp / "moto");
  Env env("weft-aws-errors", 1);
  auto run = [&](const json& task, const std::string& final_state) {
    const std::int64_t id = env.weftd().Enqueue(task);
    json t = env.weftd().WaitTaskState(id, final_state, 90s);
    return t;
  };
  const json fields = moto.Fields();

  // 500, then 200; RequestLimitExceeded, then 200: both retried inside the one attempt.
  moto.Faults(json::array({{{"action", "DescribeInstances"}, {"times", 1}, {"status", 500}, {"code", "InternalError"}},
                           {{"action", "RunInstances"}, {"times", 1}, {"status", 503}, {"code", "RequestLimitExceeded"}}}));
  json created = run(NodeTaskJson(fields, moto.image(), "CREATE", "web-1"), "succeeded");
  INFO(created.dump(1) << moto.Logs());
  std::vector<std::string> calls = moto.Calls();
  CHECK(Count(calls, "DescribeInstances 500") == 1);
  CHECK(Count(calls, "RunInstances 503") == 1);
  CHECK(Count(calls, "RunInstances 200") == 1);
  CHECK_THAT(created["stdout"].get<std::string>(), Catch::Contains("RequestLimitExceeded") &&
                                                       Catch::Contains("trying again"));
  const std::string id = created["result"]["provider_id"];
  CHECK(ByNode(moto.State(), "c1", "").size() == 1);

  // Throttled on every try: the CREATE fails once its attempts run out, saying so.
  json throttled_fields = fields;
  throttled_fields["api_max_attempts"] = 3;
  moto.Faults(json::array({{{"action", "DescribeInstances"}, {"times", 100}, {"status", 503},
                            {"code", "RequestLimitExceeded"}}}));
  json throttled = run(NodeTaskJson(throttled_fields, moto.image(), "CREATE", "web-2"), "failed");
  CHECK_THAT(throttled["message"].get<std::string>(),
             Catch::Contains("kept failing after 3 attempts") && Catch::Contains("RequestLimitExceeded"));
  CHECK(Count(moto.Calls(), "DescribeInstances 503") == 3);
  moto.Faults(json::array());

  // A wrong secret: moto checks the signature and refuses it; the sentence names the fields.
  json wrong = fields;
  wrong["api_password"] = "not-the-secret";
  json refused = run(NodeTaskJson(wrong, moto.image(), "CREATE", "web-3"), "failed");
  const std::string refused_message = refused["message"];
  CHECK_THAT(refused_message, Catch::Contains("AWS refused the credentials") && Catch::Contains("'api_password'") &&
                                  Catch::Contains("'api_user'"));
  CHECK(refused_message.find("not-the-secret") == std::string::npos);
  json unknown_key = fields;
  unknown_key["api_user"] = "AKIANOTAKEY";
  CHECK_THAT(run(NodeTaskJson(unknown_key, moto.image(), "CREATE", "web-3"), "failed")["message"].get<std::string>(),
             Catch::Contains("AWS refused the credentials"));

  // An instance that never leaves pending: CONFIRM gives up after confirm_timeout_s.
  moto.Faults(json::array({{{"action", "DescribeInstances"}, {"state", "pending"}}}));
  json short_wait = fields;
  short_wait["confirm_timeout_s"] = 2;
  json timed_out = run(NodeTaskJson(short_wait, moto.image(), "CONFIRM", "web-1", {{"provider_id", id}}), "failed");
  CHECK_THAT(timed_out["message"].get<std::string>(),
             Catch::Contains("instance " + id) && Catch::Contains("still pending after 2 s") &&
                 Catch::Contains("'confirm_timeout_s'"));
  moto.Faults(json::array());
  json confirmed = run(NodeTaskJson(fields, moto.image(), "CONFIRM", "web-1", {{"provider_id", id}}), "succeeded");
  CHECK(!confirmed["result"].value("access_v4", "").empty());
  CHECK(confirmed["result"]["host_keys"].size() == 1);
  CHECK(confirmed["result"]["host_keys"] == created["result"]["host_keys"]);

  // DELETE terminates; a DELETE again, and one of an instance EC2 never heard of, succeed.
  run(NodeTaskJson(fields, moto.image(), "DELETE", "web-1", {{"provider_id", id}}), "succeeded");
  CHECK(ByNode(moto.State(), "c1", "terminated").size() == 1);
  run(NodeTaskJson(fields, moto.image(), "DELETE", "web-1", {{"provider_id", id}}), "succeeded");
  json gone = run(NodeTaskJson(fields, moto.image(), "DELETE", "web-9", {{"provider_id", "i-0000000000000dead"}}), "succeeded");
  CHECK_THAT(gone["stdout"].get<std::string>(), Catch::Contains("gone already"));

  // A DELETE that never heard of the instance (its CREATE died before reporting) finds it by the node's tags.
  run(NodeTaskJson(fields, moto.image(), "CREATE", "web-4"), "succeeded");
  json untold = run(NodeTaskJson(fields, moto.image(), "DELETE", "web-4"), "succeeded");
  CHECK_THAT(untold["stdout"].get<std::string>(), Catch::Contains("terminating instance"));
  const json after = moto.State();
  CHECK(ByNode(after, "c1", "terminated").count("web-4") == 1);
  CHECK(ByNode(after, "c1", "running").empty());
}

TEST_CASE("aws provider: an operator's key pair, its private key from a resource, and wrong names refused by field",
          "[aws][moto]") {
  TempDir tmp("weft-aws-keypair");
  Moto moto(MotoOrSkip(), tmp / "moto");
  Env env("weft-aws-keypair", 1);
  auto run = [&](const json& task, const std::string& final_state) {
    return env.weftd().WaitTaskState(env.weftd().Enqueue(task), final_state, 90s);
  };
  // The operator's key: made here, its public half imported into EC2, its private half a resource.
  const fs::path key = tmp / "ops-key";
  REQUIRE(weft::testing::Run("/usr/bin/ssh-keygen", {"-q", "-t", "ed25519", "-N", "", "-C", "ops", "-f", key.string()})
              .exit_code == 0);
  moto.ImportKeyPair("ops-key", tmp / "ops-key.pub");
  for (std::vector<std::string> args : {std::vector<std::string>{"resource", "upload", "aws", "ops-key.pem", key.string()},
                                        std::vector<std::string>{"resource", "stage", "aws", "ops-key.pem", "1"},
                                        std::vector<std::string>{"resource", "sync"}}) {
    const RunResult r = env.weftd().Weft(args);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
  }
  json fields = moto.Fields();
  fields["ssh_keypair"] = "ops-key";
  fields["ssh_key_resource"] = "ops-key.pem";
  const json created = run(NodeTaskJson(fields, moto.image(), "CREATE", "web-1"), "succeeded");
  INFO(created.dump(1) << moto.Logs());
  CHECK(created["result"]["ssh_auth"]["user"] == "ec2-user");
  const json state = moto.State();
  REQUIRE(state["instances"].size() == 1);
  CHECK(state["instances"][0]["key_name"] == "ops-key");
  CHECK(state["key_pairs"].size() == 1);  // the operator's only: no key pair of the node's own
  // DELETE leaves the operator's key pair alone.
  run(NodeTaskJson(fields, moto.image(), "DELETE", "web-1", {{"provider_id", created["result"]["provider_id"]}}),
      "succeeded");
  CHECK(moto.State()["key_pairs"].size() == 1);

  // Wrong names, each refused with the field to fix.
  json no_resource = fields;
  no_resource["ssh_key_resource"] = "missing.pem";
  CHECK_THAT(run(NodeTaskJson(no_resource, moto.image(), "CREATE", "web-2"), "failed")["message"].get<std::string>(),
             Catch::Contains("no active resource named 'missing.pem' (field 'ssh_key_resource')"));
  json no_keypair = fields;
  no_keypair["ssh_keypair"] = "nobody-key";
  CHECK_THAT(run(NodeTaskJson(no_keypair, moto.image(), "CREATE", "web-2"), "failed")["message"].get<std::string>(),
             Catch::Contains("field 'ssh_keypair' ('nobody-key') is unknown"));
  json sized = moto.Fields();
  sized["aws_ebs_size"] = 30;
  CHECK_THAT(run(NodeTaskJson(sized, "ami-0000000000000dead", "CREATE", "web-2"), "failed")["message"].get<std::string>(),
             Catch::Contains("image 'ami-0000000000000dead' (the image type's image for provider 'aws-moto')"));
  json no_region = moto.Fields();
  no_region.erase("aws_region");
  CHECK_THAT(run(NodeTaskJson(no_region, moto.image(), "CREATE", "web-2"), "failed")["message"].get<std::string>(),
             Catch::Contains("required field 'aws_region' is missing from the task's provider fields"));
  json file_url = moto.Fields();
  file_url["endpoint_url"] = "file:///etc/passwd";
  CHECK_THAT(run(NodeTaskJson(file_url, moto.image(), "CREATE", "web-2"), "failed")["message"].get<std::string>(),
             Catch::Contains("field 'endpoint_url' must be an http:// or https:// URL"));
  CHECK(moto.State()["instances"].size() == 1);  // none of them made an instance
}

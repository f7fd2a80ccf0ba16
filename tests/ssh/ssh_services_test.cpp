// The bodies of the SSH host services (ABI 1.1: ssh_exec, ssh_upload,
// ssh_write) called as the host's services table calls them, against real sshd
// nodes (needs root).
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/sshd_node.hpp"
#include "weft/ssh/ssh_services.hpp"

using json = nlohmann::json;
using namespace weft;
using weft::testing::SshdNode;

namespace {

// The task as the host's services table sees it: its JSON and its cancel flag.
struct FakeTask {
  explicit FakeTask(std::string text) : json_text(std::move(text)) {}
  std::string json_text;
  std::atomic<bool> cancelled{false};
};

// A task for `node` as the job engine hands it out: the node's facts and the
// results of its CREATE and CONFIRM.
json TaskFor(const SshdNode& node, json fields = json::object()) {
  const localnode::Node& n = node.node();
  return {{"task_id", 42},
          {"cluster_id", "c1"},
          {"node_id", n.name},
          {"hostname", n.name + ".c1.weft"},
          {"service", {{"name", "web"}, {"action", {{"type", "shell"}, {"fields", fields}}}}},
          {"config", {{"greeting", "hello from config"}}},
          {"nodes", json::array({{{"hostname", n.name + ".c1.weft"}}, {{"hostname", "other.c1.weft"}}})},
          {"results",
           {{"provider_id", n.id},
            {"ssh_auth", {{"user", n.user}, {"private_key", n.private_key}}},
            {"access_v4", n.address},
            {"ssh_port", n.port},
            {"host_keys", n.host_keys}}}};
}

struct Collected {
  std::string out, err;
  static void Out(void* self, const char* d, size_t n) { static_cast<Collected*>(self)->out.append(d, n); }
  static void Err(void* self, const char* d, size_t n) { static_cast<Collected*>(self)->err.append(d, n); }
};

int Exec(FakeTask& task, const char* command, uint32_t timeout_ms, Collected* c, int* status, std::string* error) {
  char err[512] = {0};
  int rc = host::ssh::ServiceExec(task.json_text.c_str(), [&] { return task.cancelled.load(); }, command, timeout_ms,
                                  &Collected::Out, &Collected::Err, c, status, err, sizeof err);
  *error = err;
  return rc;
}

}  // namespace

TEST_CASE("ssh services: exec on the task's node, reusing the connection", "[ssh][services]") {
  SshdNode node("svc");
  FakeTask task(TaskFor(node).dump());
  Collected c;
  int status = -1;
  std::string err;
  REQUIRE(Exec(task, "echo out; echo err >&2; exit 4", 5000, &c, &status, &err) == WEFT_OK);
  CHECK(status == 4);
  CHECK(c.out == "out\n");
  CHECK(c.err == "err\n");
  CHECK(host::ssh::Pool::Default().idle_count() >= 1);
  // The node drops the pooled connection (its per-connection sshd dies): the
  // dead connection is replaced transparently, since no command started on it.
  REQUIRE(std::system(("pkill -KILL -P " + std::to_string(node.node().pid)).c_str()) == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  c = {};
  REQUIRE(Exec(task, "echo again", 5000, &c, &status, &err) == WEFT_OK);
  CHECK(c.out == "again\n");
}

TEST_CASE("ssh services: timeouts, mismatched host keys and missing facts are task errors", "[ssh][services]") {
  SshdNode node("svcerr");
  std::string err;
  int status = -1;
  Collected c;

  FakeTask slow(TaskFor(node).dump());
  CHECK(Exec(slow, "sleep 10", 200, &c, &status, &err) == WEFT_ERR_TIMEOUT);
  CHECK(err == "command timed out after 200 ms on node svcerr.c1.weft");
  REQUIRE(Exec(slow, "true", 5000, &c, &status, &err) == WEFT_OK);  // the host keeps serving

  FakeTask cancelled(TaskFor(node).dump());
  cancelled.cancelled = true;
  CHECK(Exec(cancelled, "true", 5000, &c, &status, &err) == WEFT_ERR_CANCELLED);

  json wrong = TaskFor(node);
  std::string key = node.node().host_keys.at(0);
  key[key.find(' ') + 40] = key[key.find(' ') + 40] == 'A' ? 'B' : 'A';
  wrong["results"]["host_keys"] = json::array({key});
  FakeTask mitm(wrong.dump());
  CHECK(Exec(mitm, "touch /tmp/weft-should-not-exist", 5000, &c, &status, &err) == WEFT_ERR_FAILED);
  CHECK(err.find("host key mismatch") != std::string::npos);
  CHECK(err.find("svcerr.c1.weft") != std::string::npos);

  json no_keys = TaskFor(node);
  no_keys["results"].erase("host_keys");
  FakeTask unchecked(no_keys.dump());
  CHECK(Exec(unchecked, "true", 5000, &c, &status, &err) == WEFT_ERR_INVALID);
  CHECK(err.find("host_keys") != std::string::npos);

  json no_address = TaskFor(node);
  no_address["results"].erase("access_v4");
  FakeTask nowhere(no_address.dump());
  CHECK(Exec(nowhere, "true", 5000, &c, &status, &err) == WEFT_ERR_INVALID);
  CHECK(err.find("access_v4") != std::string::npos);
}

TEST_CASE("ssh services: write and upload land on the task's node", "[ssh][services]") {
  SshdNode node("svcup");
  FakeTask task(TaskFor(node).dump());
  auto cancelled = [&] { return task.cancelled.load(); };
  char err[512] = {0};
  const std::string remote = (node.node().dir / "written.txt").string();
  const std::string bytes = std::string("line one\n") + '\0' + "after a NUL\n";
  REQUIRE(host::ssh::ServiceWrite(task.json_text.c_str(), cancelled, bytes.data(), bytes.size(), remote.c_str(), 0600,
                                  5000, err, sizeof err) == WEFT_OK);
  weft::testing::TempDir local("weft-svc-upload");
  weft::testing::WriteFile(local / "f.txt", "uploaded file\n");
  const std::string remote2 = (node.node().dir / "uploaded.txt").string();
  REQUIRE(host::ssh::ServiceUpload(task.json_text.c_str(), cancelled, (local / "f.txt").c_str(), remote2.c_str(),
                                   0644, 0, err, sizeof err) == WEFT_OK);
  Collected c;
  int status = -1;
  std::string e;
  REQUIRE(Exec(task, ("cat " + remote + " " + remote2).c_str(), 5000, &c, &status, &e) == WEFT_OK);
  CHECK(c.out == bytes + "uploaded file\n");

  CHECK(host::ssh::ServiceUpload(task.json_text.c_str(), cancelled, "/nonexistent/local", remote2.c_str(), 0644, 0,
                                 err, sizeof err) == WEFT_ERR_INVALID);
  CHECK(std::string(err).find("/nonexistent/local") != std::string::npos);
}

// The worker split end to end: weftd decides how many worker threads each
// tenant gets on each host, weft-host rolls its worker processes to match and
// reports them back, and the split moves when a host joins or is killed.
#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "support/fast.hpp"
#include "support/temp_dir.hpp"
#include "weft/client/client.hpp"

namespace {

using namespace weft::testing;
using namespace std::chrono_literals;
using json = nlohmann::json;
using Split = std::map<std::string, std::int64_t>;  // tenant -> threads

// A client of the api endpoint acting in one tenant.
class Tenant {
 public:
  // Creates the tenant when it does not exist yet.
  Tenant(Weftd& server, const std::string& name)
      : client_(ctx_, weft::client::Options{server.endpoints()["api"], 3000, name, {}}) {
    (void)server.TryCall("tenant.create", {{"name", name}});
  }

  std::int64_t Enqueue(int latency_ms) {
    auto r = client_.Call("debug.enqueue", {{"tasks", json::array({{{"plugin", "fake-automator"},
                                                                     {"action", "INSTALL"},
                                                                     {"node_id", "n1"},
                                                                     {"max_attempts", 1},
                                                                     {"payload",
                                                                      {{"fields", {{"latency_ms", latency_ms}}}}}}})}});
    REQUIRE(r.ok());
    return (*r)["task_ids"][0].get<std::int64_t>();
  }
  json Task(std::int64_t id) {
    auto r = client_.Call("task.get", {{"task_id", id}});
    REQUIRE(r.ok());
    return *r;
  }
  json WaitEnded(std::int64_t id) {
    json t;
    REQUIRE(WaitFor(
        [&] {
          t = Task(id);
          return t["state"] == "succeeded" || t["state"] == "failed";
        },
        30s));
    return t;
  }

 private:
  zmq::context_t ctx_;
  weft::client::Client client_;
};

int Occurrences(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

Split Sum(const json& workers) {
  Split out;
  for (const json& w : workers) out[w["tenant"].get<std::string>()] += w["threads"].get<std::int64_t>();
  return out;
}

json HostEntry(Weftd& server, const std::string& id) {
  const json list = server.Call("host.list", json::object());
  for (const json& h : list["hosts"])
    if (h["id"] == id) return h;
  return json();
}

// Waits until weftd wants `wanted` on the host and the host reports running exactly that.
void WaitForSplit(Weftd& server, Host& host, const std::string& id, const Split& wanted) {
  json last;
  const bool reached = WaitFor(
      [&] {
        last = HostEntry(server, id);
        return last.is_object() && Sum(last["workers"]) == wanted && Sum(last["reported_workers"]) == wanted;
      },
      20s);
  INFO("host " << id << " last listed as " << last.dump() << "\n" << host.Log());
  REQUIRE(reached);
  for (const json& w : last["reported_workers"]) CHECK(kill(w["pid"].get<pid_t>(), 0) == 0);
}

}  // namespace

TEST_CASE("workers: the host runs the split weftd asks for and follows it when a host joins and is killed",
          "[integration][host][workers]") {
  weft::testing::TempDir tmp("weft-it");
  Weftd server(ServerIn(tmp / "server"));
  Tenant acme(server, "acme");
  Tenant globex(server, "globex");
  // Both tenants become active (weftd counts tenants with tasks in the last minute).
  acme.Enqueue(0);
  globex.Enqueue(0);

  // h1 alone: 3 threads, 2 for acme (the first by name) and 1 for globex; with
  // workers = 2 on 3 threads, acme's 2 threads are 2 workers of 1 thread.
  Host h1(HostIn(tmp / "h1", "h1", server.provisioner(), {}, 3, "workers = 2\n"));
  WaitForSplit(server, h1, "h1", {{"acme", 2}, {"globex", 1}});
  // The master reports a worker as soon as it starts it; the worker says whom it
  // serves once its plugins are loaded, a moment later.
  const bool serving = WaitFor(
      [&] {
        const std::string log = h1.Log();
        return Occurrences(log, "serving tenant 'acme' with 1 thread(s)") == 2 &&
               log.find("serving tenant 'globex' with 1 thread(s)") != std::string::npos;
      },
      10s);
  INFO(h1.Log());
  CHECK(serving);

  // A long acme task is running when the split changes; its worker is retired,
  // finishes it and exits.
  const std::int64_t long_task = acme.Enqueue(3000);
  REQUIRE(WaitFor([&] { return acme.Task(long_task)["state"] == "leased"; }, 10s));

  // h0 joins (it sorts first, so it takes the first card): h0 gets acme's
  // first thread, and h1 gives one of acme's threads to globex.
  auto h0 = std::make_unique<Host>(HostIn(tmp / "h0", "h0", server.provisioner(), std::vector<std::filesystem::path>{}, 1));
  WaitForSplit(server, *h0, "h0", {{"acme", 1}});
  WaitForSplit(server, h1, "h1", {{"acme", 1}, {"globex", 2}});
  CHECK_THAT(h1.Log(), Catch::Contains("worker split from weftd"));

  json t = acme.WaitEnded(long_task);
  CHECK(t["state"] == "succeeded");
  CHECK(t["attempt"] == 1);

  // Both tenants' tasks still run after the change.
  const std::int64_t a = acme.Enqueue(0);
  const std::int64_t g = globex.Enqueue(0);
  CHECK(acme.WaitEnded(a)["state"] == "succeeded");
  CHECK(globex.WaitEnded(g)["state"] == "succeeded");

  // h0 is killed: once weftd finds it silent, h1 gets its whole capacity split as before.
  h0->process().Signal(SIGKILL);
  REQUIRE(h0->process().Wait(5s));
  WaitForSplit(server, h1, "h1", {{"acme", 2}, {"globex", 1}});
  CHECK(HostEntry(server, "h0")["live"] == false);
  CHECK(HostEntry(server, "h0")["workers"].empty());
  const std::int64_t after = acme.Enqueue(0);
  json done = acme.WaitEnded(after);
  CHECK(done["state"] == "succeeded");
  CHECK(done["host_id"] == "h1");
}

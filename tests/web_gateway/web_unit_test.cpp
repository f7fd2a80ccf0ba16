// weft-web's pieces that need no process: weft-web.toml, the event ring's
// numbering and resumption, and who sees which event.
#include <catch2/catch.hpp>

#include "weft/web/config.hpp"
#include "weft/web/events.hpp"

using weft::Code;
using weft::web::EventRing;
using weft::web::ParseConfig;
using weft::web::StoredEvent;
using weft::web::Viewer;
using weft::web::Visibility;
using weft::web::Visible;
using json = nlohmann::json;

TEST_CASE("an empty weft-web.toml is valid and listens on loopback over plain HTTP") {
  auto cfg = ParseConfig("", "weft-web.toml");
  REQUIRE(cfg.ok());
  CHECK(cfg->server.listen == "127.0.0.1:8443");
  CHECK_FALSE(cfg->tls.enabled());
  CHECK(cfg->server.require_login);
}

TEST_CASE("plain HTTP on an address other than loopback is refused unless allowed") {
  auto refused = ParseConfig("[server]\nlisten = \"0.0.0.0:8443\"\n", "weft-web.toml");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == Code::kInvalid);
  CHECK(refused.status().message().find("allow_plain_http") != std::string::npos);

  CHECK(ParseConfig("[server]\nlisten = \"0.0.0.0:8443\"\nallow_plain_http = true\n", "x").ok());
  CHECK(ParseConfig("[server]\nlisten = \"0.0.0.0:8443\"\n[tls]\ncert = \"c.pem\"\nkey = \"k.pem\"\n", "x").ok());
  CHECK(ParseConfig("[server]\nlisten = \"[::1]:8443\"\n", "x").ok());
}

TEST_CASE("weft-web.toml names an unknown key and a bad value") {
  auto unknown = ParseConfig("[limits]\nmax_bodybytes = 5\n", "w.toml");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.status().message().find("unknown key 'max_bodybytes' in [limits]") != std::string::npos);

  auto bad = ParseConfig("[weftd]\nclients = 0\n", "w.toml");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("weftd.clients must be an integer from 1") != std::string::npos);

  auto half_tls = ParseConfig("[tls]\ncert = \"c.pem\"\n", "w.toml");
  REQUIRE_FALSE(half_tls.ok());
  CHECK(half_tls.status().message().find("both cert and key") != std::string::npos);

  CHECK_FALSE(ParseConfig("[server]\nlisten = \"localhost\"\n", "w.toml").ok());
  CHECK_FALSE(ParseConfig("[server]\nrequire_login = false\n[weftd]\ncredentials = \"gw.json\"\n", "w.toml").ok());
}

TEST_CASE("[weftd] api may list several weftd, and events is one endpoint or none, to follow the leader") {
  auto none = ParseConfig("", "w.toml");
  REQUIRE(none.ok());
  CHECK(none->weftd.events.empty());
  auto both = ParseConfig("[weftd]\napi = \"tcp://10.0.0.1:7420,tcp://10.0.0.2:7420\"\n", "w.toml");
  REQUIRE(both.ok());
  CHECK(both->weftd.api == "tcp://10.0.0.1:7420,tcp://10.0.0.2:7420");
  CHECK(ParseConfig("[weftd]\nevents = \"tcp://127.0.0.1:7422\"\n", "w.toml").ok());

  auto list = ParseConfig("[weftd]\nevents = \"tcp://10.0.0.1:7422,tcp://10.0.0.2:7422\"\n", "w.toml");
  REQUIRE_FALSE(list.ok());
  CHECK(list.status().message().find("is not one ZeroMQ address; leave it out to follow") != std::string::npos);
  auto bad_api = ParseConfig("[weftd]\napi = \"tcp://10.0.0.1:7420,10.0.0.2:7420\"\n", "w.toml");
  REQUIRE_FALSE(bad_api.ok());
  CHECK(bad_api.status().message().find("api \"10.0.0.2:7420\" is not a ZeroMQ address") != std::string::npos);
}

TEST_CASE("a gap in weftd's events is numbered like an event, and readers pass it on") {
  EventRing ring(10, 1);
  ring.Append("acme/task", {{"type", "task"}});
  ring.AppendGap();
  ring.Append("acme/task", {{"type", "task"}});
  auto batch = ring.After(0, 100);
  REQUIRE(batch.events.size() == 3);
  CHECK_FALSE(batch.events[0]->gap);
  CHECK(batch.events[1]->gap);
  CHECK(batch.events[1]->id == 2);
  CHECK(batch.events[2]->id == 3);
}

TEST_CASE("the event ring numbers events and resumes after a kept id, else says reset") {
  EventRing ring(3, 1000);
  CHECK(ring.LastId() == 999);
  for (int i = 0; i < 5; ++i) ring.Append("acme/task", {{"type", "task"}, {"task_id", i}});
  CHECK(ring.LastId() == 1004);

  auto kept = ring.After(1002, 100);  // 1002..1004 are kept
  CHECK_FALSE(kept.reset);
  REQUIRE(kept.events.size() == 2);
  CHECK(kept.events[0]->id == 1003);
  CHECK(kept.last == 1004);

  auto gone = ring.After(1000, 100);  // 1001 was pushed out
  CHECK(gone.reset);
  CHECK(gone.last == 1004);

  CHECK(ring.After(5000, 100).reset);  // from the future: another process's id
  CHECK(ring.After(998, 100).reset);   // before this process's first
  CHECK(ring.After(1004, 100).events.empty());
}

TEST_CASE("an event belongs to the cluster its payload or else its topic names") {
  EventRing ring(10, 1);
  auto progress = ring.Append("acme/task/7/progress",
                              {{"type", "task.progress"}, {"task_id", 42}, {"cluster_id", "7"}, {"percent", 50}});
  CHECK(progress->cluster_id == "7");
  CHECK(progress->tenant == "acme");
  auto raw = ring.Append("acme/task/progress", {{"type", "task.progress"}, {"task_id", 43}, {"percent", 50}});
  CHECK(raw->cluster_id.empty());  // a raw task belongs to no cluster
  auto job = ring.Append("acme/job/9/", {{"type", "job"}, {"job_id", "3"}});
  CHECK(job->cluster_id == "9");  // from the topic
}

TEST_CASE("a superadmin sees every event, an admin their tenant's and hosts, a user only their clusters'") {
  StoredEvent task{1, "task", "acme", "7", "{}"};
  StoredEvent raw{2, "task", "acme", "", "{}"};
  StoredEvent host{3, "host", "_system", "", "{}"};
  StoredEvent other{4, "job", "globex", "8", "{}"};

  const Viewer root{"default", "root", "superadmin"};
  const Viewer admin{"acme", "ann", "admin"};
  const Viewer user{"acme", "bob", "user"};
  for (const StoredEvent* e : {&task, &raw, &host, &other}) CHECK(Visible(root, *e) == Visibility::kShow);

  CHECK(Visible(admin, task) == Visibility::kShow);
  CHECK(Visible(admin, raw) == Visibility::kShow);
  CHECK(Visible(admin, host) == Visibility::kShow);
  CHECK(Visible(admin, other) == Visibility::kHide);

  CHECK(Visible(user, task) == Visibility::kIfOwned);
  CHECK(Visible(user, raw) == Visibility::kHide);
  CHECK(Visible(user, host) == Visibility::kHide);
  CHECK(Visible(user, other) == Visibility::kHide);
}

// The host registry's rules for host.register: one live process per host id,
// and the refused plugin files a host reports, over a real store (support/dispatch_fixture.hpp).
#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "weft/server/config/config.hpp"
#include "weft/server/hosts/host_registry.hpp"
#include "support/dispatch_fixture.hpp"

using json = nlohmann::json;
using weft::testing::DispatchFixture;

namespace {

weft::server::Config SilentAfter3s() {
  weft::server::Config config;
  config.hosts.silent_after_ms = 3000;
  return config;
}

}  // namespace

TEST_CASE("host registry: a second process under a live host's id is refused until the first one is silent",
          "[hosts]") {
  DispatchFixture f(SilentAfter3s());
  weft::hosts::Host host;
  host.record.id = "h1";
  host.record.capacity = 1;
  host.record.last_seen_ms = f.clock.NowMs();
  host.incarnation = "100-a";
  host.machine = "build-3";
  host.pid = 100;
  f.hosts.Put(host);

  bool first = false;
  // The same process registering again (a plugin change, NOT_FOUND) is fine.
  CHECK(f.hosts.CheckNewProcess("h1", "100-a", "", &first).ok());
  // Another process, while the first one is live: refused, naming where the first one runs.
  f.clock.AdvanceMs(250);
  weft::Status busy = f.hosts.CheckNewProcess("h1", "200-b", "", &first);
  CHECK(busy.code() == weft::Code::kConflict);
  CHECK(busy.message() ==
        "host 'h1' is already connected from build-3 (pid 100), heard 250 ms ago; stop it first or give this host "
        "another id (a host that died is let in once it was not heard from for hosts.silent_after_ms, 3000 ms)");
  CHECK(first);
  // Its retries are refused too, but weftd logs the process once.
  CHECK(f.hosts.CheckNewProcess("h1", "200-b", "", &first).code() == weft::Code::kConflict);
  CHECK_FALSE(first);
  // Without an incarnation (an older weft-host) nothing can be told apart: let in, as before.
  CHECK(f.hosts.CheckNewProcess("h1", "", "", &first).ok());
  // A process with another key than the live one's: the host was given a new key,
  // which cut the old process off (with security off there are no keys).
  f.hosts.Find("h1")->key = "old-key";
  CHECK(f.hosts.CheckNewProcess("h1", "200-b", "new-key", &first).ok());
  CHECK(f.hosts.CheckNewProcess("h1", "200-b", "old-key", &first).code() == weft::Code::kConflict);
  // Another id is never in the way.
  CHECK(f.hosts.CheckNewProcess("h2", "200-b", "", &first).ok());
  // Once the first process is silent (it died), the second one gets in.
  f.clock.AdvanceMs(3000);
  CHECK(f.hosts.CheckNewProcess("h1", "200-b", "", &first).ok());
  // So does one after the first said goodbye.
  f.clock.AdvanceMs(-3000);
  weft::hosts::Host* h1 = f.hosts.Find("h1");
  REQUIRE(h1);
  CHECK_FALSE(f.hosts.CheckNewProcess("h1", "300-c", "", &first).ok());
  REQUIRE(f.hosts.Leave(*h1).ok());
  CHECK(f.hosts.CheckNewProcess("h1", "300-c", "", &first).ok());
}

TEST_CASE("host registry: a request of a process that another one replaced under the id is refused with the "
          "reason",
          "[hosts]") {
  DispatchFixture f(SilentAfter3s());
  weft::hosts::Host host;
  host.record.id = "h1";
  host.record.capacity = 1;
  host.record.last_seen_ms = f.clock.NowMs();
  host.incarnation = "200-b";  // the process that registered last
  host.machine = "machine-b";
  host.pid = 200;
  f.hosts.Put(host);
  weft::hosts::Host& h1 = *f.hosts.Find("h1");
  bool first = false;
  // The registered process, and one that names none (an older weft-host), are let through.
  CHECK(f.hosts.Replaced(h1, "200-b", &first).ok());
  CHECK_FALSE(first);
  CHECK(f.hosts.Replaced(h1, "", &first).ok());
  // The earlier process: refused, saying who holds the id now and what to do; logged once.
  weft::Status old = f.hosts.Replaced(h1, "100-a", &first);
  CHECK(old.code() == weft::Code::kConflict);
  CHECK(old.message() ==
        "this process (incarnation 100-a) no longer acts for host 'h1': machine-b (pid 200) registered under that id "
        "after this process was not heard from for hosts.silent_after_ms (3000 ms), and its attempts were handed out "
        "again; stop its tasks and register again (refused while that process is live)");
  CHECK(first);
  CHECK(f.hosts.Replaced(h1, "100-a", &first).code() == weft::Code::kConflict);
  CHECK_FALSE(first);
  // After a restart of weftd no incarnation is known until the host registers again: nothing is refused.
  h1.incarnation.clear();
  CHECK(f.hosts.Replaced(h1, "100-a", &first).ok());
}

TEST_CASE("host registry: refused plugin files are checked, bounded and shown to their tenant only", "[hosts]") {
  CHECK(weft::hosts::ParseRefused(json::object())->is_null());
  const json body = {{"refused",
                      {{{"file", "/p/x.so"}, {"reason", "no entry symbol"}},
                       {{"file", "/s/acme@gx.lua"}, {"reason", std::string(5000, 'r')}, {"tenant", "acme"}, {"type", "gx"}},
                       {{"file", "/s/globex@gy.lua"}, {"reason", "syntax"}, {"tenant", "globex"}}}}};
  auto parsed = weft::hosts::ParseRefused(body);
  REQUIRE(parsed.ok());
  REQUIRE(parsed->size() == 3);
  CHECK((*parsed)[1]["reason"].get<std::string>().size() == 2003);  // 2000 bytes and "..."
  const json acme = weft::hosts::RefusedFor(*parsed, "acme");
  REQUIRE(acme.size() == 2);
  CHECK(acme[0]["file"] == "/p/x.so");
  CHECK(acme[1]["type"] == "gx");
  CHECK(weft::hosts::RefusedFor(*parsed, "default").size() == 1);

  auto bad = weft::hosts::ParseRefused({{"refused", {{{"file", "/p/x.so"}}}}});
  CHECK(bad.status().code() == weft::Code::kInvalid);
  CHECK_THAT(bad.status().message(), Catch::Contains("body.refused[0]"));
  CHECK(weft::hosts::ParseRefused({{"refused", "x"}}).status().code() == weft::Code::kInvalid);
}

TEST_CASE("host registry: hosts loaded from the store are live only once heard from, a reload keeps who was heard",
          "[hosts]") {
  DispatchFixture f(SilentAfter3s());
  for (const char* id : {"h1", "h2"})
    REQUIRE(f.store->UpsertHost({id, 2, "0.1.0", "[{\"type\":\"fake\"}]", f.clock.NowMs(), f.clock.NowMs(), "", false}).ok());
  // As after a restart of weftd: both were heard a moment ago, by the previous process.
  REQUIRE(f.hosts.Load().ok());
  CHECK_FALSE(f.hosts.HostLive("h1"));
  CHECK_FALSE(f.hosts.HostLive("h2"));
  // They may be live: the split and the plugin types jobs may use still count them.
  CHECK(f.hosts.MaybeLive(*f.hosts.Find("h1")));
  CHECK(f.hosts.LivePluginTypes("default").count("fake") == 1);
  CHECK(f.hosts.SplitWith({}).size() == 2);
  f.hosts.Seen(*f.hosts.Find("h2"));
  CHECK(f.hosts.HostLive("h2"));
  CHECK_FALSE(f.hosts.HostLive("h1"));
  // A reload after a failed commit keeps what this process heard.
  REQUIRE(f.hosts.Reset().ok());
  CHECK(f.hosts.HostLive("h2"));
  CHECK_FALSE(f.hosts.HostLive("h1"));
  // Not heard within silent_after_ms: silent as before.
  f.clock.AdvanceMs(3001);
  CHECK_FALSE(f.hosts.MaybeLive(*f.hosts.Find("h1")));
}

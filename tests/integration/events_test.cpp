// The events endpoint as a program follows it: every event numbered one more
// than the last of its topic under an incarnation that changes when the
// numbering starts again (a weftd restart, a time with no subscriber), the
// client library's EventStream telling its caller of a gap or a restart, and
// which clusters a user's subscription covers (decided when weftd receives
// it: at subscribe, again when sent again, again on every reconnect). The
// real weftd, weft-host and weft binaries (docs/protocol.md, `events`).
#include <signal.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "support/catalog_dir.hpp"
#include "support/host.hpp"
#include "support/postgres.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "support/weftd.hpp"
#include "weft/client/events.hpp"
#include "weft/common/curve.hpp"

namespace weft {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using testing::CatalogDir;
using testing::Host;
using testing::PostgresServer;
using testing::RunResult;
using testing::Tail;
using testing::TempDir;
using testing::WaitFor;
using testing::Weftd;

client::Options ApiOf(Weftd& s) {
  client::Options o;
  o.endpoint = s.api();
  o.timeout_ms = 5000;
  return o;
}

// Lets a subscription reach weftd, which reads them now and then as its loop turns.
void Settle(Weftd& s) {
  for (int i = 0; i < 10; ++i) {
    (void)s.TryCall("server.status", json::object());
    std::this_thread::sleep_for(50ms);
  }
}

// The events the stream hands out within `wait`, until `done` says enough.
std::vector<client::ReceivedEvent> Collect(client::EventStream& stream, std::chrono::milliseconds wait,
                                           const std::function<bool(const client::ReceivedEvent&)>& done = {}) {
  std::vector<client::ReceivedEvent> out;
  const auto until = std::chrono::steady_clock::now() + wait;
  while (std::chrono::steady_clock::now() < until) {
    Result<std::optional<client::ReceivedEvent>> e = stream.Next(100);
    REQUIRE(e.ok());
    if (!*e) continue;
    out.push_back(std::move(**e));
    if (done && done(out.back())) break;
  }
  return out;
}

std::string Dump(const std::vector<client::ReceivedEvent>& events) {
  std::string out;
  for (const auto& e : events) out += e.topic + " " + e.event.dump() + "\n";
  return out;
}

json RawTask() { return {{"plugin", "fake-automator"}, {"action", "INSTALL"}, {"node_id", "n1"}}; }

// One event from a plain SUB socket (the wire as any language sees it).
std::optional<std::pair<std::string, json>> RecvRaw(zmq::socket_t& sub, std::chrono::milliseconds wait) {
  const auto until = std::chrono::steady_clock::now() + wait;
  while (std::chrono::steady_clock::now() < until) {
    zmq::message_t topic, body;
    if (!sub.recv(topic, zmq::recv_flags::dontwait)) {
      std::this_thread::sleep_for(10ms);
      continue;
    }
    REQUIRE(topic.more());
    REQUIRE(sub.recv(body, zmq::recv_flags::none));
    return std::pair{topic.to_string(), json::parse(body.to_string(), nullptr, false)};
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("events: a job's events are numbered one by one per topic, under one incarnation", "[events][integration]") {
  TempDir dir("weft-events-seq");
  Weftd s(testing::WeftdOptions{.dir = dir.path() / "server", .extra_toml = "[hosts]\nheartbeat_ms = 200\n"});
  CatalogDir catalog(dir.path() / "catalog");
  catalog.PatchActions("", "", {{"latency_ms", 5}});
  REQUIRE(s.Weft({"catalog", "import", catalog.path().string()}).exit_code == 0);
  Host host({.dir = dir.path(), .id = "h1", .server = s.provisioner(), .capacity = 4, .workers = 2,
             .shutdown_grace_ms = 1000});
  REQUIRE(WaitFor([&] { return s.HostLive("h1"); }, 15s));

  zmq::context_t ctx(1);
  client::EventStream stream(ctx, ApiOf(s), {"default/job/", "default/cluster/", "default/task/"});
  REQUIRE(stream.Open().ok());
  CHECK(stream.endpoint() == s.events());
  Settle(s);

  json started = s.Call("cluster.create", {{"name", "seq"}, {"template", "web-fake"}, {"size", 3}});
  const std::string job_id = started["job"]["id"];
  std::vector<client::ReceivedEvent> events = Collect(stream, 60s, [&](const client::ReceivedEvent& e) {
    return e.event.value("type", "") == "job" && e.event.value("job_id", "") == job_id &&
           e.event.value("status", "") == "succeeded";
  });
  INFO(Dump(events) << Tail(s.Log()));
  REQUIRE(events.size() > 10);
  CHECK(events.back().event["status"] == "succeeded");

  std::map<std::string, std::uint64_t> last;
  std::set<std::string> incarnations;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const auto& e = events[i];
    REQUIRE(e.event.contains("seq"));
    REQUIRE(e.event["seq"].is_number_unsigned());
    REQUIRE(e.event.contains("incarnation"));
    incarnations.insert(e.event["incarnation"].get<std::string>());
    const std::uint64_t seq = e.event["seq"];
    // Every topic starts at 1 (the cluster is new), then one more per event.
    CHECK(seq == last[e.topic] + 1);
    last[e.topic] = seq;
    CHECK_FALSE(e.seen.unnumbered);
    CHECK_FALSE(e.seen.gap());
    CHECK(e.seen.first == (i == 0));
  }
  CHECK(incarnations.size() == 1);
  // The job's own topic and its tasks' saw several events each.
  CHECK(last["default/job/" + started["cluster"]["id"].get<std::string>() + "/"] >= 2);
  CHECK(last["default/task/" + started["cluster"]["id"].get<std::string>() + "/"] >= 6);
}

TEST_CASE("events: a weftd restart, for a subscriber that stays connected, and a time with no subscriber start a "
          "new incarnation",
          "[events][integration]") {
  // A restart: weftd restarts under a plain SUB socket, which ZeroMQ reconnects by itself, and the library's
  // stream. Otherwise the only subscriber leaves, tasks change state while nobody listens, and it subscribes again.
  const bool restart = GENERATE(true, false);
  INFO((restart ? "a restart" : "a time with no subscriber"));
  TempDir dir(restart ? "weft-events-restart" : "weft-events-nobody");
  Weftd s(testing::WeftdOptions{.dir = dir.path() / "server"});
  zmq::context_t ctx(1);
  const auto subscribe = [&] {
    auto sub = std::make_unique<zmq::socket_t>(ctx, zmq::socket_type::sub);
    sub->set(zmq::sockopt::linger, 0);
    sub->set(zmq::sockopt::subscribe, "default/task");
    sub->connect(s.events());
    return sub;
  };
  std::unique_ptr<zmq::socket_t> sub = subscribe();
  std::optional<client::EventStream> stream;
  if (restart) {
    stream.emplace(ctx, ApiOf(s), std::vector<std::string>{"default/task"});
    REQUIRE(stream->Open().ok());
  }
  Settle(s);

  // Numbered from 1, one by one, under one incarnation.
  s.Enqueue(RawTask());
  s.Enqueue(RawTask());
  auto a = RecvRaw(*sub, 10s), b = RecvRaw(*sub, 10s);
  REQUIRE(a);
  REQUIRE(b);
  const std::string before = a->second["incarnation"];
  CHECK(a->second["seq"] == 1);
  CHECK(b->second["incarnation"] == before);
  CHECK(b->second["seq"].get<std::uint64_t>() == a->second["seq"].get<std::uint64_t>() + 1);

  if (restart) {
    int got = 0;
    std::vector<client::ReceivedEvent> seen = Collect(*stream, 10s, [&](const auto&) { return ++got == 2; });
    REQUIRE(seen.size() == 2);
    CHECK_FALSE(seen[1].seen.gap());
    s.Restart();
    // The SUB socket reconnects and sends its subscription again; the stream sees the same.
    std::optional<std::pair<std::string, json>> after;
    std::vector<client::ReceivedEvent> later;
    REQUIRE(WaitFor(
        [&] {
          s.Enqueue(RawTask());
          if (!after) after = RecvRaw(*sub, 300ms);
          for (auto& e : Collect(*stream, 300ms)) later.push_back(std::move(e));
          return after.has_value() && !later.empty();
        },
        20s));
    INFO(after->second.dump() << "\n" << Dump(later) << Tail(s.Log()));
    CHECK(after->second["incarnation"] != before);
    CHECK(later[0].event["incarnation"] != before);
    CHECK(later[0].seen.restarted);
    CHECK(later[0].seen.gap());
    for (std::size_t i = 1; i < later.size(); ++i) CHECK_FALSE(later[i].seen.gap());
  } else {
    sub.reset();
    // weftd learns that its only subscriber left as its loop turns and looks at the events socket
    // (ZeroMQ ends the subscriber's pipe in steps, a look each), and Settle's server.status is
    // answered beside the loop, making no turn: writes do, a few apart. Their transitions are not
    // numbered once weftd knows.
    for (int i = 0; i < 10; ++i) {
      s.Enqueue(RawTask());
      std::this_thread::sleep_for(50ms);
    }
    // Nobody listens: the next transitions are not even built, so not numbered.
    s.Enqueue(RawTask());
    s.Enqueue(RawTask());
    sub = subscribe();
    Settle(s);
    s.Enqueue(RawTask());
    auto e = RecvRaw(*sub, 10s);
    REQUIRE(e);
    INFO(e->second.dump());
    // Same numbering would have read 15 here, hiding the twelve missed.
    CHECK(e->second["incarnation"] != before);
    CHECK(e->second["seq"] == 1);
  }
}

TEST_CASE("events: a subscriber that falls behind is told how many events it missed", "[events][integration]") {
  TempDir dir("weft-events-gap");
  Weftd s(testing::WeftdOptions{.dir = dir.path() / "server"});
  zmq::context_t ctx(1);
  // A receive queue of one message and a small kernel buffer: what weftd's queue and
  // its socket's send buffer cannot hold is dropped.
  client::EventStream stream(ctx, ApiOf(s), {"default/task"}, {.check_ms = 1000, .rcvhwm = 1, .rcvbuf = 4096});
  REQUIRE(stream.Open().ok());
  Settle(s);
  REQUIRE(Collect(stream, 300ms).empty());
  // Far more events than those queues hold, read by nobody meanwhile. How much a send
  // buffer holds depends on the machine, so a round that lost nothing is run again, larger.
  constexpr int kBatch = 4000;
  std::uint64_t published = 0;
  std::vector<client::ReceivedEvent> events;
  std::uint64_t missed = 0;
  for (int batches = 5; missed == 0 && batches <= 20; batches *= 2) {
    for (int round = 0; round < batches; ++round) {
      json tasks = json::array();
      for (int i = 0; i < kBatch; ++i) tasks.push_back(RawTask());
      REQUIRE(s.Call("debug.enqueue", {{"tasks", tasks}})["task_ids"].size() == kBatch);
    }
    // What the queues held comes first; the rest was dropped, which the next event shows.
    events.clear();
    while (true) {
      Result<std::optional<client::ReceivedEvent>> e = stream.Next(2000);
      REQUIRE(e.ok());
      if (!*e) break;
      events.push_back(std::move(**e));
    }
    REQUIRE(!events.empty());
    const std::int64_t marker = s.Enqueue(RawTask());
    published += std::uint64_t{kBatch} * batches + 1;
    auto is_marker = [&](const client::ReceivedEvent& x) { return x.event.value("task_id", std::int64_t{0}) == marker; };
    // Up to 90 s: on a loaded machine weftd may still be publishing the round (PostgreSQL, ASan).
    for (auto& e : Collect(stream, 90s, is_marker)) events.push_back(std::move(e));
    REQUIRE(!events.empty());
    REQUIRE(events.back().event["task_id"] == marker);
    for (const auto& e : events) {
      CHECK_FALSE(e.seen.restarted);
      missed += e.seen.missed;
    }
  }
  const std::uint64_t last = events.back().event.value("seq", std::uint64_t{0});
  INFO(events.size() << " events received, " << missed << " missed, last seq " << last);
  CHECK(last == published);
  CHECK(missed > 0);
  // What was received and what was reported missed account for every event of the round.
  CHECK(events.size() + missed == last - events.front().event.value("seq", std::uint64_t{0}) + 1);
}

TEST_CASE("events: a user's subscription covers the clusters they own when weftd receives it", "[events][integration]") {
  TempDir dir("weft-events-rule");
  Weftd s(testing::WeftdOptions{.dir = dir.path() / "server", .curve = true, .cli_args = {"--timeout", "5000"}});
  const fs::path root = s.superadmin();
  REQUIRE(s.Weft({"catalog", "import", (fs::path(WEFT_SOURCE_DIR) / "examples/catalog").string()}).exit_code == 0);
  REQUIRE(s.Weft({"user", "create", "ann", "--role", "user"}).exit_code == 0);
  const fs::path ann = dir.path() / "ann.json";
  REQUIRE(s.Weft({"credentials", "ann", "-f", ann.string()}).exit_code == 0);
  auto cred = curve::LoadCredential(ann);
  REQUIRE(cred.ok());
  // No host: a cluster's create job waits with its tasks queued, and abort makes events.
  auto create = [&](const std::string& name) {
    RunResult r = s.Weft({"cluster", "create", name, "--template", "web-fake", "--size", "3"}, ann);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    return s.WeftJson({"cluster", "get", name}, ann)["cluster"];
  };
  auto abort = [&](const json& cluster) {
    REQUIRE(s.Weft({"job", "abort", cluster["latest_job"].get<std::string>()}, ann).exit_code == 0);
  };
  const json c1 = create("c1");

  zmq::context_t ctx(1);
  // The rule as any subscriber meets it: this stream does not send its subscription
  // again by itself when told of a new cluster.
  client::EventStream stream(ctx, client::FromCredential(*cred), {"default/"}, {.follow_created = false});
  REQUIRE(stream.Open().ok());
  Settle(s);
  const json c2 = create("c2");
  abort(c1);
  abort(c2);
  // The clusters whose own topics delivered events (not the owner topic, which tells of a cluster made).
  auto clusters_in = [](const std::vector<client::ReceivedEvent>& events) {
    std::set<std::string> ids;
    for (const auto& e : events)
      if (e.topic != "default/owner/ann/") ids.insert(e.event.value("cluster_id", ""));
    return ids;
  };
  // The subscription covers c1 only: c2 came after it, and is told on ann's owner topic.
  std::vector<client::ReceivedEvent> events = Collect(stream, 3s);
  INFO(Dump(events));
  CHECK(clusters_in(events) == std::set<std::string>{c1["id"].get<std::string>()});
  bool told = false;
  for (const auto& e : events)
    told = told || (e.topic == "default/owner/ann/" && e.event.value("type", "") == "cluster.created" &&
                    e.event.value("cluster_id", "") == c2["id"].get<std::string>() &&
                    e.event.value("job_id", "") == c2["latest_job"].get<std::string>());
  CHECK(told);

  // Sent again, the same subscription covers c2 too.
  stream.Subscribe("default/");
  Settle(s);
  REQUIRE(s.Weft({"cluster", "delete", "c2"}, ann).exit_code == 0);
  events = Collect(stream, 3s);
  INFO(Dump(events));
  CHECK(clusters_in(events).count(c2["id"].get<std::string>()) == 1);

  // A cluster made now is not covered, until the connection is made again: a weftd
  // restart (or a move to another leader) re-applies the subscription as it stands then.
  const json c3 = create("c3");
  s.Restart();
  bool restarted = false;
  std::set<std::string> seen;
  // c3's job aborted, retried, aborted...: events of c3 until the stream, back, shows them.
  REQUIRE(WaitFor(
      [&] {
        const std::string job = c3["latest_job"];
        if (!s.TryCall("job.abort", {{"job", job}}).ok()) (void)s.TryCall("job.retry", {{"job", job}});
        for (const auto& e : Collect(stream, 500ms)) {
          restarted = restarted || e.seen.restarted;
          if (e.topic != "default/owner/ann/") seen.insert(e.event.value("cluster_id", ""));
        }
        return seen.count(c3["id"].get<std::string>()) == 1;
      },
      30s));
  CHECK(restarted);
}

TEST_CASE("events: a user's EventStream follows the clusters they create after it subscribed, and no one else's",
          "[events][integration]") {
  TempDir dir("weft-events-stream-follow");
  Weftd s(testing::WeftdOptions{.dir = dir.path() / "server", .curve = true, .cli_args = {"--timeout", "5000"}});
  REQUIRE(s.Weft({"catalog", "import", (fs::path(WEFT_SOURCE_DIR) / "examples/catalog").string()}).exit_code == 0);
  auto user = [&](const std::string& name) {
    REQUIRE(s.Weft({"user", "create", name, "--role", "user"}).exit_code == 0);
    const fs::path cred = dir.path() / (name + ".json");
    REQUIRE(s.Weft({"credentials", name, "-f", cred.string()}).exit_code == 0);
    return cred;
  };
  const fs::path ann = user("ann");
  const fs::path ben = user("ben");
  // No host: a create job waits with its tasks queued; aborting and retrying it makes events.
  auto create = [&](const std::string& name, const fs::path& who) {
    RunResult r = s.Weft({"cluster", "create", name, "--template", "web-fake", "--size", "3"}, who);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    return s.WeftJson({"cluster", "get", name}, who)["cluster"];
  };
  auto stir = [&](const json& cluster, const fs::path& who) {
    const std::string job = cluster["latest_job"];
    if (s.Weft({"job", "abort", job}, who).exit_code != 0) (void)s.Weft({"job", "retry", job}, who);
  };

  // ann owns no cluster yet when her stream subscribes, with the default options.
  auto cred = curve::LoadCredential(ann);
  REQUIRE(cred.ok());
  zmq::context_t ctx(1);
  client::EventStream stream(ctx, client::FromCredential(*cred), {"default/"});
  REQUIRE(stream.Open().ok());
  Settle(s);
  const json mine = create("mine", ann);
  const json bens = create("bens", ben);
  const std::string mine_id = mine["id"];
  std::vector<client::ReceivedEvent> events;
  auto got = [&](const std::string& topic, const std::string& type) {
    for (const auto& e : events)
      if (e.topic == topic && e.event.value("type", "") == type && e.event.value("cluster_id", "") == mine_id)
        return true;
    return false;
  };
  // Her cluster is told on her owner topic; from then on its own topics reach her.
  const bool told = WaitFor(
      [&] {
        for (auto& e : Collect(stream, 500ms)) events.push_back(std::move(e));
        return got("default/owner/ann/", "cluster.created");
      },
      20s);
  INFO(Dump(events));
  REQUIRE(told);
  const bool followed = WaitFor(
      [&] {
        stir(bens, ben);
        stir(mine, ann);
        for (auto& e : Collect(stream, 1s)) events.push_back(std::move(e));
        return got("default/job/" + mine_id + "/", "job");
      },
      30s);
  INFO(Dump(events));
  REQUIRE(followed);
  // ben's cluster, stirred before each of hers on the same connection, never reached her.
  for (const auto& e : events) {
    CHECK((e.topic == "default/owner/ann/" || e.topic.find("/" + mine_id + "/") != std::string::npos));
    CHECK(e.event.value("cluster_id", "") != bens["id"].get<std::string>());
  }
}

TEST_CASE("events: EventStream tells its caller when its connection is made, lost and made again, and returns "
          "DENIED once weftd no longer knows the key",
          "[events][integration]") {
  TempDir dir("weft-events-changes");
  Weftd s(testing::WeftdOptions{.dir = dir.path() / "server", .curve = true, .cli_args = {"--timeout", "5000"}});
  REQUIRE(s.Weft({"user", "create", "ann", "--role", "user"}).exit_code == 0);
  const fs::path ann = dir.path() / "ann.json";
  REQUIRE(s.Weft({"credentials", "ann", "-f", ann.string()}).exit_code == 0);
  auto cred = curve::LoadCredential(ann);
  REQUIRE(cred.ok());

  std::vector<client::StreamChange> changes;
  auto said = [&] {
    std::string out;
    for (const auto& c : changes)
      out += std::to_string(static_cast<int>(c.kind)) + " " + c.endpoint + " (" + c.why + ")\n";
    return out;
  };
  auto connections = [&] {
    int n = 0;
    for (const auto& c : changes) n += c.kind == client::StreamChange::Kind::kConnected;
    return n;
  };
  zmq::context_t ctx(1);
  client::EventStream stream(
      ctx, client::FromCredential(*cred), {"default/"},
      {.check_ms = 300, .on_change = [&](const client::StreamChange& c) { changes.push_back(c); }});
  REQUIRE(stream.Open().ok());
  // The handshake: told from Next.
  REQUIRE(WaitFor(
      [&] {
        REQUIRE(stream.Next(100).ok());
        return connections() == 1;
      },
      20s));
  INFO(said());
  REQUIRE(changes.size() == 1);
  CHECK(changes[0].endpoint == s.events());

  // weftd restarts (on the same endpoint): the connection is lost, then made again.
  s.Restart();
  const bool back = WaitFor(
      [&] {
        REQUIRE(stream.Next(100).ok());
        return connections() == 2;
      },
      30s);
  INFO(said() << Tail(s.Log()));
  REQUIRE(back);
  REQUIRE(changes.size() >= 3);
  CHECK(changes[1].kind == client::StreamChange::Kind::kLost);
  CHECK(changes[1].why.empty());  // it went away; no handshake failed
  CHECK(changes.back().kind == client::StreamChange::Kind::kConnected);
  CHECK(changes.back().endpoint == s.events());
  for (const auto& c : changes) CHECK(c.kind != client::StreamChange::Kind::kMoved);

  // ann's user is deleted: asked where the events are, weftd refuses her key, and Next says so.
  REQUIRE(s.Weft({"user", "delete", "ann"}).exit_code == 0);
  std::optional<Status> refused;
  const bool ended = WaitFor(
      [&] {
        Result<std::optional<client::ReceivedEvent>> next = stream.Next(100);
        if (!next.ok()) refused = next.status();
        return refused.has_value();
      },
      20s);
  INFO(said());
  REQUIRE(ended);
  CHECK(refused->code() == Code::kDenied);
  CHECK_THAT(refused->message(), Catch::Contains("does not know this client's key"));
}

TEST_CASE("events: a user's plain weft events follows the clusters they create after it started, and no one "
          "else's",
          "[events][integration]") {
  TempDir dir("weft-events-follow");
  Weftd s(testing::WeftdOptions{.dir = dir.path() / "server", .curve = true, .cli_args = {"--timeout", "5000"}});
  const std::string catalog = (fs::path(WEFT_SOURCE_DIR) / "examples/catalog").string();
  REQUIRE(s.Weft({"catalog", "import", catalog}).exit_code == 0);
  REQUIRE(s.Weft({"tenant", "create", "acme"}).exit_code == 0);
  REQUIRE(s.Weft({"--tenant", "acme", "catalog", "import", catalog}).exit_code == 0);
  // ann and ben share tenant default, carl is in acme; all three are users.
  auto user = [&](const std::string& tenant, const std::string& name) {
    REQUIRE(s.Weft({"--tenant", tenant, "user", "create", name, "--role", "user"}).exit_code == 0);
    const fs::path cred = dir.path() / (name + ".json");
    REQUIRE(s.Weft({"--tenant", tenant, "credentials", name, "-f", cred.string()}).exit_code == 0);
    return cred;
  };
  const fs::path ann = user("default", "ann");
  const fs::path ben = user("default", "ben");
  const fs::path carl = user("acme", "carl");
  // No host: a create job waits with its tasks queued; aborting and retrying it makes events.
  auto create = [&](const std::string& name, const fs::path& who) {
    RunResult r = s.Weft({"cluster", "create", name, "--template", "web-fake", "--size", "3"}, who);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    return s.WeftJson({"cluster", "get", name}, who)["cluster"];
  };
  auto stir = [&](const json& cluster, const fs::path& who) {
    const std::string job = cluster["latest_job"];
    if (s.Weft({"job", "abort", job}, who).exit_code != 0) (void)s.Weft({"job", "retry", job}, who);
  };

  // ann owns no cluster yet when her `weft events` subscribes.
  testing::Process follow = s.Background("ann-events", {"-o", "json", "events"}, ann);
  REQUIRE(WaitFor([&] { return s.Err("ann-events").find("following") != std::string::npos; }, 20s));
  Settle(s);
  const json mine = create("mine", ann);
  const json bens = create("bens", ben);
  const json carls = create("carls", carl);
  const std::string mine_id = mine["id"];
  // Her cluster is told, and its events show from then on.
  const bool told = WaitFor(
      [&] { return s.Out("ann-events").find("\"type\":\"cluster.created\"") != std::string::npos; }, 20s);
  INFO(s.Out("ann-events") << s.Err("ann-events"));
  REQUIRE(told);
  auto shows_mine = [&] {
    return s.Out("ann-events").find("\"topic\":\"default/job/" + mine_id + "/\"") != std::string::npos;
  };
  REQUIRE(WaitFor(
      [&] {
        stir(bens, ben);
        stir(carls, carl);
        stir(mine, ann);
        return WaitFor(shows_mine, 1s);
      },
      30s));
  // ben's and carl's were stirred before each of hers, on the same connection: none reached her.
  const std::string out = s.Out("ann-events");
  for (const json& other : {bens, carls}) {
    CHECK(out.find("\"cluster_id\":\"" + other["id"].get<std::string>() + "\"") == std::string::npos);
  }
  CHECK(out.find("acme/") == std::string::npos);
  CHECK(out.find("default/owner/ben/") == std::string::npos);
  // Every line she got is hers: her owner topic or her cluster's.
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    const json e = json::parse(line, nullptr, false);
    REQUIRE(e.is_object());
    const std::string topic = e.value("topic", "");
    CHECK((topic == "default/owner/ann/" || topic.find("/" + mine_id + "/") != std::string::npos));
  }
}

TEST_CASE("events: weft events --cluster and --job show a tenant user's cluster, whatever the tenant",
          "[events][integration]") {
  TempDir dir("weft-events-tenant");
  Weftd s(testing::WeftdOptions{.dir = dir.path() / "server", .curve = true, .cli_args = {"--timeout", "5000"}});
  const fs::path bob = dir.path() / "bob.json";
  REQUIRE(s.Weft({"tenant", "create", "acme"}).exit_code == 0);
  REQUIRE(s.Weft({"--tenant", "acme", "user", "create", "bob", "--role", "user"}).exit_code == 0);
  REQUIRE(s.Weft({"--tenant", "acme", "credentials", "bob", "-f", bob.string()}).exit_code == 0);
  REQUIRE(s.Weft({"--tenant", "acme", "catalog", "import",
                  (fs::path(WEFT_SOURCE_DIR) / "examples/catalog").string()}).exit_code == 0);
  // No host: the create job waits with its tasks queued; its abort makes the events.
  RunResult made = s.Weft({"cluster", "create", "c1", "--template", "web-fake", "--size", "3"}, bob);
  INFO(made.out << made.err);
  REQUIRE(made.exit_code == 0);
  const std::string job = s.WeftJson({"cluster", "get", "c1"}, bob)["cluster"]["latest_job"];

  // bob's credential names tenant acme and nothing else does: no --tenant given.
  testing::Process by_cluster = s.Background("by-cluster", {"-o", "json", "events", "--cluster", "c1"}, bob);
  testing::Process by_job = s.Background("by-job", {"-o", "json", "events", "--job", job}, bob);
  REQUIRE(WaitFor([&] { return s.Err("by-cluster").find("following") != std::string::npos &&
                               s.Err("by-job").find("following") != std::string::npos; },
                  20s));
  Settle(s);
  REQUIRE(s.Weft({"job", "abort", job}, bob).exit_code == 0);
  auto shows_abort = [&](const std::string& name) {
    return s.Out(name).find("\"job_id\":\"" + job + "\"") != std::string::npos;
  };
  const bool shown = WaitFor([&] { return shows_abort("by-cluster") && shows_abort("by-job"); }, 20s);
  INFO("--cluster: " << s.Out("by-cluster") << s.Err("by-cluster") << "\n--job: " << s.Out("by-job")
                     << s.Err("by-job"));
  CHECK(shown);

  // A key weftd no longer knows ends them, saying why, instead of reconnecting for ever.
  REQUIRE(s.Weft({"--tenant", "acme", "user", "delete", "bob"}).exit_code == 0);
  for (testing::Process* p : {&by_cluster, &by_job}) {
    const auto status = p->Wait(30s);
    REQUIRE(status.has_value());
    CHECK(WIFEXITED(*status));
    CHECK(WEXITSTATUS(*status) == 1);
  }
  CHECK_THAT(s.Err("by-cluster"), Catch::Contains("stopped following weftd's events") &&
                                      Catch::Contains("does not know this client's key"));
}

TEST_CASE("events: EventStream and weft events move to the new leader, and tell of the new incarnation",
          "[events][integration][failover]") {
  TempDir dir("weft-events-failover");
  Result<std::unique_ptr<PostgresServer>> pg = PostgresServer::Start(dir.path() / "pg");
  if (!pg.ok()) FAIL("cannot start PostgreSQL: " << pg.status().message());
  auto start = [&](const std::string& node) {
    fs::create_directories(dir.path() / node);
    return std::make_unique<Weftd>(testing::WeftdOptions{
        .dir = dir.path() / node,
        .name = node,
        .extra_toml = "[store]\nbackend = \"postgres\"\nconninfo = " + json((*pg)->conninfo()).dump() +
                      "\n[leader]\nnode = \"" + node + "\"\nlease_ms = 1000\npoll_ms = 100\n",
        .store = "sqlite"});  // its [store] says postgres
  };
  auto role = [](Weftd& w) {
    Result<json> st = w.TryCall("server.status", json::object(), 2000);
    if (!st.ok() || !st->contains("leadership")) return std::string();
    return (*st)["leadership"].value("role", std::string());
  };
  std::unique_ptr<Weftd> a = start("a");
  REQUIRE(WaitFor([&] { return role(*a) == "leader"; }, 20s));
  // Every weftd on one database has the first one's keys (docs/failover.md).
  fs::create_directories(dir.path() / "b" / "data");
  fs::copy(a->data() / "keys", dir.path() / "b" / "data" / "keys", fs::copy_options::recursive);
  std::unique_ptr<Weftd> b = start("b");
  REQUIRE(WaitFor([&] { return role(*b) == "follower"; }, 20s));

  // Given both api endpoints, follower first: the stream finds the leader's events itself.
  zmq::context_t ctx(1);
  client::Options o;
  o.endpoint = b->api() + "," + a->api();
  o.timeout_ms = 3000;
  std::vector<client::StreamChange> changes;
  client::EventStream stream(ctx, o, {"default/task"},
                             {.check_ms = 300,
                              .rcvhwm = 0,
                              .on_change = [&](const client::StreamChange& c) { changes.push_back(c); }});
  REQUIRE(stream.Open().ok());
  CHECK(stream.endpoint() == a->events());
  // `weft events` given both, too.
  testing::ProcessOptions po;
  po.stdout_path = dir.path() / "events.out";
  po.stderr_path = dir.path() / "events.err";
  testing::Process cli(testing::BuildPath("bin/weft"),
                       {"--server", b->api() + "," + a->api(), "-o", "json", "events"}, po);
  REQUIRE(WaitFor([&] { return testing::ReadFile(po.stderr_path).find("following") != std::string::npos; }, 20s));
  std::vector<client::ReceivedEvent> before;
  REQUIRE(WaitFor(
      [&] {
        a->Enqueue(RawTask());
        before = Collect(stream, 300ms);
        return !before.empty();
      },
      20s));
  const std::string first = before.back().event["incarnation"];

  bool paused = false;
  SECTION("the leader dies (kill -9)") { a->Kill(); }
  SECTION("the leader is paused (SIGSTOP): its connections stay up, it publishes nothing") {
    REQUIRE(kill(a->pid(), SIGSTOP) == 0);
    paused = true;
  }
  std::vector<client::ReceivedEvent> after;
  const bool moved = WaitFor(
      [&] {
        (void)b->TryCall("debug.enqueue", {{"tasks", json::array({RawTask()})}}, 1000);
        after = Collect(stream, 300ms);
        return !after.empty();
      },
      40s);
  INFO("--- b ---\n" << Tail(b->AllLogs(), 3000));
  REQUIRE(moved);
  CHECK(stream.endpoint() == b->events());
  CHECK(stream.reopened() >= 1);
  CHECK(after[0].event["incarnation"] != first);
  CHECK(after[0].seen.restarted);
  CHECK(after[0].seen.gap());
  // The stream told its caller of the move, and of the new connection.
  REQUIRE(WaitFor(
      [&] {
        (void)Collect(stream, 100ms);
        return !changes.empty() && changes.back().kind == client::StreamChange::Kind::kConnected &&
               changes.back().endpoint == b->events();
      },
      10s));
  {
    std::optional<client::StreamChange> moved_to;
    for (const auto& c : changes)
      if (c.kind == client::StreamChange::Kind::kMoved) moved_to = c;
    REQUIRE(moved_to);
    CHECK(moved_to->endpoint == b->events());
    // Paused, the old leader kept the connection up: the stream moved off a live connection.
    if (paused) CHECK(moved_to->was_connected);
  }

  // The command moved too, said so, and told of the new numbering.
  const bool cli_moved = WaitFor(
      [&] {
        (void)b->TryCall("debug.enqueue", {{"tasks", json::array({RawTask()})}}, 1000);
        return testing::ReadFile(po.stdout_path).find(after[0].event["incarnation"].get<std::string>()) !=
               std::string::npos;
      },
      30s);
  const std::string err = testing::ReadFile(po.stderr_path);
  INFO(err << testing::ReadFile(po.stdout_path));
  CHECK(cli_moved);
  CHECK_THAT(err, Catch::Contains("events were missed (weftd's numbering started anew"));
  CHECK_THAT(err, Catch::Contains(b->events()));
  // Still connected to the paused one, the command noticed by asking while the events were quiet.
  if (paused) CHECK_THAT(err, Catch::Contains("weftd's events are now published at " + b->events()));
  if (paused) REQUIRE(kill(a->pid(), SIGCONT) == 0);
}

}  // namespace weft

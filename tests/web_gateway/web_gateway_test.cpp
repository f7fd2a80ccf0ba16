// weft-web end to end: the real weftd and weft-web on loopback ports, talked
// to over real HTTP and HTTPS connections.
#include <signal.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <thread>

#include "stream.hpp"
#include "support/catalog_dir.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "support/web.hpp"
#include "support/weftd.hpp"
#include "weft/common/digest.hpp"

using namespace weft::testing;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

// weft-web in development mode (no login) against weftd with security off.
WebOptions Open(const std::string& name) {
  WebOptions o;
  o.name = name;
  o.require_login = false;
  return o;
}

// Waits for an event of weft-web's own on the stream saying whether weftd can be reached.
bool ToldWeftd(HttpConnection& events, bool reachable) {
  return WaitFor(
      [&] {
        std::optional<SseEvent> e = events.NextEvent(200ms);
        if (!e || e->type != "weftd") return false;
        const json d = json::parse(e->data);
        INFO(e->data);
        CHECK(d.value("message", "") != "");
        return d.value("reachable", !reachable) == reachable;
      },
      30s);
}

}  // namespace

TEST_CASE("weft-web refuses to start when server.static_dir is not the UI's folder, naming the key and path") {
  TempDir dir("web-static-dir");
  std::filesystem::create_directories(dir / "empty");
  for (const std::string& ui : {(dir / "nope").string(), (dir / "empty").string()}) {
    WriteFile(dir / "weft-web.toml", "[server]\nlisten = \"127.0.0.1:0\"\nstatic_dir = \"" + ui + "\"\n");
    RunResult r = Run(BuildPath("bin/weft-web"), {"--config", (dir / "weft-web.toml").string()}, 10s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("server.static_dir is \"" + ui + "\""));
    CHECK_THAT(r.err, Catch::Contains(ui == (dir / "nope").string() ? "not a folder" : "no index.html"));
    CHECK_THAT(r.err, !Catch::Contains("serving"));
  }
}

TEST_CASE("the UI's files are served with the security headers, and nothing outside their directory") {
  Weftd weftd("web-static");
  WebGateway web(weftd, Open("web-static"));

  HttpConnection c(web.url());
  HttpReply index = c.Send("GET", "/");
  CHECK(index.status == 200);
  CHECK(index.body.find("<title>Weft</title>") != std::string::npos);
  CHECK(index.Header("content-type") == "text/html; charset=utf-8");
  CHECK(index.Header("content-security-policy").find("default-src 'self'") != std::string::npos);
  CHECK(index.Header("content-security-policy").find("unsafe-inline") == std::string::npos);
  CHECK(index.Header("x-frame-options") == "DENY");
  CHECK(index.Header("x-content-type-options") == "nosniff");
  CHECK(index.Header("referrer-policy") == "no-referrer");

  HttpReply js = c.Send("GET", "/app.js");  // the same keep-alive connection
  CHECK(js.status == 200);
  CHECK(js.Header("content-type") == "text/javascript; charset=utf-8");

  // A screen of the UI's own router is the UI's page.
  CHECK(c.Send("GET", "/clusters/7").body == index.body);
  CHECK(c.Send("GET", "/nothing.css").status == 404);

  // weft-web.toml sits next to the UI directory: no path reaches it.
  for (const char* target : {"/../weft-web.toml", "/%2e%2e/weft-web.toml", "/ui/../../weft-web.toml"}) {
    HttpReply r = HttpSend(web.url(), "GET", target);
    CHECK(r.status != 200);
    CHECK(r.body.find("weftd") == std::string::npos);
  }
}

TEST_CASE("an op through the gateway gets weftd's reply, or its error with the matching HTTP status") {
  Weftd weftd("web-ops");
  WebGateway web(weftd, Open("web-ops"));
  HttpConnection c(web.url());

  HttpReply status = c.Send("POST", "/api/v1/server.status", "{}", {{"Content-Type", "application/json"}});
  REQUIRE(status.status == 200);
  CHECK(status.Json()["pid"] == weftd.pid());
  CHECK(status.Header("cache-control") == "no-store");
  CHECK(status.Header("x-frame-options") == "DENY");

  // A read op may be a GET, its body in the query (values parsed as JSON when they parse).
  HttpReply jobs = c.Send("GET", "/api/v1/job.list?limit=5");
  REQUIRE(jobs.status == 200);
  CHECK(jobs.Json()["jobs"].is_array());

  // weftd's code and sentence, as the CLI gets them.
  const auto direct = weftd.TryCall("cluster.get", {{"cluster", "nosuch"}});
  REQUIRE_FALSE(direct.ok());
  HttpReply missing = c.Send("POST", "/api/v1/cluster.get", R"({"cluster":"nosuch"})");
  CHECK(missing.status == 404);
  CHECK(missing.Json()["error"]["code"] == "NOT_FOUND");
  CHECK(missing.Json()["error"]["message"] == direct.status().message());

  HttpReply bad = c.Send("POST", "/api/v1/cluster.get", "not json");
  CHECK(bad.status == 400);
  CHECK(bad.Json()["error"]["code"] == "INVALID");

  HttpReply unknown = c.Send("POST", "/api/v1/no.such", "{}");
  CHECK(unknown.status == 400);
  CHECK(unknown.Json()["error"]["message"].get<std::string>().find("no.such") != std::string::npos);

  // A GET never changes anything: the gateway lets through exactly the ops
  // weftd's router answers as reads (server.ops), whatever their names.
  HttpReply ops = c.Send("GET", "/api/v1/server.ops");
  REQUIRE(ops.status == 200);
  std::map<std::string, bool> reads;
  const json listed = ops.Json();
  for (const auto& o : listed["ops"]) reads[o["op"]] = o["reads"];
  CHECK(reads.at("cluster.list"));
  CHECK_FALSE(reads.at("cluster.create"));
  HttpReply get_create = c.Send("GET", "/api/v1/cluster.create?name=x");
  CHECK(get_create.status == 405);
  HttpReply get_unknown = c.Send("GET", "/api/v1/no.such");
  CHECK(get_unknown.status == 400);
  CHECK(get_unknown.Json()["error"]["message"].get<std::string>().find("no.such") != std::string::npos);
  CHECK(weftd.Call("cluster.list", json::object())["clusters"].empty());

  CHECK(c.Send("POST", "/api/v1/session.login", "{}").status == 400);  // sessions have their own paths
}

TEST_CASE("a body over the limit is refused with 413 before it is read") {
  Weftd weftd("web-limit");
  WebOptions o = Open("web-limit");
  o.limits_toml = "max_body_bytes = 2048\n";
  WebGateway web(weftd, o);

  HttpReply small = HttpSend(web.url(), "POST", "/api/v1/server.status", "{}" + std::string(1000, ' '));
  CHECK(small.status == 200);

  HttpConnection c(web.url());
  HttpReply big = c.Send("POST", "/api/v1/server.status", "{}" + std::string(4096, ' '));
  CHECK(big.status == 413);
  CHECK(big.Json()["error"]["code"] == "TOO_LARGE");
  CHECK(big.Json()["error"]["message"].get<std::string>().find("limits.max_body_bytes") != std::string::npos);

  // Chunked, so the size shows only as the chunks come.
  HttpConnection chunked(web.url());
  chunked.Write("POST /api/v1/server.status HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
  const std::string piece(1024, ' ');
  for (int i = 0; i < 3; ++i) chunked.Write("400\r\n" + piece + "\r\n");
  std::string received;
  CHECK(chunked.WaitClosed(30s, &received));
  CHECK(received.find("413") != std::string::npos);
}

TEST_CASE("a client that sends its request too slowly is cut off while others are served") {
  Weftd weftd("web-slow");
  WebOptions o = Open("web-slow");
  o.limits_toml = "header_timeout_ms = 1000\nbody_timeout_ms = 1000\n";
  WebGateway web(weftd, o);

  HttpConnection slow_headers(web.url());
  slow_headers.Write("GET / HTTP/1.1\r\nHost: x\r\n");  // and never the blank line
  HttpConnection slow_body(web.url());
  slow_body.Write("POST /api/v1/server.status HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"a\":");

  // Meanwhile everybody else is served.
  for (int i = 0; i < 5; ++i) CHECK(HttpSend(web.url(), "GET", "/").status == 200);

  std::string got_headers, got_body;
  CHECK(slow_headers.WaitClosed(30s, &got_headers));
  CHECK(slow_body.WaitClosed(30s, &got_body));
  CHECK(got_headers.find("200 OK") == std::string::npos);
  CHECK(got_body.find("200 OK") == std::string::npos);
  CHECK(HttpSend(web.url(), "GET", "/").status == 200);
}

TEST_CASE("events are numbered, resume after Last-Event-ID, and say reset when what was missed is gone") {
  Weftd weftd("web-events");
  WebOptions o = Open("web-events");
  o.events_toml = "buffer = 8\n";
  WebGateway web(weftd, o);

  HttpConnection live(web.url());
  HttpReply head = live.OpenEvents("/api/v1/events");
  REQUIRE(head.status == 200);
  CHECK(head.Header("content-type") == "text/event-stream");
  CHECK(head.Header("x-frame-options") == "DENY");
  const SseEvent first = FirstEvent(weftd, live);
  CHECK(first.type == "task");
  CHECK(json::parse(first.data)["state"] == "queued");

  Enqueue(weftd, 2);
  auto second = live.NextEvent(30s);
  auto third = live.NextEvent(30s);
  REQUIRE(second);
  REQUIRE(third);
  CHECK(std::stoull(second->id) == std::stoull(first.id) + 1);
  CHECK(std::stoull(third->id) == std::stoull(second->id) + 1);

  // A browser that saw `first` and reconnects gets the two after it, the same.
  HttpConnection resumed(web.url());
  REQUIRE(resumed.OpenEvents("/api/v1/events", {{"Last-Event-ID", first.id}}).status == 200);
  auto again = resumed.NextEvent(30s);
  REQUIRE(again);
  CHECK(again->id == second->id);
  CHECK(again->data == second->data);
  CHECK(resumed.NextEvent(30s)->id == third->id);

  // Ten more push `first`'s successors out of a ring of 8. The live stream sees
  // them all, or, when it falls more than 8 behind (a loaded machine), a reset
  // to the newest and what follows: either way it gets to the tenth.
  Enqueue(weftd, 10);
  const std::uint64_t tenth = std::stoull(third->id) + 10;
  for (std::uint64_t seen = 0; seen < tenth;) {
    auto next = live.NextEvent(30s);
    REQUIRE(next);
    seen = std::stoull(next->id);
  }
  HttpConnection late(web.url());
  REQUIRE(late.OpenEvents("/api/v1/events", {{"Last-Event-ID", first.id}}).status == 200);
  auto reset = late.NextEvent(30s);
  REQUIRE(reset);
  CHECK(reset->type == "reset");
  Enqueue(weftd, 1);
  auto after_reset = late.NextEvent(30s);  // and then it goes on live
  REQUIRE(after_reset);
  CHECK(after_reset->type == "task");
  CHECK(std::stoull(after_reset->id) > std::stoull(reset->id));

  HttpConnection foreign(web.url());
  REQUIRE(foreign.OpenEvents("/api/v1/events", {{"Last-Event-ID", "not-a-number"}}).status == 200);
  CHECK(foreign.NextEvent(30s)->type == "reset");
}

TEST_CASE("a stream for one cluster carries only that cluster's events") {
  Weftd weftd("web-events-cluster");
  CatalogDir catalog(weftd.Path("catalog"));
  REQUIRE(weftd.Weft({"catalog", "import", catalog.path().string()}).exit_code == 0);
  WebGateway web(weftd, Open("web-events-cluster"));
  HttpConnection all(web.url());
  REQUIRE(all.OpenEvents("/api/v1/events").status == 200);
  FirstEvent(weftd, all);

  // No host runs its tasks: each create job stays running until aborted.
  auto create = [&](const std::string& name) {
    return weftd.Call("cluster.create", {{"name", name}, {"template", "web-fake"}, {"size", 3}});
  };
  const json c1 = create("c1");
  HttpConnection one(web.url());
  REQUIRE(one.OpenEvents("/api/v1/events?cluster=c1").status == 200);  // by name; events name it by id
  const std::string c1_id = c1["cluster"]["id"];
  weftd.Call("job.abort", {{"job", c1["job"]["id"]}});
  const json c2 = create("c2");
  weftd.Call("job.abort", {{"job", c2["job"]["id"]}});
  const json deleting = weftd.Call("cluster.delete", {{"cluster", "c1"}});
  const std::string delete_job = deleting["job"]["id"];

  bool saw_delete = false;
  while (!saw_delete) {
    auto e = one.NextEvent(30s);
    REQUIRE(e);
    const json data = json::parse(e->data);
    CHECK(data.value("cluster_id", "") == c1_id);
    saw_delete = e->type == "job" && data.value("job_id", "") == delete_job;
  }
  HttpConnection missing(web.url());
  CHECK(missing.OpenEvents("/api/v1/events?cluster=nosuch").status == 404);
}

TEST_CASE("a resource PUT arrives whole in several upload chunks") {
  Weftd weftd("web-upload");
  WebGateway web(weftd, Open("web-upload"));

  std::string file(9 * 1024 * 1024 + 123, '\0');
  for (std::size_t i = 0; i < file.size(); ++i) file[i] = static_cast<char>((i * 7919) % 251);
  HttpConnection c(web.url());
  HttpReply put = c.Send("PUT", "/api/v1/resources/shell/big.sh", file, {{"Expect", "100-continue"}});
  REQUIRE(put.status == 200);
  const json reply = put.Json();
  CHECK(reply["version"] == 1);
  CHECK(reply["size"] == file.size());
  CHECK(reply["digest"] == weft::digest::Sha256Of(file).value());

  const json listed = weftd.Call("resource.list", {{"type", "shell"}});
  REQUIRE(listed["resources"].size() == 1);
  CHECK(listed["resources"][0]["versions"][0]["size"] == file.size());

  // The connection stays usable; a bad name is weftd's INVALID.
  HttpReply bad = c.Send("PUT", "/api/v1/resources/shell/.hidden", "x");
  CHECK(bad.status == 400);
  CHECK(c.Send("PUT", "/api/v1/resources/shell", "x").status == 404);
}

TEST_CASE("over TLS the gateway serves HTTPS with HSTS, and a plain HTTP client gets nothing") {
  Weftd weftd("web-tls");
  WebOptions o = Open("web-tls");
  o.tls = true;
  WebGateway web(weftd, o);
  REQUIRE(web.url().rfind("https://127.0.0.1:", 0) == 0);

  HttpConnection c(web.url(), web.cert());
  HttpReply index = c.Send("GET", "/");
  CHECK(index.status == 200);
  CHECK(index.Header("strict-transport-security").find("max-age=") == 0);
  HttpReply status = c.Send("POST", "/api/v1/server.status", "{}");
  CHECK(status.status == 200);

  const std::string plain_url = "http://" + web.url().substr(std::string("https://").size());
  HttpConnection plain(plain_url);
  plain.Write("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string received;
  CHECK(plain.WaitClosed(30s, &received));
  CHECK(received.find("200 OK") == std::string::npos);
}

TEST_CASE("without a session or token the API answers 401, and a cookie without the CSRF header 403") {
  Weftd weftd("web-auth-needed");
  WebOptions o;
  o.name = "web-auth-needed";
  WebGateway web(weftd, o);  // require_login = true, the default
  HttpConnection c(web.url());

  HttpReply anonymous = c.Send("POST", "/api/v1/server.status", "{}");
  CHECK(anonymous.status == 401);
  CHECK(anonymous.Json()["error"]["message"].get<std::string>().find("not logged in") == 0);
  CHECK(c.Send("GET", "/api/v1/session").status == 401);
  CHECK(c.Send("GET", "/api/v1/cluster.list").status == 401);
  HttpConnection events(web.url());
  CHECK(events.OpenEvents("/api/v1/events").status == 401);
  CHECK(c.Send("GET", "/").status == 200);  // the UI itself needs no login

  // A state-changing request with the cookie but not the header never reaches weftd.
  HttpReply no_csrf = c.Send("POST", "/api/v1/cluster.delete", R"({"cluster":"x"})",
                             {{"Cookie", "weft_session=whatever"}});
  CHECK(no_csrf.status == 403);
  CHECK(no_csrf.Json()["error"]["code"] == "DENIED");
  CHECK(no_csrf.Json()["error"]["message"].get<std::string>().find("X-CSRF-Token") != std::string::npos);
  HttpConnection upload(web.url());
  CHECK(upload.Send("PUT", "/api/v1/resources/shell/a.sh", "echo hi", {{"Cookie", "weft_session=whatever"}}).status ==
        403);
  CHECK(weftd.Call("resource.list", json::object())["resources"].empty());
}

TEST_CASE("login attempts from one address are limited per minute") {
  Weftd weftd("web-login-limit");
  WebOptions o;
  o.name = "web-login-limit";
  o.limits_toml = "login_per_minute = 3\nlogin_burst = 3\n";
  WebGateway web(weftd, o);
  HttpConnection c(web.url());
  const std::string wrong = R"({"tenant":"default","user":"nobody","password":"wrong"})";
  for (int i = 0; i < 3; ++i) {
    HttpReply r = c.Send("POST", "/api/v1/login", wrong);
    CHECK(r.status != 429);
    CHECK(r.status != 200);
    CHECK(r.Header("set-cookie").empty());
  }
  HttpReply limited = c.Send("POST", "/api/v1/login", wrong);
  CHECK(limited.status == 429);
  CHECK(limited.Json()["error"]["message"].get<std::string>().find("too many login attempts from 127.0.0.1") !=
        std::string::npos);
}

TEST_CASE("while weftd is down the API answers 503, and after its restart requests and events flow again") {
  Weftd weftd("web-restart");
  WebOptions o = Open("web-restart");
  o.weftd_toml = "timeout_ms = 1000\n";
  WebGateway web(weftd, o);
  HttpConnection events(web.url());
  REQUIRE(events.OpenEvents("/api/v1/events").status == 200);
  FirstEvent(weftd, events);

  weftd.Stop();
  HttpConnection c(web.url());
  HttpReply down = c.Send("POST", "/api/v1/server.status", "{}");
  CHECK(down.status == 503);
  CHECK(down.Json()["error"]["code"] == "UNAVAILABLE");
  CHECK(down.Json()["error"]["message"].get<std::string>().find("tcp://") == std::string::npos);  // no internals

  weftd.Restart();
  REQUIRE(WaitFor([&] { return c.Send("POST", "/api/v1/server.status", "{}").status == 200; }, 30s));
  CHECK(c.Send("POST", "/api/v1/server.status", "{}").Json()["pid"] == weftd.pid());
  // The same stream, still open, gets the new process's events, after a reset:
  // what weftd did while it was down or starting came in no event.
  CHECK(ResetThenEvent(weftd, events).type == "task");
}

TEST_CASE("while nothing listens at weftd's address calls are answered unsent, saying weftd cannot be reached") {
  Weftd weftd("web-refused");
  WebOptions o = Open("web-refused");
  o.weftd_toml = "timeout_ms = 1000\n";
  WebGateway web(weftd, o);
  HttpConnection c(web.url());
  REQUIRE(c.Send("POST", "/api/v1/server.status", "{}").status == 200);

  weftd.Stop();
  // The first call finds the connection refused (or is not sent: weft-web
  // may have seen the stop already); the calls after it are not sent (their
  // message comes only from that path).
  CHECK(c.Send("POST", "/api/v1/server.status", "{}").status == 503);
  for (int i = 0; i < 5; ++i) {
    HttpReply down = c.Send("POST", "/api/v1/server.status", "{}");
    CHECK(down.status == 503);
    CHECK(down.Json()["error"]["code"] == "UNAVAILABLE");
    const std::string message = down.Json()["error"]["message"].get<std::string>();
    CHECK_THAT(message, Catch::Contains("weftd cannot be reached") && Catch::Contains("start weftd"));
    CHECK(message.find("tcp://") == std::string::npos);  // no internals
  }
  // Logged once, without a doubt about what was carried out: nothing was.
  const std::string away = web.Log();
  INFO(away);
  CHECK(away.find("cannot be reached: nothing listens there (connection refused)") != std::string::npos);
  CHECK(away.find("cannot be reached") == away.rfind("cannot be reached"));
  CHECK(away.find("may or may not have been carried out") == std::string::npos);
  CHECK(away.find("server.status") == std::string::npos);  // no line for each failed call

  weftd.Restart();
  REQUIRE(WaitFor([&] { return c.Send("POST", "/api/v1/server.status", "{}").status == 200; }, 30s));
  // The recovery is logged once, by whichever sees it first: a call, or weft-web's own watch of the connection.
  CHECK_THAT(web.Log(), Catch::Contains("answers again") || Catch::Contains("can be connected to again"));
}

TEST_CASE("a stopped weftd is noticed without a call: open streams are told, and the first call is not sent") {
  // One weftd, or weftd's endpoint given as a list of several (the failover client).
  const bool list = GENERATE(false, true);
  INFO((list ? "weftd.api is a list" : "one weftd.api"));
  Weftd weftd("web-watch");
  WebOptions o = Open("web-watch");
  if (list) o.api = weftd.api() + "," + weftd.api();
  o.weftd_toml = "timeout_ms = 20000\n";
  o.server_toml = "log_level = \"debug\"\n";  // each failed call's reason
  WebGateway web(weftd, o);
  HttpConnection events(web.url());
  REQUIRE(events.OpenEvents("/api/v1/events").status == 200);
  FirstEvent(weftd, events);
  HttpConnection c(web.url());
  REQUIRE(c.Send("POST", "/api/v1/server.status", "{}").status == 200);
  auto told = [&](bool reachable) { return ToldWeftd(events, reachable); };

  weftd.Stop();
  // No browser asks anything: the stream is told, and the log says it.
  REQUIRE(told(false));
  CHECK_THAT(web.Log(), Catch::Contains("cannot be reached: nothing listens there (connection refused)"));
  // The first call after the stop is answered without being sent (and
  // without waiting for an answer that cannot come).
  HttpReply down = c.Send("POST", "/api/v1/server.status", "{}");
  CHECK(down.status == 503);
  CHECK_THAT(down.Json()["error"]["message"].get<std::string>(), Catch::Contains("weftd cannot be reached"));
  const std::string away = web.Log();
  INFO(away);
  CHECK(away.find("'server.status' was not sent") != std::string::npos);
  CHECK(away.find("no answer from weftd") == std::string::npos);

  weftd.Restart();
  // The stream is told that weftd is back before anyone asks again.
  REQUIRE(told(true));
  CHECK_THAT(web.Log(), Catch::Contains("can be connected to again"));
  CHECK(c.Send("POST", "/api/v1/server.status", "{}").status == 200);
}

TEST_CASE("a weftd that hangs is noticed without a call by its connection's heartbeats, and so is its return") {
  Weftd weftd("web-hang");
  WebOptions o = Open("web-hang");
  o.weftd_toml = "timeout_ms = 20000\nheartbeat_ms = 200\n";
  WebGateway web(weftd, o);
  HttpConnection events(web.url());
  REQUIRE(events.OpenEvents("/api/v1/events").status == 200);
  FirstEvent(weftd, events);
  HttpConnection c(web.url());
  REQUIRE(c.Send("POST", "/api/v1/server.status", "{}").status == 200);

  // Stopped, not gone: its port still takes connections, and nothing answers.
  weftd.process().Signal(SIGSTOP);
  // No browser asks anything (a call would wait 20 s): the stream is told, and the log says why.
  const bool noticed = ToldWeftd(events, false);
  const std::string away = web.Log();
  weftd.process().Signal(SIGCONT);
  INFO(away);
  REQUIRE(noticed);
  CHECK(away.find("does not answer: its connection's heartbeats went unanswered") != std::string::npos);
  CHECK(away.find("connection refused") == std::string::npos);

  // Running again: the stream is told before anyone asks, and calls are answered.
  REQUIRE(ToldWeftd(events, true));
  CHECK_THAT(web.Log(), Catch::Contains("can be connected to again"));
  CHECK(c.Send("POST", "/api/v1/server.status", "{}").status == 200);
}

TEST_CASE("while weftd is away calls queued past the timeout are answered unsent, and its return is logged") {
  Weftd weftd("web-backlog");
  WebOptions o = Open("web-backlog");
  o.weftd_toml = "clients = 1\ntimeout_ms = 1000\n";
  o.server_toml = "log_level = \"debug\"\n";  // each failed call's reason
  WebGateway web(weftd, o);
  HttpConnection c(web.url());
  REQUIRE(c.Send("POST", "/api/v1/server.status", "{}").status == 200);

  // Stopped, not gone: its port still takes connections, and nothing answers.
  weftd.process().Signal(SIGSTOP);
  // Browsers that keep asking while weftd is away: more calls at once than
  // the one connection to weftd can time out on in a timeout's length. Each
  // is answered 503; those that waited their whole timeout in the queue
  // are answered unsent, not sent to time out one after another.
  auto ask_at_once = [&] {
    std::vector<std::thread> browsers;
    for (int i = 0; i < 6; ++i)
      browsers.emplace_back([&] { CHECK(HttpSend(web.url(), "POST", "/api/v1/server.status", "{}").status == 503); });
    for (std::thread& b : browsers) b.join();
    return web.Log().find("not sent") != std::string::npos;
  };
  REQUIRE(WaitFor(ask_at_once, 60s));
  const std::string away = web.Log();
  CHECK(away.find("does not answer") != std::string::npos);
  CHECK(away.find("answers again") == std::string::npos);

  weftd.process().Signal(SIGCONT);
  REQUIRE(WaitFor([&] { return c.Send("POST", "/api/v1/server.status", "{}").status == 200; }, 30s));
  // The recovery is logged once, by whichever sees it first: a call, or weft-web's own watch of the connection.
  CHECK_THAT(web.Log(), Catch::Contains("answers again") || Catch::Contains("can be connected to again"));
}

TEST_CASE("weft-web stops cleanly on SIGTERM with streams and connections open") {
  Weftd weftd("web-stop");
  WebGateway web(weftd, Open("web-stop"));
  HttpConnection stream(web.url());
  REQUIRE(stream.OpenEvents("/api/v1/events").status == 200);
  HttpConnection idle(web.url());
  REQUIRE(idle.Send("GET", "/").status == 200);
  HttpConnection half(web.url());
  half.Write("POST /api/v1/server.status HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{");

  web.process().Signal(SIGTERM);
  const auto status = web.process().Wait(30s);
  REQUIRE(status);
  INFO(web.Log());
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 0);  // under the sanitizers, no error at exit either
  CHECK(stream.WaitClosed(30s));
}

TEST_CASE("API requests from one address beyond the per-second limit get 429") {
  Weftd weftd("web-request-limit");
  WebOptions o = Open("web-request-limit");
  o.limits_toml = "requests_per_s = 1\nrequests_burst = 2\n";
  WebGateway web(weftd, o);
  HttpConnection c(web.url());
  int ok = 0, limited = 0;
  std::string message;
  for (int i = 0; i < 10; ++i) {
    HttpReply r = c.Send("POST", "/api/v1/server.status", "{}");
    if (r.status == 200) ++ok;
    if (r.status == 429) {
      ++limited;
      message = r.Json()["error"]["message"];
      CHECK(r.Header("retry-after") == "1");
    }
  }
  CHECK(ok >= 2);
  CHECK(limited > 0);
  CHECK(message.find("limits.requests_per_s") != std::string::npos);
  CHECK(c.Send("GET", "/").status == 200);  // the UI's files are not counted
}

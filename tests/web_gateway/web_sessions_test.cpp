// weft-web with weftd's sessions: login, the cookie, CSRF, API tokens, logout,
// and each user's event stream, end to end with the real weftd and weft-web.
#include <catch2/catch.hpp>

#include <set>

#include "stream.hpp"
#include "support/catalog_dir.hpp"
#include "support/web.hpp"
#include "support/weftd.hpp"

using namespace weft::testing;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

// A user of the default tenant with a password (weftd with security off: the
// test's own calls act as the superadmin).
void AddUser(Weftd& weftd, const std::string& name, const std::string& role) {
  weftd.Call("user.create", {{"name", name}, {"role", role}});
  weftd.Call("user.password", {{"name", name}, {"password", name + "-secret-pw"}});
}

struct Login {
  std::string cookie;  // "weft_session=..."
  std::string csrf;
  HttpReply reply;
};

Login LogIn(HttpConnection& c, const std::string& user) {
  Login l;
  l.reply = c.Send("POST", "/api/v1/login",
                   json{{"tenant", "default"}, {"user", user}, {"password", user + "-secret-pw"}}.dump());
  REQUIRE(l.reply.status == 200);
  const std::string set_cookie = l.reply.Header("set-cookie");
  l.cookie = set_cookie.substr(0, set_cookie.find(';'));
  l.csrf = l.reply.Json()["csrf_token"];
  return l;
}

std::map<std::string, std::string> As(const Login& l, bool with_csrf = true) {
  std::map<std::string, std::string> h = {{"Cookie", l.cookie}};
  if (with_csrf) h["X-CSRF-Token"] = l.csrf;
  return h;
}

}  // namespace

TEST_CASE("login sets an HttpOnly SameSite=Strict Secure cookie and the session works with its CSRF token until logout") {
  Weftd weftd("web-login");
  AddUser(weftd, "alice", "admin");
  WebOptions o;
  o.name = "web-login";
  o.tls = true;
  WebGateway web(weftd, o);
  HttpConnection c(web.url(), web.cert());

  HttpReply wrong = c.Send("POST", "/api/v1/login", R"({"tenant":"default","user":"alice","password":"nope"})");
  CHECK(wrong.status != 200);
  CHECK(wrong.Header("set-cookie").empty());

  Login alice = LogIn(c, "alice");
  const json who = alice.reply.Json();
  CHECK(who["user"] == "alice");
  CHECK(who["tenant"] == "default");
  CHECK(who["role"] == "admin");
  CHECK(who["expires_at_ms"].get<std::int64_t>() > 0);
  CHECK_FALSE(who.contains("session"));  // only in the cookie, out of the page's reach
  const std::string set_cookie = alice.reply.Header("set-cookie");
  CHECK(set_cookie.rfind("weft_session=", 0) == 0);
  CHECK(alice.cookie.size() > std::string("weft_session=").size() + 16);
  for (const char* flag : {"; HttpOnly", "; SameSite=Strict", "; Path=/", "; Secure"})
    CHECK(set_cookie.find(flag) != std::string::npos);

  HttpReply session = c.Send("GET", "/api/v1/session", "", As(alice, false));
  REQUIRE(session.status == 200);
  CHECK(session.Json()["user"] == "alice");
  CHECK(session.Json()["csrf_token"] == alice.csrf);

  // A change with the right CSRF token; with a wrong one weftd refuses it.
  CHECK(c.Send("POST", "/api/v1/user.create", R"({"name":"carol"})", As(alice)).status == 200);
  auto forged = As(alice);
  forged["X-CSRF-Token"] = std::string(alice.csrf.size(), 'a');
  HttpReply refused = c.Send("POST", "/api/v1/user.create", R"({"name":"dave"})", forged);
  CHECK(refused.status == 403);
  CHECK(refused.Json()["error"]["message"].get<std::string>().find("CSRF") != std::string::npos);
  // A read needs none.
  CHECK(c.Send("GET", "/api/v1/user.list", "", As(alice, false)).status == 200);

  // A made-up session is not logged in.
  HttpReply made_up = c.Send("GET", "/api/v1/cluster.list", "", {{"Cookie", "weft_session=made-up-session-id"}});
  CHECK(made_up.status == 401);

  HttpReply out = c.Send("POST", "/api/v1/logout", "", As(alice));
  CHECK(out.status == 200);
  CHECK(out.Header("set-cookie").find("Max-Age=0") != std::string::npos);
  CHECK(c.Send("GET", "/api/v1/session", "", As(alice, false)).status == 401);
  CHECK(c.Send("GET", "/api/v1/user.list", "", As(alice, false)).status == 401);
  const json users = weftd.Call("user.list", json::object());
  bool dave = false;
  for (const json& u : users["users"]) dave = dave || u["name"] == "dave";
  CHECK_FALSE(dave);
}

TEST_CASE("an API token works as a bearer without CSRF, and not once revoked") {
  Weftd weftd("web-token");
  AddUser(weftd, "alice", "admin");
  WebOptions o;
  o.name = "web-token";
  WebGateway web(weftd, o);
  HttpConnection c(web.url());
  Login alice = LogIn(c, "alice");
  HttpReply made = c.Send("POST", "/api/v1/token.create", R"({"name":"ci"})", As(alice));
  REQUIRE(made.status == 200);
  const std::string token = made.Json()["token"];
  const std::string id = made.Json()["id"];
  const std::map<std::string, std::string> bearer = {{"Authorization", "Bearer " + token}};

  CHECK(c.Send("POST", "/api/v1/user.create", R"({"name":"erin"})", bearer).status == 200);
  HttpReply session = c.Send("GET", "/api/v1/session", "", bearer);
  REQUIRE(session.status == 200);
  CHECK(session.Json()["user"] == "alice");

  CHECK(c.Send("POST", "/api/v1/token.revoke", json{{"id", id}}.dump(), As(alice)).status == 200);
  CHECK(c.Send("POST", "/api/v1/user.list", "{}", bearer).status == 401);
}

TEST_CASE("a user's event stream carries only their own clusters' events and an admin's the whole tenant's") {
  Weftd weftd("web-events-users");
  CatalogDir catalog(weftd.Path("catalog"));
  RunResult imported = weftd.Weft({"catalog", "import", catalog.path().string()});
  REQUIRE(imported.exit_code == 0);
  AddUser(weftd, "alice", "user");
  AddUser(weftd, "bob", "user");
  AddUser(weftd, "root", "admin");
  WebOptions o;
  o.name = "web-events-users";
  WebGateway web(weftd, o);

  HttpConnection c(web.url());
  Login alice = LogIn(c, "alice");
  Login bob = LogIn(c, "bob");
  Login admin = LogIn(c, "root");
  HttpConnection alice_events(web.url()), admin_events(web.url());
  REQUIRE(admin_events.OpenEvents("/api/v1/events", As(admin, false)).status == 200);
  FirstEvent(weftd, admin_events);  // the gateway's subscription to weftd is in place
  REQUIRE(alice_events.OpenEvents("/api/v1/events", As(alice, false)).status == 200);

  auto create = [&](const Login& who, const std::string& name) {
    HttpReply r = c.Send("POST", "/api/v1/cluster.create",
                         json{{"name", name}, {"template", "web-fake"}, {"size", 3}}.dump(), As(who));
    INFO(r.body);
    REQUIRE(r.status == 200);
    return r.Json()["cluster"]["id"].get<std::string>();
  };
  const std::string a1 = create(alice, "a1");
  const std::string b1 = create(bob, "b1");
  const std::string a2 = create(alice, "a2");

  // Alice's stream, up to her second cluster's first event: her first cluster's
  // events, none of Bob's, no raw tasks.
  std::set<std::string> alice_saw;
  while (!alice_saw.count(a2)) {
    auto e = alice_events.NextEvent(30s);
    REQUIRE(e);
    const json data = json::parse(e->data);
    const std::string cluster = data.value("cluster_id", "");
    CHECK_FALSE(cluster.empty());
    alice_saw.insert(cluster);
  }
  CHECK(alice_saw.count(a1));
  CHECK_FALSE(alice_saw.count(b1));

  std::set<std::string> admin_saw;
  while (!admin_saw.count(a2)) {
    auto e = admin_events.NextEvent(30s);
    REQUIRE(e);
    admin_saw.insert(json::parse(e->data).value("cluster_id", ""));
  }
  CHECK(admin_saw.count(b1));

  // Bob asks for Alice's cluster's stream: weftd does not let him see it.
  HttpConnection bob_events(web.url());
  CHECK(bob_events.OpenEvents("/api/v1/events?cluster=a1", As(bob, false)).status != 200);
}

TEST_CASE("with CurveZMQ on weft-web acts through its gateway key for the logged-in user") {
  WeftdOptions wo;
  wo.name = "web-curve";
  wo.curve = true;
  Weftd weftd(wo);
  AddUser(weftd, "alice", "admin");
  const auto credential = weftd.Path("gateway.json");
  RunResult made = weftd.Weft({"gateway", "credentials", "web1", "-f", credential.string()});
  INFO(made.out << made.err);
  REQUIRE(made.exit_code == 0);
  // Its own key learns where weftd's events are, and nothing of what weftd holds.
  const json brief = weftd.WeftJson({"status"}, credential);
  CHECK(brief["endpoints"]["events"] == weftd.events());
  CHECK_FALSE(brief.contains("tasks"));
  CHECK_FALSE(brief.contains("hosts"));
  CHECK_FALSE(brief.contains("store"));
  WebOptions o;
  o.name = "web-curve";
  o.credentials = credential;
  WebGateway web(weftd, o);

  HttpConnection c(web.url());
  Login alice = LogIn(c, "alice");
  HttpConnection events(web.url());
  REQUIRE(events.OpenEvents("/api/v1/events", As(alice, false)).status == 200);
  const SseEvent first = FirstEvent(weftd, events);  // the gateway key may subscribe
  CHECK(first.type == "task");

  CHECK(c.Send("POST", "/api/v1/user.create", R"({"name":"carol"})", As(alice)).status == 200);
  const json audit = weftd.Call("audit.list", {{"user", "alice"}});
  REQUIRE_FALSE(audit["entries"].empty());
  const json last = audit["entries"].back();
  CHECK(last["op"] == "user.create");
  CHECK(last["actor"] == "alice");
  CHECK(last.dump().find("web1") != std::string::npos);

  // The gateway's key alone does nothing but log users in.
  CHECK(c.Send("POST", "/api/v1/server.status", "{}").status == 401);
}

TEST_CASE("a POST of an op that only reads needs no CSRF token but one that changes state does") {
  Weftd weftd("web-csrf-reads");
  AddUser(weftd, "alice", "admin");
  WebOptions o;
  o.name = "web-csrf-reads";
  WebGateway web(weftd, o);
  HttpConnection c(web.url());
  Login alice = LogIn(c, "alice");
  CHECK(c.Send("POST", "/api/v1/cluster.list", "{}", As(alice, false)).status == 200);
  CHECK(c.Send("POST", "/api/v1/user.list", "{}", As(alice, false)).status == 200);
  HttpReply change = c.Send("POST", "/api/v1/user.create", R"({"name":"mallory"})", As(alice, false));
  CHECK(change.status == 403);
  CHECK(change.Json()["error"]["message"].get<std::string>().find("X-CSRF-Token") != std::string::npos);
}

TEST_CASE("a logout ends the session's event streams and a quiet stream gets keepalives") {
  Weftd weftd("web-stream-logout");
  AddUser(weftd, "alice", "admin");
  WebOptions o;
  o.name = "web-stream-logout";
  o.events_toml = "keepalive_ms = 200\nsession_check_ms = 500\n";
  WebGateway web(weftd, o);
  HttpConnection c(web.url());
  Login alice = LogIn(c, "alice");
  HttpConnection events(web.url());
  REQUIRE(events.OpenEvents("/api/v1/events", As(alice, false)).status == 200);
  FirstEvent(weftd, events);

  // Nothing happens: the stream stays open, kept alive with comments, its session checked.
  bool closed = false;
  REQUIRE(WaitFor(
      [&] {
        std::string received;
        closed = closed || events.WaitClosed(100ms, &received);
        return closed || received.find(": keepalive\n\n") != std::string::npos;
      },
      30s));
  REQUIRE_FALSE(closed);

  REQUIRE(c.Send("POST", "/api/v1/logout", "", As(alice)).status == 200);
  CHECK(events.WaitClosed(30s));
}

TEST_CASE("a stream stays open while weftd is down past its session check, and carries weftd's events once it is back") {
  Weftd weftd("web-stream-outage");
  AddUser(weftd, "alice", "admin");
  WebOptions o;
  o.name = "web-stream-outage";
  o.events_toml = "keepalive_ms = 200\nsession_check_ms = 300\n";
  o.weftd_toml = "timeout_ms = 2000\n";
  WebGateway web(weftd, o);
  HttpConnection c(web.url());
  Login alice = LogIn(c, "alice");
  HttpConnection events(web.url());
  REQUIRE(events.OpenEvents("/api/v1/events", As(alice, false)).status == 200);
  FirstEvent(weftd, events);

  weftd.Stop();
  // The stream's session check is the only call to weftd: once its failure is
  // logged, the check ran while weftd was down. The stream goes on after it.
  bool closed = false;
  REQUIRE(WaitFor(
      [&] {
        closed = closed || events.WaitClosed(100ms);
        return closed || web.Log().find("cannot be reached") != std::string::npos;
      },
      60s));
  INFO(web.Log());
  REQUIRE_FALSE(closed);
  int keepalives = 0;
  REQUIRE(WaitFor(
      [&] {
        std::string received;
        closed = closed || events.WaitClosed(100ms, &received);
        if (received.find(": keepalive\n\n") != std::string::npos) ++keepalives;
        return closed || keepalives >= 3;
      },
      60s));
  REQUIRE_FALSE(closed);

  // weftd is back: the same stream gets its events, after a reset (what
  // happened meanwhile came in no event, so the page reads its state again).
  weftd.Restart();
  CHECK(ResetThenEvent(weftd, events).type == "task");
}

TEST_CASE("a body or query that names a key twice is refused with 400 as weftd refuses it, and nothing is done") {
  Weftd weftd("web-repeated-keys");
  CatalogDir catalog(weftd.Path("catalog"));
  REQUIRE(weftd.Weft({"catalog", "import", catalog.path().string()}).exit_code == 0);
  AddUser(weftd, "alice", "admin");
  WebOptions o;
  o.name = "web-repeated-keys";
  o.tls = true;
  WebGateway web(weftd, o);
  HttpConnection c(web.url(), web.cert());
  const std::string once = " appears twice; name each field once (JSON parsers differ on which of the two they take)";
  // 400 with weft-web's JSON error, and weftd's sentence for such a body.
  auto refused = [](const HttpReply& r, const std::string& message) {
    const json got = {{"status", r.status}, {"body", json::parse(r.body, nullptr, false)}};
    const json error = {{"code", "INVALID"}, {"message", message}, {"details", json::object()}};
    CHECK(got == json{{"status", 400}, {"body", {{"error", error}}}});
  };

  // The right password last: a gateway that kept the last of the two would log in.
  HttpReply login = c.Send("POST", "/api/v1/login",
                           R"({"tenant":"default","user":"alice","password":"wrong","password":"alice-secret-pw"})");
  refused(login, "body field \"password\"" + once);
  CHECK(login.Header("set-cookie").empty());

  Login alice = LogIn(c, "alice");
  // The top level, an object within, and an object in an array within.
  refused(c.Send("POST", "/api/v1/cluster.create",
                 R"({"name":"first","template":"web-fake","size":3,"name":"second"})", As(alice)),
          "body field \"name\"" + once);
  refused(c.Send("POST", "/api/v1/cluster.create",
                 R"({"name":"nested","template":"web-fake","size":3,"config":{"web":{"port":80,"port":8080}}})",
                 As(alice)),
          "body field \"config.web.port\"" + once);
  refused(c.Send("POST", "/api/v1/cluster.create",
                 R"({"name":"listed","template":"web-fake","size":3,"config":{"ports":[{"p":1},{"p":2,"p":3}]}})",
                 As(alice)),
          "body field \"config.ports[1].p\"" + once);
  // A GET's query is its body: a parameter named twice, or a JSON value with a key named twice.
  refused(c.Send("GET", "/api/v1/cluster.list?all=false&all=true", "", As(alice, false)),
          "query parameter \"all\" appears twice; name each parameter once (each is the op's body field of its "
          "name, and which of the two to take would be a guess)");
  refused(c.Send("GET", "/api/v1/cluster.get?cluster=%7B%22id%22%3A%221%22%2C%22id%22%3A%222%22%7D", "",
                 As(alice, false)),
          "body field \"cluster.id\"" + once);
  // A logout with such a body ends nothing.
  refused(c.Send("POST", "/api/v1/logout", R"({"a":1,"a":2})", As(alice)), "body field \"a\"" + once);
  CHECK(c.Send("GET", "/api/v1/session", "", As(alice, false)).status == 200);

  // The session and the connection still serve, and weftd was never asked to make anything.
  HttpReply listed = c.Send("GET", "/api/v1/cluster.list?all=true", "", As(alice, false));
  CHECK(listed.status == 200);
  CHECK(listed.Json()["clusters"] == json::array());
  CHECK(weftd.Call("cluster.list", {{"all", true}})["clusters"].empty());
  CHECK(weftd.Call("job.list", json::object())["jobs"].empty());
}

// Integration tests against the real weftd binary, on ephemeral loopback
// ports, with a temporary data directory per test.
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "support/weftd.hpp"
#include "weft/client/client.hpp"
#include "weft/common/wire.hpp"

using json = nlohmann::json;
using weft::testing::Process;
using weft::testing::TempDir;
using weft::testing::Weftd;

namespace {

constexpr int kReplyTimeoutMs = 15000;  // generous: a slow CI machine is not a failure

zmq::context_t& Ctx() {
  static zmq::context_t ctx(1);
  return ctx;
}

// weftd in a temp directory, its data directory given on the command line;
// raw frames and raw sockets: CurveZMQ is off here (tests/security covers it).
// `server`: keys of its [server] table; `extra`: more tables.
weft::testing::WeftdOptions Config(const std::string& extra = "", const std::string& server = "") {
  return {.server_toml = server, .extra_toml = extra, .data_dir_flag = true, .stop_on_destroy = true};
}

// SIGTERM, then expects exit status 0 (under the sanitizers a leak or a
// memory error in weftd makes that status non-zero).
void ExpectCleanStop(Weftd& weftd) {
  int status = weftd.Stop(std::chrono::seconds(10));
  INFO(weftd.Log());
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

weft::client::Client MakeClient(const std::string& endpoint) {
  weft::client::Options o;
  o.endpoint = endpoint;
  o.timeout_ms = kReplyTimeoutMs;
  return weft::client::Client(Ctx(), o);
}

// A raw DEALER: sends any frames, reads back the reply header.
class RawPeer {
 public:
  explicit RawPeer(const std::string& endpoint) : socket_(Ctx(), zmq::socket_type::dealer) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.connect(endpoint);
  }
  void Send(const std::vector<std::string>& frames) {
    for (std::size_t i = 0; i < frames.size(); ++i) {
      zmq::message_t m(frames[i].data(), frames[i].size());
      REQUIRE(socket_.send(m, i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none));
    }
  }
  void SendJson(const json& header) { Send({header.dump()}); }
  // The reply's JSON header (the first non-empty frame).
  json Receive(int timeout_ms = kReplyTimeoutMs) {
    socket_.set(zmq::sockopt::rcvtimeo, timeout_ms);
    weft::wire::Frames frames;
    REQUIRE(weft::wire::RecvMultipart(socket_, frames));
    for (auto& f : frames) {
      if (f.size() == 0) continue;
      json j = json::parse(f.to_string(), nullptr, false);
      REQUIRE_FALSE(j.is_discarded());
      return j;
    }
    FAIL("reply had no header frame");
    return json();
  }
  json Call(const std::string& op, const json& body, const std::string& id = "r1") {
    SendJson({{"v", 1}, {"id", id}, {"op", op}, {"body", body}});
    return Receive();
  }

 private:
  zmq::socket_t socket_;
};

json Ok(weft::Result<json> r) {
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  return r.value();
}

json RegisterHost(weft::client::Client& prov, const std::string& host_id) {
  return Ok(prov.Call("host.register",
                      {{"host_id", host_id},
                       {"capacity", 2},
                       {"version", "0.1.0"},
                       {"plugins", {{{"type", "fake-provider"}, {"kind", "provider"}, {"actions", {"CREATE"}}}}}}));
}

std::vector<std::int64_t> Enqueue(weft::client::Client& api, int n) {
  json tasks = json::array();
  for (int i = 0; i < n; ++i)
    tasks.push_back({{"plugin", "fake-provider"}, {"action", "CREATE"}, {"node_id", "n" + std::to_string(i)},
                     {"payload", {{"provider", {{"fields", {{"latency_ms", 1}}}}}}}});
  return Ok(api.Call("debug.enqueue", {{"tasks", tasks}}))["task_ids"].get<std::vector<std::int64_t>>();
}

}  // namespace

TEST_CASE("weftd: each kind of bad input gets an error reply and the server keeps serving", "[weftd]") {
  Weftd weftd(Config("[limits]\nmax_frames = 4\nmax_header_bytes = 4096\nmax_frame_bytes = 1024\n"));
  auto api = MakeClient(weftd.api());
  RawPeer raw(weftd.api());
  struct Case {
    const char* what;
    std::vector<std::string> frames;
    const char* code;
    const char* id;
    const char* says = nullptr;  // the start of the error's message, where a case checks it
  };
  const std::string big_header = json{{"v", 1}, {"id", "big"}, {"op", "server.status"},
                                      {"body", {{"pad", std::string(5000, 'x')}}}}
                                     .dump();
  const std::string status = R"({"v":1,"id":"s","op":"server.status"})";
  const std::vector<Case> cases = {
      {"garbage bytes", {std::string("\xff\xfe\x00garbage", 10)}, "INVALID", ""},
      {"not JSON", {"hello there"}, "INVALID", ""},
      {"JSON that is not an object", {"[1,2,3]"}, "INVALID", ""},
      {"wrong protocol version", {R"({"v":2,"id":"a","op":"server.status"})"}, "INVALID", "a"},
      {"missing id", {R"({"v":1,"op":"server.status"})"}, "INVALID", ""},
      {"id of the wrong type", {R"({"v":1,"id":7,"op":"server.status"})"}, "INVALID", ""},
      {"missing op", {R"({"v":1,"id":"b"})"}, "INVALID", "b"},
      {"unknown op", {R"({"v":1,"id":"c","op":"nope.nope"})"}, "INVALID", "c"},
      {"body of the wrong type", {R"({"v":1,"id":"d","op":"server.status","body":[1]})"}, "INVALID", "d"},
      {"field of the wrong type", {R"({"v":1,"id":"e","op":"debug.enqueue","body":{"tasks":"many"}})"}, "INVALID",
       "e"},
      {"bad task action", {R"({"v":1,"id":"f","op":"debug.enqueue","body":{"tasks":[{"plugin":"p","action":"FLY"}]}})"},
       "INVALID", "f"},
      {"oversized header", {big_header}, "TOO_LARGE", ""},
      // The header could be read: the reply names the request.
      {"oversized payload frame", {status, std::string(2000, 'z')}, "TOO_LARGE", "s"},
      {"too many frames", {status, "1", "2", "3", "4"}, "TOO_LARGE", "s"},
      {"unknown header field", {R"({"v":1,"id":"u","op":"server.status","tenat":"acme"})"}, "INVALID", "u"},
      {"empty frame", {""}, "INVALID", ""},
      // A payload frame an op does not take is refused, never ignored: a read the api front answers, a write the
      // reactor handles, and an upload sent more than its one chunk.
      {"a payload frame for a read that takes none",
       {R"({"v":1,"id":"pf1","op":"cluster.list"})", "x", "y"},
       "INVALID",
       "pf1",
       "op \"cluster.list\" takes no payload frame, and 2 were sent"},
      {"a payload frame for a write that takes none",
       {R"({"v":1,"id":"pf2","op":"debug.enqueue","body":{"tasks":[]}})", "x"},
       "INVALID",
       "pf2",
       "op \"debug.enqueue\" takes no payload frame, and 1 was sent"},
      {"two payload frames for an upload of one chunk",
       {R"({"v":1,"id":"pf3","op":"resource.upload","body":{"type":"shell","name":"a.sh","final":true}})", "ab",
        "cd"},
       "INVALID",
       "pf3",
       "op \"resource.upload\" takes exactly one payload frame after the JSON header, and 2 were sent"},
      // A key named twice is ambiguous (parsers take the first or the last): refused, wherever it is.
      {"a header field twice",
       {R"({"v":1,"id":"dup1","op":"server.status","tenant":"acme","tenant":"default"})"},
       "INVALID",
       "dup1",
       "header field \"tenant\" appears twice"},
      {"a body field twice",
       {R"({"v":1,"id":"dup2","op":"debug.enqueue","body":{"tasks":[],"tasks":[]}})"},
       "INVALID",
       "dup2",
       "body field \"tasks\" appears twice"},
      {"a nested body field twice",
       {R"({"v":1,"id":"dup3","op":"debug.enqueue","body":{"tasks":[{"plugin":"p","action":"CREATE","plugin":"q"}]}})"},
       "INVALID",
       "dup3",
       "body field \"tasks[0].plugin\" appears twice"},
      {"the id twice", {R"({"v":1,"id":"a","id":"b","op":"server.status"})"}, "INVALID", "",
       "header field \"id\" appears twice"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    raw.Send(c.frames);
    json reply = raw.Receive();
    CHECK(reply["ok"] == false);
    CHECK(reply["error"]["code"] == c.code);
    CHECK(reply["id"] == c.id);
    CHECK_FALSE(reply["error"]["message"].get<std::string>().empty());
    if (c.says) CHECK_THAT(reply["error"]["message"].get<std::string>(), Catch::StartsWith(c.says));
    json status_reply = Ok(api.Call("server.status"));
    CHECK(status_reply["protocol"] == 1);
  }
  // The unknown op's message names the op and lists the ops the caller may send there (not the hosts').
  json unknown = raw.Call("nope.nope", json::object(), "u");
  CHECK_THAT(unknown["error"]["message"].get<std::string>(),
             Catch::Contains("nope.nope") && Catch::Contains("server.status") && !Catch::Contains("task.take"));
  json typo = raw.Call("server.stauts", json::object(), "t");
  CHECK_THAT(typo["error"]["message"].get<std::string>(),
             Catch::StartsWith("unknown op 'server.stauts' (did you mean 'server.status'?); the ops you may send"));
  // A host's task.finish, whose body weftd reads as text field by field: a key twice is refused there too,
  // and so is a payload frame.
  RawPeer prov(weftd.provisioner());
  prov.Send({R"({"v":1,"id":"f1","op":"task.finish","body":{"host_id":"h1","task_id":1,"attempt":1,)"
             R"("status":"succeeded","result":{"ssh":{"user":"root","user":"admin"}},"task_id":2}})"});
  json twice = prov.Receive();
  CHECK(twice["id"] == "f1");
  CHECK(twice["error"]["code"] == "INVALID");
  CHECK_THAT(twice["error"]["message"].get<std::string>(),
             Catch::StartsWith("body field \"result.ssh.user\" appears twice"));
  prov.Send({R"({"v":1,"id":"f2","op":"task.finish","body":{"host_id":"h1","task_id":1,"attempt":1,"status":"succeeded"}})",
             "x"});
  json framed = prov.Receive();
  CHECK(framed["id"] == "f2");
  CHECK(framed["error"]["code"] == "INVALID");
  CHECK_THAT(framed["error"]["message"].get<std::string>(),
             Catch::StartsWith("op \"task.finish\" takes no payload frame, and 1 was sent"));
  CHECK(weftd.process().running());
  ExpectCleanStop(weftd);
}

TEST_CASE("weftd: a REQ client is answered too", "[weftd]") {
  Weftd weftd(Config());
  zmq::socket_t req(Ctx(), zmq::socket_type::req);
  req.set(zmq::sockopt::linger, 0);
  req.set(zmq::sockopt::rcvtimeo, kReplyTimeoutMs);
  req.connect(weftd.api());
  std::string msg = R"({"v":1,"id":"q1","op":"server.status"})";
  REQUIRE(req.send(zmq::buffer(msg)));
  zmq::message_t reply;
  REQUIRE(req.recv(reply));
  json j = json::parse(reply.to_string());
  CHECK(j["id"] == "q1");
  CHECK(j["ok"] == true);
  CHECK(j["body"]["store"]["schema_version"].get<int>() >= 1);
  CHECK(j["body"]["store"]["wal_pages"].get<int>() >= 0);
  CHECK(j["body"]["store"]["checkpoints"]["background"].get<int>() >= 0);
  CHECK(j["body"]["store"]["checkpoints"]["by_commits"].get<int>() >= 0);
}

TEST_CASE("weftd: admin ops are DENIED on the provisioner endpoint", "[weftd]") {
  Weftd weftd(Config());
  RawPeer prov(weftd.provisioner());
  json enqueue = prov.Call("debug.enqueue", {{"tasks", {{{"plugin", "fake-provider"}, {"action", "CREATE"}}}}});
  CHECK(enqueue["ok"] == false);
  CHECK(enqueue["error"]["code"] == "DENIED");
  CHECK(prov.Call("task.get", {{"task_id", 1}})["error"]["code"] == "DENIED");
  CHECK(prov.Call("task.list", json::object())["error"]["code"] == "DENIED");
  // Nothing was enqueued.
  auto api = MakeClient(weftd.api());
  CHECK(Ok(api.Call("server.status"))["tasks"]["queued"] == 0);
  // And a host op on the api endpoint is refused as well.
  RawPeer raw_api(weftd.api());
  CHECK(raw_api.Call("task.take", {{"host_id", "h1"}})["error"]["code"] == "DENIED");
}

TEST_CASE("weftd: an expired lease is handed out again and the stale finish is refused", "[weftd]") {
  // Short enough to wait for, long enough that h2 finishes attempt 2 within it on a slow machine.
  Weftd weftd(Config("[tasks]\nlease_ms = 1500\n"));
  auto api = MakeClient(weftd.api());
  auto prov = MakeClient(weftd.provisioner());
  RegisterHost(prov, "h1");
  RegisterHost(prov, "h2");
  std::int64_t id = Enqueue(api, 1).at(0);

  json first = Ok(prov.Call("task.take", {{"host_id", "h1"}, {"wait_ms", 0}}))["task"];
  REQUIRE(first.is_object());
  CHECK(first["task_id"] == id);
  CHECK(first["attempt"] == 1);
  CHECK(first["provider"]["fields"]["latency_ms"] == 1);  // the payload is merged in
  // h1 never finishes. This take is held until the lease runs out and the task is ready again.
  json second = Ok(prov.Call("task.take", {{"host_id", "h2"}, {"wait_ms", 10000}}))["task"];
  REQUIRE(second.is_object());
  CHECK(second["task_id"] == id);
  CHECK(second["attempt"] == 2);

  RawPeer raw(weftd.provisioner());
  json stale = raw.Call("task.finish", {{"host_id", "h1"}, {"task_id", id}, {"attempt", 1}, {"status", "succeeded"}});
  CHECK(stale["ok"] == false);
  CHECK(stale["error"]["code"] == "CONFLICT");
  CHECK(stale["error"]["details"]["current_attempt"] == 2);
  CHECK(stale["error"]["details"]["state"] == "leased");

  json finish = {{"host_id", "h2"}, {"task_id", id}, {"attempt", 2}, {"status", "succeeded"},
                 {"result", {{"provider_id", "fake-1"}}}, {"stdout", "made it"}};
  Ok(prov.Call("task.finish", finish));
  Ok(prov.Call("task.finish", finish));  // a resend of the accepted finish is ok

  json task = Ok(api.Call("task.get", {{"task_id", id}}));
  CHECK(task["state"] == "succeeded");
  CHECK(task["attempt"] == 2);
  CHECK(task["result"]["provider_id"] == "fake-1");
  CHECK(task["stdout"] == "made it");
  REQUIRE(task["attempts"].size() == 2);
  CHECK(task["attempts"][0]["host_id"] == "h1");
  CHECK(task["attempts"][0]["status"] == "expired");
  CHECK(task["attempts"][1]["host_id"] == "h2");
  CHECK(task["attempts"][1]["status"] == "succeeded");
  ExpectCleanStop(weftd);
}

TEST_CASE("weftd: queued tasks survive SIGKILL and are delivered after a restart", "[weftd]") {
  Weftd weftd(Config());
  std::vector<std::int64_t> ids;
  {
    auto api = MakeClient(weftd.api());
    ids = Enqueue(api, 3);
  }
  weftd.process().Signal(SIGKILL);
  REQUIRE(weftd.process().Wait(std::chrono::seconds(10)));
  weftd.ForgetPorts();  // `*` ports, as the first start had them
  REQUIRE(weftd.Start().ok());  // same data directory: the lock died with the process

  auto api = MakeClient(weftd.api());
  json listed = Ok(api.Call("task.list", {{"state", "queued"}}));
  CHECK(listed["tasks"].size() == 3);
  auto prov = MakeClient(weftd.provisioner());
  RegisterHost(prov, "h1");
  std::vector<std::int64_t> taken;
  for (int i = 0; i < 3; ++i) {
    json t = Ok(prov.Call("task.take", {{"host_id", "h1"}, {"wait_ms", 0}}))["task"];
    REQUIRE(t.is_object());
    taken.push_back(t["task_id"]);
    Ok(prov.Call("task.finish", {{"host_id", "h1"}, {"task_id", t["task_id"]}, {"attempt", t["attempt"]},
                                 {"status", "succeeded"}}));
  }
  CHECK(taken == ids);
  CHECK(Ok(api.Call("server.status"))["tasks"]["succeeded"] == 3);
}

TEST_CASE("weftd: a held take is answered with a task enqueued while it waits", "[weftd]") {
  Weftd weftd(Config());
  auto api = MakeClient(weftd.api());
  auto prov = MakeClient(weftd.provisioner());
  RegisterHost(prov, "h1");
  RawPeer host(weftd.provisioner());
  host.SendJson({{"v", 1}, {"id", "take"}, {"op", "task.take"}, {"body", {{"host_id", "h1"}, {"wait_ms", 30000}}}});
  // One peer's requests are handled in order: once this reply arrives the take is held.
  json status = host.Call("server.status", json::object(), "status");
  REQUIRE(status["id"] == "status");
  std::int64_t id = Enqueue(api, 1).at(0);
  json reply = host.Receive();
  CHECK(reply["id"] == "take");
  REQUIRE(reply["ok"] == true);
  REQUIRE(reply["body"]["task"].is_object());
  CHECK(reply["body"]["task"]["task_id"] == id);
}

TEST_CASE("weftd: a finish can take the next task in the same round trip, held when none is ready", "[weftd]") {
  Weftd weftd(Config());
  auto api = MakeClient(weftd.api());
  auto prov = MakeClient(weftd.provisioner());
  RegisterHost(prov, "h1");
  std::vector<std::int64_t> ids = Enqueue(api, 2);
  json t = Ok(prov.Call("task.take", {{"host_id", "h1"}, {"wait_ms", 0}}))["task"];
  REQUIRE(t["task_id"] == ids[0]);
  json next = Ok(prov.Call("task.finish", {{"host_id", "h1"}, {"task_id", t["task_id"]}, {"attempt", t["attempt"]},
                                           {"status", "succeeded"}, {"take", {{"wait_ms", 0}}}}))["task"];
  REQUIRE(next.is_object());
  CHECK(next["task_id"] == ids[1]);
  CHECK(next["attempt"] == 1);
  // Nothing left: the finish is done at once, and the take is held until a task comes.
  RawPeer host(weftd.provisioner());
  host.SendJson({{"v", 1},
                 {"id", "fin"},
                 {"op", "task.finish"},
                 {"body",
                  {{"host_id", "h1"}, {"task_id", next["task_id"]}, {"attempt", 1}, {"status", "succeeded"},
                   {"take", {{"wait_ms", 30000}}}}}});
  json status = host.Call("server.status", json::object(), "status");
  REQUIRE(status["id"] == "status");
  CHECK(Ok(api.Call("server.status"))["tasks"]["succeeded"] == 2);  // committed before any reply
  std::int64_t third = Enqueue(api, 1).at(0);
  json reply = host.Receive();
  CHECK(reply["id"] == "fin");
  REQUIRE(reply["ok"] == true);
  CHECK(reply["body"]["task"]["task_id"] == third);
  // A bad take is refused before anything happens: the task stays leased.
  auto bad = prov.Call("task.finish", {{"host_id", "h1"}, {"task_id", third}, {"attempt", 1}, {"status", "succeeded"},
                                        {"take", {{"tenant", ""}}}});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == weft::Code::kInvalid);
  CHECK_THAT(bad.status().message(), Catch::Contains("body.take.tenant"));
  CHECK(Ok(api.Call("task.get", {{"task_id", third}}))["state"] == "leased");
}

TEST_CASE("weftd: task.take and task.finish read their bodies the same however they are written", "[weftd]") {
  // weftd reads these two from the body's text, not a tree, when every field
  // is plain: spaces, members it does not know, escapes and results must read
  // as the tree reads them, and refusals (a repeated key too) must say the same.
  Weftd weftd(Config());
  auto api = MakeClient(weftd.api());
  auto prov = MakeClient(weftd.provisioner());
  RegisterHost(prov, "h1");
  std::vector<std::int64_t> ids = Enqueue(api, 3);
  RawPeer raw(weftd.provisioner());
  int next_id = 0;
  // A request with `body` written as it is.
  auto call = [&](const std::string& op, const std::string& body) {
    const std::string id = "t" + std::to_string(++next_id);
    raw.Send({"{\"body\":" + body + ",\"id\":\"" + id + "\",\"op\":\"" + op + "\",\"v\":1}"});
    json reply = raw.Receive();
    CHECK(reply["id"] == id);
    return reply;
  };
  auto error = [&](const std::string& op, const std::string& body) {
    json reply = call(op, body);
    CHECK(reply["ok"] == false);
    return reply["error"]["message"].get<std::string>();
  };

  // Refusals, in the words of the tree reading.
  CHECK(error("task.take", R"({"host_id":"nobody","wait_ms":0})") ==
        "host 'nobody' is not registered with this weftd (a weftd started on a fresh store, or the host never "
        "registered): weft-host registers again by itself; a program of your own sends host.register first");
  CHECK(error("task.take", R"({"host_id":"h1","wait_ms":-5})") ==
        "body.wait_ms must be an integer from 0 to 2147483647, got -5");
  CHECK(error("task.take", R"({"host_id":"h1","runner":"a b"})") ==
        "body.runner must be 1 to 128 characters of A-Z a-z 0-9 _ . - (the thread that takes), or left out");
  CHECK(error("task.finish", R"({"attempt":1,"host_id":"h1","status":"done","task_id":1})") ==
        "body.status must be \"succeeded\" or \"failed\", got \"done\"");
  CHECK(error("task.finish", R"({"attempt":1,"host_id":"h1","status":"succeeded","task_id":0})") ==
        "body.task_id must be an integer from 1 to 9223372036854775807, got 0");
  CHECK(error("task.finish", R"({"attempt":1,"status":"succeeded","task_id":1})") ==
        "this request does not say which host sent it (its host_id is missing): weft-host sends the host_id of its "
        "configuration (host_id, or --host-id) with every request, and so must a program of your own "
        "(docs/protocol.md, provisioner ops)");
  CHECK(error("task.finish", R"({"attempt":1,"host_id":"h1","status":"succeeded","task_id":1,"stdout":7})") ==
        "body.stdout must be a string, got 7");
  CHECK(error("task.finish", R"({"attempt":1,"host_id":"h1","status":"succeeded","task_id":1,"take":{"wait_ms":"x"}})") ==
        "body.take.wait_ms must be an integer from 0 to 2147483647, got \"x\"");

  // A take with spaces and a member weftd does not know.
  json took = call("task.take", R"( { "zz" : [1, {"a":null}], "wait_ms" : 0 , "host_id" : "h1" } )");
  REQUIRE(took["ok"] == true);
  REQUIRE(took["body"]["task"]["task_id"] == ids[0]);
  // A repeated status is refused: which of the two would count?
  CHECK_THAT(error("task.finish", "{\"attempt\":1,\"host_id\":\"h1\",\"status\":\"failed\",\"status\":\"succeeded\","
                                  "\"task_id\":" + std::to_string(ids[0]) + "}"),
             Catch::StartsWith("body field \"status\" appears twice"));
  // A plain finish with escapes and the next take in the same round trip.
  json done = call("task.finish", "{\"attempt\":1,\"host_id\":\"h1\",\"message\":\"line\\none \\\"q\\\"\","
                                  "\"status\":\"succeeded\",\"stdout\":\"a\\tb\\\\c\\/\","
                                  "\"stderr\":\"\",\"result\":{ },\"take\":{\"wait_ms\":0,\"other\":true},"
                                  "\"task_id\":" + std::to_string(ids[0]) + "}");
  REQUIRE(done["ok"] == true);
  REQUIRE(done["body"]["task"]["task_id"] == ids[1]);
  json first = Ok(api.Call("task.get", {{"task_id", ids[0]}}));
  CHECK(first["state"] == "succeeded");
  CHECK(first["message"] == "line\none \"q\"");
  CHECK(first["stdout"] == "a\tb\\c/");
  CHECK(first["result"] == json::object());
  // A result with members, keys out of order: stored as the tree writes it.
  json second = call("task.finish", R"({"task_id":)" + std::to_string(ids[1]) +
                                        R"(,"attempt":1,"host_id":"h1","status":"failed","result":{"z":1,"a":{"b":"c"}},"stderr":"oops"})");
  REQUIRE(second["ok"] == true);
  json stored = Ok(api.Call("task.get", {{"task_id", ids[1]}}));
  CHECK(stored["result"] == json{{"a", {{"b", "c"}}}, {"z", 1}});
  CHECK(stored["stderr"] == "oops");
  CHECK(stored["attempts"].back()["status"] == "failed");
  ExpectCleanStop(weftd);
}

TEST_CASE("weftd: a host request that does not say which host sent it, or names one weftd does not know, is told "
          "so in an operator's words",
          "[weftd]") {
  Weftd weftd(Config());
  auto prov = MakeClient(weftd.provisioner());
  RegisterHost(prov, "h1");
  auto refused = [&](const std::string& op, const json& body) {
    auto r = prov.Call(op, body);
    REQUIRE_FALSE(r.ok());
    return r.status();
  };
  // No host_id, a number, an empty one: every host op says the request does not name its host, and how to fix it.
  for (const char* op : {"host.heartbeat", "host.leave", "task.take", "task.progress", "task.finish"}) {
    for (const json& id : {json(), json(7), json("")}) {
      json body = {{"task_id", 1}, {"attempt", 1}, {"status", "succeeded"}, {"wait_ms", 0}};
      if (!id.is_null()) body["host_id"] = id;
      const weft::Status s = refused(op, body);
      INFO(op << " " << id.dump() << ": " << s.message());
      CHECK(s.code() == weft::Code::kInvalid);
      CHECK_THAT(s.message(), Catch::StartsWith("this request does not say which host sent it (its host_id is") &&
                                  Catch::Contains("(host_id, or --host-id)") && !Catch::Contains("body."));
    }
  }
  CHECK_THAT(refused("host.heartbeat", json::object()).message(), Catch::Contains("(its host_id is missing)"));
  CHECK_THAT(refused("host.heartbeat", {{"host_id", 7}}).message(),
             Catch::Contains("(its host_id is 7, not a host's id (a string))"));
  CHECK_THAT(refused("host.heartbeat", {{"host_id", ""}}).message(), Catch::Contains("(its host_id is empty)"));
  // A host weftd does not know: which one, and that weft-host registers again by itself.
  const weft::Status unknown = refused("host.heartbeat", {{"host_id", "nobody"}});
  CHECK(unknown.code() == weft::Code::kNotFound);
  CHECK_THAT(unknown.message(), Catch::StartsWith("host 'nobody' is not registered with this weftd") &&
                                    Catch::Contains("weft-host registers again by itself"));
  // An id that cannot be one: which, what an id is, and where to set another; the field in the details.
  auto bad = prov.Call("host.register", {{"host_id", "web 1"}, {"capacity", 1}, {"plugins", json::array()}});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == weft::Code::kInvalid);
  CHECK(bad.status().message() ==
        "host id \"web 1\" cannot be used: a host id is 1 to 128 characters of A-Z a-z 0-9 _ . -; give this host "
        "another one (host_id in weft-host's configuration, or --host-id)");
  CHECK(bad.details().value("field", "") == "body.host_id");
}

TEST_CASE("weftd: a take that names a tenant gets only that tenant's tasks, held or not", "[weftd]") {
  Weftd weftd(Config());
  // debug.enqueue puts tasks in the tenant named by the request header.
  weft::client::Options oa;
  oa.endpoint = weftd.api();
  oa.timeout_ms = kReplyTimeoutMs;
  oa.tenant = "a";
  weft::client::Client api_a(Ctx(), oa);
  weft::client::Options ob = oa;
  ob.tenant = "b";
  weft::client::Client api_b(Ctx(), ob);
  auto api = MakeClient(weftd.api());
  for (const char* tenant : {"a", "b"}) Ok(api.Call("tenant.create", {{"name", tenant}}));
  auto prov = MakeClient(weftd.provisioner());
  RegisterHost(prov, "h1");

  std::int64_t a1 = Enqueue(api_a, 1).at(0);
  std::int64_t b1 = Enqueue(api_b, 1).at(0);
  json taken = Ok(prov.Call("task.take", {{"host_id", "h1"}, {"tenant", "b"}}));
  REQUIRE(taken["task"].is_object());
  CHECK(taken["task"]["task_id"] == b1);
  CHECK(taken["task"]["tenant"] == "b");
  CHECK(Ok(prov.Call("task.take", {{"host_id", "h1"}, {"tenant", "b"}}))["task"].is_null());

  auto bad = prov.Call("task.take", {{"host_id", "h1"}, {"tenant", 7}});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == weft::Code::kInvalid);
  CHECK(bad.status().message().find("body.tenant") != std::string::npos);
  bad = prov.Call("task.take", {{"host_id", "h1"}, {"tenant", ""}});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("body.tenant") != std::string::npos);

  // A held take for b: a's enqueue does not answer it, b's does.
  RawPeer host(weftd.provisioner());
  host.SendJson({{"v", 1},
                 {"id", "take"},
                 {"op", "task.take"},
                 {"body", {{"host_id", "h1"}, {"tenant", "b"}, {"wait_ms", 30000}}}});
  // One peer's requests are handled in order: once this reply arrives the take is held.
  REQUIRE(host.Call("server.status", json::object(), "status1")["id"] == "status1");
  std::int64_t a2 = Enqueue(api_a, 1).at(0);
  // Had a's enqueue answered the take, that reply would come before this one.
  REQUIRE(host.Call("server.status", json::object(), "status2")["id"] == "status2");
  std::int64_t b2 = Enqueue(api_b, 1).at(0);
  json reply = host.Receive();
  CHECK(reply["id"] == "take");
  REQUIRE(reply["ok"] == true);
  REQUIRE(reply["body"]["task"].is_object());
  CHECK(reply["body"]["task"]["task_id"] == b2);

  // a's tasks are still queued, for a take without a tenant.
  json rest = Ok(prov.Call("task.take", {{"host_id", "h1"}}));
  REQUIRE(rest["task"].is_object());
  CHECK(rest["task"]["task_id"] == a1);
  rest = Ok(prov.Call("task.take", {{"host_id", "h1"}}));
  REQUIRE(rest["task"].is_object());
  CHECK(rest["task"]["task_id"] == a2);
}

TEST_CASE("weftd: a host gets only tasks of its plugin types, and list ops report it", "[weftd]") {
  Weftd weftd(Config());
  auto api = MakeClient(weftd.api());
  auto prov = MakeClient(weftd.provisioner());
  RegisterHost(prov, "h1");
  Ok(api.Call("debug.enqueue", {{"tasks", {{{"plugin", "fake-automator"}, {"action", "INSTALL"}}}}}));
  CHECK(Ok(prov.Call("task.take", {{"host_id", "h1"}, {"wait_ms", 0}}))["task"].is_null());
  json hosts = Ok(api.Call("host.list"));
  REQUIRE(hosts["hosts"].size() == 1);
  CHECK(hosts["hosts"][0]["id"] == "h1");
  CHECK(hosts["hosts"][0]["live"] == true);
  json plugins = Ok(api.Call("plugin.list"));
  REQUIRE(plugins["plugins"].size() == 1);
  CHECK(plugins["plugins"][0]["type"] == "fake-provider");
  CHECK(plugins["plugins"][0]["hosts"][0] == "h1");
  // An unregistered host is told to register.
  RawPeer raw(weftd.provisioner());
  CHECK(raw.Call("host.heartbeat", {{"host_id", "ghost"}})["error"]["code"] == "NOT_FOUND");
}

TEST_CASE("weftd: a second weftd on the same data directory refuses to start", "[weftd]") {
  Weftd weftd(Config());
  auto second = weft::testing::Run(weft::testing::BuildPath("bin/weftd"), {"--data-dir", weftd.data().string()});
  CHECK(second.exit_code == 1);
  CHECK_THAT(second.err, Catch::Contains("already using the data directory"));
  CHECK(weftd.process().running());
}

TEST_CASE("weftd: SIGTERM stops it cleanly with exit status 0", "[weftd]") {
  Weftd weftd(Config());
  weftd.process().Signal(SIGTERM);
  auto status = weftd.process().Wait(std::chrono::seconds(10));
  REQUIRE(status);
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 0);
  CHECK_FALSE(std::filesystem::exists(weftd.data() / "endpoints.json"));
}

TEST_CASE("weftd: runs on jemalloc when the build links it and on its own malloc in a sanitizer build", "[weftd]") {
  Weftd weftd(Config());
  // The shared objects mapped into the running weftd (a sanitizer build keeps
  // its own malloc: WEFT_JEMALLOC leaves jemalloc out there).
  const std::string maps = weft::testing::ReadFile("/proc/" + std::to_string(weftd.pid()) + "/maps");
  REQUIRE(maps.find("libc.so") != std::string::npos);
  CHECK((maps.find("libjemalloc") != std::string::npos) == (WEFT_WEFTD_JEMALLOC == 1));
  auto api = MakeClient(weftd.api());
  CHECK(Ok(api.Call("server.status")).contains("tasks"));
}

TEST_CASE("weftd: an unknown config key stops it with a sentence naming the key", "[weftd]") {
  TempDir dir;
  weft::testing::WriteFile(dir / "weftd.toml", "[tasks]\nleese_ms = 5\n");
  auto r = weft::testing::Run(weft::testing::BuildPath("bin/weftd"),
                              {"--config", (dir / "weftd.toml").string(), "--data-dir", (dir / "d").string()});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("leese_ms") && Catch::Contains("lease_ms"));
}

TEST_CASE("weftd: a store file that is not a database stops it with the path and what to do, untouched",
          "[weftd]") {
  TempDir dir;
  std::filesystem::create_directories(dir / "d");
  const std::string garbage = "garbage, not a database\n";
  weft::testing::WriteFile(dir / "d" / "weft.db", garbage);
  auto r = weft::testing::Run(weft::testing::BuildPath("bin/weftd"), {"--data-dir", (dir / "d").string()});
  INFO(r.err);
  CHECK(r.exit_code == 1);
  const std::string path = (dir / "d" / "weft.db").string();
  CHECK_THAT(r.err, Catch::Contains("cannot open the store " + path + ": it is not a SQLite database"));
  CHECK_THAT(r.err, Catch::Contains("Restore " + path + " from a backup") && Catch::Contains("move it aside"));
  // Said once, not three times.
  CHECK_THAT(r.err, !Catch::Contains("file is not a database"));  // SQLite's words, which said it three times
  const std::string notadb = "not a SQLite database";
  std::size_t count = 0;
  for (std::size_t at = r.err.find(notadb); at != std::string::npos; at = r.err.find(notadb, at + 1)) ++count;
  CHECK(count == 1);
  CHECK(weft::testing::ReadFile(dir / "d" / "weft.db") == garbage);
  CHECK_FALSE(std::filesystem::exists(dir / "d" / "weft.db-wal"));
}

TEST_CASE("weftd: task transitions are published on the events endpoint", "[weftd]") {
  Weftd weftd(Config());
  zmq::socket_t sub(Ctx(), zmq::socket_type::sub);
  sub.set(zmq::sockopt::linger, 0);
  sub.set(zmq::sockopt::subscribe, "default/task");
  sub.set(zmq::sockopt::rcvtimeo, 200);
  sub.connect(weftd.events());
  auto api = MakeClient(weftd.api());
  // A new subscription takes a moment to reach the publisher: enqueue until an event arrives.
  json event;
  std::string topic;
  for (int i = 0; i < 100 && event.is_null(); ++i) {
    Enqueue(api, 1);
    weft::wire::Frames frames;
    if (!weft::wire::RecvMultipart(sub, frames)) continue;
    REQUIRE(frames.size() == 2);
    topic = frames[0].to_string();
    event = json::parse(frames[1].to_string());
  }
  REQUIRE(event.is_object());
  CHECK(topic == "default/task");
  CHECK(event["type"] == "task");
  CHECK(event["state"] == "queued");
  CHECK(event["plugin"] == "fake-provider");
  CHECK(event["task_id"].get<std::int64_t>() >= 1);
  ExpectCleanStop(weftd);
}

TEST_CASE("weftd: a read keeps its place behind the same peer's write and sees it", "[weftd]") {
  Weftd weftd(Config());
  auto busy = MakeClient(weftd.api());
  RawPeer peer(weftd.api());
  // A big write first, from another peer, so that the two requests below are
  // queued by the time weftd looks again and arrive in one batch: there reads
  // are answered ahead of writes, but not ahead of their own peer's.
  json big = json::array();
  for (int i = 0; i < 5000; ++i) big.push_back({{"plugin", "fake-provider"}, {"action", "CREATE"}});
  weft::Status big_done;
  std::thread writer([&] { big_done = busy.Call("debug.enqueue", {{"tasks", big}}).status(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  json tasks = json::array();
  for (int i = 0; i < 3; ++i) tasks.push_back({{"plugin", "fake-automator"}, {"action", "INSTALL"}});
  peer.SendJson({{"v", 1}, {"id", "w"}, {"op", "debug.enqueue"}, {"body", {{"tasks", tasks}}}});
  peer.SendJson({{"v", 1}, {"id", "r"}, {"op", "task.list"}, {"body", {{"limit", 3}}}});
  json first = peer.Receive();
  json second = peer.Receive();
  writer.join();
  CHECK(big_done.ok());
  CHECK(first["id"] == "w");
  REQUIRE(second["id"] == "r");
  REQUIRE(second["ok"] == true);
  // The newest three tasks are the ones the same peer enqueued just before.
  const json& listed = second["body"]["tasks"];
  REQUIRE(listed.size() == 3);
  for (const json& t : listed) CHECK(t["plugin"] == "fake-automator");
  ExpectCleanStop(weftd);
}

TEST_CASE("weftd: reads are answered between the turns that end many leases run out at once", "[weftd]") {
  // Leases long enough for the host to take every task first, with room for a
  // sanitizer build on a loaded machine (2,000 takes took over 5 s there); the
  // host is never called silent (that releases its tasks another way).
  constexpr int kLeaseMs = 15000;
  Weftd weftd(Config("[tasks]\nlease_ms = " + std::to_string(kLeaseMs) + "\n[hosts]\nsilent_after_ms = 600000\n"));
  auto api = MakeClient(weftd.api());
  auto prov = MakeClient(weftd.provisioner());
  RegisterHost(prov, "h1");
  constexpr int kTasks = 2000;
  Enqueue(api, kTasks);
  // The host takes every task (pipelined takes on one connection) and then says nothing.
  RawPeer host(weftd.provisioner());
  for (int i = 0; i < kTasks; ++i)
    host.SendJson(
        {{"v", 1}, {"id", "t" + std::to_string(i)}, {"op", "task.take"}, {"body", {{"host_id", "h1"}, {"wait_ms", 0}}}});
  for (int i = 0; i < kTasks; ++i) REQUIRE(host.Receive()["body"]["task"].is_object());
  REQUIRE(Ok(api.Call("server.status", json::object()))["tasks"]["leased"] == kTasks);

  // weftd sleeps through the end of every lease, so that all are due in its
  // first turn when it wakes.
  REQUIRE(kill(weftd.pid(), SIGSTOP) == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(kLeaseMs + 500));
  REQUIRE(kill(weftd.pid(), SIGCONT) == 0);

  // Ending a lease writes to the store: ending them all in one turn kept every
  // read waiting until the last. Over several turns, reads come between them
  // and see some of the leases ended and not the others.
  std::vector<std::int64_t> seen;
  for (int i = 0; i < 100000 && (seen.empty() || seen.back() > 0); ++i)
    seen.push_back(Ok(api.Call("server.status", json::object()))["tasks"]["leased"].get<std::int64_t>());
  REQUIRE(seen.back() == 0);
  std::string list;
  for (std::int64_t n : seen) list += std::to_string(n) + " ";
  INFO("leased tasks each read saw: " << list);
  CHECK(std::any_of(seen.begin(), seen.end(), [](std::int64_t n) { return n > 0 && n < kTasks; }));
  ExpectCleanStop(weftd);
}

TEST_CASE("weftd: an api request waits a turn or two, not for the hosts' traffic to stop", "[weftd]") {
  // Small batches, so that no turn takes in everything the hosts have sent (as
  // when turns run out of time under load).
  Weftd weftd(Config("", "batch_max_messages = 16\n"));
  // Hosts that never let the provisioner endpoint run dry: each keeps 512
  // requests in flight, sending one more for every reply.
  constexpr int kFlooders = 4;
  constexpr int kInFlight = 512;
  // A context of their own, as hosts are processes of their own: sharing the
  // api client's I/O thread would slow them down.
  zmq::context_t hosts_ctx(2);
  std::atomic<bool> stop{false};
  std::atomic<long> flood_replies{0};
  std::vector<std::thread> flooders;
  for (int f = 0; f < kFlooders; ++f) {
    flooders.emplace_back([&] {
      zmq::socket_t dealer(hosts_ctx, zmq::socket_type::dealer);
      dealer.set(zmq::sockopt::linger, 0);
      dealer.set(zmq::sockopt::rcvtimeo, 200);
      dealer.connect(weftd.provisioner());
      const std::string request = R"({"v":1,"id":"f","op":"server.status"})";
      for (int i = 0; i < kInFlight; ++i) (void)dealer.send(zmq::buffer(request), zmq::send_flags::none);
      zmq::message_t reply;
      while (!stop) {
        if (!dealer.recv(reply)) continue;
        ++flood_replies;
        (void)dealer.send(zmq::buffer(request), zmq::send_flags::none);
      }
    });
  }
  struct Stop {
    std::atomic<bool>& stop;
    std::vector<std::thread>& threads;
    ~Stop() {
      stop = true;
      for (auto& t : threads) t.join();
    }
  } stop_flood{stop, flooders};
  REQUIRE(weft::testing::WaitFor([&] { return flood_replies > 2000; }, std::chrono::seconds(10)));

  // Counted in host requests answered meanwhile, not in time: an api call
  // waits for a turn or two (16 host requests each; measured: a median of
  // ~32), not until the hosts' requests happen to run out (when they hid the
  // api: medians from 230 to over 1,000). The first call also sets up the
  // connection, so it is not counted.
  auto api = MakeClient(weftd.api());
  Ok(api.Call("server.status", json::object()));
  std::vector<long> waited;
  for (int i = 0; i < 20; ++i) {
    const long before = flood_replies;
    Ok(api.Call("server.status", json::object()));
    waited.push_back(flood_replies - before);
  }
  std::string list;
  for (long w : waited) list += std::to_string(w) + " ";
  INFO("host requests answered while each api call waited: " << list);
  std::nth_element(waited.begin(), waited.begin() + waited.size() / 2, waited.end());
  CHECK(waited[waited.size() / 2] < 100);
}

TEST_CASE("weftd: an api op's refusal names its field as the caller wrote it, without a body. prefix", "[weftd]") {
  Weftd weftd(Config());
  auto api = MakeClient(weftd.api());
  const auto refused = [&](const std::string& op, const json& body) {
    auto r = api.Call(op, body);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == weft::Code::kInvalid);
    return r.status().message();
  };
  CHECK_THAT(refused("job.list", {{"limit", 0}}), Catch::StartsWith("limit must be an integer from 1 to"));
  CHECK_THAT(refused("audit.list", {{"limit", 0}}), Catch::StartsWith("limit must be an integer from 1 to"));
  CHECK_THAT(refused("cluster.list", {{"all", 1}}), Catch::StartsWith("all must be true or false"));
  CHECK_THAT(refused("resource.list", {{"type", 7}}), Catch::StartsWith("type must be a string"));
}

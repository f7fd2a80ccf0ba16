// The provisioner endpoint under attack (docs/security.md): a real weftd with
// CurveZMQ on, driven by raw ZeroMQ clients that hold keys of their own (a
// host's, a token's, a stranger's) and by the real weft CLI.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "support/weftd.hpp"
#include "support/write_lock.hpp"
#include "weft/client/client.hpp"
#include "weft/common/curve.hpp"
#include "weft/common/wire.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using weft::testing::RunResult;
using weft::testing::WaitFor;

// weftd with security on, and the superadmin's credential.
class Secured {
 public:
  explicit Secured(const std::string& extra = "")
      : weftd_("weft-prov", "[hosts]\nheartbeat_ms = 200\nsilent_after_ms = 5000\n[security]\n" + extra) {
    auto c = weft::curve::LoadCredential(weftd_.Path("data/credentials/superadmin.json"));
    REQUIRE(c.ok());
    admin_ = *c;
  }
  const weft::testing::Weftd& weftd() const { return weftd_; }
  const weft::curve::Credential& admin() const { return admin_; }
  std::string server_key() const { return admin_.server_key; }
  std::string provisioner() const { return weftd_.provisioner(); }
  int pid() const { return weftd_.endpoints()["pid"].get<int>(); }

  RunResult Weft(std::vector<std::string> args) const {
    args.insert(args.begin(), {"--credentials", weftd_.Path("data/credentials/superadmin.json").string(), "--timeout",
                               "3000"});
    return weft::testing::Run(weft::testing::BuildPath("bin/weft"), args);
  }
  json WeftJson(std::vector<std::string> args) const {
    args.insert(args.begin(), {"-o", "json"});
    RunResult r = Weft(args);
    INFO(r.err << weftd_.Log());
    REQUIRE(r.exit_code == 0);
    return json::parse(r.out);
  }
  // `weft host token create ARGS`: the token's text.
  std::string Token(std::vector<std::string> args = {}) const {
    args.insert(args.begin(), {"host", "token", "create"});
    RunResult r = Weft(args);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return r.out.substr(0, r.out.find('\n'));
  }

 private:
  weft::testing::Weftd weftd_;
  weft::curve::Credential admin_;
};

// A raw DEALER on the provisioner endpoint with a key of its own: sends
// requests without waiting, reads replies when asked.
class Peer {
 public:
  Peer(zmq::context_t& ctx, const Secured& s, weft::curve::KeyPair keys)
      : keys_(std::move(keys)), socket_(ctx, zmq::socket_type::dealer) {
    socket_.set(zmq::sockopt::linger, 0);
    weft::curve::SetClientKeys(socket_, s.server_key(), keys_);
    socket_.connect(s.provisioner());
  }
  // A peer with a fresh key nobody knows.
  static weft::curve::KeyPair Stranger() {
    auto k = weft::curve::Generate();
    REQUIRE(k.ok());
    return *k;
  }
  // A peer holding the one-time key of an enrollment token.
  static weft::curve::KeyPair TokenKeys(const std::string& token) {
    auto t = weft::curve::DecodeToken(token);
    REQUIRE(t.ok());
    return t->keys;
  }

  const weft::curve::KeyPair& keys() const { return keys_; }
  zmq::socket_t& socket() { return socket_; }

  void Send(const std::string& op, json body) {
    weft::wire::Request r;
    r.id = std::to_string(++next_id_);
    r.op = op;
    r.body = std::move(body);
    weft::wire::Frames frames = weft::wire::EncodeRequest(r);
    REQUIRE(weft::wire::SendMultipart(socket_, frames));
  }
  // A request whose body is `body_text` as it is (keys in any order, repeated, escaped).
  weft::wire::Reply CallText(const std::string& op, const std::string& body_text) {
    const std::string header = "{\"body\":" + body_text + ",\"id\":\"" + std::to_string(++next_id_) +
                               "\",\"op\":\"" + op + "\",\"v\":1}";
    REQUIRE(socket_.send(zmq::buffer(header), zmq::send_flags::none));
    auto reply = Receive(10s);
    REQUIRE(reply);
    return *reply;
  }
  // The next reply, or nullopt when none comes within `timeout`.
  std::optional<weft::wire::Reply> Receive(std::chrono::milliseconds timeout) {
    socket_.set(zmq::sockopt::rcvtimeo, static_cast<int>(timeout.count()));
    weft::wire::Frames frames;
    if (!weft::wire::RecvMultipart(socket_, frames)) return std::nullopt;
    auto reply = weft::wire::DecodeReply(frames, {});
    REQUIRE(reply.ok());
    return *reply;
  }
  weft::wire::Reply Call(const std::string& op, json body) {
    Send(op, std::move(body));
    auto reply = Receive(10s);
    REQUIRE(reply);
    return *reply;
  }

 private:
  weft::curve::KeyPair keys_;
  zmq::socket_t socket_;
  int next_id_ = 0;
};

json Register(const std::string& host_id) {
  return {{"host_id", host_id}, {"capacity", 2}, {"version", "0.1.0"},
          {"plugins", json::array({{{"type", "fake-automator"}, {"kind", "automator"}}})}};
}

// Enrolls `host_id` with `token` under a fresh key, registers it, and returns its key pair.
weft::curve::KeyPair Enroll(zmq::context_t& ctx, const Secured& s, const std::string& token, const std::string& host_id) {
  weft::curve::KeyPair mine = Peer::Stranger();
  {
    Peer t(ctx, s, Peer::TokenKeys(token));
    weft::wire::Reply enrolled = t.Call("host.enroll", {{"host_id", host_id}, {"public_key", mine.public_key}});
    INFO(enrolled.error.message);
    REQUIRE(enrolled.ok);
  }
  Peer h(ctx, s, mine);
  weft::wire::Reply registered = h.Call("host.register", Register(host_id));
  INFO(registered.error.message);
  REQUIRE(registered.ok);
  return mine;
}

}  // namespace

TEST_CASE("provisioner: a take held by a key that a re-enrollment replaced gets no task", "[security]") {
  Secured s;
  zmq::context_t ctx(1);
  const weft::curve::KeyPair old_key = Enroll(ctx, s, s.Token(), "h1");
  // The old key holds a take open for a long while...
  Peer old_host(ctx, s, old_key);
  old_host.Send("task.take", {{"host_id", "h1"}, {"wait_ms", 30000}});
  // (weftd answers one peer's requests in order: once this is answered, the take is held.)
  REQUIRE(old_host.Call("server.status", json::object()).ok);
  // ...when h1 enrolls again with a new token made for it, which revokes the old key.
  const weft::curve::KeyPair new_key = Enroll(ctx, s, s.Token({"--host", "h1", "--force"}), "h1");

  weft::client::Client api(ctx, weft::client::FromCredential(s.admin(), 5000));
  auto enqueued = api.Call("debug.enqueue", {{"tasks", json::array({{{"plugin", "fake-automator"},
                                                                     {"action", "INSTALL"},
                                                                     {"node_id", "n1"}}})}});
  REQUIRE(enqueued.ok());
  const json task_id = (*enqueued)["task_ids"][0];

  // The held take ends refused: the task is not handed to the revoked key.
  std::optional<weft::wire::Reply> held = old_host.Receive(10s);
  REQUIRE(held);
  INFO(held->body.dump());
  CHECK_FALSE(held->ok);
  CHECK_THAT(held->error.message, Catch::Contains("was revoked"));
  auto task = api.Call("task.get", {{"task_id", task_id}});
  REQUIRE(task.ok());
  CHECK((*task)["state"] == "queued");
  // The new key gets it.
  Peer new_host(ctx, s, new_key);
  weft::wire::Reply taken = new_host.Call("task.take", {{"host_id", "h1"}});
  REQUIRE(taken.ok);
  CHECK(taken.body["task"]["task_id"] == task_id);
}

TEST_CASE("provisioner: a task handed to a held take whose host went away does not use up one of its attempts",
          "[security]") {
  Secured s;
  zmq::context_t ctx(1);
  const weft::curve::KeyPair key = Enroll(ctx, s, s.Token(), "h1");
  {
    // A take held open, then its host goes away (a worker stopping) before anything is ready.
    Peer leaving(ctx, s, key);
    leaving.Send("task.take", {{"host_id", "h1"}, {"wait_ms", 30000}});
    REQUIRE(leaving.Call("server.status", json::object()).ok);  // answered in order: the take is held
  }
  std::this_thread::sleep_for(300ms);  // weftd's socket notices the connection closed

  // A task allowed one attempt: the held take gets it, and its reply finds the host gone.
  weft::client::Client api(ctx, weft::client::FromCredential(s.admin(), 5000));
  auto enqueued = api.Call(
      "debug.enqueue",
      {{"tasks",
        json::array({{{"plugin", "fake-automator"}, {"action", "INSTALL"}, {"node_id", "n1"}, {"max_attempts", 1}}})}});
  REQUIRE(enqueued.ok());
  const json task_id = (*enqueued)["task_ids"][0];
  json task;
  REQUIRE(WaitFor(
      [&] {
        auto got = api.Call("task.get", {{"task_id", task_id}});
        if (!got.ok()) return false;
        task = *got;
        return task["attempt"] == 1 && task["state"] != "leased";
      },
      10s));
  INFO(task.dump());
  // The undelivered attempt did not count: the task waits for a host that is there.
  CHECK(task["state"] == "queued");
  CHECK(task["max_attempts"] == 2);

  Peer staying(ctx, s, key);
  weft::wire::Reply taken = staying.Call("task.take", {{"host_id", "h1"}});
  REQUIRE(taken.ok);
  REQUIRE(taken.body["task"]["task_id"] == task_id);
  CHECK(taken.body["task"]["attempt"] == 2);
  weft::wire::Reply finished = staying.Call(
      "task.finish",
      {{"host_id", "h1"}, {"task_id", task_id}, {"attempt", 2}, {"status", "succeeded"}, {"result", json::object()}});
  INFO(finished.error.message);
  REQUIRE(finished.ok);
  auto done = api.Call("task.get", {{"task_id", task_id}});
  REQUIRE(done.ok());
  CHECK((*done)["state"] == "succeeded");
}

// A raw worker's runner: its takes name it, as weft-host's runner threads do.
json RunnerTake(int wait_ms) { return {{"host_id", "h1"}, {"runner", "4711.0"}, {"wait_ms", wait_ms}}; }

json EnqueueOne(weft::client::Client& api, int max_attempts) {
  auto enqueued = api.Call(
      "debug.enqueue", {{"tasks", json::array({{{"plugin", "fake-automator"},
                                                {"action", "INSTALL"},
                                                {"node_id", "n1"},
                                                {"max_attempts", max_attempts}}})}});
  REQUIRE(enqueued.ok());
  return (*enqueued)["task_ids"][0];
}

TEST_CASE("provisioner: a task whose take reply the runner never got is handed out again at its next take",
          "[security]") {
  Secured s;
  zmq::context_t ctx(1);
  const weft::curve::KeyPair key = Enroll(ctx, s, s.Token(), "h1");
  weft::client::Client api(ctx, weft::client::FromCredential(s.admin(), 5000));
  json task_id;
  {
    // The runner's take is held; a task comes and its reply is sent, but the
    // runner had given up on that take (a lazy-pirate client closes its socket
    // and asks again): the reply reaches a socket nobody reads.
    Peer gave_up(ctx, s, key);
    gave_up.Send("task.take", RunnerTake(30000));
    REQUIRE(gave_up.Call("server.status", json::object()).ok);  // answered in order: the take is held
    task_id = EnqueueOne(api, 1);
    zmq::pollitem_t reply{static_cast<void*>(gave_up.socket()), 0, ZMQ_POLLIN, 0};
    REQUIRE(zmq::poll(&reply, 1, 10s) == 1);  // weftd sent it, and it arrived
  }
  // The same runner asks again: weftd knows it never got attempt 1.
  Peer again(ctx, s, key);
  weft::wire::Reply taken = again.Call("task.take", RunnerTake(0));
  INFO(taken.error.message << s.weftd().Log());
  REQUIRE(taken.ok);
  REQUIRE(taken.body["task"].is_object());
  CHECK(taken.body["task"]["task_id"] == task_id);
  CHECK(taken.body["task"]["attempt"] == 2);

  auto got = api.Call("task.get", {{"task_id", task_id}});
  REQUIRE(got.ok());
  INFO(got->dump());
  // The lost attempt did not count, and says why it ended.
  CHECK((*got)["max_attempts"] == 2);
  REQUIRE((*got)["attempts"].size() == 2);
  CHECK((*got)["attempts"][0]["status"] == "undelivered");
  CHECK_THAT((*got)["attempts"][0]["message"].get<std::string>(), Catch::Contains("never reached runner '4711.0'"));

  // Fencing holds: the lost attempt's finish is refused, the new one's accepted.
  weft::wire::Reply late = again.Call(
      "task.finish", {{"host_id", "h1"}, {"task_id", task_id}, {"attempt", 1}, {"status", "succeeded"}});
  CHECK_FALSE(late.ok);
  CHECK(late.error.code == weft::Code::kConflict);
  weft::wire::Reply finished = again.Call(
      "task.finish", {{"host_id", "h1"}, {"task_id", task_id}, {"attempt", 2}, {"status", "succeeded"}});
  INFO(finished.error.message);
  CHECK(finished.ok);
}

TEST_CASE("provisioner: a runner's newer take replaces its held one, which gets no task", "[security]") {
  Secured s;
  zmq::context_t ctx(1);
  const weft::curve::KeyPair key = Enroll(ctx, s, s.Token(), "h1");
  weft::client::Client api(ctx, weft::client::FromCredential(s.admin(), 5000));
  // The runner gave up on its first take (weftd read it late) and asked again on a new socket.
  Peer gave_up(ctx, s, key);
  gave_up.Send("task.take", RunnerTake(30000));
  REQUIRE(gave_up.Call("server.status", json::object()).ok);
  Peer again(ctx, s, key);
  again.Send("task.take", RunnerTake(30000));
  REQUIRE(again.Call("server.status", json::object()).ok);

  const json task_id = EnqueueOne(api, 3);
  std::optional<weft::wire::Reply> taken = again.Receive(10s);
  REQUIRE(taken);
  INFO(taken->error.message << s.weftd().Log());
  REQUIRE(taken->ok);
  REQUIRE(taken->body["task"].is_object());
  CHECK(taken->body["task"]["task_id"] == task_id);
  CHECK(taken->body["task"]["attempt"] == 1);
  std::optional<weft::wire::Reply> replaced = gave_up.Receive(10s);
  REQUIRE(replaced);
  CHECK_FALSE(replaced->ok);
  CHECK_THAT(replaced->error.message, Catch::Contains("newer task.take"));
}

TEST_CASE("provisioner: a take held by a process that another one replaced under its host id gets no task",
          "[security]") {
  Secured s;  // silent_after_ms 5000
  zmq::context_t ctx(1);
  const weft::curve::KeyPair key = Enroll(ctx, s, s.Token(), "h1");
  json first = Register("h1");
  first["incarnation"] = "100-a";
  // The process holds a take open on a connection that stays up (a machine that
  // died behind a connection weftd still sees as open)...
  Peer old_process(ctx, s, key);
  REQUIRE(old_process.Call("host.register", first).ok);
  old_process.Send("task.take", {{"host_id", "h1"}, {"incarnation", "100-a"}, {"wait_ms", 30000}});
  REQUIRE(old_process.Call("server.status", json::object()).ok);  // answered in order: the take is held
  // ...and once it was silent for silent_after_ms, another process registers under the id.
  json second = Register("h1");
  second["incarnation"] = "200-b";
  Peer new_process(ctx, s, key);
  weft::wire::Reply registered;
  REQUIRE(WaitFor(
      [&] {
        registered = new_process.Call("host.register", second);
        return registered.ok;
      },
      30s));

  weft::client::Client api(ctx, weft::client::FromCredential(s.admin(), 5000));
  const json task_id = EnqueueOne(api, 3);
  // The earlier process's take ends refused, as its other requests would be; the task is not its.
  std::optional<weft::wire::Reply> held = old_process.Receive(10s);
  REQUIRE(held);
  INFO(held->body.dump() << held->error.message);
  CHECK_FALSE(held->ok);
  CHECK(held->error.code == weft::Code::kConflict);
  CHECK(held->error.details.value("reason", "") == "process_replaced");
  CHECK_THAT(held->error.message, Catch::Contains("incarnation 200-b") && Catch::Contains("gets no task"));
  weft::wire::Reply taken = new_process.Call("task.take", {{"host_id", "h1"}, {"incarnation", "200-b"}});
  REQUIRE(taken.ok);
  REQUIRE(taken.body["task"].is_object());
  CHECK(taken.body["task"]["task_id"] == task_id);
  CHECK(taken.body["task"]["attempt"] == 1);
}

TEST_CASE("provisioner: an attempt the runner named stays its own when it takes again", "[security]") {
  Secured s;
  zmq::context_t ctx(1);
  const weft::curve::KeyPair key = Enroll(ctx, s, s.Token(), "h1");
  weft::client::Client api(ctx, weft::client::FromCredential(s.admin(), 5000));
  const json task_id = EnqueueOne(api, 3);
  Peer runner(ctx, s, key);
  weft::wire::Reply taken = runner.Call("task.take", RunnerTake(0));
  REQUIRE(taken.ok);
  REQUIRE(taken.body["task"]["task_id"] == task_id);
  // Its progress shows the task reached it: a take of the same runner (one that
  // does not follow its rules) leaves that attempt alone.
  weft::wire::Reply progress =
      runner.Call("task.progress", {{"host_id", "h1"}, {"task_id", task_id}, {"attempt", 1}, {"percent", 10}});
  REQUIRE(progress.ok);
  weft::wire::Reply again = runner.Call("task.take", RunnerTake(0));
  REQUIRE(again.ok);
  CHECK(again.body["task"].is_null());
  auto got = api.Call("task.get", {{"task_id", task_id}});
  REQUIRE(got.ok());
  CHECK((*got)["state"] == "leased");
  CHECK((*got)["attempt"] == 1);
}

TEST_CASE("provisioner: a token enrolls only the host it was made for, and replaces a live host only with --force",
          "[security]") {
  Secured s;
  zmq::context_t ctx(1);
  const weft::curve::KeyPair h1 = Enroll(ctx, s, s.Token(), "h1");
  auto enroll = [&](const std::string& token, const std::string& host_id) {
    Peer t(ctx, s, Peer::TokenKeys(token));
    return t.Call("host.enroll", {{"host_id", host_id}, {"public_key", Peer::Stranger().public_key}});
  };
  // A token for a new host cannot take over h1...
  weft::wire::Reply r = enroll(s.Token(), "h1");
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.error.message, Catch::Contains("already enrolled") && Catch::Contains("--host h1"));
  // ...nor can a token made for another host...
  r = enroll(s.Token({"--host", "h2"}), "h1");
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.error.message, Catch::Contains("made for host 'h2', not 'h1'"));
  // ...nor one made for h1 while h1 is live, unless made with --force.
  r = enroll(s.Token({"--host", "h1"}), "h1");
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.error.message, Catch::Contains("is live") && Catch::Contains("--force"));
  // h1 kept its key all along.
  Peer still(ctx, s, h1);
  CHECK(still.Call("host.heartbeat", {{"host_id", "h1"}}).ok);
  RunResult usage = s.Weft({"host", "token", "create", "--force"});
  CHECK(usage.exit_code != 0);
  CHECK_THAT(usage.err, Catch::Contains("--force needs --host"));
  // With --force the live host is replaced: its old key is refused from then on.
  r = enroll(s.Token({"--host", "h1", "--force"}), "h1");
  INFO(r.error.message);
  CHECK(r.ok);
  weft::wire::Reply refused = still.Call("host.heartbeat", {{"host_id", "h1"}});
  CHECK_FALSE(refused.ok);
  CHECK_THAT(refused.error.message, Catch::Contains("revoked"));
}

TEST_CASE("provisioner: a host's key takes and finishes only as its own host, however the body names another",
          "[security]") {
  // task.take and task.finish bodies are read from their text (no JSON tree):
  // the check of the host they name must read them as a tree would.
  Secured s;
  zmq::context_t ctx(1);
  const weft::curve::KeyPair h1 = Enroll(ctx, s, s.Token(), "h1");
  (void)Enroll(ctx, s, s.Token(), "h2");
  Peer p(ctx, s, h1);
  struct Case {
    std::string op;
    std::string body;
    std::string named;  // the host the body names, as a tree reads it
  };
  const std::vector<Case> cases = {
      {"task.take", R"({"host_id":"h2","wait_ms":0})", "h2"},
      {"task.take", R"({"host_id":"h\/2","wait_ms":0})", "h/2"},               // an escape undone
      {"task.take", R"({ "host_id" : "h2" })", "h2"},
      {"task.finish", R"({"attempt":1,"host_id":"h2","status":"succeeded","task_id":1})", "h2"},
      {"task.finish", R"({"attempt":1,"host_id":"h\n2","status":"succeeded","task_id":1})", "h\n2"},
  };
  for (const Case& c : cases) {
    INFO(c.op << " " << c.body);
    weft::wire::Reply r = p.CallText(c.op, c.body);
    CHECK_FALSE(r.ok);
    CHECK(r.error.code == weft::Code::kDenied);
    CHECK(r.error.message == "op '" + c.op + "' for host '" + c.named + "': this key belongs to host 'h1'");
  }
  // A body that names a host twice is refused whichever comes last: it names no one host.
  for (const auto& [op, body] : std::vector<std::pair<std::string, std::string>>{
           {"task.take", R"({"wait_ms":0,"host_id":"h1","host_id":"h2"})"},
           {"task.take", R"({"host_id":"h2","host_id":"h1","wait_ms":0})"},
           {"task.finish", R"({"attempt":1,"host_id":"h1","status":"succeeded","task_id":1,"host_id":"h2"})"}}) {
    INFO(op << " " << body);
    weft::wire::Reply r = p.CallText(op, body);
    CHECK_FALSE(r.ok);
    CHECK(r.error.code == weft::Code::kInvalid);
    CHECK_THAT(r.error.message, Catch::StartsWith("body field \"host_id\" appears twice"));
  }
  // Its own host it takes as.
  weft::wire::Reply own = p.CallText("task.take", R"({"host_id":"h1","wait_ms":0})");
  INFO(own.error.message);
  CHECK(own.ok);
  CHECK(p.CallText("task.take", R"({ "wait_ms" : 0, "host_id" : "h1" })").ok);
}

TEST_CASE("provisioner: an admin accepts a host by its key's fingerprint, a later request does not replace an "
          "earlier one, nor an accept a live host without --force",
          "[security]") {
  Secured s;
  zmq::context_t ctx(1);
  Peer honest(ctx, s, Peer::Stranger()), mallory(ctx, s, Peer::Stranger());
  for (Peer* p : {&honest, &mallory}) {
    weft::wire::Reply r = p->Call("host.register", Register("h1"));
    CHECK_FALSE(r.ok);
    CHECK_THAT(r.error.message,
               Catch::Contains("--fingerprint " + weft::curve::Fingerprint(p->keys().public_key)));
  }
  // Both requests are listed, each with its fingerprint.
  json requests = s.WeftJson({"host", "requests"})["requests"];
  REQUIRE(requests.size() == 2);
  std::set<std::string> listed;
  for (const json& r : requests) {
    CHECK(r["host_id"] == "h1");
    listed.insert(r["fingerprint"].get<std::string>());
  }
  const std::string good = weft::curve::Fingerprint(honest.keys().public_key);
  const std::string bad = weft::curve::Fingerprint(mallory.keys().public_key);
  CHECK(listed == std::set<std::string>{good, bad});
  RunResult table = s.Weft({"host", "requests"});
  CHECK_THAT(table.out, Catch::Contains("FINGERPRINT") && Catch::Contains(good) && Catch::Contains(bad));

  // Accept needs the fingerprint, and takes exactly that key.
  RunResult r = s.Weft({"host", "accept", "h1"});
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.err, Catch::Contains("--fingerprint"));
  r = s.Weft({"host", "accept", "h1", "--fingerprint", "0000-0000-0000-0000"});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("no key with fingerprint 0000-0000-0000-0000"));
  r = s.Weft({"host", "accept", "h1", "--fingerprint", good});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(honest.Call("host.register", Register("h1")).ok);
  weft::wire::Reply denied = mallory.Call("host.register", Register("h1"));
  CHECK_FALSE(denied.ok);

  // mallory asks again; accepting that key for the live h1 needs --force.
  Peer mallory2(ctx, s, Peer::Stranger());
  CHECK_FALSE(mallory2.Call("host.register", Register("h1")).ok);
  const std::string bad2 = weft::curve::Fingerprint(mallory2.keys().public_key);
  r = s.Weft({"host", "accept", "h1", "--fingerprint", bad2});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("is live with another key") && Catch::Contains("--force"));
  CHECK(honest.Call("host.heartbeat", {{"host_id", "h1"}}).ok);
}

TEST_CASE("provisioner: unknown keys cannot file unlimited host requests, and they are logged in aggregate",
          "[security]") {
  Secured s;
  zmq::context_t ctx(1);
  // 40 strangers ask at once, for one host id and for many: the requests are capped
  // per host id and rate limited, and the log holds a tally, not a line each.
  std::vector<std::unique_ptr<Peer>> peers;
  for (int i = 0; i < 40; ++i) peers.push_back(std::make_unique<Peer>(ctx, s, Peer::Stranger()));
  int refused = 0, too_many_keys = 0, too_fast = 0;
  for (int i = 0; i < 40; ++i) {
    weft::wire::Reply r = peers[i]->Call("host.register", Register(i < 10 ? "h1" : "x" + std::to_string(i)));
    CHECK_FALSE(r.ok);
    // Past 4 keys for one host id: a limit on a list, not worth retrying. Past the rate: try again after the pause.
    if (r.error.code == weft::Code::kTooLarge) {
      ++too_many_keys;
      CHECK_THAT(r.error.message, Catch::Contains("too many keys ask to join as host 'h1'"));
    }
    if (r.error.code == weft::Code::kUnavailable) {
      ++too_fast;
      CHECK_THAT(r.error.message, Catch::Contains("too many hosts ask to join at once") &&
                                      Catch::Contains("nothing was recorded: retry after"));
      CHECK(r.error.details.value("retry_after_ms", 0) >= 1);
      CHECK(r.error.details.value("retry_after_ms", 0) <= 500);  // one request at 2 a second
    }
    if (r.error.code == weft::Code::kTooLarge || r.error.code == weft::Code::kUnavailable) ++refused;
  }
  CHECK(too_many_keys == 6);
  CHECK(too_fast >= 5);
  json requests = s.WeftJson({"host", "requests"})["requests"];
  int for_h1 = 0;
  for (const json& r : requests) for_h1 += r["host_id"] == "h1" ? 1 : 0;
  CHECK(for_h1 == 4);
  CHECK(requests.size() <= 30);  // a burst of 20, then 2 a second
  CHECK(refused == 40 - static_cast<int>(requests.size()));
  // One line for the first request, one for the first refusal, then a tally.
  REQUIRE(WaitFor([&] { return s.weftd().Log().find("hosts asked to join") != std::string::npos; }, 15s));
  const std::string log = s.weftd().Log();
  INFO(log);
  auto count = [&](const std::string& what) {
    int n = 0;
    for (auto at = log.find(what); at != std::string::npos; at = log.find(what, at + 1)) ++n;
    return n;
  };
  CHECK(count("asks to join") == 1);
  CHECK(count("refused the request of host") == 1);
  CHECK_THAT(log, Catch::Contains(std::to_string(requests.size()) + " hosts asked to join") &&
                      Catch::Contains(std::to_string(refused) + " host requests refused"));
}

TEST_CASE("provisioner: a host that encrypts for another server key is logged once, with its address and the "
          "likely cause, and a client without CurveZMQ at another address with its own",
          "[security]") {
  Secured s;
  zmq::context_t ctx(1);
  // From 127.0.0.2, with the server key of another weftd: weftd cannot open this client's HELLO, and ZAP is
  // never asked. From 127.0.0.3 at once, without CurveZMQ. Each line must name its own client's address.
  const std::string endpoint = s.provisioner();
  REQUIRE(endpoint.rfind("tcp://", 0) == 0);
  const auto from = [&](const std::string& source) { return "tcp://" + source + ":0;" + endpoint.substr(6); };
  auto other = weft::curve::Generate();
  auto keys = weft::curve::Generate();
  REQUIRE(other.ok());
  REQUIRE(keys.ok());
  zmq::socket_t socket(ctx, zmq::socket_type::dealer);
  socket.set(zmq::sockopt::linger, 0);
  socket.set(zmq::sockopt::reconnect_ivl, 50);  // it tries again and again, as a host does
  weft::curve::SetClientKeys(socket, other->public_key, *keys);
  socket.connect(from("127.0.0.2"));
  weft::wire::Request r;
  r.id = "1";
  r.op = "host.register";
  r.body = Register("h-wrong-key");
  weft::wire::Frames frames = weft::wire::EncodeRequest(r);
  REQUIRE(weft::wire::SendMultipart(socket, frames));
  // A client without CurveZMQ that sees the mismatch before weftd does gives up for good (libzmq does not
  // reconnect after a protocol error), so it connects anew every 100 ms.
  std::unique_ptr<zmq::socket_t> plain;
  int polls = 0;
  const auto connect_plain = [&] {
    plain = std::make_unique<zmq::socket_t>(ctx, zmq::socket_type::dealer);
    plain->set(zmq::sockopt::linger, 0);
    plain->connect(from("127.0.0.3"));
    weft::wire::Frames again = weft::wire::EncodeRequest(r);
    REQUIRE(weft::wire::SendMultipart(*plain, again));
  };
  connect_plain();
  const std::string undecrypted = " on the provisioner endpoint sent a CurveZMQ handshake weftd cannot decrypt";
  const std::string without = " on the provisioner endpoint does not use CurveZMQ";
  const std::string line = "a client at 127.0.0.2" + undecrypted;
  const std::string plain_line = "a client at 127.0.0.3" + without;
  const bool both = WaitFor(
      [&] {
        const std::string log = s.weftd().Log();
        const bool plain_logged = log.find(plain_line) != std::string::npos;
        if (!plain_logged && ++polls % 5 == 0) connect_plain();
        return log.find(line) != std::string::npos && plain_logged;
      },
      30s);
  if (both) {  // (many more attempts meanwhile)
    for (int i = 0; i < 10; ++i) {
      connect_plain();
      std::this_thread::sleep_for(100ms);
    }
  }
  const std::string log = s.weftd().Log();
  INFO(log);
  REQUIRE(both);
  CHECK_THAT(log, Catch::Contains(line + ": it was most likely given another server key than this weftd's"));
  const auto count = [&](const std::string& what) {
    int n = 0;
    for (auto at = log.find(what); at != std::string::npos; at = log.find(what, at + 1)) ++n;
    return n;
  };
  CHECK(count(line) == 1);  // once per address, however often it tries
  CHECK(count(plain_line) == 1);
  // Never the other client's address, nor one neither client has.
  for (const char* address : {"127.0.0.1", "127.0.0.3"})
    CHECK(count("a client at " + std::string(address) + undecrypted) == 0);
  for (const char* address : {"127.0.0.1", "127.0.0.2"})
    CHECK(count("a client at " + std::string(address) + without) == 0);
  zmq::pollitem_t items[] = {{socket.handle(), 0, ZMQ_POLLIN, 0}, {plain->handle(), 0, ZMQ_POLLIN, 0}};
  CHECK(zmq::poll(items, 2, std::chrono::milliseconds(0)) == 0);  // and neither ever got an answer
}

namespace {

// A field of /proc/PID/status, in KiB (VmRSS: now; VmHWM: the peak so far).
std::int64_t StatusKiB(int pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1));
  FAIL("no " << field << " in /proc/" << pid << "/status");
  return 0;
}

// Sends one message of `frames` frames of `size` bytes each (the same bytes,
// never copied) on `socket`, without waiting.
void SendHuge(zmq::socket_t& socket, const std::string& bytes, int frames) {
  for (int i = 0; i < frames; ++i) {
    zmq::message_t m(const_cast<char*>(bytes.data()), bytes.size(), nullptr, nullptr);
    REQUIRE(socket.send(m, i + 1 < frames ? zmq::send_flags::sndmore : zmq::send_flags::none));
  }
}

}  // namespace

TEST_CASE("provisioner: keys weftd does not know cannot make it hold memory: huge frames and messages are "
          "refused before they are buffered",
          "[security]") {
  Secured s;
  zmq::context_t ctx(1);
  weft::client::Client api(ctx, weft::client::FromCredential(s.admin(), 5000));
  const auto first = api.Call("server.status");
  INFO((first.ok() ? std::string() : first.status().message()) << s.weftd().Log());
  REQUIRE(first.ok());
  const std::int64_t idle_kib = StatusKiB(s.pid(), "VmRSS");
  const std::string frame(60u << 20, 'x');  // 60 MiB: under limits.max_message_bytes

  // One message of 16 frames of 60 MiB (960 MiB) from one unknown key...
  Peer one(ctx, s, Peer::Stranger());
  // (the monitor is set up before the message goes out, so no disconnection is missed)
  bool one_done = false;
  {
    const std::string address = "inproc://monitor-one";
    REQUIRE(zmq_socket_monitor(one.socket().handle(), address.c_str(), ZMQ_EVENT_DISCONNECTED) == 0);
    zmq::socket_t monitor(ctx, zmq::socket_type::pair);
    monitor.set(zmq::sockopt::linger, 0);
    monitor.connect(address);
    SendHuge(one.socket(), frame, 16);
    zmq::pollitem_t items[] = {{one.socket().handle(), 0, ZMQ_POLLIN, 0}, {monitor.handle(), 0, ZMQ_POLLIN, 0}};
    one_done = zmq::poll(items, 2, std::chrono::milliseconds(120'000)) > 0;
  }
  REQUIRE(one_done);
  // ...and 8 connections with two frames of 60 MiB each, at once.
  std::vector<std::unique_ptr<Peer>> many;
  std::vector<std::unique_ptr<zmq::socket_t>> monitors;
  for (int i = 0; i < 8; ++i) {
    many.push_back(std::make_unique<Peer>(ctx, s, Peer::Stranger()));
    const std::string address = "inproc://monitor-" + std::to_string(i);
    REQUIRE(zmq_socket_monitor(many.back()->socket().handle(), address.c_str(), ZMQ_EVENT_DISCONNECTED) == 0);
    monitors.push_back(std::make_unique<zmq::socket_t>(ctx, zmq::socket_type::pair));
    monitors.back()->set(zmq::sockopt::linger, 0);
    monitors.back()->connect(address);
  }
  for (auto& p : many) SendHuge(p->socket(), frame, 2);
  for (int i = 0; i < 8; ++i) {
    zmq::pollitem_t items[] = {{many[i]->socket().handle(), 0, ZMQ_POLLIN, 0}, {monitors[i]->handle(), 0, ZMQ_POLLIN, 0}};
    REQUIRE(zmq::poll(items, 2, std::chrono::milliseconds(120'000)) > 0);
  }

  // weftd's peak stayed within 64 MiB of what it held idle (docs/security.md),
  // and it still serves.
  const std::int64_t peak_kib = StatusKiB(s.pid(), "VmHWM");
  INFO("idle " << idle_kib / 1024 << " MiB, peak " << peak_kib / 1024 << " MiB");
  CHECK(peak_kib - idle_kib < 64 * 1024);
  CHECK(api.Call("server.status").ok());
  // A host's own requests still pass.
  const weft::curve::KeyPair h1 = Enroll(ctx, s, s.Token(), "h1");
  Peer host(ctx, s, h1);
  CHECK(host.Call("host.heartbeat", {{"host_id", "h1"}}).ok);
}

TEST_CASE("provisioner: a key weftd does not know gets one small frame per request, more is dropped unread",
          "[security]") {
  Secured s;
  zmq::context_t ctx(1);
  Peer stranger(ctx, s, Peer::Stranger());
  // A register padded past 64 KiB: refused as too large, not filed as a request.
  json body = Register("h1");
  body["padding"] = std::string(100 * 1024, 'p');
  weft::wire::Reply r = stranger.Call("host.register", body);
  CHECK_FALSE(r.ok);
  CHECK(r.error.code == weft::Code::kTooLarge);
  CHECK_THAT(r.error.message, Catch::Contains("does not know"));
  // Extra frames after the header: the same.
  weft::wire::Request request;
  request.id = "x";
  request.op = "host.register";
  request.body = Register("h1");
  request.blobs = {std::string(10, 'a'), std::string(10, 'b'), std::string(10, 'c')};
  weft::wire::Frames frames = weft::wire::EncodeRequest(request);
  REQUIRE(weft::wire::SendMultipart(stranger.socket(), frames));
  auto reply = stranger.Receive(10s);
  REQUIRE(reply);
  CHECK(reply->error.code == weft::Code::kTooLarge);
  CHECK(s.WeftJson({"host", "requests"})["requests"].empty());
  // The plain request is filed.
  CHECK_FALSE(stranger.Call("host.register", Register("h1")).ok);
  CHECK(s.WeftJson({"host", "requests"})["requests"].size() == 1);
}

TEST_CASE("provisioner: one connection cannot queue more than twice the message limit while weftd is busy: the "
          "excess is refused at once, the rest answered",
          "[security][sqlite]") {
  // A message may be 128 KiB, so one connection may have 256 KiB waiting.
  Secured s("[limits]\nmax_message_bytes = 131072\nmax_header_bytes = 131072\n"
            "[store]\nbusy_timeout_ms = 120000\n");
  zmq::context_t ctx(1);
  const weft::curve::KeyPair key = Enroll(ctx, s, s.Token(), "h1");
  Peer host(ctx, s, key);
  REQUIRE(host.Call("host.heartbeat", {{"host_id", "h1"}}).ok);

  // weftd's reactor waits in a write turn for the store's lock, so what comes
  // meanwhile waits in its socket and is read all at once when the lock goes.
  std::optional<weft::testing::WriteLock> lock;
  lock.emplace(s.weftd().db());
  weft::client::Client api(ctx, weft::client::FromCredential(s.admin(), 240'000));
  std::thread writer([&api] { (void)api.Call("tenant.create", {{"name", "later"}}); });
  struct Join {
    std::thread& t;
    std::optional<weft::testing::WriteLock>& lock;
    ~Join() {
      lock.reset();
      t.join();
    }
  } join{writer, lock};
  std::this_thread::sleep_for(300ms);  // the write reached the reactor

  // Five heartbeats of about 100 KB each: two fit in 256 KiB, the third does not.
  for (int i = 0; i < 5; ++i) host.Send("host.heartbeat", {{"host_id", "h1"}, {"padding", std::string(100'000, 'p')}});
  std::this_thread::sleep_for(500ms);  // all five are in weftd's socket
  lock.reset();

  std::map<int, weft::wire::Reply> replies;  // by request id, in the order they were sent
  for (int i = 0; i < 5; ++i) {
    std::optional<weft::wire::Reply> r = host.Receive(30s);
    REQUIRE(r);
    replies[std::stoi(r->id)] = *r;
  }
  REQUIRE(replies.size() == 5);
  std::string all;
  for (const auto& [id, r] : replies) all += std::to_string(id) + ": " + (r.ok ? "ok" : r.error.message) + "\n";
  INFO(all);
  int sent = 0;
  for (const auto& [id, r] : replies) {
    const bool refused = !r.ok && r.error.code == weft::Code::kTooLarge &&
                         r.error.message.find("too much waiting") != std::string::npos;
    CHECK(refused == (++sent > 2));
  }
  // Once its replies are read, the connection is served as before.
  CHECK(host.Call("host.heartbeat", {{"host_id", "h1"}}).ok);
}

namespace {

int Occurrences(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("provisioner: a flood of undelivered replies and of unknown keys is logged as a tally, not a line each",
          "[security]") {
  Secured s;
  zmq::context_t ctx(1);
  const weft::curve::KeyPair h1 = Enroll(ctx, s, s.Token(), "h1");
  {
    // 300 takes held open, then the peer leaves: every reply finds it gone.
    Peer leaving(ctx, s, h1);
    for (int i = 0; i < 300; ++i) leaving.Send("task.take", {{"host_id", "h1"}, {"wait_ms", 1000}});
    REQUIRE(leaving.Call("server.status", json::object()).ok);  // answered in order: all 300 are held
  }
  // 30 keys weftd does not know knock on the api endpoint.
  const auto knocked = std::chrono::steady_clock::now();
  std::vector<std::unique_ptr<zmq::socket_t>> strangers;
  for (int i = 0; i < 30; ++i) {
    auto d = std::make_unique<zmq::socket_t>(ctx, zmq::socket_type::dealer);
    d->set(zmq::sockopt::linger, 0);
    weft::curve::SetClientKeys(*d, s.server_key(), Peer::Stranger());
    d->connect(s.weftd().api());
    strangers.push_back(std::move(d));
  }
  REQUIRE(WaitFor(
      [&] {
        const std::string log = s.weftd().Log();
        return log.find("replies not delivered") != std::string::npos &&
               log.find("keys refused at the handshake") != std::string::npos;
      },
      20s));
  const std::string log = s.weftd().Log();
  INFO(log);
  CHECK(Occurrences(log, "could not deliver the reply") <= 2);
  // One key in full per 5 s tally interval (the first new one of each; the others are counted).
  const auto intervals = (std::chrono::steady_clock::now() - knocked) / 5s;
  CHECK(Occurrences(log, "refused key ") <= 1 + intervals);
}

TEST_CASE("security: a tenant's admin and users see only their tenant's worker split and not the data directory",
          "[security]") {
  Secured s;
  zmq::context_t ctx(1);
  for (const std::string tenant : {"acme", "globex"}) REQUIRE(s.Weft({"tenant", "create", tenant}).exit_code == 0);
  REQUIRE(s.Weft({"--tenant", "acme", "user", "create", "bob", "--role", "admin"}).exit_code == 0);
  REQUIRE(s.Weft({"--tenant", "acme", "user", "create", "alice"}).exit_code == 0);
  const fs::path bob = s.weftd().Path("bob.json"), alice = s.weftd().Path("alice.json");
  REQUIRE(s.Weft({"--tenant", "acme", "credentials", "bob", "-f", bob.string()}).exit_code == 0);
  REQUIRE(s.Weft({"--tenant", "acme", "credentials", "alice", "-f", alice.string()}).exit_code == 0);
  // A live host, and work queued in both tenants: the split names both.
  Enroll(ctx, s, s.Token(), "h1");
  for (const std::string tenant : {"acme", "globex"}) {
    weft::client::Options o = weft::client::FromCredential(s.admin(), 5000);
    o.tenant = tenant;
    weft::client::Client c(ctx, o);
    auto enqueued = c.Call("debug.enqueue", {{"tasks", json::array({{{"plugin", "fake-automator"},
                                                                    {"action", "INSTALL"},
                                                                    {"node_id", "n1"}}})}});
    REQUIRE(enqueued.ok());
  }
  auto tenants_in_split = [&](const fs::path& who) {
    RunResult r = weft::testing::Run(weft::testing::BuildPath("bin/weft"),
                                     {"--credentials", who.string(), "-o", "json", "host", "list"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    std::set<std::string> seen;
    const json list = json::parse(r.out);
    for (const json& h : list["hosts"])
      for (const char* list : {"workers", "reported_workers"})
        for (const json& w : h[list]) seen.insert(w["tenant"].get<std::string>());
    return seen;
  };
  const fs::path root = s.weftd().Path("data/credentials/superadmin.json");
  CHECK(tenants_in_split(root) == std::set<std::string>{"acme", "globex"});
  CHECK(tenants_in_split(bob) == std::set<std::string>{"acme"});
  CHECK(tenants_in_split(alice) == std::set<std::string>{"acme"});

  // The data directory: the superadmin's business only.
  const std::string data_dir = s.weftd().Path("data").string();
  for (const fs::path& who : {bob, alice}) {
    RunResult r = weft::testing::Run(weft::testing::BuildPath("bin/weft"), {"--credentials", who.string(), "status"});
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find(data_dir) == std::string::npos);
    r = weft::testing::Run(weft::testing::BuildPath("bin/weft"),
                           {"--credentials", who.string(), "-o", "json", "status"});
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find(data_dir) == std::string::npos);
    CHECK_FALSE(json::parse(r.out).contains("data_dir"));
  }
  CHECK(s.WeftJson({"status"})["data_dir"] == data_dir);
}

TEST_CASE("provisioner: a user's key sent here is logged in full, naming the api endpoint, also when another "
          "refused key came just before it",
          "[security]") {
  Secured s;
  zmq::context_t ctx(1);
  REQUIRE(s.Weft({"tenant", "create", "acme"}).exit_code == 0);
  REQUIRE(s.Weft({"--tenant", "acme", "user", "create", "bob"}).exit_code == 0);
  const fs::path bob_file = s.weftd().Path("bob.json");
  REQUIRE(s.Weft({"--tenant", "acme", "credentials", "bob", "-f", bob_file.string()}).exit_code == 0);
  auto bob = weft::curve::LoadCredential(bob_file);
  REQUIRE(bob.ok());
  // A stranger's key is refused first (on the api endpoint: the provisioner one lets
  // unknown keys ask to join), and logged in full...
  const weft::curve::KeyPair stranger_keys = Peer::Stranger();
  zmq::socket_t stranger(ctx, zmq::socket_type::dealer);
  stranger.set(zmq::sockopt::linger, 0);
  weft::curve::SetClientKeys(stranger, s.server_key(), stranger_keys);
  stranger.connect(s.weftd().api());
  REQUIRE(WaitFor(
      [&] { return s.weftd().Log().find("refused key " + weft::curve::ShortKey(stranger_keys.public_key)) !=
                   std::string::npos; },
      10s));
  // ...then bob sends a user's op to the provisioner endpoint (both endpoints are in
  // endpoints.json), trying again as a client does, on a new connection each time.
  const std::string said = "refused key " + weft::curve::ShortKey(bob->keys.public_key) + " from ";
  std::unique_ptr<zmq::socket_t> user;
  int polls = 0;
  const bool logged = WaitFor(
      [&] {
        if (polls++ % 5 == 0) {
          user = std::make_unique<zmq::socket_t>(ctx, zmq::socket_type::dealer);
          user->set(zmq::sockopt::linger, 0);
          weft::curve::SetClientKeys(*user, s.server_key(), bob->keys);
          user->connect(s.provisioner());
          weft::wire::Request r;
          r.id = std::to_string(polls);
          r.op = "cluster.list";
          weft::wire::Frames frames = weft::wire::EncodeRequest(r);
          // Not required to go: a socket whose handshake was refused may take nothing more.
          (void)weft::wire::SendMultipart(*user, frames);
        }
        return s.weftd().Log().find(said) != std::string::npos;
      },
      30s);
  const std::string log = s.weftd().Log();
  INFO(log);
  REQUIRE(logged);
  CHECK_THAT(log, Catch::Contains(said) &&
                      Catch::Contains("on the provisioner endpoint: it is the key of user 'bob' of tenant 'acme', and "
                                      "users send requests to the api endpoint (endpoints.json's \"api\")"));
}

TEST_CASE("provisioner: an address that came without CurveZMQ and then with another weftd's key has both logged",
          "[security]") {
  Secured s;
  zmq::context_t ctx(1);
  const std::string endpoint = s.provisioner();
  REQUIRE(endpoint.rfind("tcp://", 0) == 0);
  const std::string from = "tcp://127.0.0.4:0;" + endpoint.substr(6);
  weft::wire::Request r;
  r.id = "1";
  r.op = "host.register";
  r.body = Register("h1");
  // Each attempt on a socket of its own (libzmq gives up after a protocol error).
  std::vector<std::unique_ptr<zmq::socket_t>> sockets;
  const auto attempt = [&](const weft::curve::KeyPair* keys, const std::string& server_key) {
    auto socket = std::make_unique<zmq::socket_t>(ctx, zmq::socket_type::dealer);
    socket->set(zmq::sockopt::linger, 0);
    if (keys) weft::curve::SetClientKeys(*socket, server_key, *keys);
    socket->connect(from);
    weft::wire::Frames frames = weft::wire::EncodeRequest(r);
    REQUIRE(weft::wire::SendMultipart(*socket, frames));
    sockets.push_back(std::move(socket));
  };
  const auto logged_after = [&](const std::string& line, const std::function<void()>& again) {
    int polls = 0;
    return WaitFor(
        [&] {
          if (polls++ % 5 == 0) again();
          return s.weftd().Log().find(line) != std::string::npos;
        },
        20s);
  };
  // A host set up without server_key first...
  CHECK(logged_after("a client at 127.0.0.4 on the provisioner endpoint does not use CurveZMQ",
                     [&] { attempt(nullptr, ""); }));
  // ...then given another weftd's: that mistake is said too.
  auto other = weft::curve::Generate();
  auto keys = weft::curve::Generate();
  REQUIRE(other.ok());
  REQUIRE(keys.ok());
  INFO(s.weftd().Log());
  CHECK(logged_after("a client at 127.0.0.4 on the provisioner endpoint sent a CurveZMQ handshake weftd cannot decrypt",
                     [&] { attempt(&*keys, other->public_key); }));
}

TEST_CASE("provisioner: a client that sends far more requests than it reads loses replies, and weftd says so",
          "[security]") {
  Secured s("api_rate_per_s = 10000000\napi_burst = 10000000\n");  // every request answered, none refused
  zmq::context_t ctx(1);
  zmq::socket_t client(ctx, zmq::socket_type::dealer);
  client.set(zmq::sockopt::linger, 0);
  client.set(zmq::sockopt::rcvhwm, 1);
  client.set(zmq::sockopt::rcvbuf, 4096);  // little waits in the kernel either
  weft::curve::SetClientKeys(client, s.server_key(), s.admin().keys);
  client.connect(s.weftd().api());
  // server.ops answers a few KiB: 8,000 replies are far more than weftd queues for one
  // client (1,000) and every buffer between (a few MiB at most), so some must be dropped.
  constexpr int kSent = 8000;
  for (int i = 0; i < kSent; ++i) {
    weft::wire::Request r;
    r.id = "r" + std::to_string(i);
    r.op = "server.ops";
    weft::wire::Frames frames = weft::wire::EncodeRequest(r);
    REQUIRE(frames.size() == 1);
    REQUIRE(client.send(frames[0], zmq::send_flags::none));  // waits while weftd reads
  }
  const std::string said = "on the api endpoint: its client has 1000 replies waiting that it has not read";
  const bool logged = WaitFor([&] { return s.weftd().Log().find(said) != std::string::npos; }, 60s);
  INFO(s.weftd().Log().substr(0, 4000));
  CHECK(logged);
  // It is said once, then counted (the summary comes when its interval is over).
  CHECK(Occurrences(s.weftd().Log(), said) == 1);
  // Read what arrives: fewer than were sent, and weftd still answers this client.
  int got = 0;
  client.set(zmq::sockopt::rcvtimeo, 2000);
  weft::wire::Frames frames;
  while (weft::wire::RecvMultipart(client, frames)) ++got;
  CHECK(got < kSent);
  weft::wire::Request last;
  last.id = "after";
  last.op = "server.status";
  weft::wire::Frames out = weft::wire::EncodeRequest(last);
  REQUIRE(weft::wire::SendMultipart(client, out));
  client.set(zmq::sockopt::rcvtimeo, 20000);
  std::optional<weft::wire::Reply> after;
  int later = 0;
  while (!after && weft::wire::RecvMultipart(client, frames)) {
    auto reply = weft::wire::DecodeReply(frames, {});
    REQUIRE(reply.ok());
    if (reply->id == "after") after = *reply;
    else ++later;
  }
  INFO("replies read: " << got << ", then " << later);
  REQUIRE(after);
  CHECK(after->ok);
}

// weft_ssh and weft_localnode against real sshd processes (needs root).
#include <signal.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "support/sshd_node.hpp"

namespace fs = std::filesystem;
using namespace weft;
using weft::testing::SshdNode;
using weft::testing::TempDir;
using Clock = std::chrono::steady_clock;

namespace {

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

bool CanBind(const std::string& address, std::uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  ::inet_pton(AF_INET, address.c_str(), &sa.sin_addr);
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
  ::close(fd);
  return ok;
}

std::unique_ptr<host::ssh::Session> MustConnect(const host::ssh::Target& t) {
  auto s = host::ssh::Session::Connect(t, 5000);
  if (!s.ok()) FAIL(s.status().ToString());
  return std::move(s).value();
}

}  // namespace

TEST_CASE("ssh: exec returns stdout, stderr and the exit status", "[ssh]") {
  SshdNode node("exec");
  auto s = MustConnect(node.target());
  std::string out, err;
  auto r = s->Exec("echo hello; echo oops >&2; exit 3", 5000, [&](std::string_view c) { out += c; },
                   [&](std::string_view c) { err += c; });
  REQUIRE(r.ok());
  CHECK(r->exit_status == 3);
  CHECK(out == "hello\n");
  CHECK(err == "oops\n");

  // The same session runs a second command.
  out.clear();
  r = s->Exec("id -un", 5000, [&](std::string_view c) { out += c; });
  REQUIRE(r.ok());
  CHECK(r->exit_status == 0);
  CHECK(out == "root\n");
}

TEST_CASE("ssh: output streams to the callback while the command still runs", "[ssh]") {
  SshdNode node("stream");
  auto s = MustConnect(node.target());
  const auto start = Clock::now();
  Clock::time_point first_chunk{};
  std::string out;
  auto r = s->Exec("echo first; sleep 0.5; echo second", 5000, [&](std::string_view c) {
    if (out.empty()) first_chunk = Clock::now();
    out += c;
  });
  const auto end = Clock::now();
  REQUIRE(r.ok());
  CHECK(out == "first\nsecond\n");
  CHECK(end - start >= std::chrono::milliseconds(450));
  // "first" arrived well before the command finished.
  CHECK(end - first_chunk >= std::chrono::milliseconds(300));
}

TEST_CASE("ssh: a command killed by a signal reports 128+N and the signal name", "[ssh]") {
  SshdNode node("signal");
  auto s = MustConnect(node.target());
  auto r = s->Exec("kill -TERM $$", 5000);
  REQUIRE(r.ok());
  CHECK(r->exit_signal == "TERM");
  CHECK(r->exit_status == 128 + SIGTERM);
}

TEST_CASE("ssh: a command past its timeout fails with a clear message, a fresh connection works", "[ssh]") {
  SshdNode node("slow");
  auto s = MustConnect(node.target());
  const auto start = Clock::now();
  auto r = s->Exec("sleep 10", 300);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == Code::kTimeout);
  CHECK(r.status().message() == "command timed out after 300 ms on node slow");
  CHECK(Clock::now() - start < std::chrono::seconds(2));
  CHECK_FALSE(s->healthy());
  s.reset();

  auto fresh = MustConnect(node.target());
  std::string out;
  auto again = fresh->Exec("echo alive", 5000, [&](std::string_view c) { out += c; });
  REQUIRE(again.ok());
  CHECK(out == "alive\n");
}

TEST_CASE("ssh: a cancelled command stops promptly", "[ssh]") {
  SshdNode node("cancel");
  auto s = MustConnect(node.target());
  const auto start = Clock::now();
  auto r = s->Exec("sleep 10", 10000, {}, {}, [&] { return Clock::now() - start > std::chrono::milliseconds(200); });
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == Code::kConflict);
  CHECK(r.status().message().find("cancelled on node cancel") != std::string::npos);
  CHECK(Clock::now() - start < std::chrono::seconds(2));
}

TEST_CASE("ssh: upload then cat returns the same bytes, with the mode asked for", "[ssh]") {
  SshdNode node("upload");
  auto s = MustConnect(node.target());
  std::string bytes;
  for (int i = 0; i < 200000; ++i) bytes.push_back(static_cast<char>((i * 7919) & 0xFF));  // binary, NULs included
  const std::string remote = (node.node().dir / "uploaded.bin").string();
  Status written = s->Write(bytes, remote, 0640, 10000);
  INFO(written.ToString());
  REQUIRE(written.ok());
  std::string out;
  auto r = s->Exec("cat " + remote, 10000, [&](std::string_view c) { out += c; });
  REQUIRE(r.ok());
  CHECK(r->exit_status == 0);
  CHECK(out.size() == bytes.size());
  CHECK(out == bytes);
  out.clear();
  REQUIRE(s->Exec("stat -c %a " + remote, 5000, [&](std::string_view c) { out += c; }).ok());
  CHECK(out == "640\n");

  // From a local file too.
  TempDir local("weft-upload");
  const fs::path file = local / "script.sh";
  weft::testing::WriteFile(file, "#!/bin/sh\necho from script\n");
  const std::string remote_script = (node.node().dir / "script.sh").string();
  REQUIRE(s->Upload(file.string(), remote_script, 0755, 5000).ok());
  out.clear();
  REQUIRE(s->Exec(remote_script, 5000, [&](std::string_view c) { out += c; }).ok());
  CHECK(out == "from script\n");

  // A directory that does not exist is an error that names the path; the session lives on.
  Status bad = s->Write("x", "/nonexistent-dir/x", 0644, 5000);
  CHECK_FALSE(bad.ok());
  CHECK(bad.message().find("/nonexistent-dir/x") != std::string::npos);
  CHECK(s->Exec("true", 5000).ok());
}

TEST_CASE("ssh: a wrong expected host key is refused before authentication", "[ssh]") {
  SshdNode node("mitm");
  host::ssh::Target t = node.target();
  // Same type, one base64 character changed in the key itself.
  std::string key = t.host_keys.at(0);
  std::size_t pos = key.find(' ') + 40;
  key[pos] = key[pos] == 'A' ? 'B' : 'A';
  t.host_keys = {key};
  auto s = host::ssh::Session::Connect(t, 5000);
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().code() == Code::kDenied);
  CHECK(s.status().message().find("host key mismatch") != std::string::npos);
  CHECK(s.status().message().find("node mitm") != std::string::npos);
  // The server never saw a login attempt, let alone a command.
  const std::string log = Slurp(node.node().dir / "sshd.log");
  CHECK(log.find("Accepted publickey") == std::string::npos);

  // No expected key at all is refused too: never connect unchecked.
  t.host_keys.clear();
  auto none = host::ssh::Session::Connect(t, 5000);
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().message().find("host-key checking") != std::string::npos);
}

TEST_CASE("ssh: a wrong private key is refused and the message does not contain either key", "[ssh]") {
  SshdNode a("keya");
  SshdNode b("keyb");
  host::ssh::Target t = a.target();
  t.private_key = b.node().private_key;
  auto s = host::ssh::Session::Connect(t, 5000);
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().code() == Code::kDenied);
  CHECK(s.status().message().find("key authentication as 'root' failed") != std::string::npos);
  CHECK(s.status().message().find("PRIVATE KEY") == std::string::npos);
  CHECK(s.status().message().find(b.node().private_key.substr(40, 30)) == std::string::npos);
}

TEST_CASE("ssh: connecting to an address where nothing listens fails fast", "[ssh]") {
  SshdNode node("gone");
  host::ssh::Target t = node.target();
  node.Stop();
  const auto start = Clock::now();
  auto s = host::ssh::Session::Connect(t, 2000);
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().message().find("node gone") != std::string::npos);
  CHECK(Clock::now() - start < std::chrono::seconds(3));
}

TEST_CASE("ssh: the pool reuses a connection per node and keys it by credentials", "[ssh]") {
  SshdNode node("pool");
  host::ssh::Pool pool;
  {
    auto lease = pool.Acquire(node.target(), 5000);
    REQUIRE(lease.ok());
    CHECK_FALSE(lease->reused());
    REQUIRE((*lease)->Exec("true", 5000).ok());
  }
  CHECK(pool.idle_count() == 1);
  {
    auto lease = pool.Acquire(node.target(), 5000);
    REQUIRE(lease.ok());
    CHECK(lease->reused());
    CHECK(pool.idle_count() == 0);
    // A timeout breaks the session: it is not returned to the pool.
    CHECK_FALSE((*lease)->Exec("sleep 5", 100).ok());
  }
  CHECK(pool.idle_count() == 0);
  {
    host::ssh::Target other = node.target();
    other.user = "nobody";  // a different key: never handed a root session
    auto lease = pool.Acquire(node.target(), 5000);
    REQUIRE(lease.ok());
    CHECK_FALSE(lease->reused());
  }
  pool.Clear();
  CHECK(pool.idle_count() == 0);
}

TEST_CASE("localnode: a stopped node leaves no process, no directory, and its address can be reused", "[ssh][localnode]") {
  TempDir state("weft-localnode");
  localnode::NodeOptions o;
  o.state_dir = state / "nodes";
  // Claims of its own and a port of its own, so that which address a node gets
  // does not depend on other tests' nodes (ctest -j). Those claim 127.0.2.x
  // machine-wide, and stopping a node ends whatever holds sockets on its
  // address: this test's nodes stay out of 127.0.2.x (claimed here by a
  // directory that exists, so the claims count as in use).
  o.claims_dir = state / "claims";
  fs::create_directories(o.claims_dir);
  for (int y = 1; y <= 254; ++y) {
    std::ofstream claim(o.claims_dir / ("127.0.2." + std::to_string(y)));
    claim << state.path().string() << "\n";
  }
  o.name = "reuse";
  o.port = weft::testing::kReuseTestSshPort;
  const auto start = Clock::now();
  auto n = localnode::StartNode(o);
  REQUIRE(n.ok());
  CHECK(Clock::now() - start < std::chrono::seconds(1));
  CHECK(n->address == "127.0.3.1");
  CHECK(localnode::ProcessAlive(n->pid));
  CHECK(fs::exists(o.claims_dir / n->address));
  CHECK_FALSE(CanBind(n->address, n->port));

  REQUIRE(localnode::StopNode(n->dir).ok());
  CHECK(::kill(n->pid, 0) != 0);
  CHECK_FALSE(fs::exists(n->dir));
  CHECK_FALSE(fs::exists(o.claims_dir / n->address));
  CHECK(CanBind(n->address, n->port));
  CHECK(localnode::StopNode(n->dir).ok());  // stopping twice is fine

  auto again = localnode::StartNode(o);
  REQUIRE(again.ok());
  CHECK(again->address == n->address);
  CHECK(again->host_keys != n->host_keys);  // a new node, new keys
  REQUIRE(localnode::StopNode(again->dir).ok());
  CHECK(::kill(again->pid, 0) != 0);
}

TEST_CASE("localnode: stopping a node also ends its sessions and their commands", "[ssh][localnode]") {
  SshdNode node("busy");
  auto s = MustConnect(node.target());
  std::string out;
  REQUIRE(s->Exec("sleep 30 >/dev/null 2>&1 & echo $!", 5000, [&](std::string_view c) { out += c; }).ok());
  const pid_t sleeper = static_cast<pid_t>(std::stol(out));
  CHECK(localnode::ProcessAlive(sleeper));
  s.reset();
  node.Stop();
  CHECK_FALSE(localnode::ProcessAlive(node.node().pid));
  // The background command was a descendant of the node's sshd only while its
  // session lived; what matters is that the listener and session are gone.
  CHECK(::kill(node.node().pid, 0) != 0);
  if (localnode::ProcessAlive(sleeper)) ::kill(sleeper, SIGKILL);
}

TEST_CASE("localnode: two nodes at once have different addresses and both answer", "[ssh][localnode]") {
  SshdNode a("twin-a");
  SshdNode b("twin-b");
  CHECK(a.node().address != b.node().address);
  CHECK(a.node().port == b.node().port);
  for (SshdNode* n : {&a, &b}) {
    auto s = MustConnect(n->target());
    std::string out;
    REQUIRE(s->Exec("echo $SSH_CONNECTION", 5000, [&](std::string_view c) { out += c; }).ok());
    // "client_ip client_port server_ip server_port"
    CHECK(out.find(" " + n->node().address + " ") != std::string::npos);
  }
}

TEST_CASE("localnode: a relative state_dir is refused with a sentence", "[ssh][localnode]") {
  localnode::NodeOptions o;
  o.state_dir = "relative/dir";
  auto n = localnode::StartNode(o);
  REQUIRE_FALSE(n.ok());
  CHECK(n.status().message().find("absolute") != std::string::npos);
}

// What a new user's trial of the local provider and the shell automator found,
// end to end: the real weftd, weft-host and weft CLI, real sshd nodes. Needs root.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/fast.hpp"
#include "support/temp_dir.hpp"
#include "weft/localnode/local_node.hpp"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using weft::testing::Host;
using weft::testing::HostIn;
using weft::testing::kBuild;
using weft::testing::RunResult;
using weft::testing::ServerIn;
using weft::testing::TempDir;
using weft::testing::WaitFor;
using weft::testing::Weftd;

namespace {

// Each case's nodes listen on a port of their own (no other test's nodes use these),
// so one case's listener on every address cannot stop another's nodes.
constexpr std::uint16_t kSkipSshPort = 2041;
constexpr std::uint16_t kTakenSshPort = 2042;
constexpr std::uint16_t kWatchSshPort = 2043;

// A TCP socket listening on address:port (0: a port the system picks), closed when it goes.
class Listening {
 public:
  Listening(const std::string& address, std::uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    ::inet_pton(AF_INET, address.c_str(), &sa.sin_addr);
    ok_ = fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 && ::listen(fd_, 4) == 0;
    socklen_t len = sizeof sa;
    if (ok_ && ::getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len) == 0) port_ = ntohs(sa.sin_port);
  }
  ~Listening() {
    if (fd_ >= 0) ::close(fd_);
  }
  Listening(const Listening&) = delete;
  Listening& operator=(const Listening&) = delete;
  bool ok() const { return ok_; }
  std::uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  bool ok_ = false;
  std::uint16_t port_ = 0;
};

// 127.0.x.y as (x, y), the order the provider tries addresses in.
std::pair<int, int> Order(const std::string& address) {
  int a = 0, b = 0, x = 0, y = 0;
  std::sscanf(address.c_str(), "%d.%d.%d.%d", &a, &b, &x, &y);
  return {x, y};
}

// The IPv4 addresses (not 0.0.0.0) some socket of this network namespace is
// bound to: a TCP listener or a bound UDP socket, IPv4 or IPv4-mapped IPv6, as
// /proc/net shows them (what the local provider reads to skip addresses).
std::set<std::string> AddressesInUse() {
  std::set<std::string> out;
  for (const auto& [table, state] : {std::pair{"/proc/net/tcp", "0A"}, std::pair{"/proc/net/tcp6", "0A"},
                                     std::pair{"/proc/net/udp", "07"}, std::pair{"/proc/net/udp6", "07"}}) {
    std::istringstream in(weft::testing::ReadFile(table));
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string sl, local, remote, st;
      f >> sl >> local >> remote >> st;
      std::string hex = local.substr(0, local.find(':'));
      if (st != state) continue;
      if (hex.size() == 32) {  // ::ffff:a.b.c.d, printed as four 32-bit words
        if (hex.compare(0, 24, "0000000000000000FFFF0000") != 0) continue;
        hex = hex.substr(24);
      }
      if (hex.size() != 8) continue;
      in_addr a{};
      a.s_addr = static_cast<in_addr_t>(std::stoul(hex, nullptr, 16));  // the kernel prints it as it is in memory
      char text[INET_ADDRSTRLEN];
      if (a.s_addr != 0 && ::inet_ntop(AF_INET, &a, text, sizeof text)) out.insert(text);
    }
  }
  return out;
}

// The first `n` addresses the local provider would hand out next (no live claim,
// and no socket of another program on it), each given a listener of a program
// outside Weft, this test's. Chosen under the claims lock, so no node is being
// given one of them meanwhile. An address another program already uses (a stray
// sshd of another run, say) is not taken: the provider skips it too, but may name
// that other program for it, and the test could not tell which holder it names.
std::vector<std::pair<std::string, std::unique_ptr<Listening>>> OccupyNextAddresses(std::size_t n) {
  const fs::path claims = weft::localnode::kDefaultClaimsDir;
  fs::create_directories(claims);
  const int lock = ::open((claims / ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  REQUIRE(lock >= 0);
  REQUIRE(::flock(lock, LOCK_EX) == 0);
  const std::set<std::string> in_use = AddressesInUse();
  std::vector<std::pair<std::string, std::unique_ptr<Listening>>> out;
  for (int x = 2; x <= 254 && out.size() < n; ++x) {
    for (int y = 1; y <= 254 && out.size() < n; ++y) {
      const std::string address = "127.0." + std::to_string(x) + "." + std::to_string(y);
      const fs::path claim = claims / address;
      std::error_code ec;
      if (fs::exists(claim, ec)) {
        std::string owner = weft::testing::ReadFile(claim);
        while (!owner.empty() && owner.back() == '\n') owner.pop_back();
        if (!owner.empty() && fs::exists(owner, ec)) continue;  // a live node's
      }
      if (in_use.count(address)) continue;  // another program's
      auto listener = std::make_unique<Listening>(address, 0);
      if (listener->ok()) out.emplace_back(address, std::move(listener));
    }
  }
  ::flock(lock, LOCK_UN);
  ::close(lock);
  return out;
}

// weftd and one weft-host with the build's plugins; a catalog whose `trial`
// template makes local nodes (sshd on ssh_port) that run one shell service,
// `trial`, whose INSTALL runs `install`.
class Env {
 public:
  Env(std::uint16_t ssh_port, const std::string& install) : tmp_("weft-local-trial") {
    weft::testing::WeftdOptions o = ServerIn(tmp_ / "server");
    o.extra_toml = "[jobs]\nmax_attempts = 1\nretry_backoff_ms = 50\n";
    o.die_with_parent = true;  // also when a node's stop ends this process (it holds sockets on addresses)
    server_ = std::make_unique<Weftd>(o);
    weft::testing::HostOptions h = HostIn(tmp_ / "host", "h1", server_->provisioner(),
                                          {kBuild / "plugins/providers", kBuild / "plugins/automators"}, 4);
    h.die_with_parent = true;
    host_ = std::make_unique<Host>(h);
    REQUIRE(WaitFor([&] { return server_->HostLive("h1"); }, 20s));
    const fs::path examples = fs::path(WEFT_SOURCE_DIR) / "examples" / "catalog";
    const fs::path dir = tmp_ / "catalog";
    for (const char* kind : {"providers", "hardwaretypes", "imagetypes", "services", "clustertemplates"})
      fs::create_directories(dir / kind);
    fs::copy(examples / "hardwaretypes" / "small.json", dir / "hardwaretypes" / "small.json");
    fs::copy(examples / "imagetypes" / "debian12.json", dir / "imagetypes" / "debian12.json");
    Write(dir / "providers" / "local.json",
          {{"name", "local"},
           {"description", "local nodes of this test"},
           {"providertype", "local"},
           {"provisioner", {{"state_dir", (tmp_ / "nodes").string()}, {"ssh_port", ssh_port}}}});
    Write(dir / "services" / "trial.json",
          {{"name", "trial"},
           {"description", "one shell action"},
           {"dependencies", json::object()},
           {"provisioner", {{"actions", {{"install", {{"type", "shell"}, {"fields", {{"command", install}}}}}}}}}});
    Write(dir / "clustertemplates" / "trial.json",
          {{"name", "trial"},
           {"description", "one local node running trial"},
           {"compatibility", {{"hardwaretypes", {"small"}}, {"imagetypes", {"debian12"}}, {"services", {"trial"}}}},
           {"constraints", {{"size", {{"min", 1}, {"max", 3}}}}},
           {"defaults",
            {{"provider", "local"}, {"hardwaretype", "small"}, {"imagetype", "debian12"},
             {"services", {"trial"}}, {"dnsSuffix", "weft.test"}}}});
    RunResult r = Weft({"catalog", "import", dir.string()});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
  }
  ~Env() {
    // Whatever a test left: no node outlives it.
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(tmp_ / "nodes", ec)) (void)weft::localnode::StopNode(e.path());
  }

  RunResult Weft(std::vector<std::string> args) {
    args.insert(args.begin(), {"--server", server_->api()});
    return weft::testing::Run(kBuild / "bin/weft", args, 120s);
  }
  Weftd& server() { return *server_; }
  std::string Logs() const { return "---- weftd\n" + server_->Log() + "\n---- weft-host\n" + host_->Log(); }

 private:
  static void Write(const fs::path& file, const json& doc) { weft::testing::WriteFile(file, doc.dump(2)); }

  TempDir tmp_;
  std::unique_ptr<Weftd> server_;
  std::unique_ptr<Host> host_;
};

std::size_t Occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

}  // namespace

TEST_CASE("local trial: a new node never gets an address another program listens on, and says what it skipped",
          "[localnodes][local][integration]") {
  Env env(kSkipSshPort, "echo installed");
  // A listener on every address: no address choice avoids it, so CREATE says so.
  Listening everywhere("0.0.0.0", 0);
  REQUIRE(everywhere.ok());
  auto occupied = OccupyNextAddresses(3);
  REQUIRE(occupied.size() == 3);
  // What other programs listen on (none of the addresses above).
  std::set<std::string> others = AddressesInUse();
  for (const auto& [busy, listener] : occupied) others.erase(busy);

  RunResult created = env.Weft({"-o", "json", "cluster", "create", "c1", "--template", "trial", "--size", "1", "--wait"});
  INFO(created.out << created.err << env.Logs());
  REQUIRE(created.exit_code == 0);
  const json cluster = env.server().Cluster("c1");
  REQUIRE(cluster["nodes"].size() == 1);
  const std::string address = cluster["nodes"][0]["results"].value("access_v4", "");
  INFO("node address " << address);
  REQUIRE(address.rfind("127.0.", 0) == 0);
  for (const auto& [busy, listener] : occupied) CHECK(address != busy);
  CHECK(others.count(address) == 0);

  // CREATE's output names each address it passed over and who holds it, and the wildcard listener.
  // Other programs' addresses (a stray sshd, say) before this test's are passed over and named
  // too, first: the first five skipped are named, the rest counted.
  const json job = env.server().Job(json::parse(created.out)["job"]["id"].get<std::string>());
  std::string create_output;
  for (const json& t : job["tasks"])
    if (t["action"] == "CREATE") create_output += t.value("stdout", "") + t.value("stderr", "");
  INFO(create_output);
  int passed_over = 0;
  for (const auto& [busy, listener] : occupied) {
    if (Order(busy) > Order(address)) continue;  // a node deleted meanwhile may free an earlier address
    ++passed_over;
    const std::string said = "address " + busy + " skipped: in use by ";
    const std::size_t at = create_output.find(said);
    if (at == std::string::npos) {
      // Past the five named: counted. Only when other programs' addresses came first.
      CHECK(std::any_of(others.begin(), others.end(), [&](const std::string& other) {
        return other.rfind("127.0.", 0) == 0 && Order(other).first >= 2 && Order(other) < Order(busy);
      }));
      CHECK_THAT(create_output, Catch::Contains(" more addresses skipped: in use outside Weft"));
      continue;
    }
    const std::size_t from = at + said.size();
    CHECK(create_output.substr(from, create_output.find('\n', from) - from) ==
          "local_trial_tes (pid " + std::to_string(::getpid()) + ") on tcp " + busy + ":" +
              std::to_string(listener->port()));
  }
  CHECK_THAT(create_output, Catch::Contains("listeners on every address hold their ports on " + address + " too"));
  CHECK_THAT(create_output, Catch::Contains("on tcp 0.0.0.0:" + std::to_string(everywhere.port())));
  RunResult deleted = env.Weft({"cluster", "delete", "c1", "--wait"});
  INFO(deleted.out << deleted.err << "addresses passed over: " << passed_over);
  CHECK(deleted.exit_code == 0);
}

TEST_CASE("local trial: a listener on every address at the ssh port fails the create and names the listener",
          "[localnodes][local][integration]") {
  Env env(kTakenSshPort, "echo installed");
  Listening ssh_everywhere("0.0.0.0", kTakenSshPort);
  REQUIRE(ssh_everywhere.ok());
  RunResult created = env.Weft({"cluster", "create", "c2", "--template", "trial", "--size", "1", "--keep-on-failure",
                                "--wait"});
  INFO(created.out << created.err << env.Logs());
  CHECK(created.exit_code == 1);
  CHECK_THAT(created.err, Catch::Contains("port " + std::to_string(kTakenSshPort) +
                                          " is taken on every address by local_trial_tes (pid " +
                                          std::to_string(::getpid()) + ") on tcp 0.0.0.0:" +
                                          std::to_string(kTakenSshPort)));
}

TEST_CASE("local trial: weft job watch shows a failed shell action's output once", "[localnodes][local][integration]") {
  Env env(kWatchSshPort, "echo 'to stdout'; echo 'first complaint' >&2; echo 'last complaint' >&2; exit 3");
  RunResult started = env.Weft({"-o", "json", "cluster", "create", "c3", "--template", "trial", "--size", "1"});
  INFO(started.out << started.err);
  REQUIRE(started.exit_code == 0);
  const std::string id = json::parse(started.out)["job"]["id"].get<std::string>();

  RunResult watched = env.Weft({"job", "watch", id});
  const std::string all = watched.out + watched.err;
  INFO(all << env.Logs());
  CHECK(watched.exit_code == 1);
  // The message's first line, then each stream's last lines, each line once.
  CHECK_THAT(all, Catch::Contains("exited with status 3; last output:\n  --- stdout (last lines) ---\n"));
  CHECK_THAT(all, Catch::Contains("  --- stderr (last lines) ---\n  first complaint\n  last complaint\n"));
  CHECK(Occurrences(all, "to stdout") == 1);
  CHECK(Occurrences(all, "first complaint") == 1);
  CHECK(Occurrences(all, "last complaint") == 1);
  // The job's own message points at that output instead of repeating it.
  CHECK_THAT(all, Catch::Contains("exited with status 3; last output above"));
}

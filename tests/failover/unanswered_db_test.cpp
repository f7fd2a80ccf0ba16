// A PostgreSQL that accepts connections and never answers (a frozen machine,
// a stopped postmaster), with the real weftd: a TCP front of a throwaway
// PostgreSQL in this test passes bytes on until it hangs, then closes every
// connection and holds each new one open without a byte. weftd's attempts to
// connect again run on threads of their own, so the leader and the follower
// go on answering (server.status names the database and says it does not
// answer) for as long as the hang lasts; an attempt that is given up on says
// which server did not answer within how long.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/postgres.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "support/weftd.hpp"

namespace weft {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using testing::PostgresServer;
using testing::Tail;
using testing::TempDir;
using testing::WaitFor;
using testing::Weftd;

// A TCP listener on 127.0.0.1 in front of a PostgreSQL's unix socket. It
// passes bytes both ways until Hang(); from then on it has closed every
// connection it passed on, and it accepts new ones and never answers them.
class TcpFront {
 public:
  explicit TcpFront(fs::path unix_socket) : unix_socket_(std::move(unix_socket)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(listener_ >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(listener_, 64) == 0);
    socklen_t len = sizeof addr;
    REQUIRE(::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port_ = ntohs(addr.sin_port);
    REQUIRE(::pipe2(wake_, O_CLOEXEC) == 0);
    thread_ = std::thread([this] { Loop(); });
  }
  ~TcpFront() {
    stop_ = true;
    (void)!::write(wake_[1], "x", 1);
    thread_.join();
    for (auto& [a, b] : pairs_) {
      ::close(a);
      ::close(b);
    }
    for (int fd : held_) ::close(fd);
    ::close(listener_);
    ::close(wake_[0]);
    ::close(wake_[1]);
  }
  TcpFront(const TcpFront&) = delete;
  TcpFront& operator=(const TcpFront&) = delete;

  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  // Closes every connection passed on; new ones are held unanswered.
  void Hang() {
    hang_ = true;
    (void)!::write(wake_[1], "x", 1);
  }
  // How many connections were accepted and held since Hang().
  int held() const { return held_count_.load(); }

 private:
  int ConnectUpstream() const {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string path = unix_socket_.string();
    if (fd < 0 || path.size() >= sizeof addr.sun_path) return -1;
    std::copy(path.begin(), path.end(), addr.sun_path);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(fd);
      return -1;
    }
    return fd;
  }

  // Ends both sides at once (the descriptors are close-on-exec, so no weftd
  // started meanwhile holds a copy that would keep them open).
  static void Close(int a, int b) {
    ::shutdown(a, SHUT_RDWR);
    ::shutdown(b, SHUT_RDWR);
    ::close(a);
    ::close(b);
  }

  // Everything `from` has, written to `to`; false when either is done.
  static bool Pass(int from, int to) {
    char buf[65536];
    const ssize_t n = ::read(from, buf, sizeof buf);
    if (n <= 0) return false;
    for (ssize_t off = 0; off < n;) {
      const ssize_t w = ::send(to, buf + off, static_cast<std::size_t>(n - off), MSG_NOSIGNAL);
      if (w <= 0) return false;
      off += w;
    }
    return true;
  }

  void Loop() {
    while (!stop_) {
      if (hang_ && !pairs_.empty()) {
        for (auto& [a, b] : pairs_) Close(a, b);
        pairs_.clear();
      }
      std::vector<pollfd> items = {{wake_[0], POLLIN, 0}, {listener_, POLLIN, 0}};
      for (auto& [a, b] : pairs_) {
        items.push_back({a, POLLIN, 0});
        items.push_back({b, POLLIN, 0});
      }
      const std::size_t polled = pairs_.size();
      if (::poll(items.data(), items.size(), 1000) <= 0) continue;
      if (items[0].revents) {
        char c;
        (void)!::read(wake_[0], &c, 1);
      }
      if (items[1].revents & POLLIN) {
        const int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
        if (client >= 0) {
          if (hang_) {
            held_.push_back(client);
            ++held_count_;
          } else if (const int upstream = ConnectUpstream(); upstream >= 0) {
            pairs_.emplace_back(client, upstream);
          } else {
            ::close(client);
          }
        }
      }
      std::vector<std::pair<int, int>> kept;
      for (std::size_t i = 0; i < pairs_.size(); ++i) {
        bool ok = true;
        if (i < polled) {  // one accepted just now was not polled yet
          if (items[2 + 2 * i].revents) ok = Pass(pairs_[i].first, pairs_[i].second);
          if (ok && items[3 + 2 * i].revents) ok = Pass(pairs_[i].second, pairs_[i].first);
        }
        if (ok) {
          kept.push_back(pairs_[i]);
        } else {
          Close(pairs_[i].first, pairs_[i].second);
        }
      }
      pairs_ = std::move(kept);
    }
  }

  fs::path unix_socket_;
  int listener_ = -1;
  int port_ = 0;
  int wake_[2] = {-1, -1};
  std::atomic<bool> stop_{false};
  std::atomic<bool> hang_{false};
  std::atomic<int> held_count_{0};
  std::vector<std::pair<int, int>> pairs_;  // client, upstream (the loop's)
  std::vector<int> held_;                   // accepted while hanging (the loop's)
  std::thread thread_;
};

std::string Conninfo(const TcpFront& front) {
  return "host=127.0.0.1 port=" + std::to_string(front.port()) + " user=postgres dbname=postgres";
}

// What `w` says it is ("leader", "follower"; "" when it does not answer).
std::string Role(Weftd& w) {
  Result<json> s = w.TryCall("server.status", json::object(), 2000);
  if (!s.ok() || !s->contains("leadership")) return "";
  return (*s)["leadership"].value("role", std::string());
}

// A hang longer than any client waits: weftd's own attempt to connect is
// given up on only after 30 s (connect_timeout_ms), the election's after
// its lease, 20 s. Before, each attempt held weftd's only thread that long.
TEST_CASE("unanswered database: a leader and a follower answer server.status, naming the database, while new "
          "connections to it get no answer",
          "[failover][integration]") {
  TempDir dir("pg-unanswered");
  Result<std::unique_ptr<PostgresServer>> pg = PostgresServer::Start(dir.path() / "pg");
  REQUIRE(pg.ok());
  TcpFront front((*pg)->dir() / ".s.PGSQL.5432");
  auto start = [&](const std::string& node) {
    fs::create_directories(dir.path() / node);
    return std::make_unique<Weftd>(testing::WeftdOptions{
        .dir = dir.path() / node,
        .name = node,
        .extra_toml = "[store]\nbackend = \"postgres\"\nconninfo = " + json(Conninfo(front)).dump() +
                      "\nconnect_timeout_ms = 30000\n[leader]\nnode = \"" + node +
                      "\"\nlease_ms = 20000\npoll_ms = 100\n",
        .store = "sqlite"});  // its [store] says postgres
  };
  std::unique_ptr<Weftd> a = start("a");
  REQUIRE(WaitFor([&] { return Role(*a) == "leader"; }, 30s));
  fs::create_directories(dir.path() / "b" / "data");
  fs::copy(a->data() / "keys", dir.path() / "b" / "data" / "keys", fs::copy_options::recursive);
  std::unique_ptr<Weftd> b = start("b");
  REQUIRE(WaitFor([&] { return Role(*b) == "follower"; }, 30s));
  const auto logs = [&] { return "--- a ---\n" + Tail(a->AllLogs(), 3000) + "--- b ---\n" + Tail(b->AllLogs(), 3000); };

  front.Hang();
  for (Weftd* w : {a.get(), b.get()}) {
    INFO((w == a.get() ? "a" : "b"));
    // Once it found its connections gone, it says the database does not answer.
    Status last = Status::Ok();
    const bool says = WaitFor(
        [&] {
          last = w->TryCall("server.status", json::object(), 3000).status();
          return last.code() == Code::kUnavailable && last.message().find(front.address()) != std::string::npos;
        },
        60s);
    INFO(last.ToString() << "\n" << logs());
    REQUIRE(says);
    // And goes on saying so, each time within the client's wait, while the hang lasts.
    for (int i = 0; i < 6; ++i) {
      const Status s = w->TryCall("server.status", json::object(), 3000).status();
      INFO(i << ": " << s.ToString());
      CHECK(s.code() == Code::kUnavailable);
      CHECK(s.message().find("PostgreSQL") != std::string::npos);
    }
  }
  // Its attempts are still under way, unanswered, on threads of their own;
  // each weftd stops at once all the same, cleanly (no sanitizer report).
  CHECK(front.held() >= 2);
  for (Weftd* w : {a.get(), b.get()}) {
    const int status = w->Stop();
    INFO((w == a.get() ? "a" : "b") << ": wait status " << status << "\n" << Tail(w->AllLogs(), 3000));
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
}

// The start of a weftd whose database accepts the connection and never
// answers fails within [store] connect_timeout_ms, naming the server.
TEST_CASE("unanswered database: weftd stops at start saying which PostgreSQL did not answer within how long",
          "[failover][integration]") {
  TempDir dir("pg-unanswered-start");
  Result<std::unique_ptr<PostgresServer>> pg = PostgresServer::Start(dir.path() / "pg");
  REQUIRE(pg.ok());
  TcpFront front((*pg)->dir() / ".s.PGSQL.5432");
  front.Hang();
  std::string refusal;
  try {
    Weftd w(testing::WeftdOptions{.dir = dir.path() / "w",
                                  .name = "w",
                                  .extra_toml = "[store]\nbackend = \"postgres\"\nconninfo = " +
                                                json(Conninfo(front)).dump() + "\nconnect_timeout_ms = 2000\n",
                                  .start_timeout = 60s,
                                  .store = "sqlite"});  // its [store] says postgres
  } catch (const std::exception& e) {
    refusal = e.what();
  }
  INFO(refusal);
  CHECK(refusal.find("PostgreSQL at " + front.address() + " did not answer within 2 s") != std::string::npos);
}

}  // namespace
}  // namespace weft

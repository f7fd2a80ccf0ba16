#include "bench_util.hpp"

#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <nlohmann/json.hpp>

#include "weft/common/wire.hpp"

namespace weft::bench {

bool ParseInt(const std::string& text, int min, int max, int* out) {
  int v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < min || v > max) return false;
  *out = v;
  return true;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double MsSince(SteadyClock::time_point t) {
  return std::chrono::duration<double, std::milli>(SteadyClock::now() - t).count();
}

std::string Tail(const fs::path& path, std::size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  return s.size() > max_bytes ? s.substr(s.size() - max_bytes) : s;
}

std::vector<pid_t> Children(pid_t pid) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream children(entry.path() / "children");
    pid_t child = 0;
    while (children >> child) out.push_back(child);
  }
  return out;
}

std::int64_t TreeCpuNs(pid_t pid) {
  std::int64_t total = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream stat(entry.path() / "schedstat");
    std::int64_t run_ns = 0;
    if (stat >> run_ns) total += run_ns;
  }
  for (pid_t child : Children(pid)) total += TreeCpuNs(child);
  return total;
}

ScratchDir::ScratchDir(const std::string& prefix, bool keep) : keep_(keep) {
  std::string tmpl = (fs::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("cannot create a temporary directory");
  path_ = tmpl;
}

ScratchDir::~ScratchDir() {
  if (keep_) {
    std::fprintf(stderr, "weft-bench: kept %s\n", path_.c_str());
    return;
  }
  std::error_code ec;
  fs::remove_all(path_, ec);
}

testing::WeftdOptions BenchWeftd(const fs::path& binary, const fs::path& dir, const std::string& server_extra) {
  testing::WeftdOptions o;
  o.dir = dir;
  o.name = "weft-bench";
  o.server_toml = "log_level = \"warn\"\n" + server_extra;
  o.die_with_parent = true;
  o.stop_on_destroy = true;
  o.binary = binary;
  o.start_timeout = std::chrono::seconds(15);
  return o;
}

Status StartWeftd(testing::Weftd& weftd) {
  Status st = weftd.Start();
  return st.ok() ? st : st.WithContext("weftd in " + weftd.dir().string());
}

testing::HostOptions BenchHost(const fs::path& binary, const fs::path& dir, const std::string& id,
                               const std::string& provisioner, int capacity, int workers, const fs::path& plugins,
                               const std::string& log_level) {
  testing::HostOptions o;
  o.dir = dir;
  o.id = id;
  o.server = provisioner;
  o.capacity = capacity;
  o.workers = std::min(workers, capacity);
  o.take_wait_ms = 5000;
  o.request_timeout_ms = 30000;
  o.shutdown_grace_ms = 1000;
  o.plugin_dirs = {plugins};
  o.extra_toml = "log_level = \"" + log_level + "\"\n";
  o.start = false;
  o.die_with_parent = true;
  o.binary = binary;
  return o;
}

Result<Paths> FindPaths() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return Status::Internal("cannot read /proc/self/exe");
  fs::path bin = self.parent_path();
  fs::path build = bin.parent_path();
  Paths p{bin / "weftd", bin / "weft-host", build / "plugins" / "providers" / "fake_provider.so",
          build / "plugins" / "automators" / "fake_automator.so"};
  for (const auto& [path, target] : {std::pair{p.weftd, "weftd"}, std::pair{p.host, "weft-host"},
                                     std::pair{p.provider_so, "fake_provider"},
                                     std::pair{p.automator_so, "fake_automator"}}) {
    if (!fs::exists(path))
      return Status::NotFound(path.string() + " not found; build the " + std::string(target) + " target first");
  }
  return p;
}

Result<double> RawRoundTrips(zmq::context_t& ctx, int clients, int ms, const std::string& payload,
                             bool echo_own_io) {
  std::optional<zmq::context_t> own;
  if (echo_own_io) own.emplace(1);
  zmq::socket_t router(echo_own_io ? *own : ctx, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  router.bind("tcp://127.0.0.1:*");
  const std::string endpoint = wire::LastEndpoint(router);

  std::atomic<bool> stop_echo{false};
  std::thread echo([&]() {
    // The ROUTER belongs to this thread from here on.
    wire::Frames frames;
    while (!stop_echo) {
      zmq::pollitem_t item{static_cast<void*>(router), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::chrono::milliseconds(50));
      while (wire::RecvMultipart(router, frames, zmq::recv_flags::dontwait)) {
        wire::SendMultipart(router, frames);
      }
    }
  });

  std::atomic<long> total{0};
  std::atomic<bool> failed{false};
  std::barrier ready(clients + 1);
  auto client = [&]() {
    zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
    dealer.set(zmq::sockopt::linger, 0);
    dealer.set(zmq::sockopt::rcvtimeo, 5000);
    dealer.connect(endpoint);
    ready.arrive_and_wait();
    ready.arrive_and_wait();  // released together with the clock
    long count = 0;
    auto until = SteadyClock::now() + std::chrono::milliseconds(ms);
    zmq::message_t reply;
    while (SteadyClock::now() < until) {
      dealer.send(zmq::buffer(payload), zmq::send_flags::none);
      if (!dealer.recv(reply, zmq::recv_flags::none)) {
        failed = true;
        break;
      }
      ++count;
    }
    total += count;
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i) threads.emplace_back(client);
  ready.arrive_and_wait();
  auto start = SteadyClock::now();
  ready.arrive_and_wait();
  for (auto& t : threads) t.join();
  auto end = SteadyClock::now();
  stop_echo = true;
  echo.join();
  if (failed) return Status::Timeout("a raw round trip got no echo within 5 s");
  return static_cast<double>(total.load()) / std::chrono::duration<double>(end - start).count();
}

}  // namespace weft::bench

// weft-bench web: what weft-web costs a browser's requests and events.
//
// Starts weftd (CurveZMQ off, no rate limit) and weft-web in development mode
// (requests pass without a session, so the figure is the gateway's own work:
// HTTP, JSON and the hop to weftd). Then, in one run:
//   * requests/s of `server.status` from N client threads straight to weftd's
//     api endpoint (one weft::Client each), and from N threads through weft-web
//     (one keep-alive HTTP connection each, POST /api/v1/server.status), each for
//     the same time; the ratio is the target (>= 0.5);
//   * event latency: S event streams open on weft-web, E tasks enqueued one at a
//     time; each task's `queued` event is timed from the moment a subscriber
//     straight on weftd's events endpoint got it (its publication) to the moment
//     each stream read it: what the gateway adds. p50/p99 over every (event,
//     stream) (target p99 < 100 ms).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "bench.hpp"
#include "bench_util.hpp"
#include "support/web.hpp"
#include "weft/client/client.hpp"
#include "weft/common/wire.hpp"

namespace weft::bench {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr double kTargetRatio = 0.5;
constexpr double kTargetP99Ms = 100;

struct Options {
  int clients = 8;
  int ms = 2000;      // per request measurement
  int streams = 100;
  int events = 200;
  int event_gap_ms = 10;  // between two enqueues
};

int Usage(const std::string& problem) {
  std::fprintf(stderr,
               "weft-bench web: %s\n"
               "usage: weft-bench web [--clients N] [--ms MS] [--streams S] [--events E]\n"
               "  --clients N  client threads, direct and through weft-web (default 8)\n"
               "  --ms MS      length of each requests/s measurement (default 2000)\n"
               "  --streams S  event streams open on weft-web (default 100)\n"
               "  --events E   events timed (default 200)\n",
               problem.c_str());
  return 2;
}

// Runs `one` from `threads` threads for `ms`; requests per second, or -1 when one failed.
template <typename MakeClient>
double Rate(int threads, int ms, MakeClient make) {
  std::atomic<long> done{0};
  std::atomic<bool> failed{false}, stop{false};
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back([&] {
      try {
        auto one = make();
        while (!stop) {
          if (!one()) failed = true;
          ++done;
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "weft-bench web: a client failed: %s\n", e.what());
        failed = true;
      }
    });
  }
  const auto start = SteadyClock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  stop = true;
  for (auto& t : pool) t.join();
  const double seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
  return failed ? -1 : static_cast<double>(done) / seconds;
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size()))) - 1)];
}

// When each event was published: a SUB socket straight on weftd's events
// endpoint, the reference the streams' latencies are measured from.
class Reference {
 public:
  Reference(zmq::context_t& ctx, const std::string& endpoint) : sub_(ctx, zmq::socket_type::sub) {
    sub_.set(zmq::sockopt::subscribe, "");
    sub_.connect(endpoint);
    thread_ = std::thread([this] { Run(); });
  }
  ~Reference() {
    stop_ = true;
    thread_.join();
  }
  std::optional<SteadyClock::time_point> At(std::int64_t task_id) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = at_.find(task_id);
    if (it == at_.end()) return std::nullopt;
    return it->second;
  }

 private:
  void Run() {
    while (!stop_) {
      zmq::pollitem_t item{static_cast<void*>(sub_), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::chrono::milliseconds(50));
      wire::Frames frames;
      while (wire::RecvMultipart(sub_, frames, zmq::recv_flags::dontwait)) {
        const auto now = SteadyClock::now();
        if (frames.size() != 2) continue;
        const json data = json::parse(frames[1].to_string_view(), nullptr, false);
        if (!data.is_object() || data.value("state", "") != "queued") continue;
        std::lock_guard<std::mutex> lock(mu_);
        at_.emplace(data.value("task_id", std::int64_t{-1}), now);
      }
    }
  }

  zmq::socket_t sub_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::map<std::int64_t, SteadyClock::time_point> at_;
  std::thread thread_;
};

std::int64_t EnqueueOne(client::Client& client) {
  json body = {{"tasks", json::array({{{"plugin", "nobody-runs-this"}, {"action", "INSTALL"}}})}};
  Result<json> r = client.Call("debug.enqueue", body);
  return r.ok() ? (*r)["task_ids"][0].get<std::int64_t>() : -1;
}

// Latencies (ms) of `events` task events to `streams` open streams, from the
// moment weftd published each (as a direct subscriber saw it).
Result<std::vector<double>> EventLatencies(zmq::context_t& ctx, testing::Weftd& weftd,
                                           const testing::WebGateway& web, const Options& o) {
  client::Options co;
  co.endpoint = weftd.api();
  client::Client direct(ctx, co);
  Reference reference(ctx, weftd.events());
  std::vector<std::unique_ptr<testing::HttpConnection>> streams;
  for (int i = 0; i < o.streams; ++i) {
    streams.push_back(std::make_unique<testing::HttpConnection>(web.url()));
    if (streams.back()->OpenEvents("/api/v1/events").status != 200) return Status::Internal("an event stream was refused");
  }
  // Until both subscriptions are in place, events may be lost (PUB/SUB).
  bool joined = false;
  for (int i = 0; i < 200 && !joined; ++i) {
    const std::int64_t id = EnqueueOne(direct);
    joined = streams[0]->NextEvent(50ms).has_value() && testing::WaitFor([&] { return reference.At(id).has_value(); }, 50ms);
  }
  if (!joined) return Status::Internal("no event reached weft-web's streams");
  for (auto& s : streams) {
    while (s->NextEvent(200ms)) {
    }
  }

  std::vector<std::vector<std::pair<std::int64_t, SteadyClock::time_point>>> seen(streams.size());
  std::vector<std::thread> readers;
  for (std::size_t i = 0; i < streams.size(); ++i) {
    readers.emplace_back([&, i] {
      while (seen[i].size() < static_cast<std::size_t>(o.events)) {
        auto e = streams[i]->NextEvent(10s);
        if (!e) return;
        const auto now = SteadyClock::now();
        const json data = json::parse(e->data, nullptr, false);
        if (data.is_object() && data.value("state", "") == "queued")
          seen[i].emplace_back(data.value("task_id", std::int64_t{-1}), now);
      }
    });
  }
  for (int i = 0; i < o.events; ++i) {
    if (EnqueueOne(direct) < 0) return Status::Unavailable("debug.enqueue failed");
    std::this_thread::sleep_for(std::chrono::milliseconds(o.event_gap_ms));
  }
  for (auto& t : readers) t.join();
  std::vector<double> latencies;
  for (const auto& one : seen) {
    for (const auto& [task_id, at] : one) {
      std::optional<SteadyClock::time_point> published;
      testing::WaitFor([&] { return (published = reference.At(task_id)).has_value(); }, 5s);
      if (!published) return Status::Internal("task " + std::to_string(task_id) + "'s event never reached weftd's own subscriber");
      latencies.push_back(std::max(0.0, std::chrono::duration<double, std::milli>(at - *published).count()));
    }
  }
  if (latencies.size() != static_cast<std::size_t>(o.events) * static_cast<std::size_t>(o.streams))
    return Status::Internal("only " + std::to_string(latencies.size()) + " of " +
                            std::to_string(o.events * o.streams) + " events reached the streams");
  return latencies;
}

int Web(const std::vector<std::string>& args) {
  Options o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (i + 1 >= args.size()) return Usage("'" + a + "' needs a value");
    const std::string& v = args[++i];
    bool ok = a == "--clients"   ? ParseInt(v, 1, 256, &o.clients)
              : a == "--ms"      ? ParseInt(v, 100, 600000, &o.ms)
              : a == "--streams" ? ParseInt(v, 1, 1000, &o.streams)
              : a == "--events"  ? ParseInt(v, 1, 100000, &o.events)
                                 : false;
    if (!ok) return Usage("bad option " + a + " " + v);
  }
  Result<Paths> paths = FindPaths();
  if (!paths.ok()) {
    std::fprintf(stderr, "weft-bench web: %s\n", paths.status().message().c_str());
    return 1;
  }
  ScratchDir scratch("weft-bench-web");
  testing::WeftdOptions wo = BenchWeftd(paths->weftd, scratch.path() / "weftd");
  wo.security_toml = "api_rate_per_s = 0\n";  // one rate for both sides: weftd's own
  testing::Weftd weftd(wo, testing::Weftd::Deferred{});
  if (Status st = StartWeftd(weftd); !st.ok()) {
    std::fprintf(stderr, "weft-bench web: %s\n", st.message().c_str());
    return 1;
  }
  try {
    testing::WebOptions web_options;
    web_options.name = "weft-bench-web";
    web_options.require_login = false;
    web_options.die_with_parent = true;
    web_options.server_toml = "log_level = \"warn\"\n";
    web_options.weftd_toml = "clients = " + std::to_string(o.clients) + "\n";
    web_options.events_toml = "max_streams = " + std::to_string(o.streams + 10) + "\n";
    web_options.limits_toml = "requests_per_s = 0\n";  // the clients all come from one address
    testing::WebGateway web(weftd, web_options);

    zmq::context_t ctx(2);
    const double direct = Rate(o.clients, o.ms, [&] {
      client::Options co;
      co.endpoint = weftd.api();
      auto c = std::make_shared<client::Client>(ctx, co);
      return [c] { return c->Call("server.status").ok(); };
    });
    const double via = Rate(o.clients, o.ms, [&] {
      auto c = std::make_shared<testing::HttpConnection>(web.url());
      return [c] { return c->Send("POST", "/api/v1/server.status", "{}").status == 200; };
    });
    if (direct < 0 || via < 0) {
      std::fprintf(stderr, "weft-bench web: requests failed; weft-web's log:\n%s\n",
                   testing::Tail(web.Log(), 2000).c_str());
      return 1;
    }
    std::fprintf(stderr, "direct %.0f req/s, via weft-web %.0f req/s\n", direct, via);
    Result<std::vector<double>> latencies = EventLatencies(ctx, weftd, web, o);
    if (!latencies.ok()) {
      std::fprintf(stderr, "weft-bench web: %s\n", latencies.status().message().c_str());
      return 1;
    }
    nlohmann::ordered_json line;
    line["bench"] = "web";
    line["clients"] = o.clients;
    line["direct_requests_per_s"] = std::llround(direct);
    line["gateway_requests_per_s"] = std::llround(via);
    line["ratio"] = std::round(via / direct * 1000) / 1000;
    line["target_ratio"] = kTargetRatio;
    line["streams"] = o.streams;
    line["events"] = o.events;
    line["event_p50_ms"] = std::round(Quantile(*latencies, 0.5) * 10) / 10;
    line["event_p99_ms"] = std::round(Quantile(*latencies, 0.99) * 10) / 10;
    line["target_p99_ms"] = kTargetP99Ms;
    std::printf("%s\n", line.dump().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft-bench web: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace

WEFT_BENCH("web", "requests/s through weft-web vs straight to weftd; event latency to 100 streams", Web);

}  // namespace weft::bench

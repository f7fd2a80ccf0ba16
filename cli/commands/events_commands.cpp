// weft events: follows weftd's events endpoint (docs/protocol.md, `events`),
// one line per event, until interrupted. A restart of weftd is survived: the
// SUB socket reconnects by itself (ZeroMQ sends the subscriptions again), and
// while weftd is away the command says so, and asks it again where its events
// endpoint is, in case it came back on another port.
#include <chrono>
#include <cstring>
#include <ctime>
#include <memory>
#include <optional>
#include <set>

#include "weft/cli/commands.hpp"
#include "weft/cli/context.hpp"
#include "weft/cli/format.hpp"
#include "weft/cli/table.hpp"
#include "weft/common/curve.hpp"

namespace weft::cli {
namespace {

constexpr int kPollMs = 200;
constexpr std::int64_t kAskAgainMs = 2000;  // while away: how often to ask weftd where its events are

std::string IdText(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<std::int64_t>());
  return "";
}

std::string UtcTime(std::int64_t ms) {
  const std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &tm);
  return text;
}

// One line for people: what happened, without the topic's plumbing.
std::string Describe(const json& e) {
  const std::string type = e.value("type", "");
  std::string line;
  if (type == "job") {
    line = "job " + IdText(e["job_id"]) + " " + e.value("operation", "") + " " + e.value("status", "") + ": " +
           std::to_string(e.value("succeeded", 0)) + "/" + std::to_string(e.value("total", 0)) + " done, " +
           std::to_string(e.value("failed", 0)) + " failed (cluster " + IdText(e["cluster_id"]) + ")";
  } else if (type == "cluster") {
    line = "cluster " + e.value("name", "") + " (" + IdText(e["cluster_id"]) + ") " + e.value("status", "");
  } else if (type == "task") {
    line = "task " + IdText(e["task_id"]) + " " + e.value("action", "") + " " + e.value("plugin", "") + " " +
           e.value("state", "");
    if (e.value("attempt", 0) > 0) line += " (attempt " + std::to_string(e.value("attempt", 0)) + ")";
    if (!e.value("host_id", "").empty()) line += " on host " + e.value("host_id", "");
  } else if (type == "task.progress") {
    line = "task " + IdText(e["task_id"]) + " at " + std::to_string(e.value("percent", 0)) + "%";
  } else if (type == "host") {
    line = "host " + e.value("host_id", "") + " " + e.value("event", "");
  } else {
    line = type.empty() ? "event" : type;
  }
  if (!e.value("message", "").empty()) line += ": " + e.value("message", "");
  return UtcTime(e.value("at_ms", std::int64_t{0})) + "  " + line;
}

// weftd's events endpoint as this client can reach it: a wildcard address
// (bound to every interface) becomes the api endpoint's host.
Result<std::string> EventsEndpoint(Context& ctx, int timeout_ms) {
  WEFT_ASSIGN_OR_RETURN(json status, ctx.Call("server.status", json::object(), {}, timeout_ms));
  std::string events = status.value("endpoints", json::object()).value("events", "");
  if (events.empty()) return Status::NotFound("weftd did not say where its events endpoint is");
  for (const char* any : {"tcp://0.0.0.0:", "tcp://*:", "tcp://[::]:"}) {
    const std::string wildcard = any;
    if (events.rfind(wildcard, 0) != 0) continue;
    const std::string api = ctx.server();
    const std::size_t host = api.find("://");
    const std::size_t port = api.rfind(':');
    if (host != std::string::npos && port != std::string::npos && port > host + 3)
      events = "tcp://" + api.substr(host + 3, port - host - 3) + ":" + events.substr(wildcard.size());
  }
  return events;
}

// What to subscribe to, and which events of those to show.
struct Filter {
  std::vector<std::string> prefixes;
  std::string job_id;              // with --job: only that job's events
  std::set<std::int64_t> task_ids;  // ...and its tasks'
  std::set<std::int64_t> others;    // tasks of the cluster's other jobs, asked about once
};

Result<Filter> MakeFilter(Context& ctx, const ParsedArgs& args) {
  Filter f;
  std::string tenant = ctx.options().tenant;
  if (tenant.empty()) tenant = ctx.credential() && !ctx.credential()->tenant.empty() ? ctx.credential()->tenant : "default";
  std::string cluster_id;
  if (args.Has("--job")) {
    WEFT_ASSIGN_OR_RETURN(json job, ctx.Call("job.get", {{"job", args.Get("--job")}}));
    f.job_id = IdText(job["job"]["id"]);
    cluster_id = IdText(job["job"]["cluster_id"]);
    for (const json& t : job["job"].value("tasks", json::array())) f.task_ids.insert(t.value("id", std::int64_t{0}));
  }
  if (args.Has("--cluster")) {
    WEFT_ASSIGN_OR_RETURN(json cluster, ctx.Call("cluster.get", {{"cluster", args.Get("--cluster")}}));
    const std::string id = IdText(cluster["cluster"]["id"]);
    if (!cluster_id.empty() && id != cluster_id)
      return ctx.UsageError("job " + f.job_id + " is not a job of cluster '" + args.Get("--cluster") + "'");
    cluster_id = id;
  }
  if (cluster_id.empty()) {
    // Everything this caller may see (weftd narrows it to the caller's role).
    f.prefixes.push_back(ctx.options().tenant.empty() ? "" : tenant + "/");
    return f;
  }
  for (const char* kind : {"job/", "cluster/", "task/"}) f.prefixes.push_back(tenant + "/" + kind + cluster_id + "/");
  return f;
}

bool Shown(Context& ctx, Filter& f, const json& e) {
  if (f.job_id.empty()) return true;
  const std::string type = e.value("type", "");
  if (type == "job") return IdText(e["job_id"]) == f.job_id;
  if (type != "task" && type != "task.progress") return true;  // the cluster's own transitions
  const std::int64_t id = e.value("task_id", std::int64_t{0});
  if (!f.task_ids.count(id) && !f.others.count(id)) {
    // A task the job added since (a node created again): ask once more.
    Result<json> job = ctx.Call("job.get", {{"job", f.job_id}});
    if (job.ok())
      for (const json& t : (*job)["job"].value("tasks", json::array()))
        f.task_ids.insert(t.value("id", std::int64_t{0}));
    if (!f.task_ids.count(id)) f.others.insert(id);
  }
  return f.task_ids.count(id) != 0;
}

class Subscriber {
 public:
  Subscriber(zmq::context_t& zmq, Context& ctx, const Filter& filter) : zmq_(zmq), ctx_(ctx), filter_(filter) {}

  Status Open(const std::string& endpoint) {
    try {
      sub_.reset();  // before its monitor
      monitor_.reset();
      sub_ = std::make_unique<zmq::socket_t>(zmq_, zmq::socket_type::sub);
      sub_->set(zmq::sockopt::linger, 0);
      if (ctx_.credential()) curve::SetClientKeys(*sub_, ctx_.credential()->server_key, ctx_.credential()->keys);
      // Disconnects and reconnects are read from a monitor, to tell the user.
      const std::string address = "inproc://weft-events-monitor-" + std::to_string(++opened_);
      if (zmq_socket_monitor(sub_->handle(), address.c_str(), ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED) != 0)
        return Status::Internal("cannot watch the events connection: " + std::string(zmq_strerror(zmq_errno())));
      monitor_ = std::make_unique<zmq::socket_t>(zmq_, zmq::socket_type::pair);
      monitor_->set(zmq::sockopt::linger, 0);
      monitor_->connect(address);
      for (const std::string& p : filter_.prefixes) sub_->set(zmq::sockopt::subscribe, p);
      sub_->connect(endpoint);
    } catch (const zmq::error_t& e) {
      return Status::Invalid("cannot follow weftd's events at " + endpoint + ": " + e.what());
    }
    endpoint_ = endpoint;
    return Status::Ok();
  }

  zmq::socket_t& sub() { return *sub_; }
  zmq::socket_t& monitor() { return *monitor_; }
  const std::string& endpoint() const { return endpoint_; }

  // The connection events waiting on the monitor: true when connected, false when not, nullopt when none came.
  std::optional<bool> ReadMonitor() {
    std::optional<bool> state;
    while (true) {
      zmq::message_t head, address;
      if (!monitor_->recv(head, zmq::recv_flags::dontwait)) return state;
      if (head.more()) (void)monitor_->recv(address, zmq::recv_flags::none);
      if (head.size() < sizeof(std::uint16_t)) continue;
      std::uint16_t event = 0;
      std::memcpy(&event, head.data(), sizeof event);
      if (event == ZMQ_EVENT_CONNECTED) state = true;
      if (event == ZMQ_EVENT_DISCONNECTED) state = false;
    }
  }

 private:
  zmq::context_t& zmq_;
  Context& ctx_;
  const Filter& filter_;
  // The monitor first: it must close after the socket it watches is gone.
  std::unique_ptr<zmq::socket_t> monitor_;
  std::unique_ptr<zmq::socket_t> sub_;
  std::string endpoint_;
  int opened_ = 0;
};

Status Events(Context& ctx, const ParsedArgs& args) {
  WEFT_ASSIGN_OR_RETURN(Filter filter, MakeFilter(ctx, args));
  WEFT_ASSIGN_OR_RETURN(std::string endpoint, EventsEndpoint(ctx, ctx.options().timeout_ms));
  zmq::context_t zmq(1);
  Subscriber subscriber(zmq, ctx, filter);
  WEFT_RETURN_IF_ERROR(subscriber.Open(endpoint));
  bool connected = false, ever = false;
  auto asked = std::chrono::steady_clock::now();
  while (true) {
    zmq::pollitem_t items[] = {{subscriber.sub().handle(), 0, ZMQ_POLLIN, 0},
                               {subscriber.monitor().handle(), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 2, std::chrono::milliseconds(kPollMs));
    if (std::optional<bool> now = subscriber.ReadMonitor(); now && *now != connected) {
      connected = *now;
      if (connected) {
        ctx.err() << (ever ? "reconnected to weftd's events at " : "following weftd's events at ")
                  << subscriber.endpoint() << '\n' << std::flush;
        ever = true;
      } else {
        ctx.err() << "weftd's events endpoint went away; reconnecting (events meanwhile are missed)\n" << std::flush;
        asked = std::chrono::steady_clock::now();
      }
    }
    if (!connected && ever && std::chrono::steady_clock::now() - asked >= std::chrono::milliseconds(kAskAgainMs)) {
      // weftd may be back with its events on another port (an endpoint configured with port `*`).
      asked = std::chrono::steady_clock::now();
      Result<std::string> now = EventsEndpoint(ctx, 1000);
      if (now.ok() && *now != subscriber.endpoint()) WEFT_RETURN_IF_ERROR(subscriber.Open(*now));
    }
    while (true) {
      zmq::message_t topic, body;
      if (!subscriber.sub().recv(topic, zmq::recv_flags::dontwait)) break;
      if (!topic.more() || !subscriber.sub().recv(body, zmq::recv_flags::none)) continue;
      json e = json::parse(body.to_string(), nullptr, false);
      if (!e.is_object() || !Shown(ctx, filter, e)) continue;
      if (ctx.json_output()) {
        e["topic"] = topic.to_string();
        ctx.out() << e.dump() << '\n' << std::flush;
      } else {
        ctx.out() << Printable(Describe(e)) << '\n' << std::flush;
      }
    }
  }
}

}  // namespace

void RegisterEventsCommands(CommandTable& table) {
  table.Add({.noun = "events",
             .verb = "",
             .summary = "Follow job, cluster, task and host events as they happen.",
             .description =
                 "One line per event until interrupted (-o json: one JSON object per line, with\n"
                 "its topic). Without options: every event you may see (a tenant admin their\n"
                 "tenant's, a user their own clusters'). When weftd restarts it says so and\n"
                 "reconnects by itself; events published meanwhile are missed (read the state\n"
                 "back with `weft job show`).",
             .flags = {{.name = "--cluster", .value_name = "C", .help = "only this cluster's events (name or id)"},
                       {.name = "--job", .value_name = "J", .help = "only this job's events and its tasks'"}},
             .args = {},
             .handler = &Events});
}

}  // namespace weft::cli

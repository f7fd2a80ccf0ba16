// weft events: follows weftd's events endpoint (docs/protocol.md, `events`),
// one line per event, until interrupted. A restart of weftd is survived: the
// SUB socket reconnects by itself (ZeroMQ sends the subscriptions again), and
// while weftd is away the command says so, and asks it again where its events
// endpoint is, in case it came back on another port. A handshake that failed
// (a key refused, a server key that does not match) ends ZeroMQ's own
// reconnecting for good, so then the command opens a new socket itself, and
// keeps doing so until a handshake succeeds. While the events are quiet it asks
// now and then too: with several weftd (`--server a,b`) the leader may have
// changed, and the command moves to the new one's events. Every event carries its topic's
// sequence number and the numbering's incarnation: a number skipped, or a new
// incarnation (weftd restarted, another weftd took the lead), is told in one
// line on stderr, since the state must then be read again.
#include <chrono>
#include <cstring>
#include <ctime>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "weft/cli/commands.hpp"
#include "weft/cli/context.hpp"
#include "weft/cli/format.hpp"
#include "weft/cli/table.hpp"
#include "weft/client/events.hpp"
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
  } else if (type == "cluster.created") {
    line = "cluster " + e.value("name", "") + " (" + IdText(e["cluster_id"]) + ") created by " + e.value("owner", "") +
           ", job " + IdText(e["job_id"]);
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

// weftd's events endpoint as this client can reach it (the leader's, with a
// wildcard address made the host of the api endpoint that answered).
Result<std::string> EventsEndpoint(Context& ctx, int timeout_ms) {
  WEFT_ASSIGN_OR_RETURN(json status, ctx.Call("server.status", json::object(), {}, timeout_ms));
  return client::EventsEndpointOf(status, ctx.endpoint());
}

// What to subscribe to, and which events of those to show.
struct Filter {
  std::vector<std::string> prefixes;
  bool plain = false;              // no --cluster, no --job: follows clusters made later too
  std::string job_id;              // with --job: only that job's events
  std::set<std::int64_t> task_ids;  // ...and its tasks'
  std::set<std::int64_t> others;    // tasks of the cluster's other jobs, asked about once
};

Result<Filter> MakeFilter(Context& ctx, const ParsedArgs& args) {
  Filter f;
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
    f.prefixes.push_back(ctx.options().tenant.empty() ? "" : ctx.options().tenant + "/");
    f.plain = true;
    return f;
  }
  // The credential's tenant is known once a call has loaded it (the lookups above).
  std::string tenant = ctx.options().tenant;
  if (tenant.empty()) tenant = ctx.credential() && !ctx.credential()->tenant.empty() ? ctx.credential()->tenant : "default";
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
      if (zmq_socket_monitor(sub_->handle(), address.c_str(),
                             ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED |
                                 ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                                 ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) != 0)
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
    opened_at_ = std::chrono::steady_clock::now();
    tcp_ = false;
    return Status::Ok();
  }

  // Sends the subscriptions again: weftd decides anew what they cover (a user's:
  // the clusters they own now).
  void Resubscribe() {
    try {
      for (const std::string& p : filter_.prefixes) sub_->set(zmq::sockopt::subscribe, p);
    } catch (const zmq::error_t& e) {
      ctx_.err() << "cannot subscribe again to weftd's events: " << e.what() << '\n' << std::flush;
    }
  }

  zmq::socket_t& sub() { return *sub_; }
  zmq::socket_t& monitor() { return *monitor_; }
  const std::string& endpoint() const { return endpoint_; }
  std::chrono::steady_clock::time_point opened_at() const { return opened_at_; }

  // What the monitor said since the last look.
  struct Seen {
    std::optional<bool> connected;  // true: a handshake succeeded; false: the connection went away
    std::optional<std::string> failed;  // a handshake failed (why): this socket will not try again
    bool tcp = false;                   // a TCP connection is up (its handshake may still be waiting)
  };
  Seen ReadMonitor() {
    Seen seen;
    seen.tcp = tcp_;
    while (true) {
      zmq::message_t head, address;
      if (!monitor_->recv(head, zmq::recv_flags::dontwait)) break;
      if (head.more()) (void)monitor_->recv(address, zmq::recv_flags::none);
      if (head.size() < sizeof(std::uint16_t) + sizeof(std::uint32_t)) continue;
      std::uint16_t event = 0;
      std::uint32_t value = 0;
      std::memcpy(&event, head.data(), sizeof event);
      std::memcpy(&value, static_cast<const char*>(head.data()) + sizeof event, sizeof value);
      switch (event) {
        case ZMQ_EVENT_CONNECTED:
          seen.tcp = true;
          break;
        case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
          seen.connected = true;
          seen.failed.reset();
          break;
        case ZMQ_EVENT_DISCONNECTED:
          seen.tcp = false;
          seen.connected = false;
          break;
        case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
          seen.tcp = false;
          seen.failed = "weftd refused the key (ZAP status " + std::to_string(value) + ")";
          break;
        case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
        case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
          seen.tcp = false;
          seen.failed = "the handshake failed (weftd's key not the one in the credential?)";
          break;
        default:
          break;
      }
    }
    tcp_ = seen.tcp;
    return seen;
  }

 private:
  zmq::context_t& zmq_;
  Context& ctx_;
  const Filter& filter_;
  // The monitor first: it must close after the socket it watches is gone.
  std::unique_ptr<zmq::socket_t> monitor_;
  std::unique_ptr<zmq::socket_t> sub_;
  std::string endpoint_;
  std::chrono::steady_clock::time_point opened_at_{};
  bool tcp_ = false;
  int opened_ = 0;
};

Status Events(Context& ctx, const ParsedArgs& args) {
  WEFT_ASSIGN_OR_RETURN(Filter filter, MakeFilter(ctx, args));
  WEFT_ASSIGN_OR_RETURN(std::string endpoint, EventsEndpoint(ctx, ctx.options().timeout_ms));
  zmq::context_t zmq(1);
  Subscriber subscriber(zmq, ctx, filter);
  WEFT_RETURN_IF_ERROR(subscriber.Open(endpoint));
  bool connected = false, ever = false, away_said = false;
  // The socket gave up (a failed handshake): open a new one at the next try.
  bool dead = false;
  auto asked = std::chrono::steady_clock::now();
  client::EventSequence sequence;
  auto heard = std::chrono::steady_clock::now();  // the last event, or the last look at where they are
  auto went_away = [&](const std::string& why) {
    if (away_said) return;  // once per outage, not once per try
    away_said = true;
    ctx.err() << "weftd's events endpoint went away" << (why.empty() ? "" : " (" + why + ")")
              << "; reconnecting (events meanwhile are missed)\n"
              << std::flush;
  };
  while (true) {
    zmq::pollitem_t items[] = {{subscriber.sub().handle(), 0, ZMQ_POLLIN, 0},
                               {subscriber.monitor().handle(), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 2, std::chrono::milliseconds(kPollMs));
    const Subscriber::Seen seen = subscriber.ReadMonitor();
    if (seen.connected && *seen.connected != connected) {
      connected = *seen.connected;
      if (connected) {
        ctx.err() << (ever ? "reconnected to weftd's events at " : "following weftd's events at ")
                  << subscriber.endpoint() << '\n' << std::flush;
        ever = true;
        away_said = false;
        dead = false;
      } else {
        went_away("");
        asked = std::chrono::steady_clock::now();
      }
    }
    if (seen.failed && !connected) {
      dead = true;
      if (ever) went_away(*seen.failed);
      else if (!away_said) {
        away_said = true;
        ctx.err() << "cannot follow weftd's events yet: " << *seen.failed << "; trying again\n" << std::flush;
      }
    }
    const auto now = std::chrono::steady_clock::now();
    // Away, or connected but quiet: a weftd that stopped leading stays connected and publishes nothing.
    const bool quiet = now - heard >= std::chrono::milliseconds(kAskAgainMs);
    if ((!connected || quiet) && now - asked >= std::chrono::milliseconds(kAskAgainMs)) {
      // weftd may be back with its events on another port (an endpoint configured with port `*`),
      // or another weftd leads now.
      asked = now;
      Result<std::string> where = EventsEndpoint(ctx, 1000);
      // A key weftd no longer knows (revoked, its user or tenant deleted) never gets in again.
      if (!where.ok() && where.status().code() == Code::kDenied)
        return where.status().WithContext("stopped following weftd's events");
      const bool moved = where.ok() && *where != subscriber.endpoint();
      if (moved && connected) {
        ctx.err() << "weftd's events are now published at " << *where << " (another weftd leads); following there\n"
                  << std::flush;
        connected = false;
      }
      // A socket whose handshake failed never tries again by itself; one with no
      // connection up after a while is opened again too, whatever went wrong.
      const bool stuck = !seen.tcp && now - subscriber.opened_at() >= std::chrono::milliseconds(kAskAgainMs);
      if (moved || dead || stuck) {
        WEFT_RETURN_IF_ERROR(subscriber.Open(where.ok() ? *where : subscriber.endpoint()));
        dead = false;
      }
    }
    while (true) {
      zmq::message_t topic, body;
      if (!subscriber.sub().recv(topic, zmq::recv_flags::dontwait)) break;
      if (!topic.more() || !subscriber.sub().recv(body, zmq::recv_flags::none)) continue;
      json e = json::parse(body.to_string(), nullptr, false);
      if (!e.is_object()) continue;
      heard = std::chrono::steady_clock::now();
      const std::string name = topic.to_string();
      if (const client::EventSequence::Seen seen = sequence.Check(name, e); seen.gap()) {
        ctx.err() << "events were missed ("
                  << (seen.restarted ? std::string("weftd's numbering started anew: a restart or a new leader")
                                     : std::to_string(seen.missed) + " on " + name)
                  << "); read the state again (weft job show, weft cluster get)\n"
                  << std::flush;
      }
      // A cluster made since the subscription (told on its owner's topic): the
      // subscription, sent again, covers it too.
      if (filter.plain && e.value("type", "") == "cluster.created") subscriber.Resubscribe();
      if (!Shown(ctx, filter, e)) continue;
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
                 "tenant's, a user those of the clusters they own, and of each cluster they\n"
                 "create later from just after its `created by` line: the job's first events\n"
                 "may come before, see `weft job show`). When weftd restarts it says so and\n"
                 "reconnects by itself; a key weftd no longer knows (revoked) ends it with exit\n"
                 "code 1. Events missed (published while away, or dropped for a slow reader)\n"
                 "are told in one line on stderr: read the state back then with `weft job show`\n"
                 "or `weft cluster get`.",
             .flags = {{.name = "--cluster", .value_name = "C", .help = "only this cluster's events (name or id)"},
                       {.name = "--job", .value_name = "J", .help = "only this job's events and its tasks'"}},
             .args = {},
             .handler = &Events});
}

}  // namespace weft::cli

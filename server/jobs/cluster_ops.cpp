#include "weft/server/jobs/cluster_ops.hpp"

#include <algorithm>
#include <charconv>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "weft/server/api/cursor.hpp"
#include "weft/server/catalog/catalog_ops.hpp"
#include "weft/catalog/catalog.hpp"
#include "weft/common/json_fields.hpp"
#include "weft/common/json_parse.hpp"
#include "weft/common/lifecycle.hpp"
#include "weft/common/text.hpp"
#include "weft/common/wire.hpp"
#include "weft/planner/macros.hpp"
#include "weft/solver/solver.hpp"

namespace weft::jobs {
namespace {

using api::Call;
using api::Effect;
using api::Fields;
using api::Endpoint;
using api::Principal;
using api::Response;
using api::Role;
using api::Router;

using catalog::Kind;

using catalog::kMaxClusterSize;
using catalog::kSolveTimeMs;
constexpr std::int64_t kMaxLeaseMs = 100LL * 365 * 24 * 3600 * 1000;
// job.list: up to this many jobs, their clusters' names are read cluster by cluster.
constexpr std::size_t kJobsNamedOneByOne = 100;
// The largest page of cluster.list and job.list (docs/protocol.md, "Paging"), and their cursors' letters.
constexpr std::int64_t kMaxListed = 100000;
constexpr char kClusterCursor = 'c';
constexpr char kJobCursor = 'j';

// A row's id as a number (ids are decimal strings); 0 for anything else.
std::int64_t IdNumber(std::string_view id) {
  std::int64_t n = 0;
  const char* end = id.data() + id.size();
  return std::from_chars(id.data(), end, n).ptr == end ? n : 0;
}

// A duration as weft prints every one ("7d", "30d 14h", "6d 23h 59m").
std::string LeaseText(std::int64_t ms) { return DurationText(ms); }

// body.lease_ms, with an error in the user's words.
Result<std::int64_t> LeaseMs(const json& body, std::int64_t min) {
  const json& v = body["lease_ms"];
  if (!v.is_number_integer() || v.get<std::int64_t>() < min || v.get<std::int64_t>() > kMaxLeaseMs ||
      (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(kMaxLeaseMs)))
    return Status::Invalid("lease_ms must be a whole number of milliseconds from " + std::to_string(min) +
                           (min == 0 ? " (no lease)" : "") + " to " + std::to_string(kMaxLeaseMs) +
                           " (100 years), got " + jsonf::Brief(v) +
                           (v.is_string() ? " (a duration such as 1d is what the CLI's --lease takes)" : ""));
  return v.get<std::int64_t>();
}

json ParseOr(const std::string& text, json fallback) {
  json doc = wire::Parse(text);
  if (doc.is_discarded()) return fallback;
  return doc;  // moved, not copied as by `?:` of two names
}

// A task's `after` as the job engine writes it ("[12,13]": ids without sign,
// leading zero or space, which wire::Dump of the parsed list writes back the
// same), read without making a json tree. False for any other text.
bool ReadIdList(std::string_view text, std::vector<std::int64_t>* ids) {
  ids->clear();
  if (text.size() < 2 || text.front() != '[' || text.back() != ']') return false;
  const std::size_t end = text.size() - 1;
  std::size_t i = 1;
  if (i == end) return true;
  while (true) {
    const std::size_t start = i;
    while (i < end && text[i] >= '0' && text[i] <= '9') ++i;
    const std::size_t digits = i - start;
    if (digits == 0 || digits > 18 || (digits > 1 && text[start] == '0')) return false;
    std::int64_t id = 0;
    std::from_chars(text.data() + start, text.data() + i, id);
    ids->push_back(id);
    if (i == end) return true;
    if (text[i] != ',') return false;
    ++i;
  }
}

ClusterState StateOf(const store::ClusterRecord& c) {
  ClusterState s;
  s.spec = ParseOr(c.spec_json, json::object());
  s.layout = ParseOr(c.layout_json, json{{"nodes", json::array()}});
  s.status = c.status;
  return s;
}

std::set<std::string> ServicesOn(const json& layout) {
  std::set<std::string> out;
  for (const json& n : layout.value("nodes", json::array()))
    for (const json& s : n.value("services", json::array()))
      if (s.is_string()) out.insert(s.get<std::string>());
  return out;
}

// The status a cluster has once `op` succeeded: `stopped` after a stop of every
// service, and it stays so until an operation starts services again (start,
// restart, a rollback or a reconfigure with restart); otherwise `active`.
std::string TargetStatus(JobOperation op, const std::string& now, const json& body) {
  const bool every_service = !body.contains("services") || body["services"].is_null();
  const bool restarts =
      op == JobOperation::kStart || op == JobOperation::kRestart || op == JobOperation::kRollback ||
      (op == JobOperation::kReconfigure && body.contains("restart") && body["restart"] == true);
  ClusterStatus status = ClusterStatus::kActive;
  if (op == JobOperation::kStop && every_service) {
    status = ClusterStatus::kStopped;
  } else if (!restarts && ClusterStatusFrom(now) == ClusterStatus::kStopped) {
    status = ClusterStatus::kStopped;
  }
  return std::string(ToString(status));
}

bool Terminated(const store::ClusterRecord& c) { return ClusterStatusFrom(c.status) == ClusterStatus::kTerminated; }

// From the record's summary fields (the store keeps them beside spec and
// layout), so that a list of clusters parses neither.
json ClusterSummary(const store::ClusterRecord& c) {
  return {{"id", c.id},
          {"name", c.name},
          {"owner", c.owner},
          {"status", c.status},
          {"template", c.template_name},
          {"provider", c.provider_name},
          {"size", c.size},
          {"services", c.services},
          {"created_at_ms", c.created_at_ms},
          {"updated_at_ms", c.updated_at_ms},
          {"expire_at_ms", c.expire_at_ms},
          {"latest_job", c.latest_job}};
}

// `key` (the text before a value: punctuation and the quoted name) and a value,
// appended to JSON text written straight out.
void AppendNumber(std::string& out, const char* key, std::int64_t value) {
  out += key;
  char digits[24];  // an int64 has at most 19 digits and a sign
  const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, value);
  (void)ec;  // the buffer always holds it
  out.append(digits, end);
}
void AppendText(std::string& out, const char* key, std::string_view value) {
  out += key;
  wire::AppendJsonString(out, value);
}

// ClusterSummary(c) as JSON text, the same bytes as wire::Dump of it (keys in
// nlohmann's order), written straight out: cluster.list of a thousand
// clusters built and freed a tree of about 25 allocations per cluster, most of
// the 15 ms the reactor spent on it.
void AppendClusterSummary(std::string& out, const store::ClusterRecord& c) {
  AppendNumber(out, "{\"created_at_ms\":", c.created_at_ms);
  AppendNumber(out, ",\"expire_at_ms\":", c.expire_at_ms);
  AppendText(out, ",\"id\":", c.id);
  AppendText(out, ",\"latest_job\":", c.latest_job);
  AppendText(out, ",\"name\":", c.name);
  AppendText(out, ",\"owner\":", c.owner);
  AppendText(out, ",\"provider\":", c.provider_name);
  out += ",\"services\":[";
  for (std::size_t i = 0; i < c.services.size(); ++i) {
    if (i > 0) out += ',';
    wire::AppendJsonString(out, c.services[i]);
  }
  out += ']';
  AppendNumber(out, ",\"size\":", c.size);
  AppendText(out, ",\"status\":", c.status);
  AppendText(out, ",\"template\":", c.template_name);
  AppendNumber(out, ",\"updated_at_ms\":", c.updated_at_ms);
  out += '}';
}

json JobSummary(const store::JobRecord& j) {
  return {{"id", j.id},
          {"cluster_id", j.cluster_id},
          {"operation", j.operation},
          {"status", j.status},
          {"requested_by", j.requested_by},
          {"message", j.message},
          {"parent_job", j.parent_job},
          {"created_at_ms", j.created_at_ms},
          {"updated_at_ms", j.updated_at_ms},
          {"finished_at_ms", j.finished_at_ms}};
}

// The lease rules of a cluster's template copy; nullopt when it has none.
std::optional<catalog::LeaseDuration> LeaseOf(const json& spec) {
  if (!spec.contains("template")) return std::nullopt;
  Result<catalog::Parsed<catalog::ClusterTemplate>> t = catalog::ParseClusterTemplate(spec["template"]);
  if (!t.ok() || !t->entity.lease) return std::nullopt;
  return t->entity.lease;
}

class ClusterOps {
 public:
  // `engine` null: only the reads are served (on the api front's thread, from a store connection that never
  // writes, whose cluster summaries learn of the reactor's writes from the front: ClustersWrittenElsewhere).
  ClusterOps(store::Store& store, jobs::JobEngine* engine, const Clock& clock, LivePlugins live_plugins,
             catalog::PlanBounds plan_bounds = {})
      : store_(store),
        engine_(engine),
        clock_(clock),
        live_plugins_(std::move(live_plugins)),
        plan_bounds_(plan_bounds) {}

  Response Create(const Call& call) {
    const json& body = call.request->body;
    if (!body.is_object()) return Response::Error(jsonf::RequireObject(body, "body"));
    WEFT_TRY_ASSIGN(name, jsonf::String(body, "name", ""));
    if (!catalog::IsValidName(name))
      return Response::Error(Status::Invalid("a cluster name must be 1 to 128 characters of A-Z a-z 0-9 . _ -, starting "
                                             "with a letter or digit; got " + jsonf::Brief(body["name"])));
    WEFT_TRY_ASSIGN(template_name, jsonf::String(body, "template", ""));
    WEFT_TRY_ASSIGN(size, jsonf::Int(body, "size", "", 1, kMaxClusterSize));
    WEFT_TRY_ASSIGN(dry_run, jsonf::Bool(body, "dry_run", "", false));
    if (std::optional<Response> refused = plan_bounds_.RefuseNodes(size, "size"); dry_run && refused)
      return std::move(*refused);  // before the solve: see DryRun
    WEFT_TRY_ASSIGN(summary, SummaryOption(body, dry_run));
    WEFT_TRY_ASSIGN(options, JobOptions(body));
    solver::Overrides overrides;
    json overrides_json = json::object();
    for (const char* key : {"provider", "hardwaretype", "imagetype"}) {
      if (!body.contains(key) || body[key].is_null()) continue;
      WEFT_TRY_ASSIGN(value, jsonf::String(body, key, ""));
      std::string_view k = key;
      (k == "provider" ? overrides.provider : k == "hardwaretype" ? overrides.hardwaretype : overrides.imagetype) =
          value;
      overrides_json[key] = value;
    }
    if (body.contains("config") && !body["config"].is_null() && !body["config"].is_object())
      return Response::Error(jsonf::RequireObject(body["config"], "config"));

    // One lookup by name, not a read of every cluster: with a thousand clusters
    // that read made each create slower than the last.
    WEFT_TRY_ASSIGN(same_name, store_.FindCluster(call.principal.tenant, name));
    if (same_name && same_name->name == name && !Terminated(*same_name)) {
      // Another user's cluster is not shown, not even its id: to this caller its
      // cluster.get is NOT_FOUND, and deleting it is not theirs to do.
      if (!Visible(call, *same_name))
        return Response::Error(Status::Conflict("cluster name '" + name + "' is taken by a cluster you cannot see "
                                                "(another user's in tenant '" + call.principal.tenant +
                                                "'); choose another name"),
                               json{{"name", name}, {"visible", false}});
      return Response::Error(Status::Conflict("cluster '" + name + "' already exists (id " + same_name->id + ", " +
                                              same_name->status + "); delete it first or choose another name"),
                             json{{"name", name}, {"cluster_id", same_name->id}, {"status", same_name->status},
                                  {"visible", true}});
    }

    WEFT_TRY_ASSIGN(latest, catalogs_.Get(call.principal.tenant));
    const catalog::Catalog& cat = *latest;
    const catalog::ClusterTemplate* tmpl = cat.FindClusterTemplate(template_name);
    if (!tmpl)
      return Response::Error(Status::NotFound("clustertemplate '" + template_name + "' does not exist in tenant '" +
                                              call.principal.tenant + "'; clustertemplate.list (weft clustertemplate list) "
                                              "shows the templates"));
    // As cluster.plan checks it (a name twice, an empty list are refused).
    WEFT_TRY_ASSIGN(services, catalog::RequestedServices(body, *tmpl));
    if (services) {
      overrides.services = *services;
      overrides_json["services"] = *services;
    }
    json config = tmpl->defaults.config.is_object() ? tmpl->defaults.config : json::object();
    if (body.contains("config") && body["config"].is_object()) config.merge_patch(body["config"]);

    std::int64_t lease_ms = tmpl->lease ? tmpl->lease->initial_ms : 0;
    if (body.contains("lease_ms") && !body["lease_ms"].is_null()) {
      WEFT_TRY_ASSIGN(asked, LeaseMs(body, 0));
      const std::int64_t max = tmpl->lease ? tmpl->lease->max_ms : 0;
      if (max > 0 && (asked == 0 || asked > max))
        return Response::Error(Status::Invalid(
            (asked ? "a lease of " + LeaseText(asked) : std::string("no lease (lease_ms 0: a cluster that never expires)")) +
            " is longer than template '" + template_name + "' allows (" + LeaseText(max) +
            ", administration.leaseduration.max)"));
      lease_ms = asked;
    }

    solver::SolveRequest req;
    req.cluster_name = name;
    req.size = size;
    req.overrides = overrides;
    WEFT_TRY_ASSIGN(layout, Solve(cat, *tmpl, req));
    WEFT_TRY_ASSIGN(spec, BuildSpec(latest, call.principal.tenant, *tmpl, overrides, layout, config));
    spec["overrides"] = overrides_json;

    std::vector<store::ClusterRecord> clusters;  // read only when a quota needs them
    if (call.principal.max_clusters > 0 || call.principal.max_nodes > 0) {
      WEFT_TRY_ASSIGN(all, store_.ListClusters(call.principal.tenant, false));
      clusters = std::move(all);
    }
    json quota;
    if (Status s = CheckQuota(call, clusters, 1, static_cast<std::int64_t>(layout.nodes.size()), "", &quota); !s.ok())
      return Response::Error(s, std::move(quota));

    NewJob job;
    job.tenant = call.principal.tenant;
    job.operation = ToString(JobOperation::kCreate);
    job.requested_by = call.principal.user;
    job.options = options;
    job.target = {spec, catalog::LayoutToJson(layout), std::string(ToString(ClusterStatus::kActive))};
    if (dry_run) {
      job.before.spec = std::move(spec);
      return DryRun(job, summary);
    }

    store::ClusterRecord c;
    c.tenant = call.principal.tenant;
    c.name = name;
    c.owner = call.principal.user;
    c.status = ToString(ClusterStatus::kPending);
    c.spec_json = wire::Dump(spec);
    c.layout_json = wire::Dump(job.target.layout);
    c.created_at_ms = clock_.NowMs();
    c.expire_at_ms = lease_ms > 0 ? c.created_at_ms + lease_ms : 0;
    WEFT_TRY_ASSIGN(inserted, [&]() -> Result<bool> {
      WEFT_RETURN_IF_ERROR(store_.InsertCluster(&c, spec, job.target.layout));  // no parse of the texts
      return true;
    }());
    (void)inserted;
    job.cluster_id = c.id;
    // The spec's last use: moved, as a copy of it is tens of kilobytes of tree.
    job.before =
        ClusterState{std::move(spec), {{"nodes", json::array()}}, std::string(ToString(ClusterStatus::kPending))};
    // The texts just written are the job's target and the spec it starts from: not dumped again.
    job.before_spec_text = c.spec_json;
    job.target_spec_text = std::move(c.spec_json);
    job.target_layout_text = std::move(c.layout_json);
    return Launch(std::move(job));
  }

  // Every operation on an existing cluster.
  Response Change(JobOperation op, const Call& call) {
    const json& body = call.request->body;
    if (!body.is_object()) return Response::Error(jsonf::RequireObject(body, "body"));
    WEFT_TRY_ASSIGN(found, FindCluster(call));
    store::ClusterRecord c = std::move(found);
    WEFT_TRY_ASSIGN(dry_run, jsonf::Bool(body, "dry_run", "", false));
    WEFT_TRY_ASSIGN(summary, SummaryOption(body, dry_run));
    WEFT_TRY_ASSIGN(options, JobOptions(body));
    if (Terminated(c))
      return Response::Error(Status::Conflict("cluster '" + c.name + "' is terminated; create a new one"));
    if (const std::string running = engine_->ActiveJob(c.id); !running.empty()) {
      WEFT_TRY_ASSIGN(active, store_.GetJob(running, /*with_states=*/false));
      const std::string operation = active ? active->operation : "";
      return Response::Error(Status::Conflict("cluster '" + c.name + "' has job " + running + " running" +
                                              (operation.empty() ? "" : " (" + operation + ")") +
                                              "; wait for it (job.get, `weft job watch " + running +
                                              "`) or abort it (job.abort, `weft job abort " + running + "`)"),
                             json{{"cluster_id", c.id}, {"job", running}, {"operation", operation}});
    }
    NewJob job;
    job.tenant = call.principal.tenant;
    job.cluster_id = c.id;
    job.operation = ToString(op);
    job.requested_by = call.principal.user;
    job.options = options;
    job.before = StateOf(c);
    job.target = job.before;
    job.target.status = TargetStatus(op, c.status, body);
    const json& spec = job.before.spec;
    if (std::optional<Response> refused = RefuseOnMarkedNodes(op, c, job.before.layout)) return std::move(*refused);

    if (op == JobOperation::kDelete) {
      job.target.layout = {{"nodes", json::array()}};
      job.target.status = ToString(ClusterStatus::kTerminated);
    } else if (op == JobOperation::kScale) {
      WEFT_TRY_ASSIGN(size, jsonf::Int(body, "size", "", 1, kMaxClusterSize));
      if (std::optional<Response> refused = plan_bounds_.RefuseNodes(size, "size"); dry_run && refused)
        return std::move(*refused);  // before the solve: see DryRun
      // A node a failed job was to delete ("state": "delete failed") is not one of the
      // `size` nodes: the scale deletes it again, up or down, and numbers new nodes past it.
      ClusterState kept = job.before;
      std::vector<std::string> doomed;
      kept.layout["nodes"] = json::array();
      for (const json& n : job.before.layout.value("nodes", json::array())) {
        if (IsDeleteFailed(n))
          doomed.push_back(n.value("hostname", ""));
        else
          kept.layout["nodes"].push_back(n);
      }
      if (const std::size_t now = kept.layout["nodes"].size(); doomed.empty() && size == static_cast<std::int64_t>(now))
        return Response::Error(Status::Conflict("nothing to do: cluster '" + c.name + "' already has " +
                                                std::to_string(now) + (now == 1 ? " node" : " nodes")));
      const std::set<std::string> on = ServicesOn(job.before.layout);
      WEFT_TRY_ASSIGN(layout, Resolve(call, c, kept, size, std::vector<std::string>(on.begin(), on.end()), doomed));
      if (call.principal.max_nodes > 0) {
        WEFT_TRY_ASSIGN(clusters, store_.ListClusters(call.principal.tenant, false));
        json quota;
        if (Status s = CheckQuota(call, clusters, 0, static_cast<std::int64_t>(layout.nodes.size()), c.id, &quota);
            !s.ok())
          return Response::Error(s, std::move(quota));
      }
      job.target.layout = catalog::LayoutToJson(layout);
      job.target.spec["size"] = size;
    } else if (op == JobOperation::kAddServices) {
      WEFT_TRY_ASSIGN(added, catalog::ServiceNameList(body, "services", true));
      std::set<std::string> want = ServicesOn(job.before.layout);
      for (const std::string& s : added) {
        if (want.count(s))
          return Response::Error(Status::Invalid("cluster '" + c.name + "' already runs service '" + s + "'"));
        want.insert(s);
      }
      const std::int64_t size = static_cast<std::int64_t>(job.before.layout["nodes"].size());
      WEFT_TRY_ASSIGN(layout, Resolve(call, c, job.before, size, std::vector<std::string>(want.begin(), want.end())));
      job.target.layout = catalog::LayoutToJson(layout);
      WEFT_TRY_ASSIGN(latest, catalogs_.Get(call.principal.tenant));
      for (const std::string& s : added) {
        WEFT_TRY_ASSIGN(doc, latest->GetJson(Kind::kService, s));
        job.target.spec["services"][s] = doc;
      }
      job.target.spec["overrides"]["services"] = std::vector<std::string>(want.begin(), want.end());
    } else if (op == JobOperation::kRemoveServices) {
      WEFT_TRY_ASSIGN(removed, catalog::ServiceNameList(body, "services", true));
      std::set<std::string> keep = ServicesOn(job.before.layout);
      for (const std::string& s : removed)
        if (!keep.erase(s))
          return Response::Error(Status::Invalid("cluster '" + c.name + "' does not run service '" + s + "'"));
      Status needed = CheckStillMet(job.before.spec, keep, removed);
      if (!needed.ok()) return Response::Error(needed.WithContext("cluster '" + c.name + "'"));
      for (json& n : job.target.layout["nodes"]) {
        std::vector<std::string> left;
        for (const json& s : n.value("services", json::array()))
          if (keep.count(s.get<std::string>())) left.push_back(s.get<std::string>());
        n["services"] = left;
      }
      for (const std::string& s : removed) job.target.spec["services"].erase(s);
      job.target.spec["overrides"]["services"] = std::vector<std::string>(keep.begin(), keep.end());
    } else if (op == JobOperation::kStart || op == JobOperation::kStop || op == JobOperation::kRestart) {
      // Left out (or null): every service of the cluster. An empty list is refused, as
      // cluster.create refuses one: a list built by a filter that matched nothing
      // must not stop or restart everything.
      const std::set<std::string> on = ServicesOn(job.before.layout);
      std::string every;
      for (const std::string& s : on) every += (every.empty() ? "" : ", ") + s;
      WEFT_TRY_ASSIGN(only, catalog::OptionalServiceList(
                                body, std::string(ToString(op)) + " every service of cluster '" + c.name + "' (" +
                                          (every.empty() ? std::string("it runs none") : every) + ")"));
      for (const std::string& s : only.value_or(std::vector<std::string>()))
        if (!on.count(s))
          return Response::Error(Status::Invalid("cluster '" + c.name + "' does not run service '" + s + "'"));
      job.extras.only_services = only.value_or(std::vector<std::string>());
    } else if (op == JobOperation::kReconfigure) {
      if (body.contains("config") && !body["config"].is_null()) {
        if (!body["config"].is_object()) return Response::Error(jsonf::RequireObject(body["config"], "config"));
        json config = spec.value("config", json::object());
        config.merge_patch(body["config"]);
        if (Status checked = plan_bounds_.CheckConfig(config); !checked.ok()) return Response::Error(checked);
        job.target.spec["config"] = config;
      }
      WEFT_TRY_ASSIGN(restart, jsonf::Bool(body, "restart", "", false));
      job.extras.restart = restart;
    } else if (op == JobOperation::kUpgrade) {
      WEFT_TRY_ASSIGN(latest, catalogs_.Get(call.principal.tenant));
      const catalog::Catalog& cat = *latest;
      const std::string template_name = spec.contains("template") ? spec["template"].value("name", "") : "";
      const catalog::ClusterTemplate* tmpl = cat.FindClusterTemplate(template_name);
      if (!tmpl)
        return Response::Error(Status::NotFound("cluster '" + c.name + "' was made from clustertemplate '" +
                                                template_name + "', which no longer exists"));
      const std::set<std::string> on = ServicesOn(job.before.layout);
      solver::SolveRequest req = SolveFor(c, job.before, static_cast<std::int64_t>(job.before.layout["nodes"].size()),
                                          std::vector<std::string>(on.begin(), on.end()));
      WEFT_TRY_ASSIGN(layout, Solve(cat, *tmpl, req));
      json config = tmpl->defaults.config.is_object() ? tmpl->defaults.config : json::object();
      config.merge_patch(spec.value("config", json::object()));
      WEFT_TRY_ASSIGN(fresh, BuildSpec(latest, call.principal.tenant, *tmpl, req.overrides, layout, config));
      fresh["overrides"] = spec.value("overrides", json::object());
      std::vector<std::string> changed;
      for (const std::string& s : on) {
        const json old = spec["services"].value(s, json());
        if (!fresh["services"].contains(s) || fresh["services"][s] != old) changed.push_back(s);
      }
      // The provider too: a cluster keeps the copy it was made with, so a corrected
      // provider reaches its later jobs (a delete above all) only through an upgrade.
      if (changed.empty() && fresh["template"] == spec.value("template", json()) &&
          fresh["provider"] == spec.value("provider", json()) && catalog::LayoutToJson(layout) == job.before.layout)
        return Response::Error(Status::Conflict("cluster '" + c.name +
                                                "' already uses the latest template, provider and services; nothing to upgrade"));
      job.target.spec = std::move(fresh);
      job.target.layout = catalog::LayoutToJson(layout);
      job.extras.changed_services = changed;
    } else if (op == JobOperation::kRollback) {
      json previous = ParseOr(c.previous_json, json());
      if (!previous.is_object())
        return Response::Error(Status::Conflict("cluster '" + c.name +
                                                "' has no earlier state to return to: no change has succeeded since "
                                                "it was created"));
      job.target.spec = previous.value("spec", json::object());
      job.target.layout = previous.value("layout", json{{"nodes", json::array()}});
      // A node the earlier state still listed as "delete failed" (the scale since deleted it) is
      // not made again: going back never plans a task on a half-deleted node.
      if (job.target.layout.is_object() && job.target.layout.contains("nodes") &&
          job.target.layout["nodes"].is_array()) {
        json& nodes = job.target.layout["nodes"];
        nodes.erase(std::remove_if(nodes.begin(), nodes.end(), IsDeleteFailed), nodes.end());
      }
    }
    if (dry_run) return DryRun(job, summary);
    return Launch(std::move(job));
  }

  // A node a failed job was to delete and did not ("state": "delete failed") is half deleted:
  // only an operation that deletes it again (a delete; a scale, which deletes it in the same job)
  // runs while the cluster has one. Any other would plan its tasks on it (a start, a stop, a
  // reconfigure...) or solve the layout again with it as a live node and drop the mark (an
  // add-services, an upgrade, a rollback). Refused, naming the nodes and how to clear them.
  static std::optional<Response> RefuseOnMarkedNodes(JobOperation op, const store::ClusterRecord& c,
                                                     const json& layout) {
    if (op == JobOperation::kDelete || op == JobOperation::kScale) return std::nullopt;
    std::vector<std::string> marked;
    std::int64_t others = 0;
    for (const json& n : layout.value("nodes", json::array())) {
      if (IsDeleteFailed(n))
        marked.push_back(n.value("hostname", ""));
      else
        ++others;
    }
    if (marked.empty()) return std::nullopt;
    std::string names;
    for (const std::string& n : marked) names += (names.empty() ? "" : ", ") + n;
    const std::string what(ToString(op));
    const bool one = marked.size() == 1;
    const std::string it = one ? "it" : "them";
    // With no other node (a failed delete) only a delete is left to ask for.
    const std::string how =
        others > 0 ? "`weft cluster scale " + c.name + " --size " + std::to_string(others) +
                         "` (cluster.scale; any size does, this one keeps the other nodes) deletes " + it +
                         " again, or `weft cluster delete " + c.name + "` deletes the whole cluster"
                   : "`weft cluster delete " + c.name + "` (cluster.delete) deletes " + it + " again";
    return Response::Error(Status::Conflict("cluster '" + c.name + "': no " + what + " while it has " +
                                            (one ? "a node" : "nodes") + " whose DELETE failed (" + names +
                                            ", marked \"delete failed\"): " + how),
                           json{{"cluster_id", c.id}, {"operation", what}, {"delete_failed", marked}});
  }

  Response ExtendLease(const Call& call) {
    const json& body = call.request->body;
    WEFT_TRY_ASSIGN(found, FindCluster(call));
    store::ClusterRecord c = std::move(found);
    if (Terminated(c))
      return Response::Error(Status::Conflict("cluster '" + c.name + "' is terminated; its lease cannot change"));
    std::optional<catalog::LeaseDuration> lease = LeaseOf(ParseOr(c.spec_json, json::object()));
    if (!lease || c.expire_at_ms == 0)
      return Response::Error(Status::Invalid("cluster '" + c.name + "' has no lease: it never expires"));
    std::int64_t step = lease->step_ms;
    if (body.contains("lease_ms") && !body["lease_ms"].is_null()) {
      WEFT_TRY_ASSIGN(asked, LeaseMs(body, 1));
      step = asked;
    }
    if (step <= 0)
      return Response::Error(Status::Invalid("cluster '" + c.name + "': its template gives no lease step; say how "
                                             "long (lease_ms; weft cluster extend-lease --lease DURATION)"));
    const std::int64_t now = clock_.NowMs();
    const std::int64_t until = std::max(now, c.expire_at_ms) + step;
    if (lease->max_ms > 0 && until > c.created_at_ms + lease->max_ms)
      return Response::Error(Status::Invalid(
          "cluster '" + c.name + "': extending to " + LeaseText(until - c.created_at_ms) +
          " after creation passes the template's maximum lease of " + LeaseText(lease->max_ms) +
          " (administration.leaseduration.max); it can expire at the latest " +
          LeaseText((c.created_at_ms + lease->max_ms - now) / 1000 * 1000) + " from now"));
    c.expire_at_ms = until;
    c.updated_at_ms = now;
    WEFT_TRY_ASSIGN(ok, [&]() -> Result<bool> {
      WEFT_RETURN_IF_ERROR(store_.UpdateCluster(c));
      return true;
    }());
    (void)ok;
    return Response::Ok({{"cluster", ClusterSummary(c)}});
  }

  Response List(const Call& call) {
    const json& body = call.request->body;
    WEFT_TRY_ASSIGN(all, jsonf::Bool(body, "all", "", false));
    // No limit: every cluster, in one reply.
    WEFT_TRY_ASSIGN(limit,
                    jsonf::Int(body, "limit", "", 1, kMaxListed, std::numeric_limits<std::int64_t>::max()));
    WEFT_TRY_ASSIGN(after, api::ReadCursor(body, kClusterCursor, "cluster.list"));
    // The body as text (see AppendClusterSummary), never a tree. In id order,
    // so a page starts right after the last one's last cluster.
    Response r = Response::Ok(json::object());
    r.body_text = "{\"clusters\":[";
    std::int64_t listed = 0;
    std::int64_t last = 0;
    bool more = false;
    const auto add = [&](const store::ClusterRecord& c) {
      if (more) return;
      const std::int64_t id = IdNumber(c.id);
      if (id <= after || !Visible(call, c)) return;
      if (listed == limit) {
        more = true;
        return;
      }
      if (listed++ > 0) r.body_text += ',';
      r.body_text += SummaryText(c);
      last = id;
    };
    Status s = store_.VisitClusterSummaries(call.principal.tenant, all, add);
    if (!s.ok()) return Response::Error(s);
    r.body_text += ']';
    if (more) {
      r.body_text += ",\"next\":";
      wire::AppendJsonString(r.body_text, api::MakeCursor(kClusterCursor, last));
    }
    r.body_text += '}';
    return r;
  }

  Response Get(const Call& call) {
    WEFT_TRY_ASSIGN(c, FindCluster(call));
    json out = ClusterSummary(c);
    json spec = ParseOr(c.spec_json, json::object());
    out["config"] = spec.value("config", json::object());
    WEFT_TRY_ASSIGN(nodes, store_.ListNodes(c.id));
    std::map<std::string, json> results;
    for (const store::NodeRecord& n : nodes) results[n.id] = RedactResults(ParseOr(n.results_json, json::object()));
    json layout = ParseOr(c.layout_json, json::object());
    WEFT_TRY_ASSIGN(jobs, store_.ListJobs(call.principal.tenant, c.id, 1000));
    WEFT_TRY_ASSIGN(states, ServiceStates(jobs, layout, spec));
    json list = json::array();
    for (json n : layout.value("nodes", json::array())) {
      const std::string id = n.value("hostname", "");
      n["results"] = results.count(id) ? results[id] : json::object();
      json on = json::object();
      const std::map<std::string, std::string>& known = states[id];
      for (const json& s : n.value("services", json::array())) {
        if (!s.is_string()) continue;
        auto state = known.find(s.get<std::string>());
        on[s.get<std::string>()] = state == known.end() ? "unknown" : state->second;
      }
      n["service_states"] = std::move(on);
      list.push_back(std::move(n));
    }
    out["nodes"] = std::move(list);
    json history = json::array();
    for (const store::JobRecord& j : jobs) history.push_back(JobSummary(j));
    out["jobs"] = std::move(history);
    out["has_previous"] = !c.previous_json.empty();
    return Response::Ok({{"cluster", std::move(out)}});
  }

  Response JobList(const Call& call) {
    const json& body = call.request->body;
    WEFT_TRY_ASSIGN(limit, jsonf::Int(body, "limit", "", 1, kMaxListed, 100));
    WEFT_TRY_ASSIGN(after, api::ReadCursor(body, kJobCursor, "job.list"));
    std::string cluster_id;
    std::map<std::string, std::string> names;  // cluster id -> name, for people reading the list
    if (body.contains("cluster") && !body["cluster"].is_null()) {
      WEFT_TRY_ASSIGN(c, FindCluster(call));
      cluster_id = c.id;
      names[c.id] = c.name;
    }
    // A user sees the jobs of their own clusters only (all of them when the list is of one cluster: FindCluster
    // refuses another user's); the store reads those alone.
    std::optional<std::string_view> owner;
    if (call.principal.role == Role::kUser && cluster_id.empty()) owner = call.principal.user;
    // Newest first, in pages of `limit`: `next` names the last job of a full page when older ones follow. One
    // more job than the page is read to know that.
    WEFT_TRY_ASSIGN(page, store_.ListJobs(call.principal.tenant, cluster_id, limit + 1, after, owner));
    const bool more = static_cast<std::int64_t>(page.size()) > limit;
    if (more) page.pop_back();
    // The names of many jobs' clusters come from one read of the tenant's cluster summaries, not one read of a
    // whole cluster row per cluster.
    if (cluster_id.empty() && page.size() > kJobsNamedOneByOne) {
      Status s = store_.VisitClusterSummaries(call.principal.tenant, true,
                                              [&](const store::ClusterRecord& c) { names[c.id] = c.name; });
      if (!s.ok()) return Response::Error(s);
    }
    json list = json::array();
    for (const store::JobRecord& j : page) {
      json summary = JobSummary(j);
      WEFT_TRY_ASSIGN(name, ClusterName(j.cluster_id, names));
      summary["cluster_name"] = std::move(name);
      list.push_back(std::move(summary));
    }
    json reply = {{"jobs", std::move(list)}};
    if (more) reply["next"] = api::MakeCursor(kJobCursor, IdNumber(page.back().id));
    return Response::Ok(std::move(reply));
  }

  Result<std::string> ClusterName(const std::string& cluster_id, std::map<std::string, std::string>& names) {
    auto known = names.find(cluster_id);
    if (known != names.end()) return known->second;
    WEFT_ASSIGN_OR_RETURN(std::optional<store::ClusterRecord> c, store_.GetClusterSummary(cluster_id));
    return names[cluster_id] = c ? c->name : std::string();
  }

  Response JobGet(const Call& call) {
    const json& body = call.request->body;
    WEFT_TRY_ASSIGN(j, FindJob(call));
    // "tasks": false leaves the task list out (the progress counts stay): a
    // job of a few hundred nodes has a list of over a megabyte.
    WEFT_TRY_ASSIGN(with_tasks, jsonf::Bool(body, "tasks", "", true));
    WEFT_TRY_ASSIGN(asked_details, jsonf::Bool(body, "details", "", false));
    const bool details = asked_details && with_tasks;  // details are the tasks'
    std::vector<store::TaskRecord> tasks;
    // With `details`: by task id then attempt, as the tasks are by id, so that
    // each task's are found by walking both lists once.
    std::vector<store::AttemptRecord> attempts;
    if (details) {
      if (Status s = store_.ListJobTaskDetails(j.id, &tasks, &attempts); !s.ok()) return Response::Error(s);
    } else {
      WEFT_TRY_ASSIGN(listed, store_.ListJobTasks(j.id, false));
      tasks = std::move(listed);
    }
    // Progress: counts by state, and the stage (longest path from the roots) of
    // the earliest task not done, for reading only. Stages are counted as a dry
    // run's plan counts them: a JOIN adds no step, and empty levels are dropped.
    std::map<std::int64_t, std::size_t> index;
    for (std::size_t i = 0; i < tasks.size(); ++i) index[tasks[i].id] = i;
    // A list the engine wrote is read as text and sent as it is; any other is parsed.
    std::vector<json> after_trees(tasks.size());
    std::vector<char> after_as_text(tasks.size(), 0);
    std::vector<std::vector<std::size_t>> after(tasks.size());
    std::vector<std::int64_t> ids;
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      if (ReadIdList(tasks[i].after_json, &ids)) {
        after_as_text[i] = 1;
        for (std::int64_t id : ids)
          if (auto p = index.find(id); p != index.end()) after[i].push_back(p->second);
        continue;
      }
      after_trees[i] = ParseOr(tasks[i].after_json, json::array());
      for (const json& a : after_trees[i])
        if (a.is_number_integer() && index.count(a.get<std::int64_t>())) after[i].push_back(index[a.get<std::int64_t>()]);
    }
    std::vector<std::int64_t> depth(tasks.size(), -1);
    std::function<std::int64_t(std::size_t)> depth_of = [&](std::size_t i) -> std::int64_t {
      if (depth[i] >= 0) return depth[i];
      depth[i] = 0;  // a cycle cannot happen; this only guards the recursion
      const std::int64_t step = tasks[i].action == "JOIN" ? 0 : 1;
      std::int64_t d = 0;
      for (std::size_t p : after[i]) d = std::max(d, depth_of(p) + step);
      return depth[i] = d;
    };
    std::set<std::int64_t> levels;  // of the tasks that do work
    for (std::size_t i = 0; i < tasks.size(); ++i)
      if (tasks[i].action != "JOIN") levels.insert(depth_of(i));
    std::map<store::TaskState, std::int64_t> counts;
    std::int64_t retrying = 0;
    const std::int64_t now = clock_.NowMs();
    const std::int64_t stages = static_cast<std::int64_t>(levels.size());
    std::int64_t stage = -1;
    // The body as text, keys in nlohmann's order (the same bytes as wire::Dump
    // of the tree it replaced): a job of a few hundred tasks with details made
    // and freed a tree of some thirty allocations per task.
    Response r = Response::Ok(json::object());
    std::string& out = r.body_text;
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      const store::TaskRecord& t = tasks[i];
      ++counts[t.state];
      // Queued again after a failed attempt and still in its backoff (a queued
      // task's lease_until_ms is when it may be taken); past it, it is queued.
      if (t.state == store::TaskState::kQueued && t.attempt > 0 && t.lease_until_ms > now) ++retrying;
      // The earliest task not done is where the job is, or where it stopped (an
      // aborted job's cancelled tasks are not done).
      if (t.action != "JOIN" && t.state != store::TaskState::kSucceeded) {
        const auto d = static_cast<std::int64_t>(std::distance(levels.begin(), levels.find(depth_of(i))));
        if (stage < 0 || d < stage) stage = d;
      }
    }
    const auto count = [&counts](store::TaskState state) {
      auto it = counts.find(state);
      return it == counts.end() ? std::int64_t{0} : it->second;
    };
    AppendText(out, "{\"job\":{\"cluster_id\":", j.cluster_id);
    AppendNumber(out, ",\"created_at_ms\":", j.created_at_ms);
    AppendNumber(out, ",\"finished_at_ms\":", j.finished_at_ms);
    out += ",\"history\":";
    wire::AppendJson(out, ParseOr(j.history_json, json::array()));
    AppendText(out, ",\"id\":", j.id);
    AppendText(out, ",\"message\":", j.message);
    AppendText(out, ",\"operation\":", j.operation);
    AppendText(out, ",\"parent_job\":", j.parent_job);
    AppendNumber(out, ",\"progress\":{\"cancelled\":", count(store::TaskState::kCancelled));
    AppendNumber(out, ",\"failed\":", count(store::TaskState::kFailed));
    AppendNumber(out, ",\"queued\":", count(store::TaskState::kQueued));
    AppendNumber(out, ",\"retrying\":", retrying);
    AppendNumber(out, ",\"running\":", count(store::TaskState::kLeased));
    AppendNumber(out, ",\"stage\":", stage < 0 ? stages : stage + 1);
    AppendNumber(out, ",\"stages\":", stages);
    AppendNumber(out, ",\"succeeded\":", count(store::TaskState::kSucceeded));
    AppendNumber(out, ",\"total\":", static_cast<std::int64_t>(tasks.size()));
    AppendNumber(out, ",\"waiting\":", count(store::TaskState::kWaiting));
    AppendText(out, "},\"requested_by\":", j.requested_by);
    AppendText(out, ",\"status\":", j.status);
    if (with_tasks) out += ",\"tasks\":[";
    std::size_t next_attempt = 0;  // in `attempts`
    for (std::size_t i = 0; with_tasks && i < tasks.size(); ++i) {
      const store::TaskRecord& t = tasks[i];
      if (i > 0) out += ',';
      AppendText(out, "{\"action\":", t.action);
      out += ",\"after\":";
      if (after_as_text[i]) {
        out += t.after_json;
      } else {
        wire::AppendJson(out, after_trees[i]);
      }
      AppendNumber(out, ",\"attempt\":", t.attempt);
      if (details) {
        out += ",\"attempts\":[";
        while (next_attempt < attempts.size() && attempts[next_attempt].task_id < t.id) ++next_attempt;
        for (bool first = true; next_attempt < attempts.size() && attempts[next_attempt].task_id == t.id;
             first = false) {
          const store::AttemptRecord& a = attempts[next_attempt++];
          if (!first) out += ',';
          AppendNumber(out, "{\"attempt\":", a.attempt);
          AppendNumber(out, ",\"finished_at_ms\":", a.finished_at_ms);
          AppendText(out, ",\"host_id\":", a.host_id);
          AppendText(out, ",\"message\":", a.message);
          AppendText(out, ",\"status\":", a.status);
          AppendNumber(out, ",\"taken_at_ms\":", a.taken_at_ms);
          out += '}';
        }
        out += ']';
      }
      AppendNumber(out, ",\"created_at_ms\":", t.created_at_ms);
      AppendText(out, ",\"host_id\":", t.host_id);
      AppendNumber(out, ",\"id\":", t.id);
      AppendText(out, ",\"key\":", t.task_key);
      AppendNumber(out, ",\"max_attempts\":", t.max_attempts);
      AppendText(out, ",\"message\":", t.message);
      AppendText(out, ",\"node\":", t.node_id);
      AppendText(out, ",\"plugin\":", t.plugin);
      if (details) {
        out += ",\"result\":";
        if (t.result_json.empty() || t.result_json == "{}") {  // most tasks return nothing
          out += "{}";
        } else {
          wire::AppendJson(out, RedactResults(ParseOr(t.result_json, json::object())));
        }
      }
      AppendText(out, ",\"service\":", t.service);
      AppendText(out, ",\"state\":", store::TaskStateName(t.state));
      if (details) {
        AppendText(out, ",\"stderr\":", t.stderr_tail);
        AppendText(out, ",\"stdout\":", t.stdout_tail);
      }
      AppendNumber(out, ",\"updated_at_ms\":", t.updated_at_ms);
      out += '}';
    }
    if (with_tasks) out += ']';
    AppendNumber(out, ",\"updated_at_ms\":", j.updated_at_ms);
    out += ",\"waiting_for_plugins\":[";
    bool first = true;
    for (const std::string& plugin : PluginsWithoutHost(tasks, /*ready_only=*/true)) {
      if (!first) out += ',';
      first = false;
      wire::AppendJsonString(out, plugin);
    }
    out += "]}}";
    return r;
  }

  Response JobAbort(const Call& call) {
    WEFT_TRY_ASSIGN(j, FindJob(call));
    Status s = engine_->Abort(j.id, call.principal.user);
    if (!s.ok()) return Response::Error(s);
    WEFT_TRY_ASSIGN(after, store_.GetJob(j.id));
    return Response::Ok({{"job", JobSummary(after ? *after : j)}});
  }

  Response JobRetry(const Call& call) {
    WEFT_TRY_ASSIGN(j, FindJob(call));
    Status s = engine_->Retry(j.id, call.principal.user);
    if (!s.ok()) return Response::Error(s);
    WEFT_TRY_ASSIGN(after, store_.GetJob(j.id));
    return Response::Ok({{"job", JobSummary(after ? *after : j)}});
  }

 private:
  // `"summary": true` asks a dry run for the plan's counts only (as cluster.plan's does).
  static Result<bool> SummaryOption(const json& body, bool dry_run) {
    WEFT_ASSIGN_OR_RETURN(bool summary, jsonf::Bool(body, "summary", "", false));
    if (summary && !dry_run)
      return Status::Invalid("summary is for a dry run: give it with \"dry_run\": true (a job's summary is in "
                             "every reply)");
    return summary;
  }

  Result<json> JobOptions(const json& body) {
    json options = json::object();
    WEFT_ASSIGN_OR_RETURN(bool keep, jsonf::Bool(body, "keep_on_failure", "", false));
    if (keep) options["keep_on_failure"] = true;
    return options;
  }

  // The tenant's quotas (docs/security.md): the tenant's clusters that are not
  // terminated (their target layouts) plus what the request adds, in place of
  // cluster `except_id`'s nodes. Atomic: the reactor runs one request at a time
  // and a create inserts its cluster in the same request. A refusal's
  // `details` name the quota, its limit, what is used and what was asked.
  Status CheckQuota(const Call& call, const std::vector<store::ClusterRecord>& clusters, std::int64_t add_clusters,
                    std::int64_t nodes, const std::string& except_id, json* details) {
    const Principal& p = call.principal;
    const std::int64_t have = static_cast<std::int64_t>(clusters.size());
    if (p.max_clusters > 0 && add_clusters > 0 && have + add_clusters > p.max_clusters) {
      *details = {{"tenant", p.tenant}, {"quota", "max_clusters"}, {"limit", p.max_clusters}, {"used", have},
                  {"asked", add_clusters}};
      return Status::Denied("tenant '" + p.tenant + "' may have " + std::to_string(p.max_clusters) +
                            " clusters (quota max_clusters) and has " + std::to_string(have) +
                            "; delete one, or ask a superadmin to raise the quota (tenant.update)");
    }
    if (p.max_nodes <= 0) return Status::Ok();
    std::int64_t in_use = 0;
    for (const store::ClusterRecord& c : clusters) {
      if (c.id == except_id) continue;
      const json layout = json::parse(c.layout_json, nullptr, false);
      if (layout.is_object() && layout.contains("nodes") && layout["nodes"].is_array())
        in_use += static_cast<std::int64_t>(layout["nodes"].size());
    }
    if (in_use + nodes > p.max_nodes) {
      *details = {{"tenant", p.tenant}, {"quota", "max_nodes"}, {"limit", p.max_nodes}, {"used", in_use},
                  {"asked", nodes}};
      return Status::Denied("tenant '" + p.tenant + "' may have " + std::to_string(p.max_nodes) +
                            " nodes (quota max_nodes); its other clusters have " + std::to_string(in_use) +
                            " and this needs " + std::to_string(nodes));
    }
    return Status::Ok();
  }

  // A user (role user) sees only the clusters they created.
  static bool Visible(const Call& call, const store::ClusterRecord& c) {
    return call.principal.role != Role::kUser || c.owner == call.principal.user;
  }

  Result<store::ClusterRecord> FindCluster(const Call& call) {
    WEFT_ASSIGN_OR_RETURN(std::string id, jsonf::String(call.request->body, "cluster", ""));
    WEFT_ASSIGN_OR_RETURN(std::optional<store::ClusterRecord> c, store_.FindCluster(call.principal.tenant, id));
    if (!c.has_value() || !Visible(call, *c))
      return Status::NotFound("cluster '" + id + "' does not exist in tenant '" + call.principal.tenant +
                              "'; cluster.list (weft cluster list) shows the clusters");
    return std::move(*c);
  }

  // What each service on each node (node -> service -> state) did last, from
  // the jobs' tasks, newest job first: the newest START or STOP that succeeded
  // says `running` or `stopped`. A service that defines neither shows its
  // newest task (`installed`, `configured`, `initialized`), and so does one
  // that was never started. The walk stops once every service is settled.
  using States = std::map<std::string, std::map<std::string, std::string>>;
  Result<States> ServiceStates(const std::vector<store::JobRecord>& jobs, const json& layout, const json& spec) {
    auto runs = [&](const std::string& service) {  // whether it defines START or STOP
      const json services = spec.value("services", json::object());
      const json entity = services.is_object() ? services.value(service, json::object()) : json::object();
      const json p = entity.is_object() ? entity.value("provisioner", json::object()) : json::object();
      const json actions = p.is_object() ? p.value("actions", json::object()) : json::object();
      return actions.is_object() && (actions.contains("start") || actions.contains("stop"));
    };
    std::map<std::string, bool> service_runs;
    std::set<std::pair<std::string, std::string>> open;  // (node, service) not settled yet
    for (const json& n : layout.value("nodes", json::array()))
      for (const json& s : n.value("services", json::array()))
        if (s.is_string()) {
          open.insert({n.value("hostname", ""), s.get<std::string>()});
          if (!service_runs.count(s.get<std::string>())) service_runs[s.get<std::string>()] = runs(s.get<std::string>());
        }
    static const std::map<std::string, std::string> kWord = {
        {"INSTALL", "installed"}, {"CONFIGURE", "configured"}, {"INITIALIZE", "initialized"},
        {"START", "running"},     {"STOP", "stopped"}};
    States states;
    for (const store::JobRecord& j : jobs) {
      if (open.empty()) break;
      WEFT_ASSIGN_OR_RETURN(std::vector<store::TaskRecord> tasks, store_.ListJobTasks(j.id, false));
      std::sort(tasks.begin(), tasks.end(), [](const auto& a, const auto& b) { return a.id > b.id; });
      for (const store::TaskRecord& t : tasks) {
        if (t.service.empty() || t.state != store::TaskState::kSucceeded || !kWord.count(t.action)) continue;
        auto key = open.find({t.node_id, t.service});
        if (key == open.end()) continue;
        std::string& state = states[t.node_id][t.service];
        const bool run_state = t.action == "START" || t.action == "STOP";
        if (run_state || state.empty()) state = kWord.at(t.action);
        if (run_state || !service_runs[t.service]) open.erase(key);
      }
    }
    return states;
  }

  Result<store::JobRecord> FindJob(const Call& call) {
    const json& body = call.request->body;
    std::string id;
    if (body.contains("job") && body["job"].is_number_integer()) {
      id = std::to_string(body["job"].get<std::int64_t>());
    } else if (body.contains("job") && body["job"].is_number()) {
      id = "-";  // 1.5: a number, but not a job id (said below)
    } else {
      WEFT_ASSIGN_OR_RETURN(std::string s, jsonf::String(body, "job", ""));
      id = s;
    }
    // A job id is a decimal number (1, 2, ...): anything else names no job, and is the caller's mistake.
    const auto digit = [](char ch) { return ch >= '0' && ch <= '9'; };
    if (id.size() > 18 || id.front() == '0' || !std::all_of(id.begin(), id.end(), digit))
      return Status::Invalid("job must be a job id, a whole number from 1 up as job.list shows it, got " +
                             jsonf::Brief(body["job"]));
    // Without the cluster states: no op here uses them, and they are most of a job's bytes.
    WEFT_ASSIGN_OR_RETURN(std::optional<store::JobRecord> j, store_.GetJob(id, /*with_states=*/false));
    bool visible = j.has_value() && j->tenant == call.principal.tenant;
    if (visible && call.principal.role == Role::kUser) {
      WEFT_ASSIGN_OR_RETURN(std::optional<store::ClusterRecord> c, store_.GetCluster(j->cluster_id));
      visible = c.has_value() && Visible(call, *c);
    }
    if (!visible)
      return Status::NotFound("job '" + id + "' does not exist in tenant '" + call.principal.tenant +
                              "'; job.list (weft job list) shows the jobs");
    return std::move(*j);
  }

  Result<catalog::Layout> Solve(const catalog::Catalog& cat, const catalog::ClusterTemplate& tmpl,
                                const solver::SolveRequest& req) {
    solver::SolveOptions options;
    options.clock = &clock_;
    options.max_time_ms = kSolveTimeMs;
    return solver::Solve(cat, tmpl, req, options);
  }

  solver::SolveRequest SolveFor(const store::ClusterRecord& c, const ClusterState& state, std::int64_t size,
                                std::vector<std::string> services, std::vector<std::string> taken = {}) {
    solver::SolveRequest req;
    req.cluster_name = c.name;
    req.size = size;
    req.taken = std::move(taken);
    const json overrides = state.spec.value("overrides", json::object());
    if (state.spec.contains("provider")) req.overrides.provider = state.spec["provider"].value("name", "");
    for (const char* key : {"hardwaretype", "imagetype"})
      if (overrides.contains(key) && overrides[key].is_string())
        (std::string_view(key) == "hardwaretype" ? req.overrides.hardwaretype : req.overrides.imagetype) =
            overrides[key].get<std::string>();
    req.overrides.services = std::move(services);
    Result<catalog::Layout> existing = catalog::LayoutFromJson(state.layout);
    if (existing.ok()) req.existing = std::move(existing->nodes);
    return req;
  }

  // A new layout for the cluster with its nodes fixed, against its frozen template.
  Result<catalog::Layout> Resolve(const Call& call, const store::ClusterRecord& c, const ClusterState& state,
                                  std::int64_t size, std::vector<std::string> services,
                                  std::vector<std::string> taken = {}) {
    WEFT_ASSIGN_OR_RETURN(std::shared_ptr<const catalog::Catalog> latest, catalogs_.Get(call.principal.tenant));
    catalog::Catalog cat = *latest;  // a copy: the cluster's frozen entities go into it
    Result<std::string> name = cat.PutJson(Kind::kClusterTemplate, state.spec.value("template", json::object()));
    if (!name.ok()) return name.status().WithContext("the cluster's copy of its template");
    // The frozen copies of the services it runs win over the catalog's newer versions.
    const json frozen = state.spec.value("services", json::object());
    for (const auto& [s, doc] : frozen.items()) {
      Result<std::string> put = cat.PutJson(Kind::kService, doc);
      if (!put.ok()) return put.status().WithContext("the cluster's copy of service '" + s + "'");
    }
    return Solve(cat, *cat.FindClusterTemplate(*name), SolveFor(c, state, size, std::move(services), std::move(taken)));
  }

  // An entity of a catalog snapshot as a cluster's spec copies it: its JSON,
  // the version it was put as, and (a service) whether its fields' macros
  // check. GetJson writes the whole entity out and the version is a store
  // read, while every create of a template asks for the same few: made once
  // per snapshot.
  struct SpecEntity {
    json doc;
    std::int64_t version = 0;
    Status macros = Status::Ok();
  };
  struct SpecEntities {
    std::shared_ptr<const catalog::Catalog> catalog;  // held, so that its address names only it
    std::map<std::pair<Kind, std::string>, SpecEntity> entities;
  };

  Result<const SpecEntity*> EntityOf(const std::shared_ptr<const catalog::Catalog>& cat, const std::string& tenant,
                                     Kind kind, const std::string& name) {
    // Snapshots of a catalog generation that moved on are never handed out again.
    if (spec_generation_ != store_.catalog_generation()) {
      spec_entities_.clear();
      spec_generation_ = store_.catalog_generation();
    }
    auto found = spec_entities_.find(cat.get());
    if (found == spec_entities_.end()) {
      constexpr std::size_t kMaxSnapshots = 64;  // as many tenants' as the catalog cache keeps
      if (spec_entities_.size() >= kMaxSnapshots) spec_entities_.clear();
      found = spec_entities_.emplace(cat.get(), SpecEntities{cat, {}}).first;
    }
    SpecEntities& snapshot = found->second;
    auto [it, fresh] = snapshot.entities.try_emplace({kind, name});
    if (!fresh) return &it->second;
    Result<json> doc = cat->GetJson(kind, name);
    if (!doc.ok()) {
      snapshot.entities.erase(it);
      return doc.status();
    }
    SpecEntity& e = it->second;
    e.doc = std::move(*doc);
    Result<std::optional<store::CatalogEntityRecord>> r = store_.GetCatalogEntity(tenant, catalog::KindName(kind), name);
    e.version = r.ok() && r->has_value() ? (**r).version : 0;
    if (kind == Kind::kService && e.doc.contains("provisioner")) e.macros = planner::CheckMacros(e.doc["provisioner"]);
    return &e;
  }

  Result<json> BuildSpec(const std::shared_ptr<const catalog::Catalog>& cat, const std::string& tenant,
                         const catalog::ClusterTemplate& tmpl, const solver::Overrides& overrides,
                         const catalog::Layout& layout, const json& config) {
    WEFT_RETURN_IF_ERROR(plan_bounds_.CheckConfig(config));
    const std::string provider_name = overrides.provider ? *overrides.provider : tmpl.defaults.provider;
    const catalog::Provider* provider = cat->FindProvider(provider_name);
    if (!provider) return Status::NotFound("provider '" + provider_name + "' does not exist");
    WEFT_ASSIGN_OR_RETURN(const SpecEntity* tmpl_entity, EntityOf(cat, tenant, Kind::kClusterTemplate, tmpl.name));
    json spec = {{"template", tmpl_entity->doc},
                 {"provider", {{"name", provider->name}, {"type", provider->providertype}, {"fields", provider->provisioner}}},
                 {"services", json::object()},
                 {"config", config},
                 {"size", layout.nodes.size()}};
    json versions = json::object();
    versions["clustertemplate/" + tmpl.name] = tmpl_entity->version;
    WEFT_ASSIGN_OR_RETURN(const SpecEntity* provider_entity, EntityOf(cat, tenant, Kind::kProvider, provider->name));
    versions["provider/" + provider->name] = provider_entity->version;
    std::set<std::string> on;
    for (const catalog::LayoutNode& n : layout.nodes) on.insert(n.services.begin(), n.services.end());
    for (const std::string& s : on) {
      WEFT_ASSIGN_OR_RETURN(const SpecEntity* service, EntityOf(cat, tenant, Kind::kService, s));
      if (!service->macros.ok()) return service->macros.WithContext("service '" + s + "'");
      spec["services"][s] = service->doc;
      versions["service/" + s] = service->version;
    }
    spec["versions"] = std::move(versions);
    return spec;
  }

  // Removing `removed` must leave every `requires` of the services kept met.
  static Status CheckStillMet(const json& spec, const std::set<std::string>& keep,
                              const std::vector<std::string>& removed) {
    std::set<std::string> provided = keep;
    const json services = spec.value("services", json::object());
    for (const std::string& s : keep)
      for (const json& p : services.value(s, json::object()).value("dependencies", json::object()).value("provides", json::array()))
        if (p.is_string()) provided.insert(p.get<std::string>());
    for (const std::string& s : keep) {
      const json deps = services.value(s, json::object()).value("dependencies", json::object());
      for (const char* phase : {"install", "runtime"})
        for (const json& r : deps.value(phase, json::object()).value("requires", json::array()))
          if (r.is_string() && !provided.count(r.get<std::string>()))
            return Status::Invalid("service '" + s + "' requires '" + r.get<std::string>() + "' (" + phase +
                                   "), which removing " + wire::Dump(json(removed)) + " would leave missing; remove '" +
                                   s + "' too");
    }
    return Status::Ok();
  }

  // The plan a job would run, as cluster.plan answers it. Bounded as cluster.plan is (PlanBounds): a plan of
  // tens of thousands of nodes made a reply of tens of MiB, over what a client reads, and grew weftd's memory
  // by hundreds of MiB while it was built. With `summary`, its counts only (catalog::PlanCounts).
  // The catalog versions a job moves the cluster between (an upgrade, a rollback):
  // {"service/x": {"from": 1, "to": 2}, ...}, `from` or `to` null where the entity
  // comes or goes; {} when none changes.
  static json VersionChanges(const json& before, const json& target) {
    const auto versions = [](const json& spec) {
      auto it = spec.is_object() ? spec.find("versions") : spec.end();
      return it != spec.end() && it->is_object() ? *it : json::object();
    };
    const json was = versions(before), will = versions(target);
    json out = json::object();
    for (auto it = was.begin(); it != was.end(); ++it)
      if (will.value(it.key(), json()) != it.value()) out[it.key()] = {{"from", it.value()}, {"to", will.value(it.key(), json())}};
    for (auto it = will.begin(); it != will.end(); ++it)
      if (!was.contains(it.key())) out[it.key()] = {{"from", nullptr}, {"to", it.value()}};
    return out;
  }

  Response DryRun(const NewJob& job, bool summary) {
    const auto count = [](const json& layout) {
      const auto it = layout.is_object() ? layout.find("nodes") : layout.end();
      return it != layout.end() && it->is_array() ? static_cast<std::int64_t>(it->size()) : std::int64_t{0};
    };
    const std::int64_t nodes = std::max(count(job.before.layout), count(job.target.layout));
    if (std::optional<Response> refused = plan_bounds_.RefuseNodes(nodes, "nodes")) return std::move(*refused);
    const std::optional<planner::DeclaredActions> declared =
        engine_ ? engine_->DeclaredActions(job.tenant) : std::nullopt;
    const planner::DeclaredActions* known = declared ? &*declared : nullptr;
    Result<planner::Plan> plan = jobs::PlanJob(job, known);
    if (!plan.ok()) return Response::Error(plan.status());
    json out = jobs::PlanJson(job, *plan, known);
    if (summary) {
      out = catalog::PlanCounts(out);
      out["summary"] = true;
      out["nodes"] = count(job.target.layout);
    }
    out["dry_run"] = true;
    out["operation"] = job.operation;
    if (json changed = VersionChanges(job.before.spec, job.target.spec); !changed.empty())
      out["versions"] = std::move(changed);
    if (summary) return Response::Ok(std::move(out));
    out["layout"] = job.target.layout;
    json details;
    if (Status s = plan_bounds_.CheckReply(wire::Dump(out).size(), nodes, &details); !s.ok())
      return Response::Error(s, std::move(details));
    return Response::Ok(std::move(out));
  }

  // The plugin types of unfinished tasks (with `ready_only`, of queued ones)
  // that no live host runs: nothing takes those tasks until such a host comes.
  std::set<std::string> PluginsWithoutHost(const std::vector<store::TaskRecord>& tasks, bool ready_only) const {
    std::set<std::string> out;
    if (tasks.empty()) return out;
    const std::set<std::string> live = live_plugins_(tasks.front().tenant);  // a job's tasks share its tenant
    for (const store::TaskRecord& t : tasks) {
      const bool pending =
          t.state == store::TaskState::kQueued || (!ready_only && t.state == store::TaskState::kWaiting);
      if (pending && !t.plugin.empty() && !live.count(t.plugin)) out.insert(t.plugin);  // "": a JOIN, run by weftd
    }
    return out;
  }

  Response Launch(NewJob job) {
    const std::string cluster_id = job.cluster_id;
    Result<store::JobRecord> started = engine_->Start(std::move(job));
    if (!started.ok()) return Response::Error(started.status());
    Result<std::optional<store::ClusterRecord>> c = store_.GetCluster(cluster_id);
    if (!c.ok()) return Response::Error(c.status());
    json reply = {{"job", JobSummary(*started)}};
    if (c->has_value()) reply["cluster"] = ClusterSummary(**c);
    // Said at once: a plugin the job needs that no live host runs holds it up
    // (its tasks wait, and a host that starts later picks them up). From the
    // engine, not the store: a big job has tens of thousands of tasks.
    const std::set<std::string> live = live_plugins_(started->tenant);
    std::set<std::string> missing;
    for (const std::string& plugin : engine_->PendingPlugins(started->id))
      if (!live.count(plugin)) missing.insert(plugin);
    reply["waiting_for_plugins"] = std::move(missing);
    return Response::Ok(std::move(reply));
  }

  // A cluster's summary as AppendClusterSummary writes it, kept with the
  // fields it was written from: escaping the same text for every list was
  // most of what a list of a thousand clusters still cost.
  struct WrittenSummary {
    store::ClusterRecord of;
    std::string text;
  };
  static bool SameSummary(const store::ClusterRecord& a, const store::ClusterRecord& b) {
    return a.id == b.id && a.name == b.name && a.owner == b.owner && a.status == b.status &&
           a.template_name == b.template_name && a.provider_name == b.provider_name && a.size == b.size &&
           a.services == b.services && a.created_at_ms == b.created_at_ms && a.updated_at_ms == b.updated_at_ms &&
           a.expire_at_ms == b.expire_at_ms && a.latest_job == b.latest_job;
  }
  const std::string& SummaryText(const store::ClusterRecord& c) {
    WrittenSummary& kept = summary_texts_[c.id];
    if (kept.text.empty() || !SameSummary(kept.of, c)) {
      kept.of = c;
      kept.text.clear();
      AppendClusterSummary(kept.text, c);
    }
    return kept.text;
  }
  std::unordered_map<std::string, WrittenSummary> summary_texts_;  // by cluster id

  store::Store& store_;
  jobs::JobEngine* engine_;
  const Clock& clock_;
  LivePlugins live_plugins_;
  catalog::PlanBounds plan_bounds_;
  catalog::CatalogCache catalogs_{store_};
  // BuildSpec's entities, by catalog snapshot, while the catalog generation is spec_generation_.
  std::unordered_map<const catalog::Catalog*, SpecEntities> spec_entities_;
  std::uint64_t spec_generation_ = 0;
};

}  // namespace

json RedactResults(json results) {
  if (!results.is_object()) return results;
  auto auth = results.find("ssh_auth");
  if (auth != results.end() && auth->is_object())
    for (const char* secret : {"private_key", "passphrase", "password"})
      if (auth->contains(secret)) (*auth)[secret] = "<redacted>";
  return results;
}

namespace {

// The ops that only read, on weftd's reactor and on its api front alike.
void AddClusterReads(Router& router, const std::shared_ptr<ClusterOps>& ops) {
  const std::set<Role> users = {Role::kUser, Role::kAdmin, Role::kSuperadmin};
  const std::set<Endpoint> api = {Endpoint::kApi};
  router.Add("cluster.list", users, api, [ops](const Call& c) { return ops->List(c); }, Effect::kReads,
             {"all", "limit", "after"});
  router.Add("cluster.get", users, api, [ops](const Call& c) { return ops->Get(c); }, Effect::kReads, {"cluster"});
  router.Add("job.list", users, api, [ops](const Call& c) { return ops->JobList(c); }, Effect::kReads,
             {"cluster", "limit", "after"});
  router.Add("job.get", users, api, [ops](const Call& c) { return ops->JobGet(c); }, Effect::kReads,
             {"job", "details", "tasks"});
}

}  // namespace

void RegisterClusterOps(Router& router, store::Store& store, jobs::JobEngine& engine, const Clock& clock,
                        LivePlugins live_plugins, catalog::PlanBounds plan_bounds) {
  const std::set<Role> users = {Role::kUser, Role::kAdmin, Role::kSuperadmin};
  const std::set<Endpoint> api = {Endpoint::kApi};
  auto ops = std::make_shared<ClusterOps>(store, &engine, clock, std::move(live_plugins), plan_bounds);
  // Each op's body fields (docs/protocol.md): any other key is refused by the router.
  const Fields job_options = {"dry_run", "summary", "keep_on_failure"};
  const auto with = [&job_options](Fields fields) {
    fields.insert(fields.end(), job_options.begin(), job_options.end());
    return fields;
  };
  router.Add("cluster.create", users, api, [ops](const Call& c) { return ops->Create(c); }, Effect::kChanges,
             with({"name", "template", "size", "provider", "hardwaretype", "imagetype", "services", "config",
                   "lease_ms"}));
  for (const char* op : {"delete", "scale", "add-services", "remove-services", "start", "stop", "restart",
                         "reconfigure", "upgrade", "rollback"}) {
    const JobOperation operation = *JobOperationFrom(op);  // every name above is one
    std::string wire_name = op;
    std::replace(wire_name.begin(), wire_name.end(), '-', '_');
    Fields fields = {"cluster"};
    if (operation == JobOperation::kScale) fields.push_back("size");
    if (operation == JobOperation::kAddServices || operation == JobOperation::kRemoveServices ||
        operation == JobOperation::kStart || operation == JobOperation::kStop || operation == JobOperation::kRestart)
      fields.push_back("services");
    if (operation == JobOperation::kReconfigure) fields.insert(fields.end(), {"config", "restart"});
    router.Add("cluster." + wire_name, users, api,
               [ops, operation](const Call& c) { return ops->Change(operation, c); }, Effect::kChanges,
               with(std::move(fields)));
  }
  router.Add("cluster.extend_lease", users, api, [ops](const Call& c) { return ops->ExtendLease(c); },
             Effect::kChanges, {"cluster", "lease_ms"});
  router.Add("job.abort", users, api, [ops](const Call& c) { return ops->JobAbort(c); }, Effect::kChanges, {"job"});
  router.Add("job.retry", users, api, [ops](const Call& c) { return ops->JobRetry(c); }, Effect::kChanges, {"job"});
  AddClusterReads(router, ops);
}

void RegisterClusterReads(Router& router, store::Store& store, const Clock& clock, LivePlugins live_plugins) {
  const std::set<Role> users = {Role::kUser, Role::kAdmin, Role::kSuperadmin};
  const std::set<Endpoint> api = {Endpoint::kApi};
  AddClusterReads(router, std::make_shared<ClusterOps>(store, nullptr, clock, std::move(live_plugins)));
}

}  // namespace weft::jobs

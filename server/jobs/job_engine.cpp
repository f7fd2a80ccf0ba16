#include "weft/server/jobs/job_engine.hpp"

#include <algorithm>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "weft/catalog/catalog.hpp"
#include "weft/common/json_parse.hpp"
#include "weft/common/lifecycle.hpp"
#include "weft/common/log.hpp"
#include "weft/common/node_facts.hpp"
#include "weft/common/text.hpp"
#include "weft/common/wire.hpp"

namespace weft::jobs {
namespace {

using planner::Action;
using store::TaskState;

json ParseOr(const std::string& text, json fallback) {
  json doc = wire::Parse(text);
  if (doc.is_discarded()) return fallback;
  return doc;  // moved, not copied as by `?:` of two names
}

// How much of a failed run a job's history keeps: the failed tasks (a few,
// usually) with the last bytes of their output.
constexpr std::size_t kHistoryFailedTasks = 50;
constexpr std::size_t kHistoryOutputBytes = 4096;

std::string OutputTail(const std::string& text) {
  if (text.size() <= kHistoryOutputBytes) return text;
  std::size_t cut = text.size() - kHistoryOutputBytes;
  while (cut < text.size() && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) ++cut;  // not mid-character
  return text.substr(cut);
}

const json& Nodes(const json& layout) {
  static const json kEmpty = json::array();
  auto it = layout.find("nodes");
  return it != layout.end() && it->is_array() ? *it : kEmpty;
}

const json* FindNode(const json& layout, const std::string& id) {
  for (const json& n : Nodes(layout))
    if (n.value("hostname", "") == id) return &n;
  return nullptr;
}

std::set<std::string> NodeServices(const json& node) {
  std::set<std::string> out;
  if (node.contains("services") && node["services"].is_array())
    for (const json& s : node["services"])
      if (s.is_string()) out.insert(s.get<std::string>());
  return out;
}

// The service's definition of an action ({"type","fields"}), or nullptr.
const json* ServiceAction(const json& spec, const std::string& service, std::string_view action) {
  auto services = spec.find("services");
  if (services == spec.end() || !services->is_object()) return nullptr;
  auto s = services->find(service);
  if (s == services->end()) return nullptr;
  // Each key looked up once (find is end() on a value that is no object).
  auto p = s->find("provisioner");
  if (p == s->end() || !p->is_object()) return nullptr;
  auto actions = p->find("actions");
  if (actions == p->end() || !actions->is_object()) return nullptr;
  auto a = actions->find(AsciiLower(action));
  return a == actions->end() || !a->is_object() ? nullptr : &*a;
}

std::string ProviderType(const json& spec) {
  auto p = spec.find("provider");
  return p != spec.end() && p->is_object() ? p->value("type", "") : "";
}

// "job 28 has already succeeded", "job 28 was already aborted", "job 28 is running".
std::string JobIs(const std::string& id, const std::string& status) {
  const std::optional<JobStatus> s = JobStatusFrom(status);
  if (s == JobStatus::kSucceeded || s == JobStatus::kFailed) return "job " + id + " has already " + status;
  if (s == JobStatus::kAborted) return "job " + id + " was already aborted";
  return "job " + id + " is " + status;
}

// Removing things uses the definitions they were made with; making things, the new ones.
bool UsesBefore(std::string_view action) { return action == "STOP" || action == "REMOVE" || action == "DELETE"; }

const json& SpecFor(const ClusterState& before, const ClusterState& target, std::string_view action) {
  const bool prefer_before = UsesBefore(action) && !before.spec.empty();
  return prefer_before || target.spec.empty() ? before.spec : target.spec;
}

// The automators of a node's services, for planner::BootstrapPlugin: in the
// node's order of services, each one's install, configure, initialize, start.
std::vector<std::string> NodeAutomators(const json& spec, const json& node) {
  std::vector<std::string> out;
  for (const std::string& s : NodeServices(node))
    for (const char* a : {"install", "configure", "initialize", "start"})
      if (const json* def = ServiceAction(spec, s, a); def && def->contains("type") && (*def)["type"].is_string())
        out.push_back((*def)["type"].get<std::string>());
  return out;
}

// The plugin that runs a planned task; empty when no plugin has work to do.
// `node` is the task's node in the target layout (nullptr when it has none):
// looked up by the caller's index, as a search of the layout per task would
// cost a 10,000-node create seconds. `declared`: what the registered plugins
// declare (nullptr: not known), for BOOTSTRAP.
std::string PluginFor(const ClusterState& before, const ClusterState& target, const planner::PlannedTask& t,
                      const json* node, const planner::DeclaredActions* declared) {
  const std::string action(planner::ActionName(t.action));
  const json& spec = SpecFor(before, target, action);
  switch (t.action) {
    case Action::kJoin: return "";
    case Action::kCreate:
    case Action::kConfirm:
    case Action::kDelete: return ProviderType(spec);
    case Action::kBootstrap:
      // An automator of the node's services that runs BOOTSTRAP prepares the node.
      return node ? planner::BootstrapPlugin(NodeAutomators(spec, *node), declared) : "";
    default: {
      const json* def = ServiceAction(spec, t.service, action);
      if (!def) def = ServiceAction(&spec == &before.spec ? target.spec : before.spec, t.service, action);
      return def ? def->value("type", "") : "";
    }
  }
}

// The services object of a state's spec, or null when it has none.
const json& SpecServices(const ClusterState& state) {
  static const json kNone;
  auto services = state.spec.find("services");
  return services == state.spec.end() || !services->is_object() ? kNone : *services;
}

// The planner's view of the services both specs define. `cache` (may be null)
// keeps the last one made: comparing the services is a small part of making it
// again through a catalog, and the creates from one template all have the same.
Result<std::vector<planner::ServiceSpec>> ServiceSpecs(const ClusterState& before, const ClusterState& target,
                                                       PlanCache* cache) {
  if (cache && cache->valid && cache->before_services == SpecServices(before) &&
      cache->target_services == SpecServices(target))
    return cache->services;
  catalog::Catalog cat;
  const json* put = nullptr;  // the services put last
  for (const ClusterState* state : {&before, &target}) {
    auto services = state->spec.find("services");
    if (services == state->spec.end() || !services->is_object()) continue;
    // The target's the same as the spec before (a create, most changes): put once.
    if (put && *put == *services) continue;
    put = &*services;
    for (const auto& [name, entity] : services->items()) {
      Result<std::string> put = cat.PutJson(catalog::Kind::kService, entity);
      if (!put.ok()) return put.status().WithContext("the cluster's copy of service '" + name + "'");
    }
  }
  std::vector<planner::ServiceSpec> out;
  for (const auto& [name, svc] : cat.services) {
    planner::ServiceSpec spec;
    spec.name = svc.name;
    spec.install_requires = svc.dependencies.install.required;
    spec.install_uses = svc.dependencies.install.used;
    spec.runtime_requires = svc.dependencies.runtime.required;
    spec.runtime_uses = svc.dependencies.runtime.used;
    spec.provides = svc.dependencies.provides;
    for (const auto& [action, def] : svc.actions) {
      std::string upper(action);
      for (char& c : upper)
        if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
      Result<Action> a = planner::ParseAction(upper);
      if (a.ok() && *a >= Action::kInstall && *a <= Action::kRemove) spec.actions.push_back(*a);
    }
    out.push_back(std::move(spec));
  }
  if (cache) *cache = PlanCache{SpecServices(before), SpecServices(target), out, true};
  return out;
}

std::vector<planner::NodeSpec> NodeSpecs(const json& layout) {
  std::vector<planner::NodeSpec> out;
  for (const json& n : Nodes(layout)) {
    std::set<std::string> s = NodeServices(n);
    out.push_back(planner::NodeSpec{n.value("hostname", ""), {s.begin(), s.end()}});
  }
  return out;
}

// The operation that takes a cluster from `before` to `target` (rollback, undo).
Result<planner::Operation> Converge(const ClusterState& before, const ClusterState& target) {
  std::map<std::string, std::set<std::string>> a, b;
  for (const json& n : Nodes(before.layout)) a[n.value("hostname", "")] = NodeServices(n);
  for (const json& n : Nodes(target.layout)) b[n.value("hostname", "")] = NodeServices(n);
  if (b.empty()) return planner::Operation::kDelete;
  bool same_nodes = a.size() == b.size();
  for (const auto& [id, s] : a) same_nodes = same_nodes && b.count(id);
  if (!same_nodes) return planner::Operation::kScale;
  bool adds = false, removes = false;
  for (const auto& [id, had] : a) {
    const auto& wants = b.at(id);
    for (const auto& s : wants) adds = adds || !had.count(s);
    for (const auto& s : had) removes = removes || !wants.count(s);
  }
  if (adds && removes)
    return Status::Invalid("going back would both add and remove services on the same nodes, which one job cannot "
                           "do yet; add or remove the services with add-services/remove-services");
  if (adds) return planner::Operation::kAddServices;
  if (removes) return planner::Operation::kRemoveServices;
  return planner::Operation::kReconfigure;
}

// Services on both sides whose definitions differ: going back from an upgrade
// installs the earlier versions again.
std::vector<std::string> ChangedServices(const ClusterState& before, const ClusterState& target) {
  std::set<std::string> on_both;
  for (const json& n : Nodes(before.layout))
    for (const std::string& s : NodeServices(n))
      if (const json* other = FindNode(target.layout, n.value("hostname", "")); other && NodeServices(*other).count(s))
        on_both.insert(s);
  auto services = [](const ClusterState& state) {
    auto it = state.spec.find("services");
    return it != state.spec.end() && it->is_object() ? *it : json::object();
  };
  const json was = services(before);
  const json will = services(target);
  std::vector<std::string> out;
  for (const std::string& s : on_both)
    if (was.value(s, json()) != will.value(s, json())) out.push_back(s);
  return out;
}

// Whether any string in `doc` has a '%': only those can name a macro, so a
// document without one expands to itself (the usual config, at every take).
bool MayHaveMacros(const json& doc) {
  if (doc.is_string()) return doc.get_ref<const std::string&>().find('%') != std::string::npos;
  if (doc.is_object() || doc.is_array())
    for (const json& v : doc)
      if (MayHaveMacros(v)) return true;
  return false;
}

// Whether the auth take decorator, which runs after the engine's, could open
// a sealed value in this text: it opens only strings that begin with "enc:"
// (server/auth/secrets.cpp), and a JSON text never escapes those characters.
bool MayHoldSealed(const std::string& text) { return text.find("enc:") != std::string::npos; }

// A node's entry in the "nodes" list of a task as wire::Dump writes it:
// {"access_v4", "bind_v4", "hostname", "id", "services"}, written straight
// from its macro node.
std::string NodeEntryText(const planner::MacroNode& m) {
  std::string out = "{\"access_v4\":";
  wire::AppendJsonString(out, m.access_v4);
  out += ",\"bind_v4\":";
  wire::AppendJsonString(out, m.bind_v4);
  out += ",\"hostname\":";
  wire::AppendJsonString(out, m.hostname);
  out += ",\"id\":";
  wire::AppendJsonString(out, m.id);
  out += ",\"services\":[";
  for (std::size_t i = 0; i < m.services.size(); ++i) {
    if (i > 0) out += ',';
    wire::AppendJsonString(out, m.services[i]);
  }
  return out + "]}";
}

// The "nodes" list of a task as wire::Dump writes it (made again every time a
// node's addresses arrive). `entries` keeps each node's entry as text: only
// those not made yet, or cleared since (that node's addresses arrived), are
// written again.
std::string NodesText(const std::vector<planner::MacroNode>& nodes, std::vector<std::string>& entries) {
  entries.resize(nodes.size());
  std::size_t size = 2;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (entries[i].empty()) entries[i] = NodeEntryText(nodes[i]);
    size += entries[i].size() + 1;
  }
  std::string out;
  out.reserve(size);
  out += '[';
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (i > 0) out += ',';
    out += entries[i];
  }
  return out + "]";
}

// Merges a task's result into its node's results: top-level keys are replaced.
void MergeResults(json& into, const json& result) {
  if (!into.is_object()) into = json::object();
  for (const auto& [k, v] : result.items()) into[k] = v;
}

// The predecessors' ids as wire::Dump writes the list, without making a json array first.
std::string AfterJson(const std::vector<std::int64_t>& after) {
  std::string out = "[";
  for (std::size_t i = 0; i < after.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(after[i]);
  }
  return out + "]";
}

// wire::Dump(ClusterState::ToJson()) from the texts of its spec and layout,
// without copying both documents into one first.
std::string StateJson(const std::string& spec_text, const std::string& layout_text, const std::string& status) {
  return "{\"layout\":" + layout_text + ",\"spec\":" + spec_text + ",\"status\":" + wire::Dump(json(status)) + "}";
}

}  // namespace

ClusterState ClusterState::FromJson(const json& doc) {
  ClusterState s;
  if (!doc.is_object()) return s;
  if (doc.contains("spec") && doc["spec"].is_object()) s.spec = doc["spec"];
  if (doc.contains("layout") && doc["layout"].is_object()) s.layout = doc["layout"];
  s.status = doc.value("status", "");
  return s;
}

Result<planner::Plan> PlanJob(const NewJob& job, const planner::DeclaredActions* declared, PlanCache* cache) {
  planner::PlanRequest req;
  const std::optional<JobOperation> operation = JobOperationFrom(job.operation);
  if (operation == JobOperation::kRollback || operation == JobOperation::kUndo) {
    WEFT_ASSIGN_OR_RETURN(planner::Operation op, Converge(job.before, job.target));
    req.operation = op;
    // A rollback restarts what it reconfigures; an undo takes back what its
    // job did and no more: it reconfigures only what that job reconfigured.
    req.restart = operation == JobOperation::kRollback || job.extras.restart;
    req.changed_services = ChangedServices(job.before, job.target);
    if (operation == JobOperation::kUndo) req.reconfigure_only = job.extras.reconfigured;
  } else {
    WEFT_ASSIGN_OR_RETURN(planner::Operation op, planner::ParseOperation(job.operation));
    req.operation = op;
    req.restart = job.extras.restart;
    req.changed_services = job.extras.changed_services;
  }
  req.before = NodeSpecs(job.before.layout);
  req.after = NodeSpecs(job.target.layout);
  if (req.operation == planner::Operation::kDelete) {
    // A delete runs one DELETE per node, whatever the node runs: it plans even
    // when a service on a node has no definition left.
    req.after.clear();
    for (planner::NodeSpec& n : req.before) n.services.clear();
  }
  // A node a failed job was to delete and did not is half deleted: a job plans its DELETE
  // again and no other task on it, not even a STOP of what it ran.
  std::set<std::string> marked;
  for (const json& n : Nodes(job.before.layout))
    if (IsDeleteFailed(n)) marked.insert(n.value("hostname", ""));
  for (auto* nodes : {&req.before, &req.after})
    for (planner::NodeSpec& n : *nodes)
      if (marked.count(n.id)) n.services.clear();
  WEFT_ASSIGN_OR_RETURN(std::vector<planner::ServiceSpec> specs, ServiceSpecs(job.before, job.target, cache));
  // A service on a node that neither spec defines cannot be planned; say how to
  // get out of it (a cluster stored that way by an older weftd's failed undo).
  std::set<std::string_view> defined;
  for (const planner::ServiceSpec& s : specs) defined.insert(s.name);
  for (const auto* nodes : {&req.before, &req.after})
    for (const planner::NodeSpec& n : *nodes)
      for (const std::string& s : n.services)
        if (!defined.count(s))
          return Status::Invalid("node '" + n.id + "' runs service '" + s +
                                 "', which the cluster's spec does not define; `weft cluster upgrade` puts the "
                                 "catalog's definition of it back (`weft cluster delete` needs none)");
  req.services = std::move(specs);
  req.only_services = job.extras.only_services;
  // A new node whose automators all say they do not run BOOTSTRAP gets none.
  std::set<std::string> existing;
  for (const planner::NodeSpec& n : req.before) existing.insert(n.id);
  const json& bootstrap_spec = SpecFor(job.before, job.target, "BOOTSTRAP");
  // Found once per set of services, not once per node.
  std::map<std::set<std::string>, bool> runs_bootstrap;
  for (const json& n : Nodes(job.target.layout)) {
    const std::string id = n.value("hostname", "");
    if (existing.count(id)) continue;
    auto [found, fresh] = runs_bootstrap.try_emplace(NodeServices(n));
    if (fresh) found->second = !planner::BootstrapPlugin(NodeAutomators(bootstrap_spec, n), declared).empty();
    if (!found->second) req.without_bootstrap.insert(id);
  }
  req.wait_for_addresses = planner::NamesAddresses(job.target.spec.value("config", json::object())) ||
                           planner::NamesAddresses(job.target.spec.value("services", json::object()));
  return planner::MakePlan(req);
}

json PlanJson(const NewJob& job, const planner::Plan& plan, const planner::DeclaredActions* declared) {
  json out = plan.ToJson();
  std::unordered_map<std::string, const json*> nodes;
  for (const json& n : Nodes(job.target.layout)) nodes.emplace(n.value("hostname", ""), &n);
  json& tasks = out["tasks"];
  for (std::size_t i = 0; i < plan.tasks().size() && i < tasks.size(); ++i) {
    const planner::PlannedTask& t = plan.tasks()[i];
    auto n = nodes.find(t.node);
    tasks[i]["plugin"] = PluginFor(job.before, job.target, t, n == nodes.end() ? nullptr : n->second, declared);
  }
  return out;
}

JobEngine::JobEngine(store::Store& store, queue::TaskQueue& queue, const Clock& clock, EngineOptions options)
    : store_(store), queue_(queue), clock_(clock), options_(options) {}

std::int64_t JobEngine::Backoff(std::int64_t attempt) const {
  std::int64_t wait = options_.retry_backoff_ms;
  for (std::int64_t i = 1; i < attempt && wait < options_.retry_backoff_max_ms; ++i) wait *= 2;
  return std::min(wait, options_.retry_backoff_max_ms);
}

std::string JobEngine::ActiveJob(const std::string& cluster_id) const {
  auto it = cluster_job_.find(cluster_id);
  return it == cluster_job_.end() ? "" : it->second;
}

void JobEngine::EmitJob(const Run& run) {
  const store::JobRecord& j = run.record;
  std::int64_t failed = 0, cancelled = 0;
  for (const auto& [id, t] : run.tasks) {
    failed += t.state == TaskState::kFailed;
    cancelled += t.state == TaskState::kCancelled;
  }
  events_.push_back(Event{j.tenant + "/job/" + j.cluster_id + "/",
                          {{"type", "job"},
                           {"job_id", j.id},
                           {"cluster_id", j.cluster_id},
                           {"operation", j.operation},
                           {"status", j.status},
                           {"message", j.message},
                           {"total", run.tasks.size()},
                           {"succeeded", run.succeeded},
                           {"failed", failed},
                           {"cancelled", cancelled},
                           {"at_ms", clock_.NowMs()}}});
}

void JobEngine::EmitCluster(const store::ClusterRecord& c) {
  events_.push_back(Event{c.tenant + "/cluster/" + c.id + "/",
                          {{"type", "cluster"},
                           {"cluster_id", c.id},
                           {"name", c.name},
                           {"status", c.status},
                           {"latest_job", c.latest_job},
                           {"at_ms", clock_.NowMs()}}});
}

void JobEngine::EmitCreated(const store::ClusterRecord& c, const std::string& job_id) {
  // On a topic of its owner's: a user's subscription to more than one cluster
  // covers it, and a subscriber sends its subscription again on it, so that
  // weftd extends it to the new cluster (docs/protocol.md, `events`).
  events_.push_back(Event{c.tenant + "/owner/" + c.owner + "/",
                          {{"type", "cluster.created"},
                           {"cluster_id", c.id},
                           {"name", c.name},
                           {"owner", c.owner},
                           {"job_id", job_id},
                           {"at_ms", clock_.NowMs()}}});
}

Status JobEngine::SetCluster(const std::string& cluster_id,
                             const std::function<void(store::ClusterRecord&)>& change) {
  WEFT_ASSIGN_OR_RETURN(std::optional<store::ClusterRecord> c, store_.GetCluster(cluster_id));
  if (!c.has_value()) return Status::Internal("cluster " + cluster_id + " of a job does not exist");
  store::ClusterRecord& rec = *c;
  const std::string old_status = rec.status;
  change(rec);
  rec.updated_at_ms = clock_.NowMs();
  WEFT_RETURN_IF_ERROR(store_.UpdateCluster(rec));
  EmitCluster(rec);
  return Status::Ok();
}

Result<store::JobRecord> JobEngine::Start(NewJob job) {
  if (!ActiveJob(job.cluster_id).empty())
    return Status::Conflict("cluster " + job.cluster_id + " already has job " + ActiveJob(job.cluster_id) +
                            " running; wait for it (weft job watch " + ActiveJob(job.cluster_id) +
                            ") or abort it (weft job abort)");
  const std::optional<planner::DeclaredActions> declared = DeclaredActions(job.tenant);
  WEFT_ASSIGN_OR_RETURN(planner::Plan plan, PlanJob(job, declared ? &*declared : nullptr, &plan_cache_));
  const std::int64_t now = clock_.NowMs();

  auto run = std::make_unique<Run>();
  store::JobRecord& r = run->record;
  r.tenant = job.tenant;
  r.cluster_id = job.cluster_id;
  r.operation = job.operation;
  r.status = ToString(JobStatus::kRunning);
  r.requested_by = job.requested_by;
  r.options_json = wire::Dump(job.options);
  // The target's spec and layout texts are the job's and the cluster's: dumped once, or not at all when given.
  const auto text = [](std::string& given, const json& doc) { return given.empty() ? wire::Dump(doc) : std::move(given); };
  std::string spec_text = text(job.target_spec_text, job.target.spec);
  std::string layout_text = text(job.target_layout_text, job.target.layout);
  r.before_json = StateJson(text(job.before_spec_text, job.before.spec), wire::Dump(job.before.layout), job.before.status);
  r.target_json = StateJson(spec_text, layout_text, job.target.status);
  r.parent_job = job.parent_job;
  r.created_at_ms = now;
  WEFT_RETURN_IF_ERROR(store_.InsertJob(&r));
  run->options = job.options;
  run->before = std::move(job.before);
  run->target = std::move(job.target);
  run->target_spec_text = spec_text;
  run->target_layout_text = layout_text;
  Index(*run);

  WEFT_ASSIGN_OR_RETURN(std::optional<store::ClusterRecord> cluster, store_.GetCluster(r.cluster_id));
  if (!cluster.has_value()) return Status::NotFound("cluster " + r.cluster_id + " does not exist");
  run->owner = cluster->owner;
  run->cluster_name = cluster->name;
  WEFT_ASSIGN_OR_RETURN(std::vector<store::NodeRecord> nodes, store_.ListNodes(r.cluster_id));
  for (const store::NodeRecord& n : nodes) run->results[n.id] = ParseOr(n.results_json, json::object());

  Run& ref = *run;
  runs_[r.id] = std::move(run);
  cluster_job_[ref.record.cluster_id] = ref.record.id;
  WEFT_RETURN_IF_ERROR(AddTasks(ref, plan, declared ? &*declared : nullptr));
  WEFT_RETURN_IF_ERROR(SetCluster(ref.record.cluster_id, [&](store::ClusterRecord& c) {
    c.status = ToString(ClusterStatus::kPending);
    c.spec_json = std::move(spec_text);
    c.layout_json = std::move(layout_text);
    c.latest_job = ref.record.id;
  }));
  EmitJob(ref);
  if (ref.record.operation == ToString(JobOperation::kCreate)) EmitCreated(*cluster, ref.record.id);
  store::JobRecord out = ref.record;
  if (ref.tasks.size() == static_cast<std::size_t>(ref.succeeded)) WEFT_RETURN_IF_ERROR(Finish(ref));
  return out;
}

Status JobEngine::AddTasks(Run& run, const planner::Plan& plan, const planner::DeclaredActions* declared) {
  const auto& planned = plan.tasks();
  const std::int64_t max_attempts = run.options.value("max_attempts", options_.max_attempts);
  std::vector<std::int64_t> ids(planned.size());
  // A task's plugin follows from its action and service, a BOOTSTRAP's from
  // its node's services (their automators): found once each, not once per task.
  std::map<std::pair<Action, std::string_view>, std::string> plugins;
  std::map<std::set<std::string>, std::string> bootstrap_plugins;
  // The job's tasks are written together once all are given ids (a few
  // statements, not two per task), before anything reads them.
  WEFT_RETURN_IF_ERROR(store_.BeginTaskInserts(planned.size()));
  Status enqueued = Status::Ok();
  for (std::uint32_t i = 0; i < planned.size(); ++i) {
    const planner::PlannedTask& p = planned[i];
    TaskNode t;
    t.key = plan.TaskId(i);
    t.node = p.node;
    t.action = std::string(planner::ActionName(p.action));
    t.service = p.service;
    if (p.action == Action::kBootstrap) {
      auto in_target = run.target_pos.find(p.node);
      if (in_target == run.target_pos.end()) {
        t.plugin = PluginFor(run.before, run.target, p, nullptr, declared);
      } else {
        const json& node = Nodes(run.target.layout)[in_target->second];
        auto [found, fresh] = bootstrap_plugins.try_emplace(NodeServices(node));
        if (fresh) found->second = PluginFor(run.before, run.target, p, &node, declared);
        t.plugin = found->second;
      }
    } else {
      auto [found, fresh] = plugins.try_emplace({p.action, p.service});
      if (fresh) found->second = PluginFor(run.before, run.target, p, nullptr, declared);
      t.plugin = found->second;
    }
    t.max_attempts = max_attempts;
    for (std::uint32_t a : p.after) t.after.push_back(ids[a]);
    queue::NewTask n;
    n.plugin = t.plugin;
    n.action = t.action;
    n.job_id = run.record.id;
    n.cluster_id = run.record.cluster_id;
    n.node_id = t.node;
    n.max_attempts = t.max_attempts;
    n.task_key = t.key;
    n.service = t.service;
    n.after_json = AfterJson(t.after);
    // A task with work and no predecessor is ready at once: written as queued,
    // not as waiting and then updated to queued by Release.
    n.waiting = !t.after.empty() || t.plugin.empty();
    if (!n.waiting) t.state = TaskState::kQueued;
    Result<std::vector<std::int64_t>> id = queue_.Enqueue(run.record.tenant, {std::move(n)});
    if (!id.ok()) {
      enqueued = id.status();
      break;
    }
    t.id = id->front();
    ids[i] = t.id;
    task_job_[t.id] = run.record.id;
    run.tasks.emplace(t.id, std::move(t));
  }
  // Those given are written even when one failed, as one by one they would have been.
  Status written = store_.EndTaskInserts();
  WEFT_RETURN_IF_ERROR(enqueued);
  WEFT_RETURN_IF_ERROR(written);
  for (auto& [id, t] : run.tasks) {
    t.waiting_for = static_cast<std::int64_t>(t.after.size());
    for (std::int64_t a : t.after) run.tasks.at(a).before.push_back(id);
  }
  std::vector<std::int64_t> roots;
  for (const auto& [id, t] : run.tasks)
    if (t.waiting_for == 0) roots.push_back(id);
  std::sort(roots.begin(), roots.end());
  for (std::int64_t id : roots) WEFT_RETURN_IF_ERROR(Release(run, id));
  return Status::Ok();
}

Status JobEngine::Release(Run& run, std::int64_t task_id) {
  std::vector<std::int64_t> todo = {task_id};
  while (!todo.empty()) {
    const std::int64_t id = todo.back();
    todo.pop_back();
    TaskNode& t = run.tasks.at(id);
    if (t.state != TaskState::kWaiting) continue;
    if (!t.plugin.empty()) {
      WEFT_RETURN_IF_ERROR(queue_.MakeReady(id));
      t.state = TaskState::kQueued;
      continue;
    }
    // No work: done the moment it is ready.
    WEFT_RETURN_IF_ERROR(store_.SetTaskState(id, TaskState::kSucceeded, "", 0, clock_.NowMs()));
    t.state = TaskState::kSucceeded;
    ++run.succeeded;
    for (std::int64_t next : t.before)
      if (--run.tasks.at(next).waiting_for == 0) todo.push_back(next);
  }
  return Status::Ok();
}

Status JobEngine::OnTaskEnded(const queue::Ended& ended) {
  // What CheckResult parsed of this finish, if it did (the queue calls it just before).
  std::optional<CheckedResult> checked = std::exchange(checked_, std::nullopt);
  auto j = task_job_.find(ended.task_id);
  if (j == task_job_.end()) return Status::Ok();  // not a task of a running job
  auto r = runs_.find(j->second);
  if (r == runs_.end()) return Status::Ok();
  Run& run = *r->second;
  TaskNode& t = run.tasks.at(ended.task_id);
  t.attempt = ended.attempt;
  run.in_flight.erase(t.id);

  if (ended.succeeded) {
    t.state = TaskState::kSucceeded;
    ++run.succeeded;
    if (!t.node.empty()) {
      if (t.action == "DELETE") {
        run.results.erase(t.node);
        run.node_parts.erase(t.node);
        WEFT_RETURN_IF_ERROR(store_.DeleteNode(run.record.cluster_id, t.node));
      } else if (!ended.result_json.empty() && ended.result_json != "{}") {  // most tasks return nothing
        const bool parsed = checked && checked->task_id == ended.task_id && checked->text == ended.result_json;
        json result = parsed ? std::move(checked->doc) : ParseOr(ended.result_json, json::object());
        if (result.is_object() && !result.empty()) {
          MergeResults(run.results[t.node], result);
          // The node's own part stays: it is its layout entry, which results do not change.
          if (auto parts = run.node_parts.find(t.node); parts != run.node_parts.end()) parts->second.results = Part{};
          WEFT_RETURN_IF_ERROR(store_.PutNode({run.record.cluster_id, t.node, wire::Dump(run.results[t.node])}));
          if (result.contains("access_v4") || result.contains("bind_v4") || result.contains("hostname"))
            UpdateMacroNode(run, t.node);
        }
      }
    }
    if (!run.failing) {
      std::vector<std::int64_t> ready;
      for (std::int64_t next : t.before)
        if (--run.tasks.at(next).waiting_for == 0) ready.push_back(next);
      for (std::int64_t next : ready) WEFT_RETURN_IF_ERROR(Release(run, next));
      if (run.succeeded == static_cast<std::int64_t>(run.tasks.size())) return Finish(run);
      return Status::Ok();
    }
    return Settle(run);
  }

  if (ended.cancelled) {
    // An attempt its job's abort told to stop, now over.
    t.state = TaskState::kCancelled;
    return Settle(run);
  }
  const std::string what = "task " + std::to_string(t.id) + " (" + t.key + ")";
  if (ended.final) {
    // INVALID, UNSUPPORTED, a result over a limit: the next attempt would end the same.
    t.state = TaskState::kFailed;
    if (run.failing) return Settle(run);
    return Fail(run, what + " failed at attempt " + std::to_string(t.attempt) +
                         ", and another attempt cannot change that, so it is not retried: " + ended.message);
  }
  if (!run.failing && t.attempt < t.max_attempts) {
    if (t.action == "CONFIRM") return Recreate(run, t, ended.message);
    return Retry(run, t, ended.message);
  }
  t.state = TaskState::kFailed;
  if (run.failing) return Settle(run);
  return Fail(run, what + " failed after " + std::to_string(t.attempt) + " attempt(s): " + ended.message);
}

Status JobEngine::CheckResult(std::int64_t task_id, const std::string& result_json) const {
  auto j = task_job_.find(task_id);
  if (j == task_job_.end()) return Status::Ok();  // a raw task: only the queue's bound applies
  auto r = runs_.find(j->second);
  if (r == runs_.end()) return Status::Ok();
  const Run& run = *r->second;
  auto t = run.tasks.find(task_id);
  if (t == run.tasks.end() || t->second.node.empty() || t->second.action == "DELETE") return Status::Ok();
  const std::string& node = t->second.node;
  // Kept for OnTaskEnded, which the queue calls next when the result is kept: parsed once.
  checked_ = CheckedResult{task_id, result_json, ParseOr(result_json, json::object())};
  const json& result = checked_->doc;
  if (!result.is_object()) return Status::Ok();
  if (Status facts = CheckNodeFacts(result); !facts.ok()) {
    return Status::Invalid("task " + std::to_string(task_id) + " (" + t->second.key + ") returned a result Weft cannot use: " +
                           facts.message());
  }
  auto found = run.results.find(node);
  // Merging replaces top-level keys, so the merged text is at most both texts:
  // only a result that might pass the bound is merged to be measured.
  const std::size_t now = found == run.results.end() ? 2 : wire::Dump(found->second).size();
  if (now + result_json.size() <= kMaxNodeResultsBytes) return Status::Ok();
  json merged = found == run.results.end() ? json::object() : found->second;
  MergeResults(merged, result);
  const std::size_t after = wire::Dump(merged).size();
  if (after <= kMaxNodeResultsBytes) return Status::Ok();
  return Status::TooLarge("task " + std::to_string(task_id) + " (" + t->second.key + ") returned a result of " +
                          std::to_string(result_json.size()) + " bytes that would make node " + node +
                          "'s results " + std::to_string(after) + " bytes (as JSON), over the limit of " +
                          std::to_string(kMaxNodeResultsBytes) +
                          " bytes for a node's results, which every later task of the node carries");
}

Status JobEngine::Retry(Run& run, TaskNode& t, const std::string& message) {
  const std::int64_t wait = Backoff(t.attempt);
  t.state = TaskState::kQueued;
  (void)run;
  return queue_.Requeue(t.id, clock_.NowMs() + wait,
                        "attempt " + std::to_string(t.attempt) + " failed (" + message + "); attempt " +
                            std::to_string(t.attempt + 1) + " after a " + DurationText(wait) + " backoff");
}

Status JobEngine::Recreate(Run& run, TaskNode& confirm, const std::string& message) {
  // The node never came up right: delete it and create it again, then confirm again.
  const std::string provider = confirm.plugin;
  const std::string round = std::to_string(confirm.attempt + 1);
  std::vector<std::int64_t> made;
  std::int64_t previous = 0;
  for (const char* action : {"DELETE", "CREATE"}) {
    queue::NewTask n;
    n.plugin = provider;
    n.action = action;
    n.job_id = run.record.id;
    n.cluster_id = run.record.cluster_id;
    n.node_id = confirm.node;
    n.max_attempts = confirm.max_attempts;
    n.task_key = confirm.node + "/" + action + "#" + round;
    n.after_json = previous ? AfterJson({previous}) : "[]";
    n.waiting = true;
    WEFT_ASSIGN_OR_RETURN(std::vector<std::int64_t> id, queue_.Enqueue(run.record.tenant, {std::move(n)}));
    TaskNode t;
    t.id = id.front();
    t.key = confirm.node + "/" + action + "#" + round;
    t.node = confirm.node;
    t.action = action;
    t.plugin = provider;
    t.max_attempts = confirm.max_attempts;
    if (previous) t.after = {previous};
    t.waiting_for = previous ? 1 : 0;
    if (previous) run.tasks.at(previous).before.push_back(t.id);
    task_job_[t.id] = run.record.id;
    previous = t.id;
    made.push_back(t.id);
    run.tasks.emplace(t.id, std::move(t));
  }
  // The DELETE of a node that was never really there is its plugin's business.
  run.tasks.at(previous).before.push_back(confirm.id);
  confirm.after.push_back(previous);
  confirm.waiting_for = 1;
  confirm.state = TaskState::kWaiting;
  WEFT_RETURN_IF_ERROR(store_.SetTaskAfter(confirm.id, AfterJson(confirm.after)));
  WEFT_RETURN_IF_ERROR(store_.SetTaskState(confirm.id, TaskState::kWaiting,
                                           "attempt " + std::to_string(confirm.attempt) + " failed (" + message +
                                               "); the node is deleted and created again before attempt " +
                                               std::to_string(confirm.attempt + 1),
                                           0, clock_.NowMs()));
  return Release(run, made.front());
}

Status JobEngine::Fail(Run& run, const std::string& message) {
  run.failing = true;
  run.record.status = ToString(JobStatus::kFailing);
  run.record.message = message;
  run.record.updated_at_ms = clock_.NowMs();
  WEFT_RETURN_IF_ERROR(store_.UpdateJob(run.record));
  const std::string why = "cancelled: job " + run.record.id + " failed";
  for (auto& [id, t] : run.tasks) {
    if (t.state == TaskState::kWaiting) {
      WEFT_RETURN_IF_ERROR(queue_.Cancel(id, why));
      t.state = TaskState::kCancelled;
    } else if (t.state == TaskState::kQueued) {
      if (queue_.IsLeased(id)) {
        run.in_flight.insert(id);  // let it finish: it may have made something the undo must remove
      } else {
        WEFT_RETURN_IF_ERROR(queue_.Cancel(id, why));
        t.state = TaskState::kCancelled;
      }
    }
  }
  EmitJob(run);
  return run.in_flight.empty() ? Finish(run) : Status::Ok();
}

Status JobEngine::Finish(Run& run) {
  const std::int64_t now = clock_.NowMs();
  store::JobRecord& r = run.record;
  const bool ok = !run.failing;
  const bool aborted = run.options.contains("aborted_by");
  r.status = ToString(ok ? JobStatus::kSucceeded : aborted ? JobStatus::kAborted : JobStatus::kFailed);
  if (aborted) r.message = "aborted by " + run.options.value("aborted_by", std::string());
  r.updated_at_ms = now;
  r.finished_at_ms = now;
  const std::string job_id = r.id;
  const std::string cluster_id = r.cluster_id;
  const std::string cluster_name = run.cluster_name;

  const std::optional<JobOperation> operation = JobOperationFrom(r.operation);
  std::optional<NewJob> undo;
  if (ok) {
    WEFT_RETURN_IF_ERROR(SetCluster(cluster_id, [&](store::ClusterRecord& c) {
      c.status = run.target.status;
      // As Start dumped them: the target does not change while the job runs.
      c.spec_json = run.target_spec_text.empty() ? wire::Dump(run.target.spec) : run.target_spec_text;
      c.layout_json = run.target_layout_text.empty() ? wire::Dump(run.target.layout) : run.target_layout_text;
      if (operation != JobOperation::kUndo && operation != JobOperation::kDelete &&
          operation != JobOperation::kCreate)
        c.previous_json = wire::Dump(json{{"spec", run.before.spec}, {"layout", run.before.layout}});
      if (ClusterStatusFrom(c.status) == ClusterStatus::kTerminated) c.expire_at_ms = 0;
    }));
    // A deleted cluster keeps no secret, not even sealed (docs/security.md).
    if (ClusterStatusFrom(run.target.status) == ClusterStatus::kTerminated)
      WEFT_RETURN_IF_ERROR(store_.WipeSealedValues(cluster_id));
  } else {
    const bool keep = run.options.value("keep_on_failure", false) || aborted;
    if (!keep && operation != JobOperation::kUndo) undo = UndoJob(run);
    if (undo) {
      r.message += "; undoing it in a new job";
      run.options["undone"] = true;
      r.options_json = wire::Dump(run.options);
    }
    const std::string status(
        ToString(undo ? ClusterStatus::kPending : keep ? ClusterStatus::kIncomplete : ClusterStatus::kInconsistent));
    WEFT_RETURN_IF_ERROR(SetCluster(cluster_id, [&](store::ClusterRecord& c) {
      c.status = status;
      // The cluster lists what a failed job (a delete, a shrink, an undo...) could
      // not remove, so that the next `cluster delete` or scale removes it rather
      // than finding nothing to do while machines live on, and its spec keeps the
      // definition of every service left on a node, so that every later job
      // (delete, remove-services, scale...) can plan it.
      json left = operation == JobOperation::kUndo ? LeftBehind(run) : Remaining(run);
      c.spec_json = wire::Dump(LeftBehindSpec(run, left));
      c.layout_json = wire::Dump(left);
    }));
  }
  WEFT_RETURN_IF_ERROR(store_.UpdateJob(r));
  EmitJob(run);
  ended_.push_back(Ended{r.operation, r.status, r.finished_at_ms - r.created_at_ms});
  for (const auto& [id, t] : run.tasks) task_job_.erase(id);
  runs_.erase(job_id);
  cluster_job_.erase(cluster_id);
  if (!undo) return Status::Ok();
  Result<store::JobRecord> started = Start(std::move(*undo));
  if (!started.ok()) {
    // The failed job stays failed; the cluster is left for an operator to look at.
    WEFT_RETURN_IF_ERROR(SetCluster(
        cluster_id, [&](store::ClusterRecord& c) { c.status = ToString(ClusterStatus::kInconsistent); }));
    return Status::Ok();
  }
  return AuditOwnJob(*started, cluster_name, "cluster.undo",
                     {{"operation", "undo"}, {"reason", "job " + job_id + " failed"}, {"failed_job", job_id}});
}

std::optional<NewJob> JobEngine::UndoJob(const Run& run) const {
  // Which nodes (and services) the failed job may have made: (node, action,
  // service) of every task that was attempted, gathered once (a big job has as
  // many tasks as nodes times services).
  std::set<std::tuple<std::string_view, std::string_view, std::string_view>> tried;
  for (const auto& [id, t] : run.tasks)
    if (t.attempt > 0) tried.emplace(t.node, t.action, t.service);
  auto attempted = [&](const std::string& node, std::string_view action, const std::string& service) {
    return tried.count({node, action, service}) != 0;
  };
  NewJob undo;
  undo.tenant = run.record.tenant;
  undo.cluster_id = run.record.cluster_id;
  undo.operation = ToString(JobOperation::kUndo);
  undo.requested_by = "job " + run.record.id + " (undo after failure)";
  undo.parent_job = run.record.id;
  undo.before.spec = run.target.spec;
  undo.before.status = ToString(ClusterStatus::kPending);
  const std::optional<JobOperation> op = JobOperationFrom(run.record.operation);
  json made = json::array();
  std::set<std::string> gone;  // nodes of the cluster the failed job deleted
  if (op == JobOperation::kCreate || op == JobOperation::kScale) {
    bool grew = false;
    for (const json& n : Nodes(run.target.layout)) {
      const std::string id = n.value("hostname", "");
      if (auto old = run.before_pos.find(id); old != run.before_pos.end()) {
        made.push_back(Nodes(run.before.layout)[old->second]);
        continue;
      }
      if (!attempted(id, "CREATE", "")) continue;
      // A new node: only the services whose INSTALL ran need stopping before it goes.
      json node = n;
      std::vector<std::string> installed;
      for (const std::string& s : NodeServices(n))
        if (attempted(id, "INSTALL", s)) installed.push_back(s);
      node["services"] = installed;
      made.push_back(std::move(node));
      grew = true;
    }
    // A shrink, or a grow that failed before any new node was attempted: nothing to
    // remove. Going back from a failed shrink would CREATE nodes whose DELETE may
    // have half run; `job retry` finishes the shrink instead.
    if (op == JobOperation::kScale && !grew) return std::nullopt;
    // A grow also deletes the nodes an earlier job failed to delete: the undo keeps
    // those whose DELETE did not succeed as they were (marked), and forgets the others.
    for (const json& n : Nodes(run.before.layout)) {
      const std::string id = n.value("hostname", "");
      if (run.target_pos.count(id)) continue;
      auto deleted = std::find_if(run.tasks.begin(), run.tasks.end(), [&](const auto& t) {
        return t.second.node == id && t.second.action == "DELETE" && t.second.state == TaskState::kSucceeded;
      });
      if (deleted == run.tasks.end())
        made.push_back(n);
      else
        gone.insert(id);
    }
  } else if (op == JobOperation::kAddServices) {
    for (const json& old : Nodes(run.before.layout)) {
      const std::string id = old.value("hostname", "");
      json n = old;
      std::set<std::string> had = NodeServices(old);
      if (auto wanted = run.target_pos.find(id); wanted != run.target_pos.end())
        for (const std::string& s : NodeServices(Nodes(run.target.layout)[wanted->second]))
          if (!had.count(s) && attempted(id, "INSTALL", s)) had.insert(s);
      n["services"] = std::vector<std::string>(had.begin(), had.end());
      made.push_back(std::move(n));
    }
  } else {
    return std::nullopt;
  }
  undo.before.layout = {{"nodes", made}};
  // The nodes it kept get back the configuration it may have changed, no more.
  for (const auto& [id, t] : run.tasks)
    if (t.action == "CONFIGURE" && t.attempt > 0 && run.before_pos.count(t.node))
      undo.extras.reconfigured.insert(t.node + "/" + t.service);
  if (op == JobOperation::kCreate) {
    undo.target.spec = run.target.spec;
    undo.target.status = ToString(ClusterStatus::kTerminated);
  } else {
    undo.target = run.before;
    if (!gone.empty()) {
      json left = json::array();
      for (const json& n : Nodes(run.before.layout))
        if (!gone.count(n.value("hostname", ""))) left.push_back(n);
      undo.target.layout["nodes"] = std::move(left);
    }
    if (undo.target.status.empty() || ClusterStatusFrom(undo.target.status) == ClusterStatus::kPending)
      undo.target.status = ToString(ClusterStatus::kActive);
  }
  return undo;
}

json JobEngine::LeftBehind(const Run& run) {
  std::unordered_set<std::string> done;  // node/action/service of every task that succeeded
  std::unordered_set<std::string> planned;  // the same of every task
  for (const auto& [id, t] : run.tasks) {
    const std::string key = t.node + "/" + t.action + "/" + t.service;
    if (t.state == store::TaskState::kSucceeded) done.insert(key);
    planned.insert(key);
  }
  json nodes = json::array();
  for (const json& n : Nodes(run.before.layout)) {
    const std::string id = n.value("hostname", "");
    if (done.count(id + "/DELETE/")) continue;
    json node = n;
    if (planned.count(id + "/DELETE/")) node["state"] = kDeleteFailed;
    std::vector<std::string> services;
    for (const std::string& s : NodeServices(n))
      if (!done.count(id + "/REMOVE/" + s)) services.push_back(s);
    node["services"] = services;
    nodes.push_back(std::move(node));
  }
  json layout = run.before.layout.is_object() ? run.before.layout : json::object();
  layout["nodes"] = std::move(nodes);
  return layout;
}

json JobEngine::Remaining(const Run& run) {
  std::unordered_set<std::string> done;     // node/action/service of every task that succeeded
  std::unordered_set<std::string> removes;  // node/service of every REMOVE
  for (const auto& [id, t] : run.tasks) {
    if (t.state == store::TaskState::kSucceeded) done.insert(t.node + "/" + t.action + "/" + t.service);
    if (t.action == "REMOVE") removes.insert(t.node + "/" + t.service);
  }
  const json& before = Nodes(run.before.layout);
  json nodes = json::array();
  for (const json& n : Nodes(run.target.layout)) {
    const std::string id = n.value("hostname", "");
    json node = n;
    if (auto old = run.before_pos.find(id); old != run.before_pos.end()) {
      std::set<std::string> services = NodeServices(n);
      bool kept = false;
      for (const std::string& s : NodeServices(before[old->second]))
        if (!services.count(s) && removes.count(id + "/" + s) && !done.count(id + "/REMOVE/" + s)) {
          services.insert(s);
          kept = true;
        }
      if (kept) node["services"] = std::vector<std::string>(services.begin(), services.end());
    }
    nodes.push_back(std::move(node));
  }
  for (const json& n : before) {
    const std::string id = n.value("hostname", "");
    if (run.target_pos.count(id) || done.count(id + "/DELETE/")) continue;
    json node = n;
    std::vector<std::string> services;
    for (const std::string& s : NodeServices(n))
      if (!done.count(id + "/REMOVE/" + s)) services.push_back(s);
    node["services"] = services;
    node["state"] = kDeleteFailed;
    nodes.push_back(std::move(node));
  }
  json layout = run.target.layout.is_object() ? run.target.layout : json::object();
  layout["nodes"] = std::move(nodes);
  return layout;
}

json JobEngine::LeftBehindSpec(const Run& run, const json& left) {
  // The spec the undo went back to, with the services it was to remove and
  // could not: their definitions come from the spec it started from.
  json spec = run.target.spec.is_object() ? run.target.spec : json::object();
  if (!spec.contains("services") || !spec["services"].is_object()) spec["services"] = json::object();
  const json* had = nullptr;
  if (auto it = run.before.spec.find("services"); it != run.before.spec.end() && it->is_object()) had = &*it;
  std::set<std::string> kept;
  for (const json& n : Nodes(left))
    for (const std::string& s : NodeServices(n)) {
      if (spec["services"].contains(s) || !had || !had->contains(s)) continue;
      spec["services"][s] = (*had)[s];
      kept.insert(s);
    }
  if (kept.empty()) return spec;
  if (spec.contains("overrides") && spec["overrides"].is_object() && spec["overrides"].contains("services") &&
      spec["overrides"]["services"].is_array()) {
    std::set<std::string> listed;
    for (const json& s : spec["overrides"]["services"])
      if (s.is_string()) listed.insert(s.get<std::string>());
    listed.insert(kept.begin(), kept.end());
    spec["overrides"]["services"] = std::vector<std::string>(listed.begin(), listed.end());
  }
  return spec;
}

void JobEngine::Index(Run& run) {
  run.target_pos.clear();
  run.before_pos.clear();
  const json& target = Nodes(run.target.layout);
  for (std::size_t i = 0; i < target.size(); ++i) run.target_pos[target[i].value("hostname", "")] = i;
  const json& before = Nodes(run.before.layout);
  for (std::size_t i = 0; i < before.size(); ++i) run.before_pos[before[i].value("hostname", "")] = i;
}

const json* JobEngine::LayoutNode(const Run& run, const std::string& node) {
  if (auto it = run.target_pos.find(node); it != run.target_pos.end()) return &Nodes(run.target.layout)[it->second];
  if (auto it = run.before_pos.find(node); it != run.before_pos.end()) return &Nodes(run.before.layout)[it->second];
  return nullptr;
}

namespace {

// results[key] when it is a string, else `otherwise`. Results are checked as they
// arrive (CheckNodeFacts), but a store written before that check may hold others.
std::string FactOr(const json& results, const char* key, const std::string& otherwise) {
  if (!results.is_object()) return otherwise;
  auto it = results.find(key);
  return it != results.end() && it->is_string() ? it->get<std::string>() : otherwise;
}

void FillMacroNode(planner::MacroNode& m, const json& results) {
  m.hostname = FactOr(results, "hostname", m.id);
  m.access_v4 = FactOr(results, "access_v4", "");
  m.bind_v4 = FactOr(results, "bind_v4", m.access_v4);
}

}  // namespace

void JobEngine::UpdateMacroNode(Run& run, const std::string& node) {
  const json& results = run.results.count(node) ? run.results.at(node) : json::object();
  for (auto [slot, pos, entries] : {std::tuple{run.macros_target.get(), &run.target_pos, &run.node_entries_target},
                                    std::tuple{run.macros_before.get(), &run.before_pos, &run.node_entries_before}}) {
    if (!slot) continue;
    auto it = pos->find(node);
    if (it == pos->end()) continue;
    FillMacroNode(slot->nodes[it->second], results);
    if (it->second < entries->size()) (*entries)[it->second].clear();
  }
  run.nodes_target = Part{};
  run.nodes_before = Part{};
}

const planner::MacroContext& JobEngine::Macros(Run& run, const std::string& node) {
  const bool in_target = run.target_pos.count(node) != 0;
  std::unique_ptr<planner::MacroContext>& slot = in_target ? run.macros_target : run.macros_before;
  if (!slot) {
    slot = std::make_unique<planner::MacroContext>();
    slot->owner = run.owner;
    for (const json& n : Nodes(in_target ? run.target.layout : run.before.layout)) {
      planner::MacroNode m;
      m.id = n.value("hostname", "");
      FillMacroNode(m, run.results.count(m.id) ? run.results.at(m.id) : json::object());
      std::set<std::string> s = NodeServices(n);
      m.services.assign(s.begin(), s.end());
      slot->nodes.push_back(std::move(m));
    }
  }
  slot->self = node;
  return *slot;
}

namespace {

// JSON text as a part many tasks share.
std::shared_ptr<const std::string> Text(std::string text) {
  return std::make_shared<const std::string>(std::move(text));
}

}  // namespace

JobEngine::Part JobEngine::MakePart(const json& doc) {
  Part part;
  std::string text = wire::Dump(doc);
  if (MayHoldSealed(text)) {
    part.tree = doc;
  } else {
    part.text = Text(std::move(text));
  }
  return part;
}

void JobEngine::Put(json& task, queue::TaskTexts& texts, const char* name, const Part& part) {
  if (part.text) {
    texts.Add(name, part.text);
  } else {
    task[name] = part.tree;
  }
}

Status JobEngine::Decorate(const store::TaskRecord& record, json& task, queue::TaskTexts& texts) {
  if (record.job_id.empty()) return Status::Ok();
  auto r = runs_.find(record.job_id);
  // A task of another tenant that names this job (debug.enqueue) gets nothing from it.
  if (r == runs_.end() || r->second->record.tenant != record.tenant) return Status::Ok();
  Run& run = *r->second;
  const std::string& node = record.node_id;
  const json& spec = SpecFor(run.before, run.target, record.action);
  texts.members.reserve(texts.members.size() + 7);  // the parts below, at most
  static const json kNone = json::object();
  auto found = run.results.find(node);
  const json& results = found == run.results.end() ? kNone : found->second;

  task["task_key"] = record.task_key;
  auto hostname = results.is_object() ? results.find("hostname") : results.end();
  task["hostname"] = hostname != results.end() ? *hostname : json(node);
  // The same for every task of the job that uses this spec.
  const bool before = &spec == &run.before.spec;
  Part& cluster = before ? run.cluster_before : run.cluster_target;
  if (!cluster.made())
    cluster.text = Text(wire::Dump({{"id", run.record.cluster_id},
                                    {"name", run.cluster_name},
                                    {"owner", run.owner},
                                    {"template", spec.contains("template") ? spec["template"].value("name", "") : ""}}));
  Put(task, texts, "cluster", cluster);
  if (auto provider = spec.find("provider"); provider != spec.end()) {
    Part& shared = before ? run.provider_before : run.provider_target;
    if (!shared.made()) shared = MakePart(*provider);
    Put(task, texts, "provider", shared);
  }
  // The same for every task of the node until a result changes them.
  Run::NodeParts& parts = run.node_parts[node];
  if (!parts.node.made()) {
    const json* layout_node = LayoutNode(run, node);
    json n = layout_node ? *layout_node : json::object();
    n["id"] = node;
    parts.node = MakePart(n);
  }
  // The results go once, as "results": weft-host gives the plugin "node.results"
  // as a copy of them. Sent twice, they halved what a node may return.
  if (!parts.results.made()) parts.results = MakePart(results);
  Put(task, texts, "node", parts.node);
  Put(task, texts, "results", parts.results);

  const planner::MacroContext& macros = Macros(run, node);
  static const json kNoConfig = json::object();
  auto found_config = spec.find("config");
  const json& config = found_config == spec.end() ? kNoConfig : *found_config;
  std::optional<bool>& config_macros = before ? run.config_macros_before : run.config_macros_target;
  if (!config_macros) config_macros = MayHaveMacros(config);
  if (*config_macros) {
    Result<json> expanded = planner::ExpandMacros(config, macros);
    if (!expanded.ok()) return expanded.status().WithContext("cluster config for node " + node);
    task["config"] = std::move(*expanded);
  } else {
    // The same for every node (the usual config).
    Part& same = before ? run.config_before : run.config_target;
    if (!same.made()) same.text = Text(wire::Dump(config));
    Put(task, texts, "config", same);
  }
  if (!record.service.empty()) {
    // The same for every node when its fields name no macro: made once.
    Part& cached = (before ? run.services_before : run.services_target)[{record.service, record.action}];
    if (cached.made() && !cached.per_node) {
      Put(task, texts, "service", cached);
    } else {
      json service = json::object();
      service["name"] = record.service;
      bool per_node = false;
      if (const json* def = ServiceAction(spec, record.service, record.action)) {
        json action = *def;
        if (auto fields = action.find("fields"); fields != action.end() && MayHaveMacros(*fields)) {
          Result<json> expanded = planner::ExpandMacros(*fields, macros);
          if (!expanded.ok())
            return expanded.status().WithContext("service '" + record.service + "' " + AsciiLower(record.action) +
                                                 " fields");
          *fields = std::move(*expanded);
          per_node = true;
        }
        service["action"] = std::move(action);
      }
      if (per_node) {
        cached.per_node = true;
        task["service"] = std::move(service);
      } else {
        cached = MakePart(service);
        Put(task, texts, "service", cached);
      }
    }
  }
  const json& nodes = Nodes(run.target.layout);
  if (static_cast<std::int64_t>(nodes.size()) <= options_.max_nodes_in_task) {
    const bool target = &macros == run.macros_target.get();
    Part& list = target ? run.nodes_target : run.nodes_before;
    if (!list.made())
      list.text = Text(NodesText(macros.nodes, target ? run.node_entries_target : run.node_entries_before));
    Put(task, texts, "nodes", list);
  } else {
    task["nodes_omitted"] = nodes.size();
  }
  return Status::Ok();
}

Status JobEngine::Abort(const std::string& job_id, const std::string& who) {
  auto r = runs_.find(job_id);
  if (r == runs_.end()) {
    WEFT_ASSIGN_OR_RETURN(std::optional<store::JobRecord> rec, store_.GetJob(job_id));
    if (!rec.has_value()) return Status::NotFound("job '" + job_id + "' does not exist");
    return Status::Conflict(JobIs(job_id, rec->status) + "; only a running job can be aborted");
  }
  Run& run = *r->second;
  if (run.options.contains("aborted_by"))
    return Status::Conflict("job " + job_id + " is already being aborted: " + run.record.message);
  run.options["aborted_by"] = who;
  run.record.options_json = wire::Dump(run.options);
  run.failing = true;
  run.record.message = "aborted by " + who;
  WEFT_RETURN_IF_ERROR(CancelForAbort(run));
  return Settle(run);
}

Status JobEngine::CancelForAbort(Run& run) {
  const std::string why =
      "cancelled: job " + run.record.id + " was aborted by " + run.options.value("aborted_by", std::string());
  for (auto& [id, t] : run.tasks) {
    if (t.state != TaskState::kWaiting && t.state != TaskState::kQueued) continue;
    // A running attempt is told to stop; until it has, it may still change the
    // node (and a result it makes is kept), so the job waits for it.
    if (t.state == TaskState::kQueued && queue_.IsLeased(id)) {
      run.in_flight.insert(id);
    } else {
      t.state = TaskState::kCancelled;
    }
    WEFT_RETURN_IF_ERROR(queue_.Cancel(id, why));
  }
  return Status::Ok();
}

Status JobEngine::Settle(Run& run) {
  if (run.in_flight.empty()) return Finish(run);
  return run.options.contains("aborted_by") ? StoppingAttempts(run) : Status::Ok();
}

Status JobEngine::StoppingAttempts(Run& run) {
  // `failing` until the last has stopped; the cluster takes no other operation meanwhile.
  const std::string aborted = "aborted by " + run.options.value("aborted_by", std::string());
  run.record.status = ToString(JobStatus::kFailing);
  run.record.message = aborted + "; waiting for " + std::to_string(run.in_flight.size()) +
                       " running attempt(s) to stop on their hosts";
  run.record.updated_at_ms = clock_.NowMs();
  WEFT_RETURN_IF_ERROR(store_.UpdateJob(run.record));
  EmitJob(run);
  return Status::Ok();
}

Result<json> JobEngine::EndedRun(const store::JobRecord& rec, const std::string& retried_by) {
  WEFT_ASSIGN_OR_RETURN(std::vector<store::TaskRecord> tasks, store_.ListJobTasks(rec.id, false));
  const json earlier = ParseOr(rec.history_json, json::array());
  json failed = json::array();
  std::int64_t succeeded = 0, cancelled = 0, failed_count = 0;
  for (const store::TaskRecord& t : tasks) {
    succeeded += t.state == TaskState::kSucceeded;
    cancelled += t.state == TaskState::kCancelled;
    if (t.state != TaskState::kFailed) continue;
    if (++failed_count > static_cast<std::int64_t>(kHistoryFailedTasks)) continue;
    WEFT_ASSIGN_OR_RETURN(std::optional<store::TaskRecord> full, store_.GetTask(t.id));  // with message and output
    const store::TaskRecord& f = full.has_value() ? *full : t;
    failed.push_back({{"id", f.id},
                      {"key", f.task_key},
                      {"node", f.node_id},
                      {"action", f.action},
                      {"service", f.service},
                      {"attempt", f.attempt},
                      {"host_id", f.host_id},
                      {"message", f.message},
                      {"stdout", OutputTail(f.stdout_tail)},
                      {"stderr", OutputTail(f.stderr_tail)}});
  }
  std::int64_t started = rec.created_at_ms;
  if (earlier.is_array() && !earlier.empty() && earlier.back().is_object())
    started = earlier.back().value("retried_at_ms", started);
  return json{{"run", earlier.is_array() ? earlier.size() + 1 : 1},
              {"status", rec.status},
              {"message", rec.message},
              {"started_at_ms", started},
              {"finished_at_ms", rec.finished_at_ms},
              {"retried_at_ms", clock_.NowMs()},
              {"retried_by", retried_by},
              {"succeeded", succeeded},
              {"cancelled", cancelled},
              {"failed", failed_count},
              {"failed_tasks", std::move(failed)}};
}

Status JobEngine::Retry(const std::string& job_id, const std::string& who) {
  if (runs_.count(job_id)) return Status::Conflict("job " + job_id + " is still running; only a failed or aborted job can be retried");
  WEFT_ASSIGN_OR_RETURN(std::optional<store::JobRecord> found, store_.GetJob(job_id));
  if (!found.has_value()) return Status::NotFound("job '" + job_id + "' does not exist");
  store::JobRecord rec = *found;
  if (const auto status = JobStatusFrom(rec.status); status != JobStatus::kFailed && status != JobStatus::kAborted)
    return Status::Conflict(JobIs(job_id, rec.status) + "; only a failed or aborted job can be retried");
  if (ParseOr(rec.options_json, json::object()).value("undone", false))
    return Status::Conflict("job " + job_id + " failed and was undone by a later job; start the operation again instead");
  if (!ActiveJob(rec.cluster_id).empty())
    return Status::Conflict("cluster " + rec.cluster_id + " has job " + ActiveJob(rec.cluster_id) +
                            " running; retry job " + job_id + " when it is done");
  WEFT_ASSIGN_OR_RETURN(std::vector<store::JobRecord> later, store_.ListJobs(rec.tenant, rec.cluster_id, 1));
  if (!later.empty() && later.front().id != job_id)
    return Status::Conflict("cluster " + rec.cluster_id + " has had job " + later.front().id + " since job " + job_id +
                            "; only the cluster's latest job can be retried");
  // What this run ended with stays in the job: the new attempts overwrite the
  // failed tasks' state, message and output, and the job's own message.
  WEFT_ASSIGN_OR_RETURN(json ended, EndedRun(rec, who));
  json history = ParseOr(rec.history_json, json::array());
  if (!history.is_array()) history = json::array();
  history.push_back(std::move(ended));
  rec.history_json = history.dump();
  rec.status = ToString(JobStatus::kRunning);
  rec.finished_at_ms = 0;
  rec.message = "";
  rec.updated_at_ms = clock_.NowMs();
  if (json options = ParseOr(rec.options_json, json::object()); options.is_object() && options.erase("aborted_by"))
    rec.options_json = wire::Dump(options);  // the history keeps who aborted the run before
  WEFT_RETURN_IF_ERROR(store_.UpdateJob(rec));
  WEFT_RETURN_IF_ERROR(LoadRun(rec));
  Run& run = *runs_.at(job_id);
  const std::int64_t now = clock_.NowMs();
  std::vector<std::int64_t> ready;
  for (auto& [id, t] : run.tasks) {
    if (t.state == TaskState::kFailed) {
      t.max_attempts = t.attempt + options_.max_attempts;
      WEFT_RETURN_IF_ERROR(store_.SetTaskMaxAttempts(id, t.max_attempts));
      WEFT_RETURN_IF_ERROR(queue_.Requeue(id, now, "retried with job " + job_id));
      t.state = TaskState::kQueued;
    } else if (t.state == TaskState::kCancelled) {
      WEFT_RETURN_IF_ERROR(store_.SetTaskState(id, TaskState::kWaiting, "", 0, now));
      t.state = TaskState::kWaiting;
      if (t.waiting_for == 0) ready.push_back(id);
    }
  }
  std::sort(ready.begin(), ready.end());
  for (std::int64_t id : ready) WEFT_RETURN_IF_ERROR(Release(run, id));
  WEFT_RETURN_IF_ERROR(SetCluster(rec.cluster_id, [&](store::ClusterRecord& c) {
    c.status = ToString(ClusterStatus::kPending);
    c.latest_job = job_id;
  }));
  EmitJob(run);
  return Status::Ok();
}

Status JobEngine::ExpireLeases() {
  WEFT_ASSIGN_OR_RETURN(std::vector<store::ClusterRecord> expired, store_.ListExpiredClusters(clock_.NowMs()));
  std::map<std::string, std::string> blocked;  // this pass's lease_blocked_
  for (const store::ClusterRecord& c : expired) {
    if (!ActiveJob(c.id).empty()) {  // expired again once its job is done
      if (auto it = lease_blocked_.find(c.id); it != lease_blocked_.end()) blocked.insert(*it);
      continue;
    }
    NewJob job;
    job.tenant = c.tenant;
    job.cluster_id = c.id;
    job.operation = ToString(JobOperation::kDelete);
    job.requested_by = "janitor (the cluster's lease ran out)";
    job.before.spec = ParseOr(c.spec_json, json::object());
    job.before.layout = ParseOr(c.layout_json, json{{"nodes", json::array()}});
    job.before.status = c.status;
    job.target.spec = job.before.spec;
    job.target.status = ToString(ClusterStatus::kTerminated);
    Result<store::JobRecord> started = Start(std::move(job));
    if (started.ok()) {
      // The lease is over whatever the delete does: never start a second one.
      WEFT_RETURN_IF_ERROR(SetCluster(c.id, [](store::ClusterRecord& r) { r.expire_at_ms = 0; }));
      WEFT_RETURN_IF_ERROR(AuditOwnJob(*started, c.name, "cluster.delete",
                                       {{"operation", "delete"},
                                        {"reason", "the cluster's lease ran out"},
                                        {"expired_at_ms", c.expire_at_ms}}));
      continue;
    }
    if (started.status().code() != Code::kInvalid) return started.status();
    // A delete that cannot be planned (Start writes nothing then) keeps the
    // lease, still due: it is tried again on every pass, and said once, until
    // its cause is fixed or the lease is extended.
    const std::string why = started.status().message();
    auto said = lease_blocked_.find(c.id);
    if (said == lease_blocked_.end() || said->second != why) {
      WEFT_LOG(kWarn, "jobs") << "the lease of cluster '" << c.name << "' (id " << c.id << ", tenant " << c.tenant
                              << ") ran out but it cannot be deleted: " << why
                              << "; it is deleted once that is fixed (or `weft cluster extend-lease` keeps it)";
    }
    blocked[c.id] = why;
  }
  lease_blocked_ = std::move(blocked);
  return Status::Ok();
}

Status JobEngine::AuditOwnJob(const store::JobRecord& job, const std::string& cluster, const char* op, json detail) {
  store::AuditRecord e;
  e.at_ms = clock_.NowMs();
  e.actor = "weftd";
  e.actor_tenant = "_system";
  e.actor_role = "system";
  e.op = op;
  e.tenant = job.tenant;
  e.target = "cluster " + cluster;
  e.cluster_id = job.cluster_id;
  e.cluster = cluster;
  e.job_id = job.id;
  e.outcome = "ok";
  detail["job_status"] = job.status;
  e.detail_json = wire::Dump(detail);
  return store_.AppendAudit(e);
}

Status JobEngine::LoadRun(const store::JobRecord& record) {
  auto run = std::make_unique<Run>();
  run->record = record;
  run->options = ParseOr(record.options_json, json::object());
  run->before = ClusterState::FromJson(ParseOr(record.before_json, json::object()));
  run->target = ClusterState::FromJson(ParseOr(record.target_json, json::object()));
  Index(*run);
  run->failing = JobStatusFrom(record.status) == JobStatus::kFailing;
  WEFT_ASSIGN_OR_RETURN(std::optional<store::ClusterRecord> cluster, store_.GetCluster(record.cluster_id));
  if (cluster.has_value()) {
    run->owner = cluster->owner;
    run->cluster_name = cluster->name;
  }
  WEFT_ASSIGN_OR_RETURN(std::vector<store::NodeRecord> nodes, store_.ListNodes(record.cluster_id));
  for (const store::NodeRecord& n : nodes) run->results[n.id] = ParseOr(n.results_json, json::object());
  WEFT_ASSIGN_OR_RETURN(std::vector<store::TaskRecord> tasks, store_.ListJobTasks(record.id, false));
  for (const store::TaskRecord& r : tasks) {
    TaskNode t;
    t.id = r.id;
    t.key = r.task_key;
    t.node = r.node_id;
    t.action = r.action;
    t.service = r.service;
    t.plugin = r.plugin;
    t.state = r.state == TaskState::kLeased ? TaskState::kQueued : r.state;
    t.attempt = r.attempt;
    t.max_attempts = r.max_attempts;
    json after = ParseOr(r.after_json, json::array());
    if (after.is_array())
      for (const json& a : after)
        if (a.is_number_integer()) t.after.push_back(a.get<std::int64_t>());
    if (t.state == TaskState::kSucceeded) ++run->succeeded;
    task_job_[t.id] = record.id;
    run->tasks.emplace(t.id, std::move(t));
  }
  for (auto& [id, t] : run->tasks)
    for (std::int64_t a : t.after) {
      auto p = run->tasks.find(a);
      if (p == run->tasks.end()) continue;
      p->second.before.push_back(id);
      if (p->second.state != TaskState::kSucceeded) ++t.waiting_for;
    }
  cluster_job_[record.cluster_id] = record.id;
  runs_[record.id] = std::move(run);
  return Status::Ok();
}

std::set<std::string> JobEngine::PendingPlugins(const std::string& job_id) const {
  std::set<std::string> out;
  auto r = runs_.find(job_id);
  if (r == runs_.end()) return out;
  for (const auto& [id, t] : r->second->tasks)
    if ((t.state == TaskState::kWaiting || t.state == TaskState::kQueued) && !t.plugin.empty()) out.insert(t.plugin);
  return out;
}

std::map<std::string, std::int64_t> JobEngine::RunningByOperation() const {
  std::map<std::string, std::int64_t> out;
  for (const auto& [id, run] : runs_) ++out[run->record.operation];
  return out;
}

Status JobEngine::Load() {
  runs_.clear();
  task_job_.clear();
  cluster_job_.clear();
  events_.clear();
  ended_.clear();
  Result<std::vector<store::JobRecord>> jobs = store_.ListUnfinishedJobs();
  if (!jobs.ok()) return jobs.status().WithContext("cannot load the running jobs");
  for (const store::JobRecord& j : *jobs) WEFT_RETURN_IF_ERROR(LoadRun(j));
  // Finish what a crash may have interrupted between two steps of a job.
  for (const store::JobRecord& j : *jobs) {
    auto it = runs_.find(j.id);
    if (it == runs_.end()) continue;
    Run& run = *it->second;
    if (run.failing && run.options.contains("aborted_by")) {
      // Its running attempts are told to stop again: the last weftd's word was lost with it.
      WEFT_RETURN_IF_ERROR(CancelForAbort(run));
      if (run.in_flight.empty()) WEFT_RETURN_IF_ERROR(Finish(run));
      continue;
    }
    if (run.failing) {
      for (auto& [id, t] : run.tasks) {
        if (t.state != TaskState::kQueued && t.state != TaskState::kWaiting) continue;
        if (t.state == TaskState::kQueued && queue_.IsLeased(id)) {
          run.in_flight.insert(id);
          continue;
        }
        WEFT_RETURN_IF_ERROR(queue_.Cancel(id, "cancelled: job " + j.id + " failed"));
        t.state = TaskState::kCancelled;
      }
      if (run.in_flight.empty()) WEFT_RETURN_IF_ERROR(Finish(run));
      continue;
    }
    std::vector<std::int64_t> ready;
    for (const auto& [id, t] : run.tasks)
      if (t.state == TaskState::kWaiting && t.waiting_for == 0) ready.push_back(id);
    std::sort(ready.begin(), ready.end());
    for (std::int64_t id : ready) WEFT_RETURN_IF_ERROR(Release(run, id));
    if (run.succeeded == static_cast<std::int64_t>(run.tasks.size())) WEFT_RETURN_IF_ERROR(Finish(run));
  }
  return Status::Ok();
}

}  // namespace weft::jobs

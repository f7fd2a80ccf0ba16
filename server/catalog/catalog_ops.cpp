#include "weft/server/catalog/catalog_ops.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "weft/catalog/catalog.hpp"
#include "weft/common/json_fields.hpp"
#include "weft/common/wire.hpp"
#include "weft/planner/macros.hpp"
#include "weft/planner/planner.hpp"
#include "weft/solver/solver.hpp"
#include "field_check.hpp"

namespace weft::catalog {
namespace {

using api::Call;
using api::Effect;
using api::Endpoint;
using api::Response;
using api::Role;
using api::Router;

using catalog::Kind;

constexpr std::int64_t kMaxVersion = INT64_MAX;
// A page of <kind>.list with the entities' bodies: at most this many entities...
constexpr std::int64_t kMaxPageEntities = 500;
// ...and, past the first, no more once their JSON reaches this size.
constexpr std::size_t kPageBytes = 256 * 1024;

}  // namespace

Result<catalog::Catalog> LoadCatalog(store::Store& store, const std::string& tenant) {
  catalog::Catalog cat;
  for (Kind kind : catalog::kAllKinds) {
    WEFT_ASSIGN_OR_RETURN(std::vector<store::CatalogEntityRecord> records,
                          store.ListCatalogEntities(tenant, catalog::KindName(kind)));
    for (const store::CatalogEntityRecord& r : records) {
      json doc = json::parse(r.json, nullptr, false);
      Result<std::string> name = doc.is_discarded() ? Result<std::string>(Status::Internal("not JSON"))
                                                    : cat.PutJson(kind, doc);
      if (!name.ok())
        return Status::Internal("stored " + std::string(catalog::KindName(kind)) + " '" + r.name + "' version " +
                                std::to_string(r.version) + " cannot be read: " + name.status().message());
    }
  }
  return cat;
}

Result<std::shared_ptr<const Catalog>> CatalogCache::Get(const std::string& tenant) {
  // Many tenants' catalogs are not kept for long: past this many, start over.
  constexpr std::size_t kMaxTenants = 64;
  if (generation_ != store_.catalog_generation() || tenants_.size() >= kMaxTenants) {
    tenants_.clear();
    generation_ = store_.catalog_generation();
  }
  auto it = tenants_.find(tenant);
  if (it != tenants_.end()) return it->second;
  WEFT_ASSIGN_OR_RETURN(Catalog loaded, LoadCatalog(store_, tenant));
  auto shared = std::make_shared<const Catalog>(std::move(loaded));
  tenants_.emplace(tenant, shared);
  return shared;
}

PlanBounds PlanBounds::Of(const server::Config& config) {
  PlanBounds b;
  b.max_nodes = config.jobs.max_plan_nodes;
  b.max_header_bytes = config.limits.max_header_bytes;
  // Room for the reply's header around the body (v, id, ok) and the envelope.
  b.max_reply_bytes = config.limits.max_total_bytes > 8192 ? config.limits.max_total_bytes - 4096
                                                           : config.limits.max_total_bytes / 2;
  return b;
}

namespace {

// Why a cluster's config is bounded and what to do, after "more than the N bytes a
// cluster's config may be": `carried_by` names the tasks that carry the config.
std::string ConfigLimitReason(std::size_t max_header_bytes, const std::string& carried_by) {
  return ": " + carried_by + " carries it, and a task handed out to a host may be at most " +
         std::to_string(server::MaxTaskBytes(max_header_bytes)) +
         " bytes (limits.max_header_bytes, at most 1 MiB, less 4 KiB), with room for the rest of the task";
}

constexpr const char* kConfigAdvice =
    "Keep files out of the config: upload them as resources (weft resource upload) and name them in it";

}  // namespace

Status PlanBounds::CheckConfig(const json& config) const {
  WEFT_RETURN_IF_ERROR(planner::CheckMacros(config).WithContext("cluster config"));
  const std::size_t bytes = wire::Dump(config).size();
  const std::size_t max_config_bytes = server::MaxClusterConfigBytes(max_header_bytes);
  if (bytes <= max_config_bytes) return Status::Ok();
  return Status::Invalid("the cluster config is " + std::to_string(bytes) + " bytes as JSON, more than the " +
                         std::to_string(max_config_bytes) + " bytes a cluster's config may be" +
                         ConfigLimitReason(max_header_bytes, "every task of the cluster") + ". " + kConfigAdvice);
}

Status PlanBounds::CheckTemplateConfig(const ClusterTemplate& tmpl) const {
  // Measured as cluster.create measures the config of a create that adds none.
  const std::size_t bytes = wire::Dump(tmpl.defaults.config.is_object() ? tmpl.defaults.config : json::object()).size();
  const std::size_t max_config_bytes = server::MaxClusterConfigBytes(max_header_bytes);
  if (bytes <= max_config_bytes) return Status::Ok();
  return Status::Invalid("clustertemplate '" + tmpl.name + "': defaults.config: " + std::to_string(bytes) +
                         " bytes as JSON, more than the " + std::to_string(max_config_bytes) +
                         " bytes a cluster's config may be" +
                         ConfigLimitReason(max_header_bytes, "every task of a cluster made from the template") +
                         "; every cluster.create from it would be refused. " + kConfigAdvice);
}

Status PlanBounds::CheckNodes(std::int64_t nodes) const {
  if (nodes <= max_nodes) return Status::Ok();
  return Status::TooLarge("a plan of " + std::to_string(nodes) + " nodes is more than this weftd answers (at most " +
                          std::to_string(max_nodes) + " nodes, jobs.max_plan_nodes in weftd.toml); plan a smaller "
                          "size, or raise jobs.max_plan_nodes (a plan's reply is about 2 KiB per node)");
}

std::optional<api::Response> PlanBounds::RefuseNodes(std::int64_t nodes, const char* key) const {
  Status s = CheckNodes(nodes);
  if (s.ok()) return std::nullopt;
  return api::Response::Error(std::move(s), {{key, nodes}, {"max_plan_nodes", max_nodes}});
}

Status PlanBounds::CheckReply(std::size_t bytes, std::int64_t nodes, json* details) const {
  if (bytes <= max_reply_bytes) return Status::Ok();
  *details = {{"nodes", nodes}, {"reply_bytes", bytes}, {"max_reply_bytes", max_reply_bytes}};
  return Status::TooLarge("the plan of " + std::to_string(nodes) + " nodes would be a reply of " +
                          std::to_string(bytes) + " bytes, more than a message may be (" +
                          std::to_string(max_reply_bytes) + " bytes: limits.max_message_bytes in weftd.toml, less "
                          "4 KiB for the header); plan fewer nodes, or raise limits.max_message_bytes here and in "
                          "the client");
}

json PlanCounts(const json& plan) {
  json actions = json::object();
  json bootstrap = json::object();  // plugin -> the nodes whose BOOTSTRAP it runs
  const json no_list = json::array();
  const json& tasks = plan.is_object() && plan.contains("tasks") ? plan["tasks"] : no_list;
  for (const json& t : tasks) {
    const std::string action = t.value("action", "");
    actions[action] = actions.value(action, std::int64_t{0}) + 1;
    if (action == "BOOTSTRAP") {
      const std::string plugin = t.value("plugin", "");
      bootstrap[plugin] = bootstrap.value(plugin, std::int64_t{0}) + 1;
    }
  }
  const std::size_t stages = plan.is_object() && plan.contains("stages") ? plan["stages"].size() : 0;
  return {{"task_count", tasks.size()},
          {"stage_count", stages},
          {"actions", std::move(actions)},
          {"bootstrap", std::move(bootstrap)}};
}

Result<std::vector<std::string>> ServiceNameList(const json& body, const char* key, bool required) {
  std::vector<std::string> out;
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) {
    if (required) return Status::Invalid(std::string(key) + " is required: a list of service names");
    return out;
  }
  if (!it->is_array())
    return Status::Invalid(std::string(key) + " must be a list of service names, got " + jsonf::Brief(*it));
  for (std::size_t i = 0; i < it->size(); ++i) {
    const json& v = (*it)[i];
    if (!v.is_string() || v.get<std::string>().empty())
      return Status::Invalid(std::string(key) + "[" + std::to_string(i) + "] must be a service name, got " +
                             jsonf::Brief(v));
    if (std::find(out.begin(), out.end(), v.get<std::string>()) != out.end())
      return Status::Invalid("the list of " + std::string(key) + " names '" + v.get<std::string>() + "' twice");
    out.push_back(v.get<std::string>());
  }
  if (required && out.empty()) return Status::Invalid(std::string("the list of ") + key + " names no service");
  return out;
}

Result<std::optional<std::vector<std::string>>> OptionalServiceList(const json& body, const std::string& left_out) {
  WEFT_ASSIGN_OR_RETURN(std::vector<std::string> services, ServiceNameList(body, "services", false));
  if (!body.contains("services") || body["services"].is_null()) return std::optional<std::vector<std::string>>();
  if (services.empty())
    return Status::Invalid("services is empty: leave it out to " + left_out + ", or name at least one");
  return std::optional<std::vector<std::string>>(std::move(services));
}

Result<std::optional<std::vector<std::string>>> RequestedServices(const json& body, const ClusterTemplate& tmpl) {
  std::string defaults;
  for (const std::string& s : tmpl.defaults.services) defaults += (defaults.empty() ? "" : ", ") + s;
  return OptionalServiceList(
      body, "get the services of template '" + tmpl.name + "' (" +
                (defaults.empty() ? std::string("it names none in defaults.services") : defaults) + ")");
}

void AddDeclaredActions(planner::DeclaredActions& into, const json& d, const std::string& tenant) {
  if (!d.is_object() || !d.contains("type") || !d["type"].is_string()) return;
  const std::string owner = d.value("tenant", std::string());
  if (!owner.empty() && owner != tenant) return;
  std::uint32_t& bits = into[d["type"].get<std::string>()];
  auto actions = d.find("actions");
  if (actions == d.end() || !actions->is_array()) return;
  for (const json& a : *actions) {
    if (!a.is_string()) continue;
    Result<planner::Action> action = planner::ParseAction(a.get<std::string>());
    if (action.ok() && *action != planner::Action::kJoin) bits |= 1u << (static_cast<int>(*action) - 1);
  }
}

namespace {

json EntityJson(Kind kind, const store::CatalogEntityRecord& r) {
  json entity = json::parse(r.json, nullptr, false);
  if (entity.is_discarded()) entity = json::object();
  return {{"kind", catalog::KindName(kind)},
          {"name", r.name},
          {"version", r.version},
          {"created_at_ms", r.created_at_ms},
          {"entity", std::move(entity)}};
}

class CatalogOps {
 public:
  CatalogOps(store::Store& store, const Clock& clock, const server::Config& config,
             resources::ResourceStore* resources)
      : store_(store), clock_(clock), config_(config), resources_(resources) {}

  Response Put(Kind kind, const Call& call) {
    const json& body = call.request->body;
    if (!body.is_object()) return Response::Error(jsonf::RequireObject(body, "body"));
    // A <kind>.get reply fed back whole would be stored as a hollow entity (its
    // fields are all unknown to the kind): what to put is its `entity`.
    if (body.contains("entity") && (body.contains("kind") || body.contains("version")))
      return Response::Error(Status::Invalid("this is a " + std::string(catalog::KindName(kind)) +
                                             ".get reply: put its `entity`"),
                             {{"kind", catalog::KindName(kind)}});
    catalog::Catalog scratch;
    std::vector<std::string> warnings;
    Result<std::string> name = scratch.PutJson(kind, body, &warnings);
    if (!name.ok()) return Response::Error(name.status(), {{"kind", catalog::KindName(kind)}});
    // A template whose own config is over what a cluster's may be could make no cluster.
    if (kind == Kind::kClusterTemplate)
      if (const catalog::ClusterTemplate* tmpl = scratch.FindClusterTemplate(*name))
        if (Status s = PlanBounds::Of(config_).CheckTemplateConfig(*tmpl); !s.ok())
          return Response::Error(s, {{"kind", catalog::KindName(kind)}});
    // A provider's or service's plugin fields are checked as `catalog check` checks them,
    // against the registered plugins: a misspelt or mistyped field is said now, not when a
    // task fails. Only warned: the plugin may change before anything runs.
    if (kind == Kind::kProvider || kind == Kind::kService) {
      WEFT_TRY_ASSIGN(plugins, RegisteredPlugins(call.principal.tenant));
      WEFT_TRY_ASSIGN(fields, CheckPluginFields(scratch, plugins.descriptors, resources_, call.principal.tenant));
      for (const json& p : fields.problems) warnings.push_back(p.value("message", std::string()));
    }
    // Stored as the library writes it back: unknown fields kept, keys sorted.
    WEFT_TRY_ASSIGN(doc, scratch.GetJson(kind, *name));
    // An entity equal to the latest version keeps it: no new version, nothing written.
    WEFT_TRY_ASSIGN(latest, store_.GetCatalogEntity(call.principal.tenant, catalog::KindName(kind), *name));
    if (latest && json::parse(latest->json, nullptr, false) == doc)
      return Response::Ok({{"kind", catalog::KindName(kind)},
                           {"name", *name},
                           {"version", latest->version},
                           {"unchanged", true},
                           {"warnings", warnings}});
    WEFT_TRY_ASSIGN(version, store_.PutCatalogEntity(call.principal.tenant, catalog::KindName(kind), *name,
                                                     wire::Dump(doc), clock_.NowMs()));
    return Response::Ok({{"kind", catalog::KindName(kind)}, {"name", *name}, {"version", version}, {"unchanged", false},
                         {"warnings", warnings}});
  }

  Response Get(Kind kind, const Call& call) {
    const json& body = call.request->body;
    WEFT_TRY_ASSIGN(name, jsonf::String(body, "name", ""));
    std::optional<std::int64_t> version;
    if (body.contains("version") && !body["version"].is_null()) {
      WEFT_TRY_ASSIGN(v, jsonf::Int(body, "version", "", 1, kMaxVersion));
      version = v;
    }
    WEFT_TRY_ASSIGN(record, store_.GetCatalogEntity(call.principal.tenant, catalog::KindName(kind), name, version));
    if (!record)
      return Response::Error(Status::NotFound(
          std::string(catalog::KindName(kind)) + " '" + name + "'" +
          (version ? " version " + std::to_string(*version) : std::string()) + " does not exist in tenant '" +
          call.principal.tenant + "'" + (version ? " (or that version is a deletion)" : "")));
    return Response::Ok(EntityJson(kind, *record));
  }

  // Names and versions of every entity; or, with "with_entities", a page of
  // them with their bodies, so that an export of a large catalog takes one
  // request per page instead of one per entity.
  Response List(Kind kind, const Call& call) {
    const json& body = call.request->body;
    WEFT_TRY_ASSIGN(with_entities, jsonf::Bool(body, "with_entities", "", false));
    if (!with_entities) {
      WEFT_TRY_ASSIGN(records, store_.ListCatalogEntities(call.principal.tenant, catalog::KindName(kind)));
      json list = json::array();
      for (const store::CatalogEntityRecord& r : records)
        list.push_back({{"name", r.name}, {"version", r.version}, {"created_at_ms", r.created_at_ms}});
      return Response::Ok({{"kind", catalog::KindName(kind)}, {"entities", std::move(list)}});
    }
    WEFT_TRY_ASSIGN(after, jsonf::String(body, "after", "", ""));
    WEFT_TRY_ASSIGN(limit, jsonf::Int(body, "limit", "", 1, kMaxPageEntities, kMaxPageEntities));
    // One more than the page holds tells whether another page follows.
    WEFT_TRY_ASSIGN(records, store_.ListCatalogEntities(call.principal.tenant, catalog::KindName(kind), after,
                                                        limit + 1));
    json list = json::array();
    std::size_t bytes = 0;
    json next = nullptr;
    for (std::size_t i = 0; i < records.size(); ++i) {
      // A page ends at `limit` entities or once it holds kPageBytes of JSON
      // (at least one entity), so a reply stays well inside the header limit.
      if (i == static_cast<std::size_t>(limit) || (!list.empty() && bytes >= kPageBytes)) {
        next = list.back()["name"];
        break;
      }
      bytes += records[i].json.size();
      list.push_back(EntityJson(kind, records[i]));
    }
    return Response::Ok({{"kind", catalog::KindName(kind)}, {"entities", std::move(list)}, {"next", std::move(next)}});
  }

  Response Delete(Kind kind, const Call& call) {
    const json& body = call.request->body;
    WEFT_TRY_ASSIGN(name, jsonf::String(body, "name", ""));
    WEFT_TRY_ASSIGN(version,
                    store_.DeleteCatalogEntity(call.principal.tenant, catalog::KindName(kind), name, clock_.NowMs()));
    if (!version)
      return Response::Error(Status::NotFound(std::string(catalog::KindName(kind)) + " '" + name +
                                              "' does not exist in tenant '" + call.principal.tenant + "'"));
    return Response::Ok({{"kind", catalog::KindName(kind)}, {"name", name}, {"version", *version}});
  }

  // The plugin types a tenant's tasks can run: every descriptor a host registered, and
  // the types some live host runs.
  struct Plugins {
    std::map<std::string, json> descriptors;
    std::set<std::string> live_types;
  };

  Result<Plugins> RegisteredPlugins(const std::string& tenant) {
    Result<std::vector<store::HostRecord>> hosts = store_.ListHosts();
    if (!hosts.ok()) return hosts.status();
    Plugins out;
    const std::int64_t now = clock_.NowMs();
    for (const store::HostRecord& h : *hosts) {
      json list = json::parse(h.plugins_json, nullptr, false);
      if (!list.is_array()) continue;
      const bool live = now - h.last_seen_ms <= config_.hosts.silent_after_ms;
      for (const json& d : list) {
        if (!d.is_object() || !d.contains("type") || !d["type"].is_string()) continue;
        // Another tenant's own (Lua resource) plugins never run this tenant's tasks.
        const std::string owner = d.value("tenant", std::string());
        if (!owner.empty() && owner != tenant) continue;
        const std::string type = d["type"].get<std::string>();
        if (live) out.live_types.insert(type);
        out.descriptors.emplace(type, d);
      }
    }
    return out;
  }

  Response Check(const Call& call) {
    WEFT_TRY_ASSIGN(cat, LoadCatalog(store_, call.principal.tenant));
    WEFT_TRY_ASSIGN(plugins, RegisteredPlugins(call.principal.tenant));
    const std::set<std::string>& live_types = plugins.live_types;
    const std::map<std::string, json>& descriptors = plugins.descriptors;

    json dangling = json::array();
    for (const catalog::DanglingReference& d : catalog::CheckReferences(cat))
      dangling.push_back({{"kind", catalog::KindName(d.kind)},
                          {"name", d.name},
                          {"path", d.path},
                          {"target_kind", catalog::KindName(d.target_kind)},
                          {"target", d.target},
                          {"message", d.message}});

    json unrunnable = json::array();
    auto unrun = [&](const char* kind, const std::map<std::string, std::vector<std::string>>& in_use) {
      for (const auto& [type, users] : in_use) {
        if (live_types.count(type)) continue;
        std::string who;
        for (const std::string& u : users) who += (who.empty() ? "" : ", ") + u;
        const bool known = descriptors.count(type) != 0;
        unrunnable.push_back(
            {{"kind", kind},
             {"type", type},
             {"needed_by", users},
             {"message", std::string(kind) + " type '" + type + "' (needed by " + who + ") " +
                             (known ? "is registered only by hosts that are not live; start one of them"
                                    : "is run by no registered host; start a weft-host that has that plugin")}});
      }
    };
    unrun("provider", catalog::ProviderTypesInUse(cat));
    unrun("automator", catalog::AutomatorTypesInUse(cat));

    WEFT_TRY_ASSIGN(fields, CheckPluginFields(cat, descriptors, resources_, call.principal.tenant));
    const std::size_t problems = dangling.size() + unrunnable.size() + fields.problems.size();
    return Response::Ok({{"dangling", std::move(dangling)},
                         {"unrunnable", std::move(unrunnable)},
                         {"fields", std::move(fields.problems)},
                         {"warnings", std::move(fields.warnings)},
                         {"problems", problems}});
  }

  Response Plan(const Call& call) {
    const json& body = call.request->body;
    WEFT_TRY_ASSIGN(name, jsonf::String(body, "name", ""));
    if (!catalog::IsValidName(name))
      return Response::Error(Status::Invalid("a cluster name must be 1 to 128 characters of A-Z a-z 0-9 . _ -, starting "
                                             "with a letter or digit; got " + jsonf::Brief(body["name"])));
    WEFT_TRY_ASSIGN(template_name, jsonf::String(body, "template", ""));
    WEFT_TRY_ASSIGN(size, jsonf::Int(body, "size", "", 1, kMaxClusterSize));
    // Before anything is solved or planned: a plan's memory grows with its nodes.
    const PlanBounds bounds = PlanBounds::Of(config_);
    if (std::optional<Response> refused = bounds.RefuseNodes(size, "size")) return std::move(*refused);
    solver::SolveRequest req;
    req.cluster_name = name;
    req.size = size;
    for (const char* key : {"provider", "hardwaretype", "imagetype"}) {
      if (!body.contains(key) || body[key].is_null()) continue;
      WEFT_TRY_ASSIGN(value, jsonf::String(body, key, ""));
      std::string_view k = key;
      (k == "provider" ? req.overrides.provider : k == "hardwaretype" ? req.overrides.hardwaretype
                                                                       : req.overrides.imagetype) = value;
    }
    if (body.contains("config") && !body["config"].is_null() && !body["config"].is_object())
      return Response::Error(jsonf::RequireObject(body["config"], "config"));
    WEFT_TRY_ASSIGN(summary, jsonf::Bool(body, "summary", "", false));

    WEFT_TRY_ASSIGN(cat, LoadCatalog(store_, call.principal.tenant));
    const catalog::ClusterTemplate* tmpl = cat.FindClusterTemplate(template_name);
    if (!tmpl)
      return Response::Error(Status::NotFound("clustertemplate '" + template_name + "' does not exist in tenant '" +
                                              call.principal.tenant + "'; see `weft clustertemplate list`"));
    // Checked as cluster.create checks it (a name twice, an empty list are refused).
    WEFT_TRY_ASSIGN(services, RequestedServices(body, *tmpl));
    req.overrides.services = std::move(services);

    json config = tmpl->defaults.config.is_object() ? tmpl->defaults.config : json::object();
    if (body.contains("config") && body["config"].is_object()) config.merge_patch(body["config"]);
    if (Status checked = bounds.CheckConfig(config); !checked.ok()) return Response::Error(checked);

    solver::SolveOptions options;
    options.clock = &clock_;
    options.max_time_ms = kSolveTimeMs;
    Result<catalog::Layout> layout = solver::Solve(cat, *tmpl, req, options);
    if (!layout.ok()) return Response::Error(layout.status(), {{"template", template_name}, {"size", size}});

    // What the registered plugins declare decides each node's BOOTSTRAP, as for the job.
    WEFT_TRY_ASSIGN(hosts, store_.ListHosts());
    planner::DeclaredActions declared;
    for (const store::HostRecord& h : hosts) {
      json list = json::parse(h.plugins_json, nullptr, false);
      if (list.is_array())
        for (const json& d : list) AddDeclaredActions(declared, d, call.principal.tenant);
    }
    // The automators of a node's services, in the order the job engine looks at them.
    auto automators = [&](const catalog::LayoutNode& n) {
      std::vector<std::string> out;
      for (const std::string& s : std::set<std::string>(n.services.begin(), n.services.end()))
        if (const catalog::Service* svc = cat.FindService(s))
          for (const char* a : {"install", "configure", "initialize", "start"})
            if (auto it = svc->actions.find(a); it != svc->actions.end()) out.push_back(it->second.type);
      return out;
    };
    std::map<std::string, std::string> bootstrap;  // node -> the automator that runs its BOOTSTRAP

    planner::PlanRequest plan_req;
    plan_req.operation = planner::Operation::kCreate;
    std::set<std::string> on_cluster;
    for (const catalog::LayoutNode& n : layout->nodes) {
      plan_req.after.push_back(planner::NodeSpec{n.hostname, n.services});
      on_cluster.insert(n.services.begin(), n.services.end());
      std::string b = planner::BootstrapPlugin(automators(n), &declared);
      if (b.empty()) plan_req.without_bootstrap.insert(n.hostname);
      bootstrap.emplace(n.hostname, std::move(b));
    }
    for (const std::string& s : on_cluster) {
      const catalog::Service* svc = cat.FindService(s);
      if (!svc) continue;  // the solver only places services of the catalog
      planner::ServiceSpec spec;
      spec.name = svc->name;
      spec.install_requires = svc->dependencies.install.required;
      spec.install_uses = svc->dependencies.install.used;
      spec.runtime_requires = svc->dependencies.runtime.required;
      spec.runtime_uses = svc->dependencies.runtime.used;
      spec.provides = svc->dependencies.provides;
      for (const auto& [action, def] : svc->actions) {
        std::string upper;
        for (char c : action) upper += static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
        Result<planner::Action> a = planner::ParseAction(upper);
        if (a.ok() && *a >= planner::Action::kInstall && *a <= planner::Action::kRemove) spec.actions.push_back(*a);
      }
      plan_req.services.push_back(std::move(spec));
      // As the job's plan: service tasks wait for the addresses their fields name.
      if (Result<json> doc = cat.GetJson(Kind::kService, s); doc.ok() && planner::NamesAddresses(*doc))
        plan_req.wait_for_addresses = true;
    }
    plan_req.wait_for_addresses = plan_req.wait_for_addresses || planner::NamesAddresses(config);
    Result<planner::Plan> plan = planner::MakePlan(plan_req);
    if (!plan.ok()) return Response::Error(plan.status().WithContext("template '" + template_name + "'"));

    json reply = plan->ToJson();
    // Each task's plugin ("" for a JOIN, which runs none), and a warning for
    // each plugin that would be sent an action it does not declare.
    const catalog::Provider* provider =
        cat.FindProvider(req.overrides.provider ? *req.overrides.provider : tmpl->defaults.provider);
    const std::string provider_type = provider ? provider->providertype : "";
    std::set<std::string> warned;
    json warnings = json::array();
    json& tasks = reply["tasks"];
    for (std::size_t i = 0; i < plan->tasks().size() && i < tasks.size(); ++i) {
      const planner::PlannedTask& t = plan->tasks()[i];
      std::string plugin;
      if (t.action == planner::Action::kCreate || t.action == planner::Action::kConfirm ||
          t.action == planner::Action::kDelete) {
        plugin = provider_type;
      } else if (t.action == planner::Action::kBootstrap) {
        plugin = bootstrap[t.node];
      } else if (const catalog::Service* svc = t.service.empty() ? nullptr : cat.FindService(t.service)) {
        std::string lower;
        for (char c : planner::ActionName(t.action)) lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
        if (auto it = svc->actions.find(lower); it != svc->actions.end()) plugin = it->second.type;
      }
      tasks[i]["plugin"] = plugin;
      auto d = declared.find(plugin);
      if (plugin.empty() || d == declared.end() || t.action == planner::Action::kJoin) continue;
      const std::uint32_t bit = 1u << (static_cast<int>(t.action) - 1);
      const std::string action(planner::ActionName(t.action));
      if (!(d->second & bit) && warned.insert(plugin + "/" + action).second)
        warnings.push_back("plugin '" + plugin + "' does not declare action " + action + " (task " +
                           plan->TaskId(static_cast<std::uint32_t>(i)) +
                           (t.service.empty() ? std::string() : ", service '" + t.service + "'") +
                           "): that task would fail; see `weft plugin list`");
    }
    const std::int64_t nodes = static_cast<std::int64_t>(layout->nodes.size());
    if (summary) return Response::Ok(PlanSummary(*layout, reply, std::move(warnings)));
    reply["layout"] = catalog::LayoutToJson(*layout);
    reply["warnings"] = std::move(warnings);
    // Never a reply larger than a message may be.
    json details;
    if (Status s = bounds.CheckReply(wire::Dump(reply).size(), nodes, &details); !s.ok())
      return Response::Error(s, std::move(details));
    return Response::Ok(std::move(reply));
  }

 private:
  // What `weft cluster plan` prints, without the list of every node and task: a reply of
  // a few hundred bytes for a plan of any size. `plan` is the full reply's tasks and stages.
  static json PlanSummary(const catalog::Layout& layout, const json& plan, json warnings) {
    json out = PlanCounts(plan);
    out["summary"] = true;
    out["nodes"] = layout.nodes.size();
    out["layout_summary"] = catalog::LayoutSummary(layout);
    out["warnings"] = std::move(warnings);
    return out;
  }

  store::Store& store_;
  const Clock& clock_;
  const server::Config& config_;
  resources::ResourceStore* resources_;  // may be null: then no field is checked against it
};

}  // namespace

// The body fields of the reads (docs/protocol.md), for both routers that serve them.
const api::Fields kGetFields = {"name", "version"};
const api::Fields kListFields = {"with_entities", "after", "limit"};

void RegisterCatalogReads(Router& router, store::Store& store, const Clock& clock, const server::Config& config) {
  const std::set<Role> users = {Role::kUser, Role::kAdmin, Role::kSuperadmin};
  const std::set<Endpoint> api = {Endpoint::kApi};
  auto ops = std::make_shared<CatalogOps>(store, clock, config, nullptr);
  for (Kind kind : catalog::kAllKinds) {
    const std::string k(catalog::KindName(kind));
    router.Add(k + ".get", users, api, [ops, kind](const Call& c) { return ops->Get(kind, c); }, Effect::kReads,
               kGetFields);
    router.Add(k + ".list", users, api, [ops, kind](const Call& c) { return ops->List(kind, c); }, Effect::kReads,
               kListFields);
  }
}

void RegisterCatalogOps(Router& router, store::Store& store, const Clock& clock, const server::Config& config,
                        resources::ResourceStore* resources) {
  const std::set<Role> users = {Role::kUser, Role::kAdmin, Role::kSuperadmin};
  const std::set<Role> admins = {Role::kAdmin, Role::kSuperadmin};
  const std::set<Endpoint> api = {Endpoint::kApi};
  auto ops = std::make_shared<CatalogOps>(store, clock, config, resources);
  for (Kind kind : catalog::kAllKinds) {
    const std::string k(catalog::KindName(kind));
    // A put's body is the entity itself, whose unknown keys are kept (with a warning).
    router.Add(k + ".put", admins, api, [ops, kind](const Call& c) { return ops->Put(kind, c); }, Effect::kChanges,
               api::Fields::FreeForm());
    router.Add(k + ".get", users, api, [ops, kind](const Call& c) { return ops->Get(kind, c); }, Effect::kReads,
               kGetFields);
    router.Add(k + ".list", users, api, [ops, kind](const Call& c) { return ops->List(kind, c); }, Effect::kReads,
               kListFields);
    router.Add(k + ".delete", admins, api, [ops, kind](const Call& c) { return ops->Delete(kind, c); },
               Effect::kChanges, {"name"});
  }
  router.Add("catalog.check", users, api, [ops](const Call& c) { return ops->Check(c); }, Effect::kReads, {});
  router.Add("cluster.plan", users, api, [ops](const Call& c) { return ops->Plan(c); }, Effect::kReads,
             {"name", "template", "size", "provider", "hardwaretype", "imagetype", "services", "config", "summary"});
}

}  // namespace weft::catalog

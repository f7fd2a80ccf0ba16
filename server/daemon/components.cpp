#include "weft/server/daemon/components.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "weft/server/api/audit.hpp"
#include "weft/server/auth/auth_ops.hpp"
#include "weft/server/capacity/capacity_ops.hpp"
#include "weft/server/catalog/catalog_ops.hpp"
#include "weft/server/hosts/host_ops.hpp"
#include "weft/server/jobs/cluster_ops.hpp"
#include "weft/server/resources/database_resource_store.hpp"
#include "weft/server/resources/resource_ops.hpp"
#include "weft/common/lifecycle.hpp"
#include "weft/common/log.hpp"
#include "weft/common/wire.hpp"

namespace weft::server {

using json = nlohmann::json;

Components::Components(const Config& config, store::Store& store, const Clock& clock)
    : config_(config),
      store_(store),
      clock_(clock),
      metrics_(config.metrics.enabled ? std::make_unique<ServerMetrics>() : nullptr),
      queue_(store, clock, queue::QueueOptions{config.tasks.lease_ms}),
      engine_(store, queue_, clock,
              jobs::EngineOptions{config.jobs.max_attempts, config.jobs.retry_backoff_ms,
                                  config.jobs.retry_backoff_max_ms, config.jobs.max_nodes_in_task}),
      hosts_(store, queue_, clock, config),
      dispatcher_(hosts_, queue_),
      registry_(store, clock, keys_),
      logins_(store, clock, registry_,
              auth::LoginOptions{config.security.session_idle_ms, config.security.session_max_ms,
                                 config.security.login_burst, config.security.login_interval_ms}),
      retention_(config.retention, store) {
  retention_.OnTokensPruned([this](std::int64_t cutoff_ms) { logins_.ForgetSpentTokens(cutoff_ms); });
}

Status Components::Start() {
  WEFT_RETURN_IF_ERROR(Prepare());
  return Resume();
}

Status Components::Prepare() {
  if (config_.store.ResourcesInDatabase()) {
    auto in_store = std::make_unique<resources::DatabaseResourceStore>(store_, clock_);
    resources_in_store_ = in_store.get();
    resources_ = std::move(in_store);
  } else {
    WEFT_ASSIGN_OR_RETURN(std::unique_ptr<resources::FileResourceStore> files,
                          resources::FileResourceStore::Open(config_.server.data_dir / "resources", clock_));
    WEFT_RETURN_IF_ERROR(ExportResourceRows(*files));
    resources_ = std::move(files);
  }
  return Wire();
}

Status Components::ExportResourceRows(resources::FileResourceStore& files) {
  // Resources a "database" weftd kept in this store's tables before: not lost by the switch back to files.
  resources::DatabaseResourceStore rows(store_, clock_);
  WEFT_ASSIGN_OR_RETURN(resources::DatabaseResourceStore::Exported exported, rows.ExportFiles(files));
  for (const std::string& what : exported.exported) {
    WEFT_LOG(kInfo, "resources") << "exported from the store into " << files.root().string() << ": " << what;
  }
  for (const std::string& what : exported.replaced) {
    WEFT_LOG(kInfo, "resources") << "exported from the store into " << files.root().string() << ": " << what;
  }
  for (const std::string& what : exported.same) {
    WEFT_LOG(kInfo, "resources") << "not exported from the store into " << files.root().string()
                                 << ", the directory has it already (kept the directory's): " << what;
  }
  if (!exported.marked.empty()) {
    WEFT_LOG(kInfo, "resources") << "resources are kept as files now; the store's were compared with "
                                 << files.root().string() << " and the export recorded in "
                                 << exported.marked.string()
                                 << " (weftd no longer compares them; the store's rows stay for other weftd)";
  }
  return Status::Ok();
}

void Components::ImportResourceFiles() {
  if (!resources_in_store_) return;
  const std::filesystem::path dir = config_.server.data_dir / "resources";
  Result<resources::DatabaseResourceStore::Imported> imported = resources_in_store_->ImportFiles(dir);
  if (!imported.ok()) {
    // Not a reason to stop leading: the store serves what it has; the files stay where they are.
    WEFT_LOG(kError, "resources") << imported.status().message() << "; the resources in that directory are not "
                                  << "served until imported: fix the cause and restart weftd, or upload them again "
                                  << "(weft resource upload TYPE NAME FILE)";
    return;
  }
  for (const std::string& what : imported->imported) {
    WEFT_LOG(kInfo, "resources") << "imported from " << dir.string() << " into the store: " << what;
  }
  for (const std::string& what : imported->skipped) {
    WEFT_LOG(kWarn, "resources") << "not imported from " << dir.string() << ", the store has it already (kept the "
                                 << "store's): " << what;
  }
  if (!imported->moved_to.empty()) {
    WEFT_LOG(kInfo, "resources") << "resources are kept in the store now; the imported files were moved to "
                                 << imported->moved_to.string() << " (remove it once you no longer need it)";
  }
}

Status Components::Resume() {
  ImportResourceFiles();
  // Loading may resume jobs (tasks whose predecessors are done become ready): one transaction.
  WEFT_RETURN_IF_ERROR(store_.Begin());
  Status loaded = Load();
  if (loaded.ok()) loaded = store_.Commit();
  if (!loaded.ok()) {
    (void)store_.Rollback();
    return loaded.WithContext("cannot resume from the store");
  }
  Committed();
  return Status::Ok();
}

void Components::Committed() {
  retention_.Committed();
  std::vector<jobs::JobEngine::Ended> ended = engine_.TakeEnded();
  if (!metrics_) return;
  for (const jobs::JobEngine::Ended& e : ended)
    metrics_->JobFinished(e.operation, e.outcome, static_cast<double>(e.duration_ms) / 1000.0);
}

void Components::RefreshMetrics() {
  if (!metrics_ || !metrics_->RefreshDue()) return;
  using metrics::Family;
  const std::int64_t now = clock_.NowMs();
  metrics::Snapshot out;

  // Every label set that is known gets a sample, 0 included, so that a sum over
  // an idle weftd is 0 rather than no data: each state for every tenant that
  // exists (and any tenant that still has tasks or clusters), each operation.
  std::set<std::string> tenants;
  for (const auto& [name, t] : registry_.tenants()) tenants.insert(name);
  const std::map<std::string, queue::TaskQueue::TenantCounts> by_tenant = queue_.CountByTenant();
  for (const auto& [tenant, c] : by_tenant) tenants.insert(tenant);
  Result<std::vector<store::ClusterCount>> clusters = store_.CountClusters();
  if (clusters.ok())
    for (const store::ClusterCount& row : *clusters) tenants.insert(row.tenant);

  Family tasks{
      "weft_tasks", "Tasks queued (ready or waiting out a retry's backoff) and leased, by tenant.", "gauge", {}};
  for (const std::string& tenant : tenants) {
    auto it = by_tenant.find(tenant);
    const queue::TaskQueue::TenantCounts c = it == by_tenant.end() ? queue::TaskQueue::TenantCounts{} : it->second;
    tasks.samples.push_back({{{"state", "queued"}, {"tenant", tenant}}, static_cast<double>(c.queued)});
    tasks.samples.push_back({{{"state", "leased"}, {"tenant", tenant}}, static_cast<double>(c.leased)});
  }
  out.push_back(std::move(tasks));
  out.push_back({"weft_tasks_ended", "Tasks that ended, every tenant, as server.status counts them.", "gauge",
                 {{{{"state", "succeeded"}}, static_cast<double>(queue_.succeeded())},
                  {{{"state", "failed"}}, static_cast<double>(queue_.failed())}}});

  Family running{"weft_jobs_running", "Jobs running now, by operation.", "gauge", {}};
  const std::map<std::string, std::int64_t> by_operation = engine_.RunningByOperation();
  std::map<std::string, std::int64_t> operations;
  // The enums count from 0 and ToString names each value ("" past the last).
  for (int i = 0; !ToString(static_cast<JobOperation>(i)).empty(); ++i)
    operations[std::string(ToString(static_cast<JobOperation>(i)))] = 0;
  for (const auto& [operation, n] : by_operation) operations[operation] = n;
  for (const auto& [operation, n] : operations)
    running.samples.push_back({{{"operation", operation}}, static_cast<double>(n)});
  out.push_back(std::move(running));

  if (clusters.ok()) {
    Family c{"weft_clusters", "Clusters by tenant and status.", "gauge", {}};
    Family n{"weft_nodes", "Nodes by tenant and the status of their cluster.", "gauge", {}};
    std::map<std::pair<std::string, std::string>, store::ClusterCount> counts;
    for (const std::string& tenant : tenants)
      for (int i = 0; !ToString(static_cast<ClusterStatus>(i)).empty(); ++i)
        counts[{tenant, std::string(ToString(static_cast<ClusterStatus>(i)))}] = store::ClusterCount{};
    for (const store::ClusterCount& row : *clusters) counts[{row.tenant, row.status}] = row;
    for (const auto& [key, row] : counts) {
      const metrics::Labels labels = {{"status", key.second}, {"tenant", key.first}};
      c.samples.push_back({labels, static_cast<double>(row.clusters)});
      n.samples.push_back({labels, static_cast<double>(row.nodes)});
    }
    out.push_back(std::move(c));
    out.push_back(std::move(n));
  }

  Family capacity{"weft_host_capacity", "Worker threads each registered host offers.", "gauge", {}};
  Family in_flight{"weft_host_in_flight", "Task attempts each host holds now.", "gauge", {}};
  Family age{"weft_host_heartbeat_age_seconds", "Time since weftd last heard from each host.", "gauge", {}};
  Family up{"weft_host_live", "1 when the host is live (heard from within hosts.silent_after_ms), else 0.", "gauge",
            {}};
  std::map<std::string, double> workers;
  double live = 0;
  for (const auto& [id, h] : hosts_.all()) {
    const metrics::Labels labels = {{"host", id}};
    if (metrics_) metrics_->HostFinished(id);  // its counter starts at 0 once the host is known
    const bool is_live = hosts_.Live(h);
    live += is_live ? 1 : 0;
    capacity.samples.push_back({labels, static_cast<double>(h.record.capacity)});
    in_flight.samples.push_back({labels, static_cast<double>(queue_.InFlight(id))});
    age.samples.push_back({labels, static_cast<double>(now - h.record.last_seen_ms) / 1000.0});
    up.samples.push_back({labels, is_live ? 1.0 : 0.0});
    if (!is_live || !h.reported_workers.is_array()) continue;
    for (const json& w : h.reported_workers) {
      if (!w.is_object()) continue;
      const std::string tenant = w.value("tenant", std::string());
      workers[tenant.empty() ? "any" : tenant] += w.value("threads", 0.0);
    }
  }
  out.push_back(std::move(capacity));
  out.push_back(std::move(in_flight));
  out.push_back(std::move(age));
  out.push_back(std::move(up));
  out.push_back({"weft_hosts_registered", "Hosts that registered (server.status hosts.registered).", "gauge",
                 {{{}, static_cast<double>(hosts_.all().size())}}});
  out.push_back({"weft_hosts_live", "Hosts heard from within hosts.silent_after_ms (server.status hosts.live).",
                 "gauge", {{{}, live}}});
  Family threads{"weft_worker_threads", "Worker threads live hosts run, by the tenant they serve (any: every tenant).",
                 "gauge", {}};
  for (const auto& [tenant, n] : workers) threads.samples.push_back({{{"tenant", tenant}}, n});
  out.push_back(std::move(threads));

  Family principals{"weft_principals",
                    "CurveZMQ keys weftd keeps, by kind and state (revoked ones stay: docs/operations.md).", "gauge",
                    {}};
  for (const char* kind : {"host", "token", "user"}) {
    for (const bool revoked : {false, true}) {
      auto n = registry_.principal_counts().find({kind, revoked});
      principals.samples.push_back({{{"kind", kind}, {"state", revoked ? "revoked" : "not_revoked"}},
                                    n == registry_.principal_counts().end() ? 0.0 : static_cast<double>(n->second)});
    }
  }
  out.push_back(std::move(principals));

  const store::CheckpointStats cp = store_.checkpoint_stats();
  out.push_back({"weft_store_wal_pages", "Pages in the store's write-ahead log after the last commit.", "gauge",
                 {{{}, static_cast<double>(cp.wal_pages)}}});
  out.push_back({"weft_store_checkpoints_total", "WAL checkpoints, by who ran them (background thread or commits).",
                 "counter",
                 {{{{"kind", "background"}}, static_cast<double>(cp.background_rounds)},
                  {{{"kind", "by_commits"}}, static_cast<double>(cp.writer_rounds)}}});
  retention_.AppendMetrics(out);
  metrics_->Publish(std::move(out));
}

Status Components::Wire() {
  // First: ops are given their metrics as they are added.
  router_.set_metrics(metrics_.get());
  queue_.set_metrics(metrics_.get());
  // A task that ends tells the job engine, in the same transaction.
  queue_.set_end_observer([this](const queue::Ended& e) { return engine_.OnTaskEnded(e); });
  queue_.set_result_check(
      [this](std::int64_t task_id, const std::string& result) { return engine_.CheckResult(task_id, result); });
  // What each plugin type a tenant may use declares, as the hosts registered it.
  engine_.set_declared_actions([this](const std::string& tenant) {
    planner::DeclaredActions out;
    for (const auto& [id, h] : hosts_.all())
      for (const json& d : h.descriptors) catalog::AddDeclaredActions(out, d, tenant);
    return out;
  });
  hosts_.set_worker_caps([this] {
    std::map<std::string, std::int64_t> caps;
    for (const auto& [name, t] : registry_.tenants())
      if (t.max_workers > 0) caps[name] = t.max_workers;
    return caps;
  });
  hosts_.set_plugin_tenants([this] {
    std::set<std::string> out;
    if (!resources_) return out;
    const std::vector<std::string> lua = {std::string(resources::kLuaPluginType)};
    for (const auto& [name, t] : registry_.tenants()) {
      Result<std::vector<resources::ActiveVersion>> active = resources_->Active(name, lua);
      if (active.ok() && !active->empty()) out.insert(name);
    }
    return out;
  });
  router_.set_audit_recorder(
      [this](const api::Call& c, const api::Response& r) { return api::RecordAudit(store_, clock_, c, r); });
  // The take decorators run in this order: the job engine's node facts and
  // config, the resource versions, then (last) auth opens the sealed values.
  // Cluster configs are bounded from the same figure (MaxClusterConfigBytes), so that their tasks fit.
  dispatcher_.set_max_task_bytes(MaxTaskBytes(config_));
  dispatcher_.AddTakeDecorator([this](const store::TaskRecord& r, json& task, hosts::TaskTexts& texts) {
    return engine_.Decorate(r, task, texts);
  });

  RegisterServerOps(router_, {store_, queue_, hosts_, clock_, config_, info_, retention_, store_health_});
  hosts::RegisterHostOps(router_, {hosts_, dispatcher_, queue_, store_, clock_, config_});
  capacity::RegisterCapacityOps(router_, {store_, hosts_, clock_});
  catalog::RegisterCatalogOps(router_, store_, clock_, config_, resources_.get());
  jobs::RegisterClusterOps(router_, store_, engine_, clock_,
                           [this](const std::string& tenant) { return hosts_.LivePluginTypes(tenant); },
                           catalog::PlanBounds::Of(config_));
  api::RegisterAuditOps(router_, store_);
  resources::RegisterResourceOps(router_, {*resources_, hosts_, dispatcher_, config_.limits});
  auth::RegisterTenantOps(router_, registry_);
  auth::RegisterLoginOps(router_, logins_, registry_);
  // Last: it wraps every op registered so far.
  return auth::InstallSecrets(router_, {store_, hosts_, dispatcher_},
                              config_.server.data_dir / "keys" / "secrets.key");
}

void Components::AddSecurityOps(const std::string& server_key) {
  auth::RegisterAuthOps(router_, registry_, hosts_, {server_key, config_.security.token_ttl_ms});
  auth::RegisterUserKeyOps(router_, registry_, logins_,
                           {config_.server.data_dir / "credentials" / "superadmin.json", &clock_});
}

Status Components::Load() {
  // At start and when this weftd takes over: another one may have written since.
  store_.ForgetClusterSummaries();
  store_.CatalogMayHaveChanged();
  if (resources_) resources_->ForgetCached();
  WEFT_RETURN_IF_ERROR(queue_.Load());
  dispatcher_.ForgetRunners();
  WEFT_RETURN_IF_ERROR(hosts_.Load());
  WEFT_RETURN_IF_ERROR(engine_.Load());
  WEFT_RETURN_IF_ERROR(registry_.Load());
  return logins_.Load();
}

Status Components::Reset() {
  // The rollback may have undone what they hold.
  retention_.RolledBack();
  store_.ForgetClusterSummaries();
  store_.CatalogMayHaveChanged();
  if (resources_) resources_->ForgetCached();
  WEFT_RETURN_IF_ERROR(queue_.Load());
  dispatcher_.ForgetRunners();
  WEFT_RETURN_IF_ERROR(hosts_.Reset());
  WEFT_RETURN_IF_ERROR(engine_.Load());
  WEFT_RETURN_IF_ERROR(registry_.Load());
  return logins_.Load();
}

Status Components::Janitor() {
  WEFT_RETURN_IF_ERROR(hosts_.MarkSilent());
  return engine_.ExpireLeases();
}

void Components::set_events_wanted(bool wanted) {
  hosts_.set_events_wanted(wanted);
  queue_.set_events_wanted(wanted);
}

void Components::DiscardEvents() {
  (void)hosts_.TakeEvents();
  (void)queue_.TakeEvents();
  (void)engine_.TakeEvents();
}

std::vector<Event> Components::DrainEvents() {
  std::vector<Event> out = hosts_.TakeEvents();
  for (queue::TaskEvent& e : queue_.TakeEvents()) {
    json p = {{"type", "task"},        {"task_id", e.task_id}, {"state", store::TaskStateName(e.state)},
              {"attempt", e.attempt},  {"host_id", e.host_id}, {"plugin", e.plugin},
              {"action", e.action},    {"at_ms", e.at_ms}};
    if (!e.message.empty()) p["message"] = e.message;
    if (!e.cluster_id.empty()) p["cluster_id"] = e.cluster_id;
    out.push_back(Event{e.tenant + "/task" + (e.cluster_id.empty() ? "" : "/" + e.cluster_id + "/"), std::move(p)});
  }
  for (Event& e : engine_.TakeEvents()) out.push_back(std::move(e));
  return out;
}

}  // namespace weft::server

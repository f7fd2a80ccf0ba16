#include "weft/server/daemon/components.hpp"

#include <utility>

#include "weft/server/api/audit.hpp"
#include "weft/server/auth/auth_ops.hpp"
#include "weft/server/capacity/capacity_ops.hpp"
#include "weft/server/catalog/catalog_ops.hpp"
#include "weft/server/hosts/host_ops.hpp"
#include "weft/server/jobs/cluster_ops.hpp"
#include "weft/server/resources/resource_ops.hpp"

namespace weft::server {

using json = nlohmann::json;

Components::Components(const Config& config, store::Store& store, const Clock& clock)
    : config_(config),
      store_(store),
      clock_(clock),
      queue_(store, clock, queue::QueueOptions{config.tasks.lease_ms}),
      engine_(store, queue_, clock,
              jobs::EngineOptions{config.jobs.max_attempts, config.jobs.retry_backoff_ms,
                                  config.jobs.retry_backoff_max_ms, config.jobs.max_nodes_in_task}),
      hosts_(store, queue_, clock, config),
      dispatcher_(hosts_, queue_),
      registry_(store, clock, keys_),
      logins_(store, clock, registry_,
              auth::LoginOptions{config.security.session_idle_ms, config.security.session_max_ms,
                                 config.security.login_burst, config.security.login_interval_ms}) {}

Status Components::Start() {
  WEFT_ASSIGN_OR_RETURN(resources_, resources::FileResourceStore::Open(config_.server.data_dir / "resources", clock_));
  WEFT_RETURN_IF_ERROR(Wire());
  // Loading may resume jobs (tasks whose predecessors are done become ready): one transaction.
  WEFT_RETURN_IF_ERROR(store_.Begin());
  Status loaded = Load();
  if (loaded.ok()) loaded = store_.Commit();
  if (!loaded.ok()) {
    (void)store_.Rollback();
    return loaded.WithContext("cannot resume from the store");
  }
  return Status::Ok();
}

Status Components::Wire() {
  // A task that ends tells the job engine, in the same transaction.
  queue_.set_end_observer([this](const queue::Ended& e) { return engine_.OnTaskEnded(e); });
  hosts_.set_worker_caps([this] {
    std::map<std::string, std::int64_t> caps;
    for (const auto& [name, t] : registry_.tenants())
      if (t.max_workers > 0) caps[name] = t.max_workers;
    return caps;
  });
  router_.set_audit_recorder(
      [this](const api::Call& c, const api::Response& r) { return api::RecordAudit(store_, clock_, c, r); });
  // The take decorators run in this order: the job engine's node facts and
  // config, the resource versions, then (last) auth opens the sealed values.
  dispatcher_.AddTakeDecorator([this](const store::TaskRecord& r, json& task) { return engine_.Decorate(r, task); });

  RegisterServerOps(router_, {store_, queue_, hosts_, clock_, config_, info_});
  hosts::RegisterHostOps(router_, {hosts_, dispatcher_, queue_, store_, clock_, config_});
  capacity::RegisterCapacityOps(router_, {store_, hosts_, clock_});
  catalog::RegisterCatalogOps(router_, store_, clock_, config_);
  jobs::RegisterClusterOps(router_, store_, engine_, clock_,
                           [this](const std::string& tenant) { return hosts_.LivePluginTypes(tenant); });
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
}

Status Components::Load() {
  WEFT_RETURN_IF_ERROR(queue_.Load());
  WEFT_RETURN_IF_ERROR(hosts_.Load());
  WEFT_RETURN_IF_ERROR(engine_.Load());
  WEFT_RETURN_IF_ERROR(registry_.Load());
  return logins_.Load();
}

Status Components::Reset() {
  WEFT_RETURN_IF_ERROR(queue_.Load());
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

#include "weft/server/hosts/dispatcher.hpp"

namespace weft::hosts {
namespace {

json ParseStored(const std::string& text) {
  json v = json::parse(text, nullptr, false);
  return v.is_discarded() ? json::object() : v;
}

// The same for every attempt of a task, and different for every task: a
// provider that finds a machine it made under this key hands that one back
// instead of making a second one when a lost attempt is run again.
std::string IdempotencyKey(const store::TaskRecord& t) {
  if (t.cluster_id.empty()) return "task/" + std::to_string(t.id);
  return t.cluster_id + "/" + t.node_id + "/" + std::to_string(t.id);
}

}  // namespace

bool Dispatcher::CanServe(const std::string& host_id, const std::string& tenant) const {
  const Host* host = hosts_.Find(host_id);
  return host && queue_.HasReady(host->plugins, tenant);
}

Result<json> Dispatcher::TryTake(const std::string& host_id, const std::string& tenant) {
  const Host* host = hosts_.Find(host_id);
  if (!host) return json();
  WEFT_ASSIGN_OR_RETURN(std::optional<store::TaskRecord> taken, queue_.Take(host_id, host->plugins, tenant));
  if (!taken) return json();
  const store::TaskRecord& t = *taken;
  // Built member by member, in the map's (sorted) order with a hint at its
  // end: no key is compared on the way in. An initializer list would make a
  // two-element array per member first, three times the allocations on the
  // hottest path.
  json task = json::object();
  json::object_t& members = task.get_ref<json::object_t&>();
  const auto add = [&members](const char* key, json value) { members.emplace_hint(members.end(), key, std::move(value)); };
  add("action", t.action);
  add("attempt", t.attempt);
  add("cluster_id", t.cluster_id);
  add("idempotency_key", IdempotencyKey(t));
  add("job_id", t.job_id);
  add("lease_ms", queue_.lease_ms());
  add("node_id", t.node_id);
  add("plugin", t.plugin);
  add("task_id", t.id);
  add("tenant", t.tenant);
  if (!t.payload_json.empty() && t.payload_json != "{}") {
    json payload = ParseStored(t.payload_json);
    if (payload.is_object())
      for (auto& [k, v] : payload.items())
        if (!task.contains(k)) task[k] = std::move(v);
  }
  for (const TakeDecorator& decorate : decorators_) {
    Status s = decorate(t, task);
    if (s.ok()) continue;
    // What a decorator refuses it will refuse again: the attempt fails here
    // (and is retried or fails the task like any failed attempt).
    queue::FinishRequest f;
    f.host_id = host_id;
    f.task_id = t.id;
    f.attempt = t.attempt;
    f.succeeded = false;
    f.message = "the task could not be handed out: " + s.message();
    queue::Conflict conflict;
    WEFT_RETURN_IF_ERROR(queue_.Finish(f, &conflict));
    return json();
  }
  return task;
}

}  // namespace weft::hosts

#include "weft/server/hosts/host_registry.hpp"

#include <algorithm>

#include "weft/server/hosts/workers.hpp"
#include "weft/common/curve.hpp"
#include "weft/common/json_fields.hpp"
#include "weft/common/log.hpp"

namespace weft::hosts {
namespace {

json ParseStored(const std::string& text) {
  json v = json::parse(text, nullptr, false);
  return v.is_discarded() ? json::object() : v;
}

// Cuts `text` to at most `max` bytes, not inside a UTF-8 sequence.
std::string Cut(std::string text, std::size_t max) {
  if (text.size() <= max) return text;
  std::size_t end = max;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  text.resize(end);
  return text + "...";
}

}  // namespace

Result<json> ParseRefused(const json& body) {
  constexpr std::size_t kMaxEntries = 1000;
  constexpr std::size_t kMaxText = 2000;
  auto it = body.find("refused");
  if (it == body.end() || it->is_null()) return json();
  if (!it->is_array() || it->size() > kMaxEntries)
    return Status::Invalid("body.refused must be an array of at most " + std::to_string(kMaxEntries) +
                           " {file, reason, type?, tenant?}, got " + jsonf::Brief(*it));
  json out = json::array();
  for (std::size_t i = 0; i < it->size(); ++i) {
    const json& r = (*it)[i];
    const std::string path = "body.refused[" + std::to_string(i) + "]";
    if (!r.is_object()) return jsonf::RequireObject(r, path);
    json entry = json::object();
    for (const char* key : {"file", "reason", "type", "tenant"}) {
      const bool required = std::string_view(key) == "file" || std::string_view(key) == "reason";
      Result<std::string> v = required ? jsonf::String(r, key, path) : jsonf::String(r, key, path, "");
      if (!v.ok()) return v.status();
      if (!v->empty()) entry[key] = Cut(std::move(*v), kMaxText);
    }
    out.push_back(std::move(entry));
  }
  return out;
}

json RefusedFor(const json& refused, const std::string& tenant) {
  json out = json::array();
  if (!refused.is_array()) return out;
  for (const json& r : refused) {
    const std::string owner = r.is_object() ? r.value("tenant", std::string()) : std::string();
    if (owner.empty() || owner == tenant) out.push_back(r);
  }
  return out;
}

bool ValidHostId(const std::string& id) {
  if (id.empty() || id.size() > 128) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-';
  });
}

HostRegistry::HostRegistry(store::Store& store, queue::TaskQueue& queue, const Clock& clock,
                           const server::Config& config)
    : store_(store), queue_(queue), clock_(clock), config_(config) {}

Status HostRegistry::Load() {
  std::set<std::string> heard;  // a reload after a failed commit keeps who this process heard from
  for (const auto& [id, h] : hosts_)
    if (h.heard) heard.insert(id);
  hosts_.clear();
  Result<std::vector<store::HostRecord>> records = store_.ListHosts();
  if (!records.ok()) return records.status().WithContext("cannot load hosts");
  for (store::HostRecord& r : *records) {
    Host h;
    h.descriptors = ParseStored(r.plugins_json);
    if (!h.descriptors.is_array()) h.descriptors = json::array();
    for (const json& d : h.descriptors) {
      if (!d.is_object() || !d.contains("type") || !d["type"].is_string()) continue;
      const std::string tenant = d.value("tenant", std::string());
      (tenant.empty() ? h.plugins.shared : h.plugins.by_tenant[tenant]).insert(d["type"].get<std::string>());
    }
    h.silent = !MaybeLive(h);
    h.heard = heard.count(r.id) > 0;
    h.incarnation = r.incarnation;
    std::string id = r.id;
    h.record = std::move(r);
    hosts_.emplace(std::move(id), std::move(h));
  }
  return Status::Ok();
}

Status HostRegistry::Reset() {
  events_.clear();
  return Load();
}

Host* HostRegistry::Find(const std::string& host_id) {
  auto it = hosts_.find(host_id);
  return it == hosts_.end() ? nullptr : &it->second;
}

const Host* HostRegistry::Find(const std::string& host_id) const {
  auto it = hosts_.find(host_id);
  return it == hosts_.end() ? nullptr : &it->second;
}

Result<std::string> HostRegistry::HostIdOf(const json& body) {
  const auto id = body.is_object() ? body.find("host_id") : body.end();
  std::string why;
  if (!body.is_object() || id == body.end() || id->is_null()) {
    why = "its host_id is missing";
  } else if (!id->is_string()) {
    why = "its host_id is " + jsonf::Brief(*id) + ", not a host's id (a string)";
  } else if (id->get_ref<const std::string&>().empty()) {
    why = "its host_id is empty";
  } else {
    return id->get<std::string>();
  }
  return Status::Invalid("this request does not say which host sent it (" + why +
                         "): weft-host sends the host_id of its configuration (host_id, or --host-id) with every "
                         "request, and so must a program of your own (docs/protocol.md, provisioner ops)");
}

Result<Host*> HostRegistry::Known(const json& body) {
  WEFT_ASSIGN_OR_RETURN(std::string id, HostIdOf(body));
  Host* host = Find(id);
  if (!host)
    return Status::NotFound("host '" + id + "' is not registered with this weftd (a weftd started on a fresh store, "
                            "or the host never registered): weft-host registers again by itself; a program of your "
                            "own sends host.register first");
  return host;
}

void HostRegistry::Put(Host host) {
  std::string id = host.record.id;
  hosts_[id] = std::move(host);
  HostEvent(id, "registered");
}

Status HostRegistry::CheckNewProcess(const std::string& host_id, const std::string& incarnation,
                                     const std::string& key, bool* first) {
  *first = false;
  Host* old = Find(host_id);
  if (!old || !Live(*old) || old->incarnation.empty() || incarnation.empty() || old->incarnation == incarnation)
    return Status::Ok();
  if (!key.empty() && !old->key.empty() && key != old->key) return Status::Ok();
  *first = old->refused_incarnation != incarnation;
  old->refused_incarnation = incarnation;
  std::string from = old->machine.empty() ? std::string("another process") : old->machine;
  if (old->pid > 0) from += " (pid " + std::to_string(old->pid) + ")";
  return Status::Conflict("host '" + host_id + "' is already connected from " + from + ", heard " +
                          std::to_string(std::max<std::int64_t>(0, clock_.NowMs() - old->record.last_seen_ms)) +
                          " ms ago; stop it first or give this host another id (a host that died is let in once "
                          "it was not heard from for hosts.silent_after_ms, " +
                          std::to_string(config_.hosts.silent_after_ms) + " ms)");
}

Status HostRegistry::Replaced(Host& host, std::string_view incarnation, bool* first) const {
  *first = false;
  if (incarnation.empty() || host.incarnation.empty() || incarnation == host.incarnation) return Status::Ok();
  *first = host.replaced_incarnation != incarnation;
  if (*first) host.replaced_incarnation = std::string(incarnation);
  std::string now = host.machine.empty() ? std::string("another process") : host.machine;
  if (host.pid > 0) now += " (pid " + std::to_string(host.pid) + ")";
  return Status::Conflict("this process (incarnation " + std::string(incarnation) + ") no longer acts for host '" +
                          host.record.id + "': " + now + " registered under that id after this process was not "
                          "heard from for hosts.silent_after_ms (" + std::to_string(config_.hosts.silent_after_ms) +
                          " ms), and its attempts were handed out again; stop its tasks and register again (refused "
                          "while that process is live)");
}

void HostRegistry::Learn(Host& host, std::string_view incarnation, const std::string& key) const {
  if (!host.incarnation.empty() || incarnation.empty()) return;
  host.incarnation = std::string(incarnation);
  if (host.key.empty()) host.key = key;
}

Status HostRegistry::SetDraining(Host& host, bool draining) {
  if (host.record.draining == draining) return Status::Ok();
  WEFT_RETURN_IF_ERROR(store_.SetHostDraining(host.record.id, draining));
  host.record.draining = draining;
  HostEvent(host.record.id, draining ? "draining" : "undrained");
  return Status::Ok();
}

std::string HostRegistry::MachineChange(const std::string& host_id, const std::string& machine, std::int64_t pid,
                                        const std::string& key) const {
  const Host* old = Find(host_id);
  if (!old || old->machine.empty() || machine.empty() || old->machine == machine) return "";
  auto where = [](const std::string& m, std::int64_t p) { return m + (p > 0 ? " (pid " + std::to_string(p) + ")" : ""); };
  std::string text = "host '" + host_id + "' registers from " + where(machine, pid) +
                     "; its previous process ran on " + where(old->machine, old->pid) + ", last heard " +
                     std::to_string(std::max<std::int64_t>(0, clock_.NowMs() - old->record.last_seen_ms)) + " ms ago";
  if (key.empty())
    return text + ". With security off ([security] curve = false) weftd cannot tell two machines that use one host "
                  "id apart: each takes the other's place whenever it falls silent. Unless the host moved, give "
                  "each machine its own host_id (docs/security.md)";
  if (key == old->key)
    return text + ", with the same key " + curve::ShortKey(key) + " (a copy of its credential.json?). Unless the "
                  "host moved, give the other machine its own host_id and enroll it (docs/security.md)";
  return text + ", with a new key " + curve::ShortKey(key) + " (the host was enrolled again)";
}

bool HostRegistry::Live(const Host& host) const { return host.heard && MaybeLive(host); }

bool HostRegistry::MaybeLive(const Host& host) const {
  return !host.left && clock_.NowMs() - host.record.last_seen_ms <= config_.hosts.silent_after_ms;
}

bool HostRegistry::HostLive(const std::string& host_id) const {
  const Host* host = Find(host_id);
  return host && Live(*host);
}

void HostRegistry::Seen(Host& host) {
  host.record.last_seen_ms = clock_.NowMs();
  host.left = false;
  if (host.silent || !host.heard) {
    host.heard = true;
    host.silent = false;
    HostEvent(host.record.id, "live");
  }
}

Status HostRegistry::Leave(Host& host) {
  // A host stopping cleanly finished or reported its tasks first; what is
  // still leased to it it gave up (shutdown_grace_ms ran out): that is the
  // operator's stop, not the task's doing, so it does not use up an attempt.
  WEFT_RETURN_IF_ERROR(queue_.ReleaseHost(host.record.id,
                                          "host '" + host.record.id +
                                              "' stopped (host.leave); this attempt does not count against "
                                              "max_attempts",
                                          /*counts=*/false));
  if (!host.left) {
    host.left = true;
    host.silent = true;
    HostEvent(host.record.id, "left");
    WEFT_LOG(kInfo, "weftd") << "host '" << host.record.id << "' stopped";
  }
  return Status::Ok();
}

Status HostRegistry::MarkSilent() {
  for (auto& [id, h] : hosts_) {
    if (!h.silent && !MaybeLive(h)) {
      h.silent = true;
      WEFT_LOG(kWarn, "weftd") << "host '" << id << "' is silent: not heard from for "
                               << config_.hosts.silent_after_ms << " ms (hosts.silent_after_ms)";
      HostEvent(id, "silent");
      WEFT_RETURN_IF_ERROR(queue_.ReleaseHost(
          id, "the host is silent (not heard from for " + std::to_string(config_.hosts.silent_after_ms) + " ms)"));
    }
  }
  return Status::Ok();
}

Status HostRegistry::Forget(const std::string& host_id, const std::string& reason) {
  WEFT_RETURN_IF_ERROR(queue_.ReleaseHost(host_id, reason));
  WEFT_RETURN_IF_ERROR(store_.DeleteHost(host_id));
  if (hosts_.erase(host_id)) HostEvent(host_id, "revoked");
  return Status::Ok();
}

std::set<std::string> HostRegistry::TypesFor(const Host& host, const std::string& tenant) {
  std::set<std::string> out = host.plugins.shared;
  auto own = host.plugins.by_tenant.find(tenant);
  if (own != host.plugins.by_tenant.end()) out.insert(own->second.begin(), own->second.end());
  return out;
}

std::set<std::string> HostRegistry::LivePluginTypes(const std::string& tenant) const {
  std::set<std::string> out;
  for (const auto& [id, h] : hosts_) {
    if (!MaybeLive(h)) continue;
    const std::set<std::string> types = TypesFor(h, tenant);
    out.insert(types.begin(), types.end());
  }
  return out;
}

std::vector<std::string> HostRegistry::HostsWithHostWidePlugin(const std::string& type) const {
  std::vector<std::string> out;
  for (const auto& [id, h] : hosts_)
    if (h.plugins.shared.count(type)) out.push_back(id);
  return out;
}

std::set<std::string> HostRegistry::SensitiveFields(const std::string& type) const {
  std::set<std::string> out;
  for (const auto& [id, h] : hosts_) {
    for (const json& d : h.descriptors) {
      if (!d.is_object() || d.value("type", "") != type || !d.contains("fields") || !d["fields"].is_array()) continue;
      for (const json& f : d["fields"])
        if (f.is_object() && f.value("sensitive", false) && f.contains("name") && f["name"].is_string())
          out.insert(f["name"].get<std::string>());
    }
  }
  return out;
}

std::set<std::string> HostRegistry::ActiveTenants() {
  constexpr std::int64_t kTenantHoldMs = 60000;
  const std::int64_t now = clock_.NowMs();
  for (const std::string& t : queue_.LiveTenants()) tenant_seen_ms_[t] = now;
  std::set<std::string> active;
  for (auto it = tenant_seen_ms_.begin(); it != tenant_seen_ms_.end();) {
    if (now - it->second > kTenantHoldMs) {
      it = tenant_seen_ms_.erase(it);
      continue;
    }
    active.insert(it->first);
    ++it;
  }
  return active;
}

WorkerSplit HostRegistry::SplitWith(const std::set<std::string>& also) {
  std::set<std::string> active = ActiveTenants();
  active.insert(also.begin(), also.end());
  std::vector<HostCapacity> live;
  for (const auto& [id, h] : hosts_)
    if (MaybeLive(h)) live.push_back({id, h.record.capacity});
  return AllocateWorkers(std::move(live), active,
                         worker_caps_ ? worker_caps_() : std::map<std::string, std::int64_t>{});
}

json HostRegistry::WorkersFor(const std::string& host_id) {
  const WorkerSplit split = SplitWith({});
  json out = json::array();
  auto it = split.find(host_id);
  if (it != split.end())
    for (const auto& [tenant, threads] : it->second) out.push_back({{"tenant", tenant}, {"threads", threads}});
  return out;
}

void HostRegistry::HostEvent(const std::string& host_id, const char* what) {
  events_.push_back(
      Event{"_system/host", json{{"type", "host"}, {"host_id", host_id}, {"event", what}, {"at_ms", clock_.NowMs()}}});
}

}  // namespace weft::hosts

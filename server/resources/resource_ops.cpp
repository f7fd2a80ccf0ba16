#include "weft/server/resources/resource_ops.hpp"

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "weft/common/digest.hpp"
#include "weft/common/json_fields.hpp"

namespace weft::resources {
namespace {

using api::Call;
using api::Endpoint;
using api::Response;
using api::Role;
using json = nlohmann::json;

constexpr std::int64_t kMaxVersion = INT64_MAX;
constexpr std::int64_t kDefaultFetchChunkBytes = 4 << 20;
constexpr std::size_t kMaxTypesPerActive = 1000;

json VersionJson(const VersionInfo& v) {
  return {{"version", v.version},
          {"state", VersionStateName(v.state)},
          {"size", v.size_bytes},
          {"digest", v.digest},
          {"created_at_ms", v.created_at_ms},
          {"created_by", v.created_by},
          {"activated_at_ms", v.activated_at_ms},
          {"retired_at_ms", v.retired_at_ms}};
}

json ActiveJson(const ActiveVersion& a) {
  return {{"type", a.type}, {"name", a.name}, {"version", a.version}, {"digest", a.digest}, {"size", a.size_bytes}};
}

// body.type and body.name, checked.
struct Named {
  std::string type;
  std::string name;
};
Result<Named> ReadNamed(const json& body) {
  WEFT_ASSIGN_OR_RETURN(std::string type, jsonf::String(body, "type", ""));
  WEFT_RETURN_IF_ERROR(ValidateType(type, "type"));
  WEFT_ASSIGN_OR_RETURN(std::string name, jsonf::String(body, "name", ""));
  WEFT_RETURN_IF_ERROR(ValidateName(type, name, "name"));
  return Named{std::move(type), std::move(name)};
}

class ResourceOps {
 public:
  ResourceOps(ResourceStore& store, const wire::Limits& limits, const hosts::HostRegistry& registry)
      : store_(store), limits_(limits), hosts_(registry) {}

  // A tenant's Lua plugin is named after the type it declares ("<type>.lua"),
  // so that its type is known here: hosts keep it for the tenant's own tasks
  // (docs/host.md), and it may not take a type that hosts run host-wide.
  Status CheckLuaPlugin(const Named& named) const {
    if (named.type != kLuaPluginType) return Status::Ok();
    const std::string type = named.name.substr(0, named.name.size() - 4);  // ValidateName: it ends in ".lua"
    if (!ValidateType(type, "type").ok())
      return Status::Invalid("a " + std::string(kLuaPluginType) +
                             " resource is named after the plugin type the file declares, \"<type>.lua\" with a type "
                             "of 1 to 64 characters [a-z0-9_.-] (e.g. \"hello-lua.lua\" for type = \"hello-lua\"); "
                             "got \"" + named.name + "\"");
    const std::vector<std::string> hosts = hosts_.HostsWithHostWidePlugin(type);
    if (hosts.empty()) return Status::Ok();
    std::string list;
    for (const std::string& h : hosts) list += (list.empty() ? "'" : ", '") + h + "'";
    return Status::Conflict("plugin type '" + type + "' is a host-wide plugin of host " + list +
                            " (from the operator's plugin directory); a tenant's Lua plugin needs a type of its own: "
                            "change its type in the file and upload it as <new type>.lua");
  }

  Response Upload(const Call& call) {
    const json& body = call.request->body;
    WEFT_TRY_ASSIGN(named, ReadNamed(body));
    Status lua = CheckLuaPlugin(named);
    if (!lua.ok()) return Response::Error(lua);
    WEFT_TRY_ASSIGN(upload_id, jsonf::String(body, "upload_id", "", ""));
    WEFT_TRY_ASSIGN(offset, jsonf::Int(body, "offset", "", 0, kMaxVersion, 0));
    WEFT_TRY_ASSIGN(final, jsonf::Bool(body, "final", "", false));
    WEFT_TRY_ASSIGN(digest, jsonf::String(body, "digest", "", ""));
    // Exactly one payload frame, the chunk's bytes: the router refuses any other count (Add below).
    const auto& blobs = call.request->blobs;
    UploadChunk chunk;
    chunk.tenant = call.principal.tenant;
    chunk.type = named.type;
    chunk.name = named.name;
    chunk.upload_id = upload_id;
    chunk.offset = offset;
    chunk.bytes = blobs[0];
    chunk.final = final;
    chunk.digest = digest;
    chunk.user = call.principal.user;
    if (body.contains("size") && !body["size"].is_null()) {
      WEFT_TRY_ASSIGN(size, jsonf::Int(body, "size", "", 0, kMaxVersion));
      chunk.size_bytes = size;
    }
    WEFT_TRY_ASSIGN(progress, store_.Upload(chunk));
    json reply = {{"type", named.type},
                  {"name", named.name},
                  {"upload_id", progress.upload_id},
                  {"received", progress.received_bytes}};
    if (progress.version) {
      reply["version"] = progress.version->version;
      reply["state"] = VersionStateName(progress.version->state);
      reply["size"] = progress.version->size_bytes;
      reply["digest"] = progress.version->digest;
    }
    return Response::Ok(std::move(reply));
  }

  Response List(const Call& call) {
    const json& body = call.request->body;
    WEFT_TRY_ASSIGN(type, jsonf::String(body, "type", "", ""));
    if (!type.empty()) {
      Status s = ValidateType(type, "type");
      if (!s.ok()) return Response::Error(s);
    }
    WEFT_TRY_ASSIGN(resources, store_.List(call.principal.tenant, type));
    json list = json::array();
    for (const ResourceInfo& r : resources) {
      json versions = json::array();
      json active = nullptr, staged = nullptr;
      for (const VersionInfo& v : r.versions) {
        versions.push_back(VersionJson(v));
        if (v.state == VersionState::kActive) active = v.version;
        if (v.state == VersionState::kStaged) staged = v.version;
      }
      list.push_back({{"type", r.type},
                      {"name", r.name},
                      {"active", active},
                      {"staged", staged},
                      {"versions", std::move(versions)}});
    }
    return Response::Ok({{"resources", std::move(list)}});
  }

  Response Stage(const Call& call) {
    const json& body = call.request->body;
    WEFT_TRY_ASSIGN(named, ReadNamed(body));
    WEFT_TRY_ASSIGN(version, jsonf::Int(body, "version", "", 1, kMaxVersion));
    WEFT_TRY_ASSIGN(v, store_.Stage(call.principal.tenant, named.type, named.name, version));
    return Response::Ok({{"type", named.type}, {"name", named.name}, {"version", v.version},
                         {"state", VersionStateName(v.state)}});
  }

  Response Recall(const Call& call) {
    WEFT_TRY_ASSIGN(named, ReadNamed(call.request->body));
    WEFT_TRY_ASSIGN(v, store_.Recall(call.principal.tenant, named.type, named.name));
    return Response::Ok({{"type", named.type}, {"name", named.name}, {"version", v.version},
                         {"state", VersionStateName(v.state)}});
  }

  Response Sync(const Call& call) {
    WEFT_TRY_ASSIGN(activated, store_.Sync(call.principal.tenant));
    json list = json::array();
    for (const Activation& a : activated)
      list.push_back({{"type", a.type},
                      {"name", a.name},
                      {"version", a.version},
                      {"retired", a.retired ? json(*a.retired) : json(nullptr)}});
    return Response::Ok({{"activated", std::move(list)}});
  }

  Response Delete(const Call& call) {
    const json& body = call.request->body;
    WEFT_TRY_ASSIGN(named, ReadNamed(body));
    std::optional<std::int64_t> version;
    if (body.contains("version") && !body["version"].is_null()) {
      WEFT_TRY_ASSIGN(v, jsonf::Int(body, "version", "", 1, kMaxVersion));
      version = v;
    }
    WEFT_TRY_ASSIGN(removed, store_.Delete(call.principal.tenant, named.type, named.name, version));
    return Response::Ok({{"type", named.type}, {"name", named.name}, {"deleted", removed}});
  }

  Response Fetch(const Call& call) {
    const json& body = call.request->body;
    WEFT_TRY_ASSIGN(tenant, jsonf::String(body, "tenant", "body"));
    WEFT_TRY_ASSIGN(named, ReadNamed(body));
    WEFT_TRY_ASSIGN(version, jsonf::Int(body, "version", "body", 1, kMaxVersion));
    WEFT_TRY_ASSIGN(offset, jsonf::Int(body, "offset", "body", 0, kMaxVersion, 0));
    const std::int64_t frame_cap =
        std::min<std::int64_t>(kMaxFetchChunkBytes, static_cast<std::int64_t>(limits_.max_frame_bytes));
    WEFT_TRY_ASSIGN(max_bytes, jsonf::Int(body, "max_bytes", "body", 1, kMaxVersion, kDefaultFetchChunkBytes));
    WEFT_TRY_ASSIGN(chunk, store_.Read(tenant, named.type, named.name, version, offset,
                                       std::min(max_bytes, frame_cap)));
    Response r = Response::Ok({{"type", named.type},
                               {"name", named.name},
                               {"version", version},
                               {"size", chunk.size_bytes},
                               {"digest", chunk.digest},
                               {"offset", chunk.offset},
                               {"length", chunk.bytes.size()},
                               {"eof", chunk.eof}});
    r.blobs.push_back(std::move(chunk.bytes));
    return r;
  }

  Response Active(const Call& call) {
    const json& body = call.request->body;
    WEFT_TRY_ASSIGN(tenant, jsonf::String(body, "tenant", "body", "default"));
    if (tenant.empty()) return Response::Error(Status::Invalid("body.tenant must not be empty"));
    std::vector<std::string> types;
    auto t = body.find("types");
    if (t != body.end() && !t->is_null()) {
      if (!t->is_array())
        return Response::Error(Status::Invalid("body.types must be an array of plugin type names, got " +
                                               jsonf::Brief(*t)));
      if (t->size() > kMaxTypesPerActive)
        return Response::Error(Status::TooLarge("body.types lists " + std::to_string(t->size()) +
                                                " types; at most " + std::to_string(kMaxTypesPerActive)));
      for (std::size_t i = 0; i < t->size(); ++i) {
        const json& v = (*t)[i];
        const std::string path = "body.types[" + std::to_string(i) + "]";
        if (!v.is_string()) return Response::Error(Status::Invalid(path + " must be a string, got " + jsonf::Brief(v)));
        Status s = ValidateType(v.get<std::string>(), path);
        if (!s.ok()) return Response::Error(s);
        types.push_back(v.get<std::string>());
      }
      // An empty list asks for nothing (not for every type).
      if (types.empty()) return Response::Ok({{"tenant", tenant}, {"resources", json::array()}});
    }
    WEFT_TRY_ASSIGN(active, store_.Active(tenant, types));
    json list = json::array();
    for (const ActiveVersion& a : active) list.push_back(ActiveJson(a));
    return Response::Ok({{"tenant", tenant}, {"resources", std::move(list)}});
  }

  // Pins the versions a task will use at the moment it is handed out.
  Status Decorate(const store::TaskRecord& record, json& task, hosts::TaskTexts& texts) {
    auto pinned = task.find("resources");
    if (pinned == task.end() || pinned->is_null()) {
      // The type asked for, in a list this object keeps and reuses, so a take allocates no list.
      if (one_type_.size() != 1) one_type_.resize(1);
      one_type_[0] = record.plugin;
      WEFT_ASSIGN_OR_RETURN(std::vector<ActiveVersion> active, store_.Active(record.tenant, one_type_));
      if (active.empty()) {
        // Most tasks use none: they share one "resources":[] text, made once,
        // which the reply writes as it stands.
        static const auto kNone = std::make_shared<const std::string>("[]");
        if (pinned != task.end()) task.erase(pinned);  // a null: the text stands for it
        texts.Add("resources", kNone);
        return Status::Ok();
      }
      json list = json::array();
      for (const ActiveVersion& a : active) list.push_back(ActiveJson(a));
      task["resources"] = std::move(list);
      return Status::Ok();
    }
    // The task names its versions already (a retry of a pinned task, or a job
    // that pinned them): keep them, completing digest and size from the store.
    if (!pinned->is_array())
      return Status::Invalid("the task's \"resources\" must be an array of {type, name, version}, got " +
                             jsonf::Brief(*pinned));
    for (std::size_t i = 0; i < pinned->size(); ++i) {
      json& r = (*pinned)[i];
      const std::string path = "resources[" + std::to_string(i) + "]";
      if (!r.is_object()) return jsonf::RequireObject(r, path);
      WEFT_ASSIGN_OR_RETURN(std::string type, jsonf::String(r, "type", path, record.plugin));
      WEFT_RETURN_IF_ERROR(ValidateType(type, path + ".type"));
      WEFT_ASSIGN_OR_RETURN(std::string name, jsonf::String(r, "name", path));
      WEFT_RETURN_IF_ERROR(ValidateName(type, name, path + ".name"));
      WEFT_ASSIGN_OR_RETURN(std::int64_t version, jsonf::Int(r, "version", path, 1, kMaxVersion));
      Result<VersionInfo> v = store_.Get(record.tenant, type, name, version);
      if (!v.ok()) return v.status().WithContext("the task's " + path);
      r = {{"type", type}, {"name", name}, {"version", version}, {"digest", v->digest}, {"size", v->size_bytes}};
    }
    return Status::Ok();
  }

 private:
  ResourceStore& store_;
  const wire::Limits limits_;
  const hosts::HostRegistry& hosts_;
  std::vector<std::string> one_type_;  // Decorate's (the reactor thread's) list of one type
};

}  // namespace

void RegisterResourceOps(api::Router& router, ResourceOpsDeps deps) {
  // Owned by the handlers, which share it; it lives as long as the router.
  auto impl = std::make_shared<ResourceOps>(deps.store, deps.limits, deps.hosts);
  const std::set<Role> users = {Role::kUser, Role::kAdmin, Role::kSuperadmin};
  const std::set<Role> admins = {Role::kAdmin, Role::kSuperadmin};
  const std::set<Role> hosts = {Role::kHost};
  const std::set<Endpoint> api = {Endpoint::kApi};
  const std::set<Endpoint> prov = {Endpoint::kProvisioner};
  auto bind = [impl](Response (ResourceOps::*fn)(const Call&)) {
    return [impl, fn](const Call& c) { return ((*impl).*fn)(c); };
  };
  router.Add("resource.upload", admins, api, bind(&ResourceOps::Upload), api::Effect::kChanges,
             {"type", "name", "upload_id", "offset", "final", "digest", "size"}, /*payload_frames=*/1);
  router.Add("resource.list", users, api, bind(&ResourceOps::List), api::Effect::kReads, {"type"});
  router.Add("resource.stage", admins, api, bind(&ResourceOps::Stage), api::Effect::kChanges,
             {"type", "name", "version"});
  router.Add("resource.recall", admins, api, bind(&ResourceOps::Recall), api::Effect::kChanges, {"type", "name"});
  router.Add("resource.sync", admins, api, bind(&ResourceOps::Sync), api::Effect::kChanges, {});
  router.Add("resource.delete", admins, api, bind(&ResourceOps::Delete), api::Effect::kChanges,
             {"type", "name", "version"});
  router.Add("resource.fetch", hosts, prov, bind(&ResourceOps::Fetch), api::Effect::kHostTraffic);
  router.Add("resource.active", hosts, prov, bind(&ResourceOps::Active), api::Effect::kHostTraffic);
  deps.dispatcher.AddTakeDecorator([impl](const store::TaskRecord& r, json& task, hosts::TaskTexts& texts) {
    return impl->Decorate(r, task, texts);
  });
}

}  // namespace weft::resources

// openstack: a provider whose nodes are Nova servers (see README.md). CREATE
// makes a server (idempotent per task: the server's metadata holds the task's
// idempotency key, looked up before creating), CONFIRM waits until it is
// ACTIVE and returns its addresses, DELETE deletes every server whose metadata
// names the node. Field names are Coopr's, so Coopr's openstack provider files
// import unchanged.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/cloud/fields.hpp"
#include "weft/cloud/ssh_keys.hpp"
#include "weft/openstack/api.hpp"
#include "weft/plugin.hpp"

namespace {

using json = nlohmann::json;
using weft::sdk::Error;
using weft::cloud::BoolField;
using weft::cloud::IntegerField;
using weft::cloud::ListField;
using weft::cloud::ParseTask;
using weft::cloud::StringField;

constexpr const char* kPlugin = "openstack provider";  // begins its field errors
namespace os = weft::openstack;

constexpr int kDefaultConfirmTimeoutS = 600;
constexpr int kDefaultConfirmPollMs = 2000;
constexpr const char* kDefaultSshUser = "root";  // Coopr's, when the image type names none
constexpr std::size_t kMaxUserData = 65535;      // Nova's limit, base64 included

// ---- the task and the provider's fields --------------------------------------------

// The provider's fields, checked.
struct Settings {
  os::Credentials credentials;
  os::Options api;
  std::string keypair;        // ssh_keypair: the operator's Nova key pair; empty: one per node, made here
  std::string key_resource;   // ssh_key_resource: the resource holding its private key
  std::string user_data_resource;
  std::vector<std::string> security_groups, network_ids;
  std::string availability_zone;
  bool floating_ip = false;         // a floating address per server, from Neutron
  std::string floating_network_id;  // the external network it comes from; empty: the first one
  int confirm_timeout_s = kDefaultConfirmTimeoutS;
  int confirm_poll_ms = kDefaultConfirmPollMs;
};

Settings ReadSettings(const weft::sdk::Task& task) {
  Settings s;
  os::Credentials& c = s.credentials;
  c.auth_url =
      StringField(kPlugin, task, "openstack_auth_url", "the Keystone URL, such as https://keystone:5000/v3", true);
  if (!c.auth_url.starts_with("https://") && !c.auth_url.starts_with("http://")) {
    throw Error(WEFT_ERR_INVALID, "openstack provider: field 'openstack_auth_url' must be an http:// or https:// URL");
  }
  c.user = StringField(kPlugin, task, "api_user", "the OpenStack user name", true);
  c.password = StringField(kPlugin, task, "api_password", "the OpenStack user's password", true);
  c.project = StringField(kPlugin, task, "openstack_tenant", "the project (tenant) servers are made in", true);
  c.region = StringField(kPlugin, task, "openstack_region", "the region of the service catalog to use", false);
  if (std::string d = StringField(kPlugin, task, "openstack_user_domain", "the user's Keystone domain", false);
      !d.empty())
    c.user_domain = d;
  if (std::string d = StringField(kPlugin, task, "openstack_project_domain", "the project's Keystone domain", false);
      !d.empty())
    c.project_domain = d;
  s.api.verify_peer = BoolField(kPlugin, task, "openstack_ssl_verify_peer").value_or(true);
  if (const auto n = IntegerField(kPlugin, task, "api_max_attempts", 1, 20)) s.api.max_attempts = static_cast<int>(*n);
  if (const auto n = IntegerField(kPlugin, task, "api_backoff_ms", 1, 60000))
    s.api.first_backoff = std::chrono::milliseconds(*n);
  s.keypair = StringField(kPlugin, task, "ssh_keypair", "the Nova key pair new servers get", false);
  s.key_resource =
      StringField(kPlugin, task, "ssh_key_resource", "the resource holding the key pair's private key", false);
  if (!s.keypair.empty() && s.key_resource.empty()) {
    throw Error(WEFT_ERR_INVALID,
                "openstack provider: field 'ssh_keypair' names the key pair '" + s.keypair +
                    "', so field 'ssh_key_resource' must name the resource (type 'openstack') holding its private "
                    "key; or leave both empty and Weft makes a key pair per node");
  }
  s.user_data_resource = StringField(kPlugin, task, "user_data_resource", "the resource with more user data", false);
  s.security_groups = ListField(kPlugin, task, "security_groups", "(\"default, web\")");
  s.network_ids = ListField(kPlugin, task, "network_ids", "(\"2c1f..., 7d4e...\")");
  s.availability_zone = StringField(kPlugin, task, "availability_zone", "the zone servers go into", false);
  s.floating_ip = BoolField(kPlugin, task, "floating_ip").value_or(false);
  s.floating_network_id =
      StringField(kPlugin, task, "floating_network_id", "the external network of floating IPs", false);
  if (const auto n = IntegerField(kPlugin, task, "confirm_timeout_s", 1, 86400))
    s.confirm_timeout_s = static_cast<int>(*n);
  if (const auto n = IntegerField(kPlugin, task, "confirm_poll_ms", 10, 60000))
    s.confirm_poll_ms = static_cast<int>(*n);
  return s;
}

// The facts of the task that name what is made.
struct NodeTask {
  std::string tenant, cluster_id, cluster_name, node_id, hostname, key, provider_name;
  std::string flavor, image, ssh_user;
};

// object[key], or null when `object` is not an object or has no such key.
json Member(const json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() ? json() : *it;
}

std::string StringAt(const json& object, const char* key) {
  if (!object.is_object()) return {};
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

NodeTask ReadNodeTask(const json& t) {
  NodeTask n;
  n.tenant = StringAt(t, "tenant");
  n.cluster_id = StringAt(t, "cluster_id");
  n.node_id = StringAt(t, "node_id");
  n.hostname = StringAt(t, "hostname");
  n.key = StringAt(t, "idempotency_key");
  const json node = t.value("node", json::object());
  if (node.is_object()) {
    if (n.node_id.empty()) n.node_id = StringAt(node, "id");
    if (n.hostname.empty()) n.hostname = StringAt(node, "hostname");
    n.flavor = StringAt(node, "flavor");
    n.image = StringAt(node, "image");
    n.ssh_user = StringAt(node, "sshuser");
  }
  if (n.flavor.empty()) n.flavor = StringAt(t, "flavor");
  if (n.image.empty()) n.image = StringAt(t, "image");
  if (n.ssh_user.empty()) n.ssh_user = kDefaultSshUser;
  n.cluster_name = StringAt(t.value("cluster", json::object()), "name");
  n.provider_name = StringAt(t.value("provider", json::object()), "name");
  if (n.cluster_id.empty() || n.node_id.empty()) {
    throw Error(WEFT_ERR_INVALID, "openstack provider: the task names no cluster_id and node_id; servers carry the "
                                  "cluster node they belong to in their metadata, so both are needed");
  }
  if (n.hostname.empty()) n.hostname = "weft-" + n.cluster_id + "-" + n.node_id;
  return n;
}

// ---- what a node's server is made of -----------------------------------------------

// The node's own key pair's name in Nova, when the operator names none.
std::string NodeKeyName(const NodeTask& n) { return "weft-" + n.tenant + "-" + n.cluster_id + "-" + n.node_id; }

// The node's login and host keys: derived from the password and the node, so
// every attempt of every task of the node gets the same ones.
weft::cloud::SshKeyPair LoginKey(const Settings& s, const NodeTask& n) {
  return weft::cloud::DerivedEd25519(s.credentials.password,
                                   "weft openstack login key\n" + n.tenant + "/" + n.cluster_id + "/" + n.node_id,
                                   NodeKeyName(n));
}
weft::cloud::SshKeyPair HostKey(const Settings& s, const NodeTask& n) {
  return weft::cloud::DerivedEd25519(s.credentials.password,
                                   "weft openstack host key\n" + n.tenant + "/" + n.cluster_id + "/" + n.node_id,
                                   n.hostname);
}

std::string ReadResource(const json& t, const std::string& name, const char* field) {
  auto resources = t.find("resources");
  if (resources != t.end() && resources->is_array()) {
    for (const json& r : *resources) {
      if (!r.is_object() || StringAt(r, "name") != name) continue;
      std::ifstream in(StringAt(r, "path"), std::ios::binary);
      std::ostringstream text;
      text << in.rdbuf();
      if (in) return text.str();
    }
  }
  throw Error(WEFT_ERR_INVALID, "openstack provider: no active resource named '" + name + "' (field '" + field +
                                    "'); upload it with `weft resource upload openstack " + name +
                                    " FILE`, then stage and sync it");
}

// cloud-init's user data: the node's SSH host key, so the host key is known
// (and checked) from the first connection on; with the operator's own user
// data as a second part of a MIME multipart message, which cloud-init runs too.
std::string UserData(const weft::cloud::SshKeyPair& host_key, const std::string& extra) {
  std::string indented;
  std::istringstream in(host_key.private_key);
  for (std::string line; std::getline(in, line);) indented += "    " + line + "\n";
  const std::string ours =
      "#cloud-config\nssh_deletekeys: true\nssh_genkeytypes: []\nssh_keys:\n  ed25519_private: |\n" + indented +
      "  ed25519_public: " + host_key.public_key + "\n";
  if (extra.empty()) return ours;
  const std::string type = extra.starts_with("#cloud-config") ? "text/cloud-config"
                           : extra.starts_with("#include")    ? "text/x-include-url"
                                                              : "text/x-shellscript";
  const std::string boundary = "==weft-user-data==";
  return "Content-Type: multipart/mixed; boundary=\"" + boundary + "\"\nMIME-Version: 1.0\n\n--" + boundary +
         "\nContent-Type: text/cloud-config; charset=\"utf-8\"\n\n" + ours + "\n--" + boundary +
         "\nContent-Type: " + type + "; charset=\"utf-8\"\n\n" + extra + "\n--" + boundary + "--\n";
}

// ---- OpenStack's errors, as sentences naming the field to fix ----------------------

bool Mentions(const std::string& text, const char* word) {
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  return lower.find(word) != std::string::npos;
}

std::string Explain(const os::Reply& r, const Settings& s, const NodeTask* n) {
  const os::Credentials& c = s.credentials;
  const bool keystone = r.service == "Keystone";
  const std::string fields = "the provider's fields 'api_user' ('" + c.user + "'), 'api_password' and "
                             "'openstack_tenant' ('" + c.project + "')";
  if (r.failure == os::Failure::kRefusedCredentials) {
    return keystone ? "Keystone at " + c.auth_url + " refused the credentials: check " + fields
                    : r.service + " refused a fresh token from Keystone at " + c.auth_url + ": check " + fields +
                          ", and that the user has a role in the project";
  }
  if (keystone && r.failure == os::Failure::kNotFound) {
    return "Keystone has no token API at " + c.auth_url + " (HTTP 404): check field 'openstack_auth_url' (\"https://"
           "keystone:5000/v3\", or Coopr's \"http://keystone:5000/v2.0/tokens\")";
  }
  if (keystone && r.failure == os::Failure::kUnavailable) {
    return "Keystone at " + c.auth_url + " (field 'openstack_auth_url') kept failing after " +
           std::to_string(s.api.max_attempts) + " attempts";
  }
  if (r.failure == os::Failure::kNoEndpoint) {
    return r.message + (c.region.empty() ? "" : ": check field 'openstack_region'");
  }
  if (keystone && (r.failure == os::Failure::kInvalid || r.failure == os::Failure::kDenied)) {
    return "Keystone at " + c.auth_url + " did not issue a token for project '" + c.project +
           "': check the fields 'openstack_tenant', 'openstack_user_domain' and 'openstack_project_domain'";
  }
  if (r.failure == os::Failure::kDenied) {
    return "user '" + c.user + "' (field 'api_user') may not do this in project '" + c.project + "'";
  }
  if (r.failure == os::Failure::kOverQuota) {
    return "project '" + c.project + "' (field 'openstack_tenant') is over its quota";
  }
  if (r.failure == os::Failure::kInvalid && n) {
    const std::string& f = r.fault;
    if (Mentions(f, "image")) {
      return "image '" + n->image + "' (the image type's image for provider '" + n->provider_name +
             "') is not usable in project '" + c.project + "'";
    }
    if (Mentions(f, "flavor")) {
      return "flavor '" + n->flavor + "' (the hardware type's flavor for provider '" + n->provider_name +
             "') is not usable in project '" + c.project + "'";
    }
    if (Mentions(f, "key_name") || Mentions(f, "keypair") || Mentions(f, "key pair")) {
      return s.keypair.empty() ? "Nova does not know the node's own key pair '" + NodeKeyName(*n) + "'"
                               : "the key pair of field 'ssh_keypair' ('" + s.keypair + "') is unknown";
    }
    if (Mentions(f, "security group")) return "a security group of field 'security_groups' does not exist";
    if (Mentions(f, "network")) return "a network of field 'network_ids' does not exist or is not usable";
    if (Mentions(f, "availability zone")) {
      return "the zone of field 'availability_zone' ('" + s.availability_zone + "') does not exist";
    }
  }
  if (r.failure == os::Failure::kUnavailable) {
    return r.service + " kept failing after " + std::to_string(s.api.max_attempts) + " attempts";
  }
  return {};
}

[[noreturn]] void Fail(const os::Reply& r, const Settings& s, const NodeTask* n = nullptr) {
  const std::string why = Explain(r, s, n);
  const std::string message = "openstack provider: " + (why.empty() ? r.message : why + " (" + r.message + ")");
  switch (r.failure) {
    case os::Failure::kCancelled: throw Error(WEFT_ERR_CANCELLED, message);
    case os::Failure::kUnavailable: throw Error(WEFT_ERR_FAILED, message);
    default: throw Error(WEFT_ERR_INVALID, message);
  }
}

os::Reply Must(os::Session& api, std::string_view service, std::string_view method, const std::string& path,
               const Settings& s, const NodeTask* n = nullptr, const json& body = nullptr) {
  os::Reply r = api.Call(service, method, path, body);
  if (!r.ok()) Fail(r, s, n);
  return r;
}

os::Options Options(const Settings& s, const weft::sdk::Task& task) {
  os::Options o = s.api;
  o.cancelled = [&task] { return task.Cancelled(); };
  o.note = [&task](const std::string& m) { task.Info("openstack provider: " + m); };
  return o;
}

// ---- servers -----------------------------------------------------------------------

std::string MetadataAt(const json& server, const char* key) {
  return StringAt(Member(server, "metadata"), key);
}

// The servers named `hostname` whose metadata has every pair of `match`, not deleted.
std::vector<json> ServersOf(os::Session& api, const Settings& s, const NodeTask& n,
                            const std::vector<std::pair<const char*, std::string>>& match) {
  const os::Reply r =
      Must(api, "compute", "GET", "/servers/detail?name=" + os::QueryEncode(os::ExactNameRegex(n.hostname)), s, &n);
  std::vector<json> out;
  const json servers = Member(r.body, "servers");
  for (const json& server : servers.is_array() ? servers : json::array()) {
    const std::string status = StringAt(server, "status");
    if (status == "DELETED" || status == "SOFT_DELETED") continue;
    const bool all = std::all_of(match.begin(), match.end(),
                                 [&](const auto& m) { return MetadataAt(server, m.first) == m.second; });
    if (all) out.push_back(server);
  }
  return out;
}

// The flavor's id: the hardware type may name a flavor by its name or its id.
std::string FlavorId(os::Session& api, const Settings& s, const NodeTask& n) {
  const os::Reply r = Must(api, "compute", "GET", "/flavors", s, &n);
  std::string names;
  for (const json& f : Member(r.body, "flavors")) {
    if (StringAt(f, "id") == n.flavor || StringAt(f, "name") == n.flavor) return StringAt(f, "id");
    names += (names.empty() ? "" : ", ") + StringAt(f, "name");
  }
  throw Error(WEFT_ERR_INVALID, "openstack provider: flavor '" + n.flavor + "' (the hardware type's flavor for "
                                "provider '" + n.provider_name + "') is not offered to project '" +
                                    s.credentials.project + "'; its flavors are: " + names);
}

bool LooksLikeUuid(const std::string& text) {
  if (text.size() != 36) return false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? text[i] != '-' : !std::isxdigit(static_cast<unsigned char>(text[i]))) return false;
  }
  return true;
}

// The image's id: the image type may name an image by its id, or by its name (looked up in Glance).
std::string ImageId(os::Session& api, const Settings& s, const NodeTask& n) {
  if (LooksLikeUuid(n.image)) return n.image;
  const os::Reply r = Must(api, "image", "GET", "/v2/images?name=" + os::QueryEncode(n.image), s, &n);
  const json images = Member(r.body, "images");
  if (images.is_array() && !images.empty() && !StringAt(images.front(), "id").empty()) {
    return StringAt(images.front(), "id");
  }
  throw Error(WEFT_ERR_INVALID, "openstack provider: image '" + n.image + "' (the image type's image for provider '" +
                                    n.provider_name + "') is not in Glance for project '" + s.credentials.project +
                                    "'; name an image by its name or id");
}

json ServerBody(const Settings& s, const NodeTask& n, const std::string& flavor_id, const std::string& image_id,
                const std::string& key_name, const std::string& user_data) {
  json server = {{"name", n.hostname},
                 {"flavorRef", flavor_id},
                 {"imageRef", image_id},
                 {"key_name", key_name},
                 {"user_data", weft::cloud::Base64(user_data)},
                 // Nova limits metadata keys and values to 255 characters each.
                 {"metadata",
                  {{"weft:tenant", n.tenant},
                   {"weft:cluster-id", n.cluster_id},
                   {"weft:cluster", n.cluster_name.substr(0, 255)},
                   {"weft:node", n.node_id},
                   {"weft:idempotency-key", n.key}}}};
  if (!s.security_groups.empty()) {
    json groups = json::array();
    for (const std::string& g : s.security_groups) groups.push_back({{"name", g}});
    server["security_groups"] = groups;
  }
  if (!s.network_ids.empty()) {
    json networks = json::array();
    for (const std::string& id : s.network_ids) networks.push_back({{"uuid", id}});
    server["networks"] = networks;
  }
  if (!s.availability_zone.empty()) server["availability_zone"] = s.availability_zone;
  return {{"server", server}};
}

// Waits `delay`, unless the task is cancelled meanwhile; false if it was.
bool Pause(const weft::sdk::Task& task, std::chrono::milliseconds delay) {
  const auto until = std::chrono::steady_clock::now() + delay;
  while (std::chrono::steady_clock::now() < until) {
    if (task.Cancelled()) return false;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        std::chrono::milliseconds(50), until - std::chrono::steady_clock::now()));
  }
  return !task.Cancelled();
}

// ---- floating IPs (Neutron) -------------------------------------------------------

// What a node's floating IP says about itself, so that CONFIRM run again finds
// it and DELETE releases it even after its server (and port) are gone.
std::string FloatingIpDescription(const NodeTask& n) {
  return "weft " + n.tenant + "/" + n.cluster_id + "/" + n.node_id;
}

std::vector<json> FloatingIpsOf(os::Session& api, const Settings& s, const NodeTask& n) {
  const os::Reply r = Must(api, "network", "GET",
                           "/v2.0/floatingips?description=" + os::QueryEncode(FloatingIpDescription(n)), s, &n);
  const json ips = Member(r.body, "floatingips");
  return ips.is_array() ? std::vector<json>(ips.begin(), ips.end()) : std::vector<json>();
}

std::string ExternalNetwork(os::Session& api, const Settings& s, const NodeTask& n) {
  if (!s.floating_network_id.empty()) return s.floating_network_id;
  const os::Reply r = Must(api, "network", "GET", "/v2.0/networks?router%3Aexternal=true", s, &n);
  const json nets = Member(r.body, "networks");
  if (nets.is_array() && !nets.empty() && !StringAt(nets.front(), "id").empty()) return StringAt(nets.front(), "id");
  throw Error(WEFT_ERR_INVALID, "openstack provider: field 'floating_ip' asks for floating addresses, but project '" +
                                    s.credentials.project + "' sees no external network; name one in field "
                                    "'floating_network_id'");
}

// The node's floating address, attached to server `id`'s port: the one an
// earlier attempt made (found by its description), or a new one.
std::string AttachFloatingIp(os::Session& api, const Settings& s, const NodeTask& n, const std::string& id,
                             const weft::sdk::Task& task) {
  const os::Reply ports = Must(api, "network", "GET", "/v2.0/ports?device_id=" + os::QueryEncode(id), s, &n);
  const json list = Member(ports.body, "ports");
  const std::string port = list.is_array() && !list.empty() ? StringAt(list.front(), "id") : std::string();
  if (port.empty()) throw Error(WEFT_ERR_FAILED, "openstack provider: server " + id + " has no network port to "
                                                 "attach a floating IP to");
  for (const json& ip : FloatingIpsOf(api, s, n)) {
    const std::string address = StringAt(ip, "floating_ip_address");
    if (StringAt(ip, "port_id") != port) {
      Must(api, "network", "PUT", "/v2.0/floatingips/" + StringAt(ip, "id"), s, &n,
           {{"floatingip", {{"port_id", port}}}});
    }
    task.Info("openstack provider: floating IP " + address + " of " + n.hostname + " is attached");
    return address;
  }
  const json body = {{"floatingip",
                      {{"floating_network_id", ExternalNetwork(api, s, n)},
                       {"port_id", port},
                       {"description", FloatingIpDescription(n)}}}};
  const os::Reply r = api.Call("network", "POST", "/v2.0/floatingips", body, os::Repeat::kOnlyRateLimited);
  if (!r.ok()) Fail(r, s, &n);  // a CONFIRM run again finds an address whose answer was lost, by its description
  const std::string address = StringAt(Member(r.body, "floatingip"), "floating_ip_address");
  task.Info("openstack provider: attached floating IP " + address + " to " + n.hostname);
  return address;
}

// Releases the node's floating IPs; what is gone already is success.
void ReleaseFloatingIps(os::Session& api, const Settings& s, const NodeTask& n, const weft::sdk::Task& task) {
  for (const json& ip : FloatingIpsOf(api, s, n)) {
    const os::Reply r = api.Call("network", "DELETE", "/v2.0/floatingips/" + StringAt(ip, "id"));
    if (!r.ok() && r.failure != os::Failure::kNotFound) Fail(r, s, &n);
    task.Info("openstack provider: released floating IP " + StringAt(ip, "floating_ip_address") + " of " +
              n.hostname);
  }
}

// ---- the actions -------------------------------------------------------------------

// The node's own key pair, imported once; another attempt finds it there.
void ImportNodeKey(os::Session& api, const Settings& s, const NodeTask& n, const weft::cloud::SshKeyPair& key,
                   const weft::sdk::Task& task) {
  const os::Reply r = api.Call("compute", "POST", "/os-keypairs",
                               {{"keypair", {{"name", NodeKeyName(n)}, {"public_key", key.public_line}}}});
  if (r.ok()) {
    task.Info("openstack provider: imported key pair " + NodeKeyName(n));
  } else if (r.failure == os::Failure::kConflict) {
    task.Info("openstack provider: key pair " + NodeKeyName(n) + " is there already");
  } else {
    Fail(r, s, &n);
  }
}

void Create(weft::sdk::Task& task, const json& t) {
  const Settings s = ReadSettings(task);
  const NodeTask n = ReadNodeTask(t);
  if (n.key.empty()) throw Error(WEFT_ERR_INVALID, "openstack provider: the task has no idempotency_key");
  if (n.flavor.empty()) {
    throw Error(WEFT_ERR_INVALID, "openstack provider: the node has no flavor; give its hardware type a providermap "
                                  "entry for provider '" + n.provider_name +
                                      "' with a Nova flavor (\"flavor\": \"m1.small\")");
  }
  if (n.image.empty()) {
    throw Error(WEFT_ERR_INVALID, "openstack provider: the node has no image; give its image type a providermap "
                                  "entry for provider '" + n.provider_name + "' with a Glance image's name or id");
  }
  const std::string extra = s.user_data_resource.empty() ? std::string()
                                                         : ReadResource(t, s.user_data_resource, "user_data_resource");
  os::Session api(s.credentials, Options(s, task));
  if (const os::Reply a = api.Authenticate(); !a.ok()) Fail(a, s, &n);
  const weft::cloud::SshKeyPair host_key = HostKey(s, n);
  const std::string user_data = UserData(host_key, extra);
  if ((user_data.size() + 2) / 3 * 4 > kMaxUserData) {
    throw Error(WEFT_ERR_INVALID, "openstack provider: the resource of field 'user_data_resource' ('" +
                                      s.user_data_resource + "') makes the user data larger than Nova's 64 KiB");
  }
  std::string private_key;
  std::string key_name = s.keypair;
  if (s.keypair.empty()) {
    const weft::cloud::SshKeyPair login = LoginKey(s, n);
    ImportNodeKey(api, s, n, login, task);
    key_name = NodeKeyName(n);
    private_key = login.private_key;
  } else {
    private_key = ReadResource(t, s.key_resource, "ssh_key_resource");
    if (private_key.find("PRIVATE KEY") == std::string::npos) {
      throw Error(WEFT_ERR_INVALID, "openstack provider: resource '" + s.key_resource + "' (field 'ssh_key_resource') "
                                    "does not hold a private key in OpenSSH or PEM text");
    }
  }
  task.Progress(20, "key pair ready");

  // Nova has no client token: the server's metadata carries the task's
  // idempotency key, and it is looked for before every POST, so neither an
  // earlier attempt of the task nor a POST whose answer was lost makes a
  // second server.
  std::string id;
  std::string flavor_id, image_id;
  std::mt19937 jitter(std::random_device{}());
  std::chrono::milliseconds ceiling = s.api.first_backoff;
  for (int attempt = 1; id.empty(); ++attempt) {
    const std::vector<json> made = ServersOf(api, s, n, {{"weft:idempotency-key", n.key}});
    if (!made.empty()) {
      id = StringAt(made.front(), "id");
      task.Info("openstack provider: reuses server " + id + " (" + StringAt(made.front(), "status") +
                ") that an earlier attempt of this task made for " + n.hostname);
      break;
    }
    if (flavor_id.empty()) flavor_id = FlavorId(api, s, n);
    if (image_id.empty()) image_id = ImageId(api, s, n);
    const os::Reply r =
        api.Call("compute", "POST", "/servers", ServerBody(s, n, flavor_id, image_id, key_name, user_data),
                 os::Repeat::kOnlyRateLimited);
    if (r.ok()) {
      id = r.body.is_object() ? StringAt(Member(r.body, "server"), "id") : std::string();
      if (id.empty())
        throw Error(WEFT_ERR_FAILED, "openstack provider: Nova answered the server's creation without an id");
      task.Info("openstack provider: created server " + id + " (flavor " + n.flavor + ", image " + n.image +
                ") for " + n.hostname);
      break;
    }
    // A POST answered with a 5xx, or not at all, may still have made the server: look again before the next
    // one. (Rate limits were waited out within the call already.)
    const bool lost = r.failure == os::Failure::kUnavailable && (r.http_status == 0 || r.http_status >= 500);
    if (!lost || attempt >= s.api.max_attempts) Fail(r, s, &n);
    std::uniform_int_distribution<long> pick(ceiling.count() / 2, ceiling.count());
    const std::chrono::milliseconds delay(pick(jitter));
    ceiling = std::min(ceiling * 2, s.api.max_backoff);
    task.Info("openstack provider: " + r.message + "; looking for the server and trying again in " +
              std::to_string(delay.count()) + " ms (attempt " + std::to_string(attempt + 1) + " of " +
              std::to_string(s.api.max_attempts) + ")");
    if (!Pause(task, delay))
      throw Error(WEFT_ERR_CANCELLED, "openstack provider: cancelled while creating " + n.hostname);
  }
  task.SetResultString("provider_id", id);
  if (!s.credentials.region.empty()) task.SetResultString("openstack_region", s.credentials.region);
  // ssh_auth.private_key is a secret: it goes into the result only, never a log line.
  task.SetResult("ssh_auth", json{{"user", n.ssh_user}, {"private_key", private_key}}.dump());
  task.SetResult("host_keys", json::array({host_key.public_key}).dump());
  task.SetResult("ssh_port", "22");
  task.Progress(100, "server " + id + " requested");
}

struct Addresses {
  std::string access, bind;
};

// The address Weft reaches the node at (a floating one first) and the one its
// services bind (the first fixed one), IPv4.
Addresses AddressesOf(const json& server) {
  Addresses a;
  json nets = Member(server, "addresses");
  if (!nets.is_object()) nets = json::object();
  for (const auto& network : nets.items()) {
    const json& list = network.value();
    for (const json& addr : list.is_array() ? list : json::array()) {
      if (!addr.is_object() || Member(addr, "version") == json(6)) continue;
      const std::string ip = StringAt(addr, "addr");
      const std::string type = StringAt(addr, "OS-EXT-IPS:type");
      if (type == "floating") {
        if (a.access.empty()) a.access = ip;
      } else if (a.bind.empty()) {
        a.bind = ip;
      }
    }
  }
  if (const std::string public_ip = StringAt(server, "accessIPv4"); !public_ip.empty() && a.access.empty())
    a.access = public_ip;
  if (a.access.empty()) a.access = a.bind;
  if (a.bind.empty()) a.bind = a.access;
  return a;
}

bool StillBuilding(const std::string& status) {
  for (const char* s :
       {"BUILD", "REBUILD", "REBOOT", "HARD_REBOOT", "MIGRATING", "RESIZE", "VERIFY_RESIZE", "PASSWORD"})
    if (status == s) return true;
  return false;
}

std::string ProviderId(const weft::sdk::Task& task) {
  const std::optional<std::string> provider_id = task.NodeJson("provider_id");
  const json idj = provider_id ? json::parse(*provider_id, nullptr, false) : json();
  return idj.is_string() ? idj.get<std::string>() : std::string();
}

void Confirm(weft::sdk::Task& task, const json& t) {
  const Settings s = ReadSettings(task);
  const NodeTask n = ReadNodeTask(t);
  const std::string id = ProviderId(task);
  if (id.empty())
    throw Error(WEFT_ERR_INVALID, "openstack provider: the task has no provider_id; CREATE must run first");
  os::Session api(s.credentials, Options(s, task));

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(s.confirm_timeout_s);
  const std::chrono::milliseconds poll(s.confirm_poll_ms);
  std::string status;
  for (;;) {
    const os::Reply r = api.Call("compute", "GET", "/servers/" + id);
    if (r.failure == os::Failure::kNotFound) {
      throw Error(WEFT_ERR_FAILED, "openstack provider: server " + id + " of " + n.hostname + " is gone (deleted)");
    }
    if (!r.ok()) Fail(r, s, &n);
    const json server = Member(r.body, "server");
    status = StringAt(server, "status");
    Addresses a = AddressesOf(server);
    if (status == "ACTIVE" && !a.access.empty()) {
      if (s.floating_ip && a.access == a.bind) a.access = AttachFloatingIp(api, s, n, id, task);
      task.Info("openstack provider: server " + id + " is active at " + a.access +
                (a.bind == a.access ? "" : " (fixed " + a.bind + ")"));
      task.SetResultString("access_v4", a.access);
      task.SetResultString("bind_v4", a.bind);
      task.SetResultString("hostname", n.hostname);
      task.SetResult("host_keys", json::array({HostKey(s, n).public_key}).dump());
      task.SetResult("ssh_port", "22");
      task.Progress(100, "server active");
      return;
    }
    if (status == "ERROR") {
      const std::string fault = StringAt(Member(server, "fault"), "message");
      throw Error(WEFT_ERR_FAILED, "openstack provider: server " + id + " of " + n.hostname + " failed to build: " +
                                       (fault.empty() ? "Nova gives no reason" : fault));
    }
    if (status != "ACTIVE" && !StillBuilding(status)) {
      throw Error(WEFT_ERR_FAILED, "openstack provider: server " + id + " of " + n.hostname + " is " + status +
                                       ", not ACTIVE");
    }
    if (status == "ACTIVE") status = "ACTIVE without an IPv4 address";
    if (task.Cancelled())
      throw Error(WEFT_ERR_CANCELLED, "openstack provider: cancelled while waiting for server " + id);
    if (std::chrono::steady_clock::now() + poll > deadline) {
      throw Error(WEFT_ERR_TIMEOUT, "openstack provider: server " + id + " of " + n.hostname + " is still " + status +
                                        " after " + std::to_string(s.confirm_timeout_s) +
                                        " s (field 'confirm_timeout_s')");
    }
    task.Progress(50, "server " + id + " is " + status);
    std::this_thread::sleep_for(poll);
  }
}

// Deletes every server of the node, found by its metadata as well as by
// provider_id: a CREATE that made one and died never reported it. What is
// gone already is success.
void Delete(weft::sdk::Task& task, const json& t) {
  const Settings s = ReadSettings(task);
  const NodeTask n = ReadNodeTask(t);
  os::Session api(s.credentials, Options(s, task));
  if (const os::Reply a = api.Authenticate(); !a.ok()) Fail(a, s, &n);
  std::vector<std::string> ids;
  for (const json& server :
       ServersOf(api, s, n, {{"weft:tenant", n.tenant}, {"weft:cluster-id", n.cluster_id}, {"weft:node", n.node_id}}))
    ids.push_back(StringAt(server, "id"));
  if (const std::string id = ProviderId(task); !id.empty() && std::find(ids.begin(), ids.end(), id) == ids.end()) {
    const os::Reply r = api.Call("compute", "GET", "/servers/" + id);
    const std::string status = r.ok() ? StringAt(Member(r.body, "server"), "status") : std::string();
    if (r.failure == os::Failure::kNotFound || status == "DELETED" || status == "SOFT_DELETED") {
      task.Info("openstack provider: server " + id + " of " + n.hostname + " is gone already");
    } else if (!r.ok()) {
      Fail(r, s, &n);
    } else {
      ids.push_back(id);
    }
  }
  for (const std::string& id : ids) {
    const os::Reply r = api.Call("compute", "DELETE", "/servers/" + id);
    if (r.ok()) {
      task.Info("openstack provider: deleting server " + id + " of " + n.hostname);
    } else if (r.failure == os::Failure::kNotFound) {
      task.Info("openstack provider: server " + id + " of " + n.hostname + " is gone already");
    } else {
      Fail(r, s, &n);
    }
  }
  if (ids.empty()) task.Info("openstack provider: no server of " + n.hostname + " exists; nothing to delete");
  if (s.floating_ip) ReleaseFloatingIps(api, s, n, task);
  if (s.keypair.empty()) {
    const os::Reply r = api.Call("compute", "DELETE", "/os-keypairs/" + os::QueryEncode(NodeKeyName(n)));
    if (!r.ok() && r.failure != os::Failure::kNotFound) Fail(r, s, &n);
  }
  task.Progress(100, "server deleted");
}

class OpenStackProvider : public weft::sdk::Plugin {
 public:
  static weft::sdk::Info Describe() {
    weft::sdk::Info info;
    info.type_name = "openstack";
    info.kind = WEFT_KIND_PROVIDER;
    info.version = "1.0";
    info.description = "Nodes are OpenStack Nova servers";
    info.actions = {WEFT_ACTION_CREATE, WEFT_ACTION_CONFIRM, WEFT_ACTION_DELETE};
    info.resource_types = {"openstack"};
    auto text = [](const char* name, const char* label, bool required, const char* description) {
      return weft::sdk::Field{.name = name, .label = label, .required = required, .description = description};
    };
    auto integer = [](const char* name, const char* label, std::string default_json, const char* description) {
      return weft::sdk::Field{.name = name,
                              .label = label,
                              .type = WEFT_FIELD_INTEGER,
                              .default_json = std::move(default_json),
                              .description = description};
    };
    info.fields = {
        text("api_user", "User name", true, "the OpenStack user name"),
        {.name = "api_password",
         .label = "Password",
         .required = true,
         .sensitive = true,
         .description = "the password of api_user"},
        text("openstack_tenant", "Project (tenant)", true, "the project servers are made in, by name"),
        text("openstack_auth_url", "Keystone URL", true,
             "https://keystone:5000/v3 (v3), or Coopr's http://keystone:5000/v2.0/tokens (v2.0)"),
        text("openstack_region", "Region", false, "the region of the service catalog; empty: the first"),
        {.name = "openstack_user_domain",
         .label = "User domain",
         .default_json = "\"Default\"",
         .description = "the user's Keystone domain (v3)"},
        {.name = "openstack_project_domain",
         .label = "Project domain",
         .default_json = "\"Default\"",
         .description = "the project's Keystone domain (v3)"},
        text("ssh_keypair", "Key pair", false,
             "a Nova key pair new servers get; empty: Weft imports a key pair of its own per node"),
        text("ssh_key_resource", "Key pair's private key", false,
             "the resource (type openstack) holding ssh_keypair's private key; required with ssh_keypair"),
        text("security_groups", "Security groups", false, "comma-separated security group names; empty: default"),
        text("network_ids", "Network ids", false, "comma-separated ids of the networks servers attach to"),
        text("availability_zone", "Availability zone", false, "the zone servers go into"),
        text("user_data_resource", "User data resource", false,
             "a resource (type openstack) cloud-init runs besides Weft's own user data"),
        {.name = "floating_ip",
         .label = "Floating IP",
         .type = WEFT_FIELD_BOOLEAN,
         .default_json = "false",
         .description = "give each server a floating address (Neutron), which Weft reaches it at"},
        text("floating_network_id", "Floating IP network", false,
             "the external network floating addresses come from; empty: the first external network"),
        {.name = "openstack_ssl_verify_peer",
         .label = "Verify TLS",
         .type = WEFT_FIELD_BOOLEAN,
         .default_json = "true",
         .description = "check the API's TLS certificates"},
        integer("confirm_timeout_s", "Boot timeout (s)", std::to_string(kDefaultConfirmTimeoutS),
                "how long CONFIRM waits for a server to be ACTIVE"),
        integer("confirm_poll_ms", "Boot poll (ms)", std::to_string(kDefaultConfirmPollMs),
                "how often CONFIRM asks Nova about the server"),
        integer("api_max_attempts", "API attempts", "6", "tries per call when OpenStack fails (5xx) or rate-limits"),
        integer("api_backoff_ms", "First backoff (ms)", "250", "the first wait before a retry; it doubles up to 8 s"),
    };
    return info;
  }

  void Run(weft_action action, weft::sdk::Task& task) override {
    const json t = ParseTask(task);
    switch (action) {
      case WEFT_ACTION_CREATE: Create(task, t); break;
      case WEFT_ACTION_CONFIRM: Confirm(task, t); break;
      case WEFT_ACTION_DELETE: Delete(task, t); break;
      default: throw Error(WEFT_ERR_UNSUPPORTED, "openstack provider implements CREATE, CONFIRM and DELETE only");
    }
  }
};

}  // namespace

WEFT_PLUGIN(OpenStackProvider)

// aws: a provider whose nodes are EC2 instances (see README.md). CREATE runs
// an instance (idempotent per task: EC2's ClientToken plus a look-up by the
// idempotency-key tag first), CONFIRM waits until it runs and returns its
// addresses, DELETE terminates every instance tagged with the node. Field
// names are Coopr's, so Coopr's aws provider files import unchanged.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <openssl/evp.h>

#include <nlohmann/json.hpp>

#include "weft/aws/ec2.hpp"
#include "weft/cloud/fields.hpp"
#include "weft/cloud/ssh_keys.hpp"
#include "weft/plugin.hpp"

namespace {

using json = nlohmann::json;
using weft::sdk::Error;
using weft::cloud::BoolField;
using weft::cloud::IntegerField;
using weft::cloud::ListField;
using weft::cloud::ParseTask;
using weft::cloud::StringField;

constexpr const char* kPlugin = "aws provider";  // begins its field errors
constexpr const char* kIdList = "of ids (\"sg-0123, sg-4567\")";

namespace aws = weft::aws;
namespace cloud = weft::cloud;

constexpr int kDefaultConfirmTimeoutS = 600;
constexpr const char* kDefaultSshUser = "ec2-user";

// ---- the task and the provider's fields --------------------------------------------

// The provider's fields, checked.
struct Settings {
  aws::Ec2Options ec2;
  std::string keypair;           // ssh_keypair: the operator's EC2 key pair; empty: one per node, made here
  std::string key_resource;      // ssh_key_resource: the resource holding its private key
  std::vector<std::string> security_group_ids;  // VPC groups, by id
  std::vector<std::string> security_groups;     // groups by name (EC2-Classic, the default VPC)
  std::string subnet;
  std::optional<std::int64_t> ebs_size_gb;
  bool ebs_delete_on_termination = true;
  std::string ebs_volume_type;
  std::optional<bool> public_ip;
  std::string availability_zone, placement_group, iam_instance_profile;
  bool dedicated = false;
  int confirm_timeout_s = kDefaultConfirmTimeoutS;
};

Settings ReadSettings(const weft::sdk::Task& task) {
  Settings s;
  s.ec2.credentials.access_key_id = StringField(kPlugin, task, "api_user", "the AWS access key id", true);
  s.ec2.credentials.secret_access_key = StringField(kPlugin, task, "api_password", "the AWS secret access key", true);
  s.ec2.credentials.session_token =
      StringField(kPlugin, task, "api_session_token", "a temporary credential's token", false);
  s.ec2.region = StringField(kPlugin, task, "aws_region", "the EC2 region, such as us-east-1", true);
  s.ec2.endpoint = StringField(kPlugin, task, "endpoint_url", "where EC2 requests go", false);
  if (!s.ec2.endpoint.empty() && !s.ec2.endpoint.starts_with("https://") && !s.ec2.endpoint.starts_with("http://")) {
    throw Error(WEFT_ERR_INVALID, "aws provider: field 'endpoint_url' must be an http:// or https:// URL");
  }
  if (const auto n = IntegerField(kPlugin, task, "api_max_attempts", 1, 20)) s.ec2.max_attempts = static_cast<int>(*n);
  if (const auto n = IntegerField(kPlugin, task, "api_backoff_ms", 1, 60000))
    s.ec2.first_backoff = std::chrono::milliseconds(*n);
  s.keypair = StringField(kPlugin, task, "ssh_keypair", "the EC2 key pair new instances get", false);
  s.key_resource =
      StringField(kPlugin, task, "ssh_key_resource", "the resource holding the key pair's private key", false);
  if (!s.keypair.empty() && s.key_resource.empty()) {
    throw Error(WEFT_ERR_INVALID,
                "aws provider: field 'ssh_keypair' names the key pair '" + s.keypair +
                    "', so field 'ssh_key_resource' must name the resource (type 'aws') holding its private key; "
                    "or leave both empty and Weft makes a key pair per node");
  }
  s.security_group_ids = ListField(kPlugin, task, "security_group_ids", kIdList);
  s.security_groups = ListField(kPlugin, task, "security_groups", kIdList);
  s.subnet = StringField(kPlugin, task, "subnet_id", "the VPC subnet new instances go into", false);
  s.ebs_size_gb = IntegerField(kPlugin, task, "aws_ebs_size", 1, 16384);
  s.ebs_delete_on_termination = BoolField(kPlugin, task, "aws_ebs_delete_on_term").value_or(true);
  s.ebs_volume_type = StringField(kPlugin, task, "aws_ebs_volume_type", "the root volume's type, such as gp3", false);
  s.public_ip = BoolField(kPlugin, task, "associate_public_ip");
  s.availability_zone = StringField(kPlugin, task, "availability_zone", "the zone instances go into", false);
  s.placement_group = StringField(kPlugin, task, "placement_group", "the placement group instances join", false);
  s.iam_instance_profile = StringField(kPlugin, task, "iam_instance_profile", "the instances' IAM role", false);
  s.dedicated = BoolField(kPlugin, task, "dedicated_instance").value_or(false);
  if (const auto n = IntegerField(kPlugin, task, "confirm_timeout_s", 1, 86400))
    s.confirm_timeout_s = static_cast<int>(*n);
  return s;
}

// The facts of the task that name what is made.
struct NodeTask {
  std::string tenant, cluster_id, cluster_name, node_id, hostname, key, provider_name;
  std::string flavor, image, ssh_user;
};

std::string StringAt(const json& object, const char* key) {
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
  const json cluster = t.value("cluster", json::object());
  const json provider = t.value("provider", json::object());
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
  if (cluster.is_object()) n.cluster_name = StringAt(cluster, "name");
  if (provider.is_object()) n.provider_name = StringAt(provider, "name");
  if (n.cluster_id.empty() || n.node_id.empty()) {
    throw Error(WEFT_ERR_INVALID, "aws provider: the task names no cluster_id and node_id; instances are tagged with "
                                  "the cluster node they belong to, so both are needed");
  }
  return n;
}

// ---- what a node's instance is made of -------------------------------------------

std::string Sha256Hex(std::string_view text) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(text.data(), text.size(), out, &size, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < size; ++i) {
    hex.push_back(kHex[out[i] >> 4]);
    hex.push_back(kHex[out[i] & 0xF]);
  }
  return hex;
}

// The node's own key pair's name in EC2, when the operator names none.
std::string NodeKeyName(const NodeTask& n) { return "weft-" + n.tenant + "-" + n.cluster_id + "-" + n.node_id; }

// The node's login and host keys: derived from the AWS secret and the node, so
// every attempt of every task of the node gets the same ones.
cloud::SshKeyPair LoginKey(const Settings& s, const NodeTask& n) {
  return cloud::DerivedEd25519(s.ec2.credentials.secret_access_key,
                             "weft aws login key\n" + n.tenant + "/" + n.cluster_id + "/" + n.node_id,
                             NodeKeyName(n));
}
cloud::SshKeyPair HostKey(const Settings& s, const NodeTask& n) {
  return cloud::DerivedEd25519(s.ec2.credentials.secret_access_key,
                             "weft aws host key\n" + n.tenant + "/" + n.cluster_id + "/" + n.node_id, n.hostname);
}

// cloud-init's user data: the node's SSH host key, so the host key is known
// (and checked) from the first connection on.
std::string UserData(const cloud::SshKeyPair& host_key) {
  std::string indented;
  std::istringstream in(host_key.private_key);
  for (std::string line; std::getline(in, line);) indented += "    " + line + "\n";
  return "#cloud-config\nssh_deletekeys: true\nssh_genkeytypes: []\nssh_keys:\n  ed25519_private: |\n" + indented +
         "  ed25519_public: " + host_key.public_key + "\n";
}

std::string ReadResource(const json& t, const std::string& name) {
  auto resources = t.find("resources");
  if (resources != t.end() && resources->is_array()) {
    for (const json& r : *resources) {
      if (!r.is_object() || StringAt(r, "name") != name) continue;
      const std::string path = StringAt(r, "path");
      std::ifstream in(path, std::ios::binary);
      std::ostringstream text;
      text << in.rdbuf();
      if (in && text.str().find("PRIVATE KEY") != std::string::npos) return text.str();
      throw Error(WEFT_ERR_INVALID, "aws provider: resource '" + name + "' (field 'ssh_key_resource') does not hold a "
                                    "private key in OpenSSH or PEM text");
    }
  }
  throw Error(WEFT_ERR_INVALID, "aws provider: no active resource named '" + name + "' (field 'ssh_key_resource'); "
                                "upload the key pair's private key with `weft resource upload aws " + name +
                                    " FILE`, then stage and sync it");
}

// ---- EC2 calls and their errors ---------------------------------------------------

// What an EC2 error means for the operator, naming the field to fix.
std::string Explain(const aws::Reply& r, const Settings& s, const NodeTask* n) {
  const std::string& code = r.error_code;
  if (r.failure == aws::Failure::kRefusedCredentials) {
    return "AWS refused the credentials: check the provider's fields 'api_user' (access key id '" +
           s.ec2.credentials.access_key_id + "') and 'api_password' (its secret access key) for region '" +
           s.ec2.region + "'";
  }
  if (r.failure == aws::Failure::kDenied) {
    return "the credentials of field 'api_user' ('" + s.ec2.credentials.access_key_id +
           "') may not do this; grant its IAM user the EC2 permission the message names";
  }
  if (code.starts_with("InvalidAMIID") && n) {
    return "image '" + n->image + "' (the image type's image for provider '" + n->provider_name +
           "') does not exist in region '" + s.ec2.region + "' or is not usable";
  }
  if (code == "InvalidInstanceType" || code == "Unsupported") {
    return n ? "flavor '" + n->flavor + "' (the hardware type's flavor for provider '" + n->provider_name +
                   "') is not offered in region '" + s.ec2.region + "'"
             : "this is not offered in region '" + s.ec2.region + "'";
  }
  if (code.starts_with("InvalidKeyPair")) return "the key pair of field 'ssh_keypair' ('" + s.keypair + "') is unknown";
  if (code.starts_with("InvalidGroup") || code.starts_with("InvalidSecurityGroup")) {
    return "a security group of field 'security_group_ids' or 'security_groups' does not exist in region '" +
           s.ec2.region + "'";
  }
  if (code.starts_with("InvalidPlacementGroup")) return "the group of field 'placement_group' does not exist";
  if (code.starts_with("InvalidParameterValue") && r.message.find("iamInstanceProfile") != std::string::npos) {
    return "the profile of field 'iam_instance_profile' is unknown";
  }
  if (code.starts_with("InvalidSubnet")) return "the subnet of field 'subnet_id' ('" + s.subnet + "') does not exist";
  if (r.failure == aws::Failure::kUnavailable) {
    return "EC2 at " + (s.ec2.endpoint.empty() ? "region '" + s.ec2.region + "'" : s.ec2.endpoint) +
           " kept failing after " + std::to_string(s.ec2.max_attempts) + " attempts";
  }
  return {};
}

[[noreturn]] void Fail(const aws::Reply& r, const Settings& s, const NodeTask* n = nullptr) {
  const std::string why = Explain(r, s, n);
  const std::string message = "aws provider: " + (why.empty() ? r.message : why + " (" + r.message + ")");
  switch (r.failure) {
    case aws::Failure::kCancelled: throw Error(WEFT_ERR_CANCELLED, message);
    case aws::Failure::kRefusedCredentials:
    case aws::Failure::kInvalid:
    case aws::Failure::kNotFound: throw Error(WEFT_ERR_INVALID, message);
    default: throw Error(WEFT_ERR_FAILED, message);
  }
}

aws::Reply Must(aws::Ec2& ec2, std::string_view action, const aws::Pairs& params, const Settings& s,
                const NodeTask* n = nullptr) {
  aws::Reply r = ec2.Call(action, params);
  if (!r.ok()) Fail(r, s, n);
  return r;
}

std::string Text(const pugi::xml_node& node, const char* path) {
  return node.select_node(path).node().text().as_string();
}

struct Instance {
  std::string id, state, private_ip, public_ip, reason;
};

std::vector<Instance> InstancesOf(const aws::Reply& r) {
  std::vector<Instance> out;
  for (const pugi::xpath_node& x : r.root().select_nodes("reservationSet/item/instancesSet/item")) {
    const pugi::xml_node i = x.node();
    out.push_back({Text(i, "instanceId"), Text(i, "instanceState/name"), Text(i, "privateIpAddress"),
                   Text(i, "ipAddress"), Text(i, "stateReason/message")});
  }
  return out;
}

// Instances not terminated (nor on their way) matching the tag filters.
std::vector<Instance> Live(aws::Ec2& ec2, const aws::Pairs& tag_filters, const Settings& s) {
  aws::Pairs params;
  int i = 0;
  for (const auto& [tag, value] : tag_filters) {
    const std::string f = "Filter." + std::to_string(++i);
    params.emplace_back(f + ".Name", "tag:" + tag);
    params.emplace_back(f + ".Value.1", value);
  }
  const std::string f = "Filter." + std::to_string(++i);
  params.emplace_back(f + ".Name", "instance-state-name");
  int v = 0;
  for (const char* state : {"pending", "running", "stopping", "stopped"})
    params.emplace_back(f + ".Value." + std::to_string(++v), state);
  return InstancesOf(Must(ec2, "DescribeInstances", params, s));
}

aws::Ec2Options Options(const Settings& s, const weft::sdk::Task& task) {
  aws::Ec2Options o = s.ec2;
  o.cancelled = [&task] { return task.Cancelled(); };
  o.note = [&task](const std::string& m) { task.Info("aws provider: " + m); };
  return o;
}

// ---- the actions -----------------------------------------------------------------

// The node's own key pair, imported once; another attempt finds it there.
void ImportNodeKey(aws::Ec2& ec2, const Settings& s, const NodeTask& n, const cloud::SshKeyPair& key,
                   const weft::sdk::Task& task) {
  aws::Reply r = ec2.Call("ImportKeyPair", {{"KeyName", NodeKeyName(n)}, {"PublicKeyMaterial", cloud::Base64(key.public_line)}});
  if (r.ok()) {
    task.Info("aws provider: imported key pair " + NodeKeyName(n));
  } else if (r.error_code == "InvalidKeyPair.Duplicate") {
    task.Info("aws provider: key pair " + NodeKeyName(n) + " is there already");
  } else {
    Fail(r, s, &n);
  }
}

aws::Pairs RunParams(const Settings& s, const NodeTask& n, const std::string& key_name, const std::string& user_data,
                     const std::string& root_device) {
  aws::Pairs p = {{"ImageId", n.image},
                  {"InstanceType", n.flavor},
                  {"MinCount", "1"},
                  {"MaxCount", "1"},
                  // EC2 makes one instance per token, however often the call is repeated (64 characters at most).
                  {"ClientToken", Sha256Hex(n.key)},
                  {"KeyName", key_name},
                  {"UserData", cloud::Base64(user_data)}};
  const std::vector<std::pair<std::string, std::string>> tags = {
      {"Name", n.hostname},         {"weft:tenant", n.tenant},         {"weft:cluster-id", n.cluster_id},
      {"weft:cluster", n.cluster_name}, {"weft:node", n.node_id}, {"weft:idempotency-key", n.key}};
  p.emplace_back("TagSpecification.1.ResourceType", "instance");
  int i = 0;
  for (const auto& [k, v] : tags) {
    const std::string t = "TagSpecification.1.Tag." + std::to_string(++i);
    p.emplace_back(t + ".Key", k);
    p.emplace_back(t + ".Value", v);
  }
  if (s.public_ip) {
    // A public address is asked for on the network interface, which then carries the subnet and groups too.
    p.emplace_back("NetworkInterface.1.DeviceIndex", "0");
    p.emplace_back("NetworkInterface.1.AssociatePublicIpAddress", *s.public_ip ? "true" : "false");
    p.emplace_back("NetworkInterface.1.DeleteOnTermination", "true");
    if (!s.subnet.empty()) p.emplace_back("NetworkInterface.1.SubnetId", s.subnet);
    for (std::size_t g = 0; g < s.security_group_ids.size(); ++g)
      p.emplace_back("NetworkInterface.1.SecurityGroupId." + std::to_string(g + 1), s.security_group_ids[g]);
  } else {
    if (!s.subnet.empty()) p.emplace_back("SubnetId", s.subnet);
    for (std::size_t g = 0; g < s.security_group_ids.size(); ++g)
      p.emplace_back("SecurityGroupId." + std::to_string(g + 1), s.security_group_ids[g]);
  }
  // Groups by name are for the default VPC only; with a subnet, as in Coopr, the ids apply.
  if (s.subnet.empty()) {
    for (std::size_t g = 0; g < s.security_groups.size(); ++g)
      p.emplace_back("SecurityGroup." + std::to_string(g + 1), s.security_groups[g]);
  }
  if (!s.availability_zone.empty()) p.emplace_back("Placement.AvailabilityZone", s.availability_zone);
  if (!s.placement_group.empty()) p.emplace_back("Placement.GroupName", s.placement_group);
  if (s.dedicated) p.emplace_back("Placement.Tenancy", "dedicated");
  if (!s.iam_instance_profile.empty()) {
    p.emplace_back(s.iam_instance_profile.starts_with("arn:") ? "IamInstanceProfile.Arn" : "IamInstanceProfile.Name",
                   s.iam_instance_profile);
  }
  if (s.ebs_size_gb) {
    p.emplace_back("BlockDeviceMapping.1.DeviceName", root_device);
    p.emplace_back("BlockDeviceMapping.1.Ebs.VolumeSize", std::to_string(*s.ebs_size_gb));
    p.emplace_back("BlockDeviceMapping.1.Ebs.DeleteOnTermination", s.ebs_delete_on_termination ? "true" : "false");
    p.emplace_back("BlockDeviceMapping.1.Ebs.VolumeType", s.ebs_volume_type.empty() ? "gp3" : s.ebs_volume_type);
  }
  return p;
}

// The image's root device, which a root volume size applies to.
std::string RootDevice(aws::Ec2& ec2, const Settings& s, const NodeTask& n) {
  const aws::Reply r = Must(ec2, "DescribeImages", {{"ImageId.1", n.image}}, s, &n);
  const std::string device = Text(r.root(), "imagesSet/item/rootDeviceName");
  return device.empty() ? "/dev/xvda" : device;
}

void Create(weft::sdk::Task& task, const json& t) {
  const Settings s = ReadSettings(task);
  const NodeTask n = ReadNodeTask(t);
  if (n.key.empty()) throw Error(WEFT_ERR_INVALID, "aws provider: the task has no idempotency_key");
  if (n.flavor.empty()) {
    throw Error(WEFT_ERR_INVALID, "aws provider: the node has no flavor; give its hardware type a providermap entry "
                                  "for provider '" + n.provider_name + "' with the EC2 instance type (\"flavor\": \"t3.micro\")");
  }
  if (n.image.empty()) {
    throw Error(WEFT_ERR_INVALID, "aws provider: the node has no image; give its image type a providermap entry for "
                                  "provider '" + n.provider_name + "' with the AMI id of region '" + s.ec2.region +
                                      "' (\"image\": \"ami-0123...\")");
  }
  aws::Ec2 ec2(Options(s, task));
  const cloud::SshKeyPair host_key = HostKey(s, n);
  std::string private_key;
  std::string key_name = s.keypair;
  if (s.keypair.empty()) {
    const cloud::SshKeyPair login = LoginKey(s, n);
    ImportNodeKey(ec2, s, n, login, task);
    key_name = NodeKeyName(n);
    private_key = login.private_key;
  } else {
    private_key = ReadResource(t, s.key_resource);
  }
  task.Progress(20, "key pair ready");

  // An earlier attempt of this task may have made the instance already:
  // ClientToken covers that on EC2, the tag look-up wherever tokens are not kept.
  std::vector<Instance> made = Live(ec2, {{"weft:idempotency-key", n.key}}, s);
  std::string id;
  if (!made.empty()) {
    id = made.front().id;
    task.Info("aws provider: reuses instance " + id + " (" + made.front().state + ") that an earlier attempt of this "
              "task made for " + n.hostname);
  } else {
    const std::string root_device = s.ebs_size_gb ? RootDevice(ec2, s, n) : std::string();
    const aws::Reply r = Must(ec2, "RunInstances", RunParams(s, n, key_name, UserData(host_key), root_device), s, &n);
    id = Text(r.root(), "instancesSet/item/instanceId");
    if (id.empty()) throw Error(WEFT_ERR_FAILED, "aws provider: EC2 RunInstances answered without an instance id");
    task.Info("aws provider: ran instance " + id + " (" + n.flavor + ", " + n.image + ") in " + s.ec2.region +
              " for " + n.hostname);
  }
  task.SetResultString("provider_id", id);
  task.SetResultString("aws_region", s.ec2.region);
  // ssh_auth.private_key is a secret: it goes into the result only, never a log line.
  task.SetResult("ssh_auth", json{{"user", n.ssh_user}, {"private_key", private_key}}.dump());
  task.SetResult("host_keys", json::array({host_key.public_key}).dump());
  task.SetResult("ssh_port", "22");
  task.Progress(100, "instance " + id + " requested");
}

void Confirm(weft::sdk::Task& task, const json& t) {
  const Settings s = ReadSettings(task);
  const NodeTask n = ReadNodeTask(t);
  const std::optional<std::string> provider_id = task.NodeJson("provider_id");
  const json idj = provider_id ? json::parse(*provider_id, nullptr, false) : json();
  if (!idj.is_string()) throw Error(WEFT_ERR_INVALID, "aws provider: the task has no provider_id; CREATE must run first");
  const std::string id = idj.get<std::string>();
  aws::Ec2 ec2(Options(s, task));

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(s.confirm_timeout_s);
  const auto poll = std::chrono::milliseconds(std::clamp(s.confirm_timeout_s * 50, 200, 5000));
  std::string state;
  for (;;) {
    const aws::Reply r = ec2.Call("DescribeInstances", {{"InstanceId.1", id}});
    if (!r.ok() && r.error_code == "InvalidInstanceID.NotFound") {
      // EC2 is eventually consistent: a fresh instance may not be visible yet.
      state = "not visible yet";
    } else if (!r.ok()) {
      Fail(r, s, &n);
    } else {
      const std::vector<Instance> found = InstancesOf(r);
      if (found.empty()) throw Error(WEFT_ERR_FAILED, "aws provider: EC2 does not know instance " + id);
      const Instance& i = found.front();
      state = i.state;
      if (i.state == "running") {
        const std::string access = i.public_ip.empty() ? i.private_ip : i.public_ip;
        task.Info("aws provider: instance " + id + " runs at " + access +
                  (i.private_ip.empty() ? "" : " (private " + i.private_ip + ")"));
        task.SetResultString("access_v4", access);
        task.SetResultString("bind_v4", i.private_ip.empty() ? access : i.private_ip);
        task.SetResultString("hostname", n.hostname.empty() ? access : n.hostname);
        task.SetResult("host_keys", json::array({HostKey(s, n).public_key}).dump());
        task.SetResult("ssh_port", "22");
        task.Progress(100, "instance running");
        return;
      }
      if (i.state != "pending") {
        throw Error(WEFT_ERR_FAILED, "aws provider: instance " + id + " of " + n.hostname + " is " + i.state +
                                         (i.reason.empty() ? "" : " (" + i.reason + ")") + ", not running");
      }
    }
    if (task.Cancelled()) throw Error(WEFT_ERR_CANCELLED, "aws provider: cancelled while waiting for instance " + id);
    if (std::chrono::steady_clock::now() + poll > deadline) {
      throw Error(WEFT_ERR_TIMEOUT, "aws provider: instance " + id + " of " + n.hostname + " is still " + state +
                                        " after " + std::to_string(s.confirm_timeout_s) +
                                        " s (field 'confirm_timeout_s')");
    }
    task.Progress(50, "instance " + id + " is " + state);
    std::this_thread::sleep_for(poll);
  }
}

// Terminates every instance of the node, found by its tags as well as by
// provider_id: a CREATE that made one and died never reported it. What is
// gone already is success.
void Delete(weft::sdk::Task& task, const json& t) {
  const Settings s = ReadSettings(task);
  const NodeTask n = ReadNodeTask(t);
  aws::Ec2 ec2(Options(s, task));
  std::vector<std::string> ids;
  for (const Instance& i : Live(ec2, {{"weft:tenant", n.tenant}, {"weft:cluster-id", n.cluster_id}, {"weft:node", n.node_id}}, s))
    ids.push_back(i.id);
  // provider_id as well, when the tags did not find it (an instance tagged by
  // hand differently, or one already on its way out).
  if (const std::optional<std::string> p = task.NodeJson("provider_id")) {
    const json idj = json::parse(*p, nullptr, false);
    if (idj.is_string() && std::find(ids.begin(), ids.end(), idj.get<std::string>()) == ids.end()) {
      const std::string id = idj.get<std::string>();
      const aws::Reply r = ec2.Call("DescribeInstances", {{"InstanceId.1", id}});
      if (!r.ok() && r.error_code != "InvalidInstanceID.NotFound" && r.error_code != "InvalidInstanceID.Malformed") {
        Fail(r, s, &n);
      }
      const std::vector<Instance> found = r.ok() ? InstancesOf(r) : std::vector<Instance>();
      if (found.empty() || found.front().state == "terminated" || found.front().state == "shutting-down") {
        task.Info("aws provider: instance " + id + " of " + n.hostname + " is gone already");
      } else {
        ids.push_back(id);
      }
    }
  }
  for (const std::string& id : ids) {
    const aws::Reply r = ec2.Call("TerminateInstances", {{"InstanceId.1", id}});
    if (r.ok()) {
      task.Info("aws provider: terminating instance " + id + " of " + n.hostname);
    } else if (r.error_code == "InvalidInstanceID.NotFound") {
      task.Info("aws provider: instance " + id + " of " + n.hostname + " is gone already");
    } else {
      Fail(r, s, &n);
    }
  }
  if (ids.empty()) task.Info("aws provider: no instance of " + n.hostname + " is running; nothing to terminate");
  if (s.keypair.empty()) {
    const aws::Reply r = ec2.Call("DeleteKeyPair", {{"KeyName", NodeKeyName(n)}});
    if (!r.ok() && r.error_code != "InvalidKeyPair.NotFound") Fail(r, s, &n);
  }
  task.Progress(100, "instance terminated");
}

class AwsProvider : public weft::sdk::Plugin {
 public:
  static weft::sdk::Info Describe() {
    weft::sdk::Info info;
    info.type_name = "aws";
    info.kind = WEFT_KIND_PROVIDER;
    info.version = "1.0";
    info.description = "Nodes are Amazon EC2 instances";
    info.actions = {WEFT_ACTION_CREATE, WEFT_ACTION_CONFIRM, WEFT_ACTION_DELETE};
    info.resource_types = {"aws"};
    auto text = [](const char* name, const char* label, bool required, const char* description) {
      return weft::sdk::Field{.name = name, .label = label, .required = required, .description = description};
    };
    info.fields = {
        text("api_user", "Access key id", true, "the AWS access key id (AKIA...)"),
        {.name = "api_password",
         .label = "Secret access key",
         .required = true,
         .sensitive = true,
         .description = "the secret access key of api_user"},
        {.name = "api_session_token",
         .label = "Session token",
         .sensitive = true,
         .description = "for temporary credentials only"},
        text("aws_region", "Region", true, "the EC2 region, such as us-east-1; images are per region"),
        text("ssh_keypair", "Key pair", false,
             "an EC2 key pair new instances get; empty: Weft imports a key pair of its own per node"),
        text("ssh_key_resource", "Key pair's private key", false,
             "the resource (type aws) holding ssh_keypair's private key; required with ssh_keypair"),
        text("security_group_ids", "Security group ids", false, "comma-separated security group ids (sg-...), VPC"),
        text("security_groups", "Security group names", false,
             "comma-separated security group names (the default VPC, EC2-Classic)"),
        text("subnet_id", "Subnet", false, "the VPC subnet instances go into; empty: the default VPC"),
        {.name = "associate_public_ip",
         .label = "Public IP",
         .type = WEFT_FIELD_BOOLEAN,
         .description = "whether instances get a public address; unset: the subnet's setting"},
        text("availability_zone", "Availability zone", false, "the zone instances go into, such as us-east-1a"),
        text("placement_group", "Placement group", false, "a placement group instances join"),
        text("iam_instance_profile", "IAM instance profile", false, "the profile's name or ARN"),
        {.name = "dedicated_instance",
         .label = "Dedicated",
         .type = WEFT_FIELD_BOOLEAN,
         .default_json = "false",
         .description = "run on single-tenant hardware"},
        {.name = "aws_ebs_size",
         .label = "Root volume (GB)",
         .type = WEFT_FIELD_INTEGER,
         .description = "the root EBS volume's size in GB; unset: the image's"},
        {.name = "aws_ebs_delete_on_term",
         .label = "Delete volume on termination",
         .type = WEFT_FIELD_BOOLEAN,
         .default_json = "true",
         .description = "whether the root volume goes with the instance"},
        {.name = "aws_ebs_volume_type",
         .label = "Root volume type",
         .default_json = "\"gp3\"",
         .description = "the root volume's type, used when aws_ebs_size is set"},
        {.name = "confirm_timeout_s",
         .label = "Boot timeout (s)",
         .type = WEFT_FIELD_INTEGER,
         .default_json = std::to_string(kDefaultConfirmTimeoutS),
         .description = "how long CONFIRM waits for an instance to be running"},
        {.name = "api_max_attempts",
         .label = "API attempts",
         .type = WEFT_FIELD_INTEGER,
         .default_json = "6",
         .description = "tries per EC2 call when EC2 throttles or fails (5xx)"},
        {.name = "api_backoff_ms",
         .label = "First backoff (ms)",
         .type = WEFT_FIELD_INTEGER,
         .default_json = "250",
         .description = "the first wait before a retry; it doubles up to 8 s"},
        text("endpoint_url", "EC2 endpoint", false,
             "where EC2 requests go instead of https://ec2.<region>.amazonaws.com (a simulator, a proxy)"),
    };
    return info;
  }

  void Run(weft_action action, weft::sdk::Task& task) override {
    const json t = ParseTask(task);
    switch (action) {
      case WEFT_ACTION_CREATE: Create(task, t); break;
      case WEFT_ACTION_CONFIRM: Confirm(task, t); break;
      case WEFT_ACTION_DELETE: Delete(task, t); break;
      default: throw Error(WEFT_ERR_UNSUPPORTED, "aws provider implements CREATE, CONFIRM and DELETE only");
    }
  }
};

}  // namespace

WEFT_PLUGIN(AwsProvider)

// moto_server (AWS's API simulator, a Python package) for the aws provider's
// tests and `weft-bench cloud`: on a loopback port, with signature checking on
// (INITIAL_NO_AUTH_ACTION_COUNT=3: the three calls that make an IAM user and
// its key are the only unsigned ones), behind tests/aws/ec2_fault_proxy.py,
// which logs every call and injects the faults a test asks for. What was made
// is read back through boto3 (tests/aws/moto_tool.py), not through the
// plugin's own EC2 client.
//
// No Catch2 here: failures to start throw std::runtime_error.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/process.hpp"

namespace weft::testing {

struct MotoTools {
  std::filesystem::path server;  // moto_server
  std::filesystem::path python;  // a Python that imports moto and boto3
};

// $WEFT_MOTO_SERVER names moto_server (set but empty: none); else PATH and
// pyenv's shims are searched. nullopt when there is none.
std::optional<MotoTools> FindMoto();

class Moto {
 public:
  // Starts moto_server and the proxy in `dir` (made if missing).
  Moto(const MotoTools& tools, const std::filesystem::path& dir);
  Moto(const Moto&) = delete;
  Moto& operator=(const Moto&) = delete;

  // The provider's fields: the IAM user's key, requests through the proxy.
  nlohmann::json Fields() const;
  // One of the images moto ships; a security group and a subnet of moto's default VPC.
  std::string image() const { return setup_["image"]; }
  std::string security_group() const { return setup_["security_group"]; }
  std::string subnet() const { return setup_["subnet"]; }
  // Every instance and key pair moto holds:
  // {"instances":[{"id","state","type","image","key_name","tags","security_groups","subnet","volume_sizes"}],
  //  "key_pairs":[{"name","fingerprint"}]}.
  nlohmann::json State() const;
  // An operator's key pair `name` in EC2, from an OpenSSH public key file.
  void ImportKeyPair(const std::string& name, const std::filesystem::path& public_key) const;
  // Faults for the proxy (see ec2_fault_proxy.py); its counts start over.
  void Faults(const nlohmann::json& rules) const;
  // "Action status" per request so far, in order.
  std::vector<std::string> Calls() const;
  // The ends of moto's and the proxy's logs.
  std::string Logs() const;

 private:
  RunResult Tool(std::vector<std::string> args) const;

  MotoTools tools_;
  std::filesystem::path dir_;
  std::string url_, proxy_url_;
  nlohmann::json setup_;
  Process server_, proxy_;
};

}  // namespace weft::testing

// A real sshd node (weft_localnode) that is stopped when the
// object dies, and the ssh::Target that reaches it.
#pragma once

#include <memory>
#include <string>

#include <catch2/catch.hpp>

#include "weft/localnode/local_node.hpp"
#include "support/temp_dir.hpp"
#include "weft/ssh/ssh.hpp"

namespace weft::testing {

// Tests use their own port so a system sshd on 0.0.0.0:22 cannot get in the way.
inline constexpr std::uint16_t kTestSshPort = 2022;
// A port only tests/ssh's address-reuse case listens on, so that no other
// test's node (ctest -j) decides which address its nodes get.
inline constexpr std::uint16_t kReuseTestSshPort = 2023;

// How the SSH service reaches a local node.
inline host::ssh::Target TargetOf(const localnode::Node& n) {
  host::ssh::Target t;
  t.node = n.name;
  t.address = n.address;
  t.port = n.port;
  t.user = n.user;
  t.private_key = n.private_key;
  t.host_keys = n.host_keys;
  return t;
}

class SshdNode {
 public:
  explicit SshdNode(const std::string& name = "t") : state_("weft-sshd") {
    localnode::NodeOptions o;
    o.state_dir = state_.path() / "nodes";
    o.name = name;
    o.port = kTestSshPort;
    auto n = localnode::StartNode(o);
    if (!n.ok()) FAIL("cannot start a test sshd: " << n.status().ToString());
    node_ = *n;
  }
  ~SshdNode() { Stop(); }
  SshdNode(const SshdNode&) = delete;
  SshdNode& operator=(const SshdNode&) = delete;

  void Stop() {
    if (stopped_) return;
    stopped_ = true;
    Status st = localnode::StopNode(node_.dir);
    if (!st.ok()) FAIL_CHECK("cannot stop the test sshd: " << st.ToString());
  }

  const localnode::Node& node() const { return node_; }
  host::ssh::Target target() const { return TargetOf(node_); }

 private:
  TempDir state_;
  localnode::Node node_;
  bool stopped_ = false;
};

}  // namespace weft::testing

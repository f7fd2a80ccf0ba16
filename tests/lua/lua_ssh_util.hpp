// Helpers for Lua plugin tests against real sshd nodes (weft_localnode, needs
// root): the task the job engine would hand out for a node.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "lua_test_util.hpp"
#include "support/sshd_node.hpp"

namespace weft::lua_test {

// A service task for `node` with the results its CREATE and CONFIRM returned:
// what the SSH services need to reach it.
inline json SshTaskFor(const weft::testing::SshdNode& node, json fields = json::object()) {
  const localnode::Node& n = node.node();
  json task = DefaultTask();
  task["cluster_id"] = "c1";
  task["node_id"] = n.name;
  task["hostname"] = n.name + ".c1.weft";
  task["service"]["action"]["fields"] = std::move(fields);
  task["config"] = {{"greeting", "hello from config"}, {"ports", {80, 443}}};
  task["nodes"] = json::array({{{"id", n.name}, {"hostname", n.name + ".c1.weft"}, {"access_v4", n.address}},
                               {{"id", "other"}, {"hostname", "other.c1.weft"}, {"access_v4", "127.0.0.9"}}});
  task["results"] = {{"provider_id", n.id},
                     {"ssh_auth", {{"user", n.user}, {"private_key", n.private_key}}},
                     {"access_v4", n.address},
                     {"ssh_port", n.port},
                     {"host_keys", n.host_keys}};
  return task;
}

// A line of the node's private key that must never show up anywhere.
inline std::string KeyBodyLine(const localnode::Node& n) {
  const std::string& k = n.private_key;
  std::size_t start = k.find('\n') + 1;
  return k.substr(start, k.find('\n', start) - start);
}

}  // namespace weft::lua_test

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "weft/common/node_facts.hpp"

using nlohmann::json;
using weft::CheckNodeFacts;
using weft::Code;

TEST_CASE("node facts: a result whose facts have their types, or holds none, is OK", "[node_facts]") {
  CHECK(CheckNodeFacts(json::object()).ok());
  CHECK(CheckNodeFacts(json::array()).ok());
  CHECK(CheckNodeFacts({{"nginx_port", nullptr}, {"facts", 7}}).ok());  // not facts weft reads
  CHECK(CheckNodeFacts({{"hostname", "n1"},
                        {"access_v4", "10.0.0.1"},
                        {"bind_v4", ""},
                        {"provider_id", "vm-1"},
                        {"ssh_port", 2222},
                        {"host_keys", json::array({"ssh-ed25519 AAAA"})},
                        {"ssh_auth", {{"user", "root"}}}})
            .ok());
  CHECK(CheckNodeFacts({{"host_keys", "ssh-ed25519 AAAA"}}).ok());
}

TEST_CASE("node facts: a fact of the wrong type is INVALID, naming it, its type and what it holds", "[node_facts]") {
  const std::pair<json, std::string> cases[] = {
      {{{"access_v4", nullptr}}, "'access_v4' must be a string; it is null"},
      {{{"bind_v4", false}}, "'bind_v4' must be a string; it is the boolean false"},
      {{{"hostname", 5}}, "'hostname' must be a string; it is the number 5"},
      {{{"provider_id", 12}}, "'provider_id' must be a string; it is the number 12"},
      {{{"ssh_port", "22"}}, "'ssh_port' must be an integer 1-65535; it is the string \"22\""},
      {{{"ssh_port", 0}}, "'ssh_port' must be an integer 1-65535; it is the number 0"},
      {{{"ssh_port", 65536}}, "'ssh_port' must be an integer 1-65535; it is the number 65536"},
      {{{"host_keys", json::array({"ssh-ed25519 AAAA", 1})}},
       "'host_keys' must be a string or an array of strings; it is the array [\"ssh-ed25519 AAAA\",1]"},
      {{{"ssh_auth", "root"}}, "'ssh_auth' must be an object; it is the string \"root\""},
  };
  for (const auto& [result, message] : cases) {
    INFO(result.dump());
    const weft::Status s = CheckNodeFacts(result);
    CHECK(s.code() == Code::kInvalid);
    CHECK_THAT(s.message(), Catch::StartsWith(message));
  }
  // What it holds is cut short in the message.
  const weft::Status long_one = CheckNodeFacts({{"hostname", json::array({std::string(100, 'x')})}});
  CHECK_THAT(long_one.message(), Catch::Contains("...") && !Catch::Contains(std::string(100, 'x')));
}

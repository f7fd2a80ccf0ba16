#include <catch2/catch.hpp>

#include "weft/server/hosts/workers.hpp"

using weft::hosts::AllocateWorkers;
using weft::hosts::HostCapacity;

TEST_CASE("workers: with no active tenant every slot serves any tenant", "[workers]") {
  auto split = AllocateWorkers({{"b", 3}, {"a", 2}}, {});
  CHECK(split["a"][""] == 2);
  CHECK(split["b"][""] == 3);
}

TEST_CASE("workers: one active tenant alone is not pinned, so a second one is served at once", "[workers]") {
  auto split = AllocateWorkers({{"h1", 4}}, {"acme"});
  CHECK(split["h1"] == std::map<std::string, std::int64_t>{{"", 4}});
}

TEST_CASE("workers: capacity is shared equally among active tenants and spread over hosts", "[workers]") {
  auto split = AllocateWorkers({{"h1", 4}, {"h2", 4}}, {"acme", "globex"});
  CHECK(split["h1"]["acme"] == 2);
  CHECK(split["h1"]["globex"] == 2);
  CHECK(split["h2"]["acme"] == 2);
  CHECK(split["h2"]["globex"] == 2);
  CHECK_FALSE(split["h1"].count(""));
}

TEST_CASE("workers: a second host joining splits the tenants over both, one leaving gives all back", "[workers]") {
  auto one = AllocateWorkers({{"h1", 3}}, {"a", "b", "c"});
  CHECK(one["h1"] == std::map<std::string, std::int64_t>{{"a", 1}, {"b", 1}, {"c", 1}});
  auto two = AllocateWorkers({{"h1", 3}, {"h2", 3}}, {"a", "b", "c"});
  std::int64_t a = 0, b = 0, c = 0;
  for (const auto& [host, tenants] : two) {
    a += tenants.count("a") ? tenants.at("a") : 0;
    b += tenants.count("b") ? tenants.at("b") : 0;
    c += tenants.count("c") ? tenants.at("c") : 0;
  }
  CHECK(a == 2);
  CHECK(b == 2);
  CHECK(c == 2);
  // Every tenant keeps a worker on each host.
  for (const auto& [host, tenants] : two) CHECK(tenants.size() == 3);
  auto left = AllocateWorkers({{"h2", 3}}, {"a", "b", "c"});
  CHECK(left.size() == 1);
  CHECK(left["h2"].size() == 3);
}

TEST_CASE("workers: fewer slots than active tenants leaves every slot to any tenant", "[workers]") {
  auto split = AllocateWorkers({{"h1", 2}}, {"a", "b", "c"});
  CHECK(split["h1"] == std::map<std::string, std::int64_t>{{"", 2}});
}

TEST_CASE("workers: the split is deterministic and uses every slot", "[workers]") {
  std::vector<HostCapacity> hosts = {{"x", 5}, {"y", 1}, {"z", 3}};
  auto first = AllocateWorkers(hosts, {"t1", "t2"});
  CHECK(first == AllocateWorkers({hosts[2], hosts[0], hosts[1]}, {"t2", "t1"}));
  std::int64_t total = 0, t1 = 0;
  for (const auto& [host, tenants] : first)
    for (const auto& [tenant, n] : tenants) {
      total += n;
      if (tenant == "t1") t1 += n;
    }
  CHECK(total == 9);
  CHECK(t1 == 5);  // the remainder goes to the first tenant by name
}

TEST_CASE("workers: a tenant's max_workers caps its threads, the rest go to the others or stay idle", "[workers]") {
  auto split = AllocateWorkers({{"h1", 4}, {"h2", 4}}, {"acme", "globex"}, {{"acme", 2}});
  std::int64_t acme = 0, globex = 0;
  for (const auto& [host, tenants] : split) {
    acme += tenants.count("acme") ? tenants.at("acme") : 0;
    globex += tenants.count("globex") ? tenants.at("globex") : 0;
    CHECK_FALSE(tenants.count(""));
  }
  CHECK(acme == 2);
  CHECK(globex == 6);
  // Alone and capped: pinned to its cap, not "any tenant".
  auto alone = AllocateWorkers({{"h1", 4}}, {"acme"}, {{"acme", 1}});
  CHECK(alone["h1"] == std::map<std::string, std::int64_t>{{"acme", 1}});
}

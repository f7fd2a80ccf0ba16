// What the tests of the host registry's rules and of the dispatcher's take
// start from, in-process: weftd's store (on the backend the run names,
// test_store.hpp) in a directory of its own, its task queue loaded, a host
// registry with the given config and a dispatcher over them, on a manual
// clock. Header-only: for Catch2 test binaries that link weft_hosts,
// weft_server_queue and weft_server_store (and SQLite).
#pragma once

#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <utility>

#include "support/temp_dir.hpp"
#include "support/test_store.hpp"
#include "weft/common/clock.hpp"
#include "weft/server/config/config.hpp"
#include "weft/server/hosts/dispatcher.hpp"
#include "weft/server/hosts/host_registry.hpp"
#include "weft/server/queue/task_queue.hpp"

namespace weft::testing {

struct DispatchFixture {
  explicit DispatchFixture(server::Config with = {})
      : store(Open(dir)),
        queue(*store, clock, queue::QueueOptions{1000}),
        config(std::move(with)),
        hosts(*store, queue, clock, config),
        dispatcher(hosts, queue) {
    REQUIRE(queue.Load().ok());
  }

  // A host that runs the plugin type "fp" for every tenant, with `capacity`
  // runners; not in the registry until put there (hosts.Put).
  static hosts::Host FpHost(const std::string& id, int capacity) {
    hosts::Host host;
    host.record.id = id;
    host.record.capacity = capacity;
    host.plugins.shared = {"fp"};
    return host;
  }

  // A task of "fp" with `payload_json`, to enqueue.
  static queue::NewTask FpTask(const std::string& action, const std::string& payload_json = "{}") {
    queue::NewTask task;
    task.plugin = "fp";
    task.action = action;
    task.payload_json = payload_json;
    return task;
  }

  TempDir dir;
  std::unique_ptr<store::Store> store;
  ManualClock clock;
  queue::TaskQueue queue;
  server::Config config;
  hosts::HostRegistry hosts;
  hosts::Dispatcher dispatcher;

 private:
  static std::unique_ptr<store::Store> Open(const TempDir& in) {
    auto opened = OpenStore(in / "weft.db");
    if (!opened.ok()) FAIL(opened.status().ToString());
    return std::move(opened.value());
  }
};

}  // namespace weft::testing

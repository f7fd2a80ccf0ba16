// A weftd without sockets for the fuzz targets that drive ops: a store in a
// temporary directory, the queue, the ops with the security ops and the
// resource ops registered, as weftd's reactor sets them up. Each input runs
// in a transaction that is rolled back, and the in-memory state is reloaded
// from the store after it, so no input sees what an earlier one did.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include "fuzz_util.hpp"
#include "server/api/ops.hpp"
#include "server/auth/auth.hpp"
#include "server/auth/auth_ops.hpp"
#include "server/config/config.hpp"
#include "server/queue/task_queue.hpp"
#include "server/resources/resource_ops.hpp"
#include "server/resources/resource_store.hpp"
#include "server/store/store.hpp"
#include "weft/common/clock.hpp"
#include "weft/common/curve.hpp"
#include "weft/common/log.hpp"

namespace weft::fuzz {

class Server {
 public:
  // One per process: the store and the resource files live in a fresh temporary directory.
  static Server& Get() {
    static Server* server = new Server();  // never destroyed: libFuzzer exits without unwinding
    return *server;
  }

  api::Ops& ops() { return *ops_; }
  auth::Registry& registry() { return *registry_; }
  const std::string& token_key() const { return token_key_; }
  const std::string& host_key() const { return host_key_; }
  const wire::Limits& limits() const { return config_.limits; }

  // Runs `fn` in a transaction that is rolled back, then reloads what it may have changed.
  template <typename Fn>
  void Isolated(Fn&& fn) {
    clock_.AdvanceMs(1000);  // (so rate limits, such as new host requests', refill between inputs)
    Require(store_->Begin().ok(), "a transaction begins");
    fn();
    Require(store_->Rollback().ok(), "the transaction rolls back");
    Require(queue_->Load().ok() && ops_->Reset().ok() && registry_->Load().ok(), "the state reloads");
  }

 private:
  Server() {
    log::SetLevel(log::Level::kError);
    char tmpl[] = "/tmp/weft-fuzz-XXXXXX";
    Require(mkdtemp(tmpl) != nullptr, "a temporary directory");
    const std::filesystem::path dir = tmpl;
    config_.server.data_dir = dir;
    auto store = store::Store::Open(dir / "weft.db");
    Require(store.ok(), "the store opens", store.status().ToString());
    store_ = std::move(*store);
    queue_ = std::make_unique<queue::TaskQueue>(*store_, clock_, queue::QueueOptions{config_.tasks.lease_ms});
    ops_ = std::make_unique<api::Ops>(*store_, *queue_, clock_, config_);
    registry_ = std::make_unique<auth::Registry>(*store_, clock_, keys_);
    auto resources = resources::FileResourceStore::Open(dir / "resources", clock_);
    Require(resources.ok(), "the resource store opens", resources.status().ToString());
    resources_ = std::move(*resources);
    resources::RegisterResourceOps(*ops_, *resources_, config_.limits);
    auto server_keys = curve::Generate();
    Require(server_keys.ok(), "a key pair");
    auth::RegisterOps(*ops_, *registry_, {server_keys->public_key, config_.security.token_ttl_ms});
    // What every input starts from: a token not spent yet and an enrolled host.
    Require(store_->Begin().ok(), "a transaction begins");
    Require(queue_->Load().ok() && ops_->Load().ok() && registry_->Load().ok(), "the state loads");
    auto token = registry_->CreateToken(3600 * 1000, "fuzz");
    Require(token.ok(), "a token");
    token_key_ = token->keys.public_key;
    auto enrolling = registry_->CreateToken(3600 * 1000, "fuzz");
    auto host = curve::Generate();
    Require(enrolling.ok() && host.ok(), "a host's key");
    host_key_ = host->public_key;
    Require(registry_->EnrollHost(enrolling->keys.public_key, "h1", host_key_, false).ok(), "h1 enrolls");
    Require(store_->Commit().ok(), "the setup commits");
  }

  server::Config config_;
  ManualClock clock_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<queue::TaskQueue> queue_;
  std::unique_ptr<api::Ops> ops_;
  auth::KeySnapshot keys_;
  std::unique_ptr<auth::Registry> registry_;
  std::unique_ptr<resources::FileResourceStore> resources_;
  std::string token_key_, host_key_;
};

}  // namespace weft::fuzz

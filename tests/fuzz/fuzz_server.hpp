// A weftd without sockets for the fuzz targets that drive ops: a store in a
// temporary directory and weftd's components with the security ops, built by
// the same composition root as weftd's (server/daemon/components.cpp). Each input runs
// in a transaction that is rolled back, and the in-memory state is reloaded
// from the store after it, so no input sees what an earlier one did.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include "fuzz_util.hpp"
#include "weft/server/auth/auth.hpp"
#include "weft/server/auth/auth_ops.hpp"
#include "weft/server/config/config.hpp"
#include "weft/server/daemon/components.hpp"
#include "weft/server/store/store.hpp"
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

  server::Components& components() { return *components_; }
  auth::Registry& registry() { return components_->registry(); }
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
    Require(components_->Reset().ok(), "the state reloads");
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
    components_ = std::make_unique<server::Components>(config_, *store_, clock_);
    Status started = components_->Start();
    Require(started.ok(), "the components start", started.ToString());
    auto server_keys = curve::Generate();
    Require(server_keys.ok(), "a key pair");
    components_->AddSecurityOps(server_keys->public_key);
    // What every input starts from: a token not spent yet and an enrolled host.
    Require(store_->Begin().ok(), "a transaction begins");
    auth::Registry& registry = components_->registry();
    auto token = registry.CreateToken(3600 * 1000, "fuzz");
    Require(token.ok(), "a token");
    token_key_ = token->keys.public_key;
    auto enrolling = registry.CreateToken(3600 * 1000, "fuzz");
    auto host = curve::Generate();
    Require(enrolling.ok() && host.ok(), "a host's key");
    host_key_ = host->public_key;
    Require(registry.EnrollHost(enrolling->keys.public_key, "h1", host_key_, false).ok(), "h1 enrolls");
    Require(store_->Commit().ok(), "the setup commits");
  }

  server::Config config_;
  ManualClock clock_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<server::Components> components_;
  std::string token_key_, host_key_;
};

}  // namespace weft::fuzz

// weft::server::ApiFront: the thread that serves weftd's api ROUTER.
//
// The reactor is busy with writes for most of a busy second, and a thread
// that is always runnable waits its turn for a CPU behind the hosts and
// everything else on the machine: a read that waited for it waited for the
// scheduler (tens of milliseconds, whatever the reactor's own turns cost). This
// thread sleeps until an api request arrives, so the scheduler runs it at once,
// and it answers the reads it can from a store connection of its own, which
// sees only committed state (a reply to a write is sent only after its commit).
// Everything else goes to the reactor, as does a read of a connection that
// has a request with the reactor still unanswered: one connection's requests
// are answered in order.
//
// It answers an op itself only when the reactor's rules give the same answer
// from what the front knows: the principal from the keys and tenants of the
// reactor's last commit (auth::AuthView), the same roles, endpoint and tenant
// checks (a Router of its own holding only those ops), the per-connection
// rate limit (applied here to every api request), and only while this weftd
// leads. A request for a gateway's browser session or token, a key the
// front's view refuses, and anything malformed or too large go to the reactor,
// which answers them as it always did.
//
// Thread-safe where it says so; the rest runs on the reactor thread before
// Start or after Stop.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include <zmq.hpp>

#include "weft/server/api/router.hpp"
#include "weft/server/auth/auth.hpp"
#include "weft/server/config/config.hpp"
#include "weft/server/daemon/rate_limits.hpp"
#include "weft/server/daemon/transport.hpp"
#include "weft/server/store/store.hpp"
#include "weft/common/clock.hpp"
#include "weft/common/status.hpp"

namespace weft::server {

class ApiFront {
 public:
  // Where the reactor's PAIR connects (Transport::HandOverApi).
  static constexpr const char* kPipe = "inproc://weftd-api-front";

  ApiFront(const Config& config, const Clock& clock, RateLimits& limits);
  ~ApiFront();
  ApiFront(const ApiFront&) = delete;
  ApiFront& operator=(const ApiFront&) = delete;

  // Binds kPipe in `ctx` (call before the reactor connects to it).
  [[nodiscard]] Status Bind(zmq::context_t& ctx);
  // Starts the thread on the api ROUTER. `reads`: the ops it answers itself,
  // whose handlers use `store` (a connection that only reads) and nothing of
  // the reactor's; the front owns both from now on.
  [[nodiscard]] Status Start(zmq::socket_t router, std::unique_ptr<store::Store> store,
                             std::unique_ptr<api::Router> reads);
  // Passes on the replies the reactor sent so far, then ends the thread.
  void Stop();

  // Thread-safe, from the reactor. Whether it answers reads (this weftd leads).
  // Serving again, it forgets what it kept of the clusters: another weftd may have changed them.
  void SetServing(bool serving);
  // The clusters the reactor's commits wrote, once those commits succeeded and
  // before their replies are passed on: the front's cluster summaries read them
  // again at its next read (store::Store::ClustersWrittenElsewhere).
  void ClustersWritten(store::Store::ClusterWrites writes);
  // The keys and tenants as the reactor's last commit left them.
  void SetAuth(std::shared_ptr<const auth::AuthView> view);
  // The plugin types live hosts run for each tenant (job.get's waiting_for_plugins).
  void SetLivePlugins(std::map<std::string, std::set<std::string>> by_tenant);
  std::set<std::string> LivePlugins(const std::string& tenant) const;

 private:
  void Run();
  // Takes one request off the ROUTER; false when none was ready.
  bool TakeRequest();
  // Answers it here when it may; false: the reactor must.
  bool Serve(wire::Frames& frames, const std::string& key);
  void PassOn(wire::Frames frames, bool over, const std::string& key, std::string address);
  // Passes one reply of the reactor's on to its client; false when none was ready.
  bool PassBack();
  // Logs (tallied) a reply dropped because its client does not read; `id` the request's, "" if not known.
  void Delivered(Delivery delivery, const std::string& id);
  std::shared_ptr<const auth::AuthView> View() const;

  const Config& config_;
  const Clock& clock_;
  RateLimits& limits_;  // the front's alone once started
  log::Tally tally_;
  zmq::socket_t router_;
  zmq::socket_t pipe_;  // PAIR to the reactor
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<api::Router> reads_;
  // Requests of each connection (routing id) the reactor has not answered yet.
  std::map<std::string, int> with_reactor_;
  // The view the request being served is checked against (front thread only).
  std::shared_ptr<const auth::AuthView> serving_view_;
  int stop_fd_ = -1;
  std::thread thread_;
  std::atomic<bool> serving_{false};
  mutable std::mutex mu_;  // guards auth_, live_plugins_ and cluster_writes_
  std::shared_ptr<const auth::AuthView> auth_;
  std::map<std::string, std::set<std::string>> live_plugins_;
  store::Store::ClusterWrites cluster_writes_;  // not yet handed to store_
};

}  // namespace weft::server

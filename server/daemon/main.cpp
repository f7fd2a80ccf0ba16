// weftd: the Weft server daemon. See docs/configuration.md and docs/protocol.md.
#include <signal.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "weft/server/config/config.hpp"
#include "weft/server/daemon/daemon.hpp"
#include "weft/server/store/store.hpp"
#include "weft/common/log.hpp"

namespace {

// Every runner thread of every weft-host worker keeps two connections to the
// provisioner endpoint, so one host of capacity 1,000 is ~2,000 descriptors
// here: more than the usual soft limit of 1,024. Raise the soft limit towards
// the hard one (capped, so a huge hard limit does not make descriptor walks slow).
void RaiseOpenFileLimit() {
  constexpr rlim_t kWanted = 65536;
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= kWanted) return;
  const rlim_t wanted = limit.rlim_max == RLIM_INFINITY ? kWanted : std::min(kWanted, limit.rlim_max);
  if (wanted <= limit.rlim_cur) return;
  limit.rlim_cur = wanted;
  (void)setrlimit(RLIMIT_NOFILE, &limit);  // best effort: fewer connections still work
}

// weftd --vacuum: the SQLite store rewritten without its free pages, with
// auto_vacuum=INCREMENTAL from then on, under the data directory's lock (so
// never beside a running weftd). VACUUM writes a whole new copy through the
// WAL and replaces the file atomically: a crash leaves the old one whole.
weft::Status VacuumStore(const weft::server::Config& config) {
  using namespace weft;
  if (config.store.backend == "postgres")
    return Status::Invalid("--vacuum is for the SQLite store; PostgreSQL's autovacuum looks after its own files");
  const std::filesystem::path path = config.server.data_dir / "weft.db";
  if (!std::filesystem::exists(path)) return Status::NotFound("no store at " + path.string() + " to vacuum");
  store::StoreOptions options;
  options.busy_timeout_ms = static_cast<int>(config.store.busy_timeout_ms);
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<store::Store> store, store::Store::Open(path, options));
  WEFT_ASSIGN_OR_RETURN(store::StoreSpace before, store->Space());
  const auto started = std::chrono::steady_clock::now();
  WEFT_RETURN_IF_ERROR(store->Vacuum());
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  WEFT_ASSIGN_OR_RETURN(store::StoreSpace after, store->Space());
  std::cout << path.string() << ": " << before.pages * before.page_size / 1024 << " KiB (" << before.free_pages
            << " free pages) before, " << after.pages * after.page_size / 1024 << " KiB after, in " << ms.count()
            << " ms; auto_vacuum is " << (after.incremental ? "incremental" : "none")
            << ": retention gives free pages back from now on\n";
  return Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace weft;
  RaiseOpenFileLimit();
  Result<server::Flags> flags = server::ParseFlags(argc, argv);
  if (!flags.ok()) {
    std::cerr << "weftd: " << flags.status().message() << "\n" << server::kUsage;
    return 2;
  }
  if (flags->help) {
    std::cout << server::kUsage;
    return 0;
  }
  if (flags->version) {
    std::cout << "weftd 0.1.0 (protocol 1)\n";
    return 0;
  }
  Result<server::Config> config =
      flags->config_path.empty() ? Result<server::Config>(server::Config{}) : server::LoadConfigFile(flags->config_path);
  if (!config.ok()) {
    std::cerr << "weftd: " << config.status().message() << "\n";
    return 2;
  }
  if (!flags->data_dir.empty()) config->server.data_dir = flags->data_dir;
  log::SetLevel(config->server.log_level);
  // What weftd creates (the store with its users' password hashes and audit log,
  // resources, keys) is its owner's alone, whatever umask it was started with;
  // the few files meant for others (endpoints.json) say so themselves.
  ::umask(::umask(0) | 077);
  if (flags->vacuum) {
    Status s = server::LockDataDir(config->server.data_dir);
    if (s.ok()) s = VacuumStore(*config);
    if (!s.ok()) {
      std::cerr << "weftd: " << s.message() << "\n";
      return 1;
    }
    return 0;
  }

  // Block the stop signals before any thread exists (ZeroMQ starts I/O
  // threads), so that they arrive only through the signalfd the reactor polls.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  if (sigprocmask(SIG_BLOCK, &stop, nullptr) != 0) {
    std::cerr << "weftd: cannot block signals: " << std::strerror(errno) << "\n";
    return 1;
  }
  int sfd = signalfd(-1, &stop, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) {
    std::cerr << "weftd: cannot create a signalfd: " << std::strerror(errno) << "\n";
    return 1;
  }

  Status s = server::LockDataDir(config->server.data_dir);
  if (s.ok()) s = server::RunDaemon(*config, sfd, flags->new_keys);
  close(sfd);
  if (!s.ok()) {
    WEFT_LOG(kError, "weftd") << s.message();
    return 1;
  }
  return 0;
}

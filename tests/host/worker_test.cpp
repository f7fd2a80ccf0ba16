// The pieces of the master/worker split that work in-process: the channel
// protocol, exit-status messages, RSS reading and the capacity split.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "weft/host/config.hpp"
#include "weft/host/supervision.hpp"
#include "weft/host/worker_protocol.hpp"

using weft::host::DeathReport;
using weft::host::KillReason;
using weft::host::LineBuffer;
using weft::host::WorkerMessage;

namespace {

// A real wait status, from a real child that ends the way `body` says.
int StatusOf(void (*body)()) {
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    body();
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  return status;
}

}  // namespace

TEST_CASE("worker protocol: every message survives encode and parse", "[host][worker]") {
  WorkerMessage start;
  start.kind = WorkerMessage::Kind::kStart;
  start.task_id = 42;
  start.attempt = 3;
  start.plugin = "fake-automator";
  start.action = "INSTALL";
  start.tenant = "acme";
  start.node = "web-1";
  std::string line = weft::host::EncodeWorkerMessage(start);
  CHECK(line.find('\n') == std::string::npos);
  auto parsed = weft::host::ParseWorkerMessage(line);
  REQUIRE(parsed.ok());
  CHECK(parsed->kind == WorkerMessage::Kind::kStart);
  CHECK(parsed->task_id == 42);
  CHECK(parsed->attempt == 3);
  CHECK(parsed->plugin == "fake-automator");
  CHECK(parsed->action == "INSTALL");
  CHECK(parsed->tenant == "acme");
  CHECK(parsed->node == "web-1");

  WorkerMessage cancel;
  cancel.kind = WorkerMessage::Kind::kCancel;
  cancel.task_id = 7;
  cancel.attempt = 1;
  cancel.reason = "stale\nwith a newline";
  line = weft::host::EncodeWorkerMessage(cancel);
  CHECK(line.find('\n') == std::string::npos);
  parsed = weft::host::ParseWorkerMessage(line);
  REQUIRE(parsed.ok());
  CHECK(parsed->kind == WorkerMessage::Kind::kCancel);
  CHECK(parsed->reason == "stale\nwith a newline");

  WorkerMessage skip;
  skip.kind = WorkerMessage::Kind::kSkip;
  skip.task_id = 9;
  skip.attempt = 1;
  skip.reason = "this host started attempt 2 of the task already";
  parsed = weft::host::ParseWorkerMessage(weft::host::EncodeWorkerMessage(skip));
  REQUIRE(parsed.ok());
  CHECK(parsed->kind == WorkerMessage::Kind::kSkip);
  CHECK(parsed->task_id == 9);
  CHECK(parsed->attempt == 1);
  CHECK(parsed->reason == skip.reason);
  WorkerMessage run;
  run.kind = WorkerMessage::Kind::kRun;
  run.task_id = 9;
  run.attempt = 2;
  parsed = weft::host::ParseWorkerMessage(weft::host::EncodeWorkerMessage(run));
  REQUIRE(parsed.ok());
  CHECK(parsed->kind == WorkerMessage::Kind::kRun);
  CHECK(parsed->attempt == 2);
  CHECK_FALSE(weft::host::ParseWorkerMessage(R"({"cmd":"run","attempt":1})").ok());

  for (auto kind : {WorkerMessage::Kind::kReady, WorkerMessage::Kind::kDrained, WorkerMessage::Kind::kDrain,
                    WorkerMessage::Kind::kStop}) {
    WorkerMessage m;
    m.kind = kind;
    auto p = weft::host::ParseWorkerMessage(weft::host::EncodeWorkerMessage(m));
    REQUIRE(p.ok());
    CHECK(p->kind == kind);
  }
}

TEST_CASE("worker protocol: malformed lines are refused with a reason", "[host][worker]") {
  CHECK_FALSE(weft::host::ParseWorkerMessage("").ok());
  CHECK_FALSE(weft::host::ParseWorkerMessage("not json").ok());
  CHECK_FALSE(weft::host::ParseWorkerMessage("[1,2]").ok());
  auto unknown = weft::host::ParseWorkerMessage(R"({"ev":"explode"})");
  REQUIRE_FALSE(unknown.ok());
  CHECK_THAT(unknown.status().message(), Catch::Contains("unknown message"));
  auto no_id = weft::host::ParseWorkerMessage(R"({"ev":"start","attempt":1})");
  REQUIRE_FALSE(no_id.ok());
  CHECK_THAT(no_id.status().message(), Catch::Contains("'task_id' must be a positive integer"));
  CHECK_FALSE(weft::host::ParseWorkerMessage(R"({"ev":"end","task_id":"5","attempt":1})").ok());
  CHECK_FALSE(weft::host::ParseWorkerMessage(R"({"cmd":"cancel","task_id":5,"attempt":0})").ok());
}

TEST_CASE("worker protocol: lines split across reads are put back together", "[host][worker]") {
  LineBuffer buffer;
  buffer.Append("{\"ev\":\"ready\"");
  CHECK_FALSE(buffer.Next().has_value());
  buffer.Append(",\"plugins\":2}\n{\"ev\":\"dra");
  auto first = buffer.Next();
  REQUIRE(first.has_value());
  CHECK(*first == R"({"ev":"ready","plugins":2})");
  CHECK_FALSE(buffer.Next().has_value());
  buffer.Append("ined\"}\n\n");
  CHECK(buffer.Next() == std::optional<std::string>(R"({"ev":"drained"})"));
  CHECK(buffer.Next() == std::optional<std::string>(""));
  CHECK_FALSE(buffer.Next().has_value());
}

TEST_CASE("worker protocol: an overlong line is dropped, the next one still arrives", "[host][worker]") {
  LineBuffer buffer;
  std::string huge(LineBuffer::kMaxLineBytes + 10, 'x');
  buffer.Append(huge.substr(0, 1000));
  buffer.Append(huge.substr(1000));
  buffer.Append("tail of the huge one\n{\"ev\":\"drained\"}\n");
  CHECK(buffer.dropped() == 1);
  CHECK(buffer.Next() == std::optional<std::string>(R"({"ev":"drained"})"));
}

TEST_CASE("supervision: wait statuses of real children read as sentences", "[host][worker]") {
  CHECK(weft::host::DescribeExit(StatusOf([] { _exit(3); })) == "exited with status 3");
  CHECK(weft::host::DescribeExit(StatusOf([] {
          signal(SIGSEGV, SIG_DFL);
          raise(SIGSEGV);
        })) == "crashed with SIGSEGV");
  CHECK(weft::host::DescribeExit(StatusOf([] {
          signal(SIGABRT, SIG_DFL);
          raise(SIGABRT);
        })) == "crashed with SIGABRT");
  CHECK(weft::host::DescribeExit(StatusOf([] { raise(SIGKILL); })) == "was killed with SIGKILL");
  CHECK(weft::host::SignalName(SIGBUS) == "SIGBUS");
  CHECK(weft::host::SignalName(77) == "signal 77");
}

TEST_CASE("supervision: a dead worker's task gets a message that says what happened", "[host][worker]") {
  DeathReport r;
  r.plugin = "crash-segv";
  r.action = "INSTALL";
  r.wait_status = StatusOf([] {
    signal(SIGSEGV, SIG_DFL);
    raise(SIGSEGV);
  });
  CHECK(weft::host::TaskFailureMessage(r) == "plugin 'crash-segv' crashed with SIGSEGV during INSTALL");

  r.plugin = "crash-exit";
  r.action = "START";
  r.wait_status = StatusOf([] { _exit(3); });
  CHECK(weft::host::TaskFailureMessage(r) == "plugin 'crash-exit' exited with status 3 during START");

  r.plugin = "crash-hang";
  r.action = "INSTALL";
  r.reason = KillReason::kHung;
  r.task_timeout_ms = 500;
  CHECK(weft::host::TaskFailureMessage(r) ==
        "plugin 'crash-hang' hung past the task timeout of 500 ms during INSTALL; its worker was killed");

  r.plugin = "crash-memory";
  r.reason = KillReason::kMemory;
  r.memory_limit_mb = 256;
  CHECK(weft::host::TaskFailureMessage(r) ==
        "plugin 'crash-memory' used more than 256 MiB during INSTALL; its worker was killed");

  r.others = {"plugin 'fake-automator' (START)"};
  CHECK_THAT(weft::host::TaskFailureMessage(r),
             Catch::Contains("the worker also ran plugin 'fake-automator' (START) at the time"));

  DeathReport late;
  late.plugin = "fake-automator";
  late.action = "STOP";
  late.wait_status = StatusOf([] { _exit(1); });
  late.plugin_returned = true;
  CHECK(weft::host::TaskFailureMessage(late) ==
        "plugin 'fake-automator' exited with status 1 after its STOP returned, before the result was reported");
}

TEST_CASE("supervision: RSS comes from statm's second field, in pages", "[host][worker]") {
  CHECK(weft::host::ParseStatmRssBytes("1000 250 40 10 0 300 0\n", 4096) == std::optional<std::uint64_t>(250 * 4096));
  CHECK_FALSE(weft::host::ParseStatmRssBytes("", 4096).has_value());
  CHECK_FALSE(weft::host::ParseStatmRssBytes("12", 4096).has_value());

  auto before = weft::host::ReadRssBytes(getpid());
  REQUIRE(before.has_value());
  CHECK(*before > 0);
  // 64 MiB touched: the reading must grow by about that much.
  std::vector<char> block(64u << 20, 1);
  for (std::size_t i = 0; i < block.size(); i += 4096) block[i] = static_cast<char>(i);
  auto after = weft::host::ReadRssBytes(getpid());
  REQUIRE(after.has_value());
  CHECK(*after >= *before + (48u << 20));
  CHECK(block[4096] == static_cast<char>(4096));

  CHECK_FALSE(weft::host::ReadRssBytes(999'999'999).has_value());
}

TEST_CASE("config: capacity is split across workers, never more workers than capacity", "[host][worker]") {
  weft::host::HostConfig c;
  c.capacity = 5;
  c.workers = 2;
  CHECK(weft::host::EffectiveWorkers(c) == 2);
  CHECK(weft::host::WorkerThreads(c, 0) == 3);
  CHECK(weft::host::WorkerThreads(c, 1) == 2);
  c.capacity = 1;
  CHECK(weft::host::EffectiveWorkers(c) == 1);
  CHECK(weft::host::WorkerThreads(c, 0) == 1);
}

TEST_CASE("config: workers, worker_memory_limit_mb and tenants are read and checked", "[host][worker][config]") {
  auto parsed = weft::host::ParseConfig("workers = 3\ncapacity = 6\nworker_memory_limit_mb = 512\n"
                                        "tenants = [\"acme\", \"globex\"]\n",
                                        "t.toml", "/tmp", "/opt/weft/bin");
  REQUIRE(parsed.ok());
  CHECK(parsed->workers == 3);
  CHECK(parsed->worker_memory_limit_mb == 512);
  CHECK(parsed->tenants == std::vector<std::string>{"acme", "globex"});

  auto defaults = weft::host::ParseConfig("", "t.toml", "/tmp", "/opt/weft/bin");
  REQUIRE(defaults.ok());
  CHECK(defaults->workers == 2);
  CHECK(defaults->worker_memory_limit_mb == 1024);
  CHECK(defaults->tenants.empty());

  auto bad = weft::host::ParseConfig("workers = 0\n", "t.toml", "/tmp", "/opt");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.status().message(), Catch::Contains("'workers' must be an integer from 1 to 256"));
  auto too_many = weft::host::ParseConfig("workers = 2\ncapacity = 4\ntenants = [\"a\", \"b\", \"c\"]\n", "t.toml",
                                          "/tmp", "/opt");
  REQUIRE_FALSE(too_many.ok());
  CHECK_THAT(too_many.status().message(), Catch::Contains("each tenant needs a worker of its own"));
  auto not_list = weft::host::ParseConfig("tenants = \"acme\"\n", "t.toml", "/tmp", "/opt");
  REQUIRE_FALSE(not_list.ok());
  CHECK_THAT(not_list.status().message(), Catch::Contains("'tenants' must be an array"));

  // What the master hands a worker comes back the same.
  auto round = weft::host::WorkerConfigFromJson(weft::host::WorkerConfigJson(*parsed));
  REQUIRE(round.ok());
  CHECK(round->workers == 3);
  CHECK(round->tenants == parsed->tenants);
  CHECK(round->host_id == parsed->host_id);
  CHECK_FALSE(weft::host::WorkerConfigFromJson("{}").ok());
}

namespace {
using weft::host::SlotSpec;
using weft::host::SplitHold;
// Any tenant on 4 threads, and weftd's split when acme and globex are both active.
const std::vector<SlotSpec> kAny = {{"", 2}, {"", 2}};
const std::vector<SlotSpec> kBoth = {{"acme", 2}, {"globex", 2}};

// The moves a host makes over `minutes` while globex is busy for its first
// `busy` minutes of every `period` (weftd counts a tenant active for a minute
// after its last task), with acme always busy; the split is looked at every second.
int MovesOverSoak(std::int64_t hold_ms, int minutes, int period, int busy) {
  SplitHold hold(hold_ms);
  std::vector<SlotSpec> workers = kAny;
  int moves = 0;
  for (std::int64_t s = 0; s < minutes * 60; ++s) {
    const bool globex = (s / 60) % period < busy + 1;  // + the minute weftd keeps it active
    const std::vector<SlotSpec>& wanted = globex ? kBoth : kAny;
    std::vector<std::string> active = {"acme"};
    if (globex) active.push_back("globex");
    if (hold.Due(workers, wanted, active, /*free=*/false, s * 1000)) {
      workers = wanted;
      ++moves;
    }
  }
  return moves;
}
}  // namespace

TEST_CASE("worker split: a tenant active now and then does not make the host drain and restart workers each time",
          "[host][worker]") {
  // The soak: a second tenant busy for a minute every 4 minutes, for 80 minutes.
  // Following every split moves the workers twice a burst; with the default hold
  // (2 minutes) they never move.
  CHECK(MovesOverSoak(0, 80, 4, 1) == 40);
  CHECK(MovesOverSoak(weft::host::HostConfig{}.split_hold_ms, 80, 4, 1) == 0);
  // A tenant that stays busy gets its own workers once the hold is over, and keeps
  // them until it has been idle as long.
  CHECK(MovesOverSoak(120'000, 80, 40, 20) == 4);
}

TEST_CASE("worker split: a move is made at once when a tenant with work has no worker, or only threads move",
          "[host][worker]") {
  SplitHold hold(60'000);
  // Nothing to do when the workers are as weftd asks.
  CHECK_FALSE(hold.Due(kBoth, kBoth, {"acme", "globex"}, false, 0));
  CHECK_FALSE(hold.holding());
  // Before the first split is followed (or before any worker runs): at once.
  CHECK(hold.Due(kAny, kBoth, {"acme", "globex"}, /*free=*/true, 0));
  // The same tenants, other thread counts (a host joined): at once.
  CHECK(hold.Due(kBoth, {{"acme", 1}, {"globex", 3}}, {"acme", "globex"}, false, 0));
  // A tenant with work that no worker serves (initech): at once, even when its
  // split names only the others, and from any-tenant workers too.
  CHECK(hold.Due(kBoth, {{"acme", 2}, {"initech", 2}}, {"acme", "initech"}, false, 0));
  CHECK(hold.Due(kBoth, kAny, {"initech"}, false, 0));
  CHECK_FALSE(hold.Due(kAny, {{"acme", 4}}, {"acme"}, false, 0));  // any-tenant workers serve acme
  CHECK(hold.holding());

  // globex goes idle: its workers stay for the hold, counted from when the split
  // first differed, even if weftd's split changes meanwhile...
  SplitHold idle(60'000);
  CHECK_FALSE(idle.Due(kBoth, kAny, {"acme"}, false, 1'000));
  CHECK(idle.holding());
  CHECK_FALSE(idle.Due(kBoth, {{"", 4}}, {"acme"}, false, 30'000));
  CHECK_FALSE(idle.Due(kBoth, kAny, {"acme"}, false, 60'999));
  CHECK(idle.Due(kBoth, kAny, {"acme"}, false, 61'000));
  CHECK_FALSE(idle.holding());
  // ... and a globex busy again before the hold is over finds its workers where they were.
  CHECK_FALSE(idle.Due(kBoth, kAny, {"acme"}, false, 100'000));
  CHECK_FALSE(idle.Due(kBoth, kBoth, {"acme", "globex"}, false, 150'000));
  CHECK_FALSE(idle.holding());
  CHECK_FALSE(idle.Due(kBoth, kAny, {"acme"}, false, 200'000));
  CHECK_FALSE(idle.Due(kBoth, kAny, {"acme"}, false, 259'999));  // the hold starts again at 200 s
  CHECK(idle.Due(kBoth, kAny, {"acme"}, false, 260'000));
}

TEST_CASE("supervision: workers dying in a loop are restarted with a growing delay", "[host][worker]") {
  CHECK(weft::host::RestartDelayMs(0) == 0);
  CHECK(weft::host::RestartDelayMs(1) == 0);
  CHECK(weft::host::RestartDelayMs(2) == 500);
  CHECK(weft::host::RestartDelayMs(3) == 1000);
  CHECK(weft::host::RestartDelayMs(4) == 2000);
  CHECK(weft::host::RestartDelayMs(8) == 30'000);
  CHECK(weft::host::RestartDelayMs(1000) == 30'000);
}

TEST_CASE("attempt guard: an older attempt never starts after a newer one", "[host][worker]") {
  weft::host::AttemptGuard guard(100);
  std::int64_t newest = 0;
  REQUIRE(guard.Start(7, 1, &newest));
  // The lease ran out; weftd handed attempt 2 to another runner of this host.
  REQUIRE(guard.Start(7, 2, &newest));
  // A runner that read its take of attempt 1 only now.
  CHECK_FALSE(guard.Start(7, 1, &newest));
  CHECK(newest == 2);
  // The same attempt twice at once neither.
  CHECK_FALSE(guard.Start(7, 2, &newest));
  CHECK(newest == 2);
  guard.End(7, 1);
  guard.End(7, 2);
  // Attempt 2 ended: a late attempt 1 is still refused.
  CHECK_FALSE(guard.Start(7, 1, &newest));
  CHECK(newest == 2);
  // A newer attempt (weftd retried the task) starts.
  CHECK(guard.Start(7, 3, &newest));
  // Other tasks are not affected.
  CHECK(guard.Start(8, 1, &newest));
  guard.End(7, 3);
  guard.End(8, 1);
  // Ending what never started changes nothing.
  guard.End(99, 1);
  CHECK(guard.size() == 2);
}

TEST_CASE("attempt guard: ended tasks are forgotten oldest first past the window, running ones never",
          "[host][worker]") {
  weft::host::AttemptGuard guard(3);
  std::int64_t newest = 0;
  REQUIRE(guard.Start(1, 5, &newest));  // runs throughout
  for (std::int64_t task = 10; task < 1010; ++task) {
    REQUIRE(guard.Start(task, 2, &newest));
    guard.End(task, 2);
  }
  CHECK(guard.size() == 4);  // task 1 and the last 3 ended ones
  CHECK_FALSE(guard.Start(1, 4, &newest));
  CHECK(newest == 5);
  CHECK_FALSE(guard.Start(1009, 1, &newest));
  CHECK_FALSE(guard.Start(1007, 1, &newest));
  // Forgotten: the guard cannot tell any more.
  CHECK(guard.Start(1006, 1, &newest));
  guard.End(1006, 1);

  // A task that ended, started again and ended again counts from its last end.
  weft::host::AttemptGuard again(2);
  REQUIRE(again.Start(1, 1, &newest));
  again.End(1, 1);
  REQUIRE(again.Start(1, 2, &newest));
  again.End(1, 2);
  REQUIRE(again.Start(2, 1, &newest));
  again.End(2, 1);  // the first end of task 1 leaves the window, its last one not
  CHECK_FALSE(again.Start(1, 1, &newest));
  CHECK(newest == 2);
}

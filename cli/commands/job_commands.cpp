// weft job ...: the jobs that carry out cluster operations, and the progress
// bar that `job watch` and every `--wait` show.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "weft/cli/commands.hpp"
#include "weft/cli/context.hpp"
#include "weft/cli/paging.hpp"
#include "weft/cli/format.hpp"
#include "weft/cli/table.hpp"
#include "weft/common/clock.hpp"
#include "weft/common/lifecycle.hpp"

namespace weft::cli {
namespace {

constexpr int kPollMs = 300;
constexpr std::size_t kTailLines = 20;

std::string JobId(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<std::int64_t>());
  return "";
}

std::string Tail(const std::string& text, std::size_t lines) {
  std::size_t pos = text.size();
  std::size_t seen = 0;
  while (pos > 0) {
    std::size_t nl = text.rfind('\n', pos - 1);
    if (nl == std::string::npos) return text;
    if (nl + 1 < text.size() && ++seen > lines) return text.substr(nl + 1);
    pos = nl;
  }
  return text;
}

}  // namespace

std::string WaitingForHosts(const json& plugins) {
  if (!plugins.is_array() || plugins.empty()) return "";
  std::string names;
  for (const json& p : plugins)
    if (p.is_string()) names += (names.empty() ? "'" : ", '") + Printable(p.get<std::string>()) + "'";
  const bool one = plugins.size() == 1;
  return std::string("waiting for a host that runs plugin") + (one ? " " : "s ") + names + ": no live host runs " +
         (one ? "it" : "them") + "; the tasks start when one registers";
}

namespace {

std::string Bar(std::int64_t done, std::int64_t total, int width) {
  const int filled = total > 0 ? static_cast<int>(done * width / total) : width;
  return "[" + std::string(static_cast<std::size_t>(filled), '#') +
         std::string(static_cast<std::size_t>(width - filled), '.') + "]";
}

}  // namespace

std::string ProgressLine(const json& job, std::int64_t elapsed_ms) {
  const json p = job.value("progress", json::object());
  const std::string status = job.value("status", "");
  std::ostringstream line;
  const std::int64_t total = Int(p, "total");
  const std::int64_t done = Int(p, "succeeded");
  line << "job " << JobId(job.value("id", json())) << " " << job.value("operation", "") << " " << Bar(done, total, 30)
       << " " << done << "/" << total << " done, " << Int(p, "running") << " running, ";
  // Tasks in a retry's backoff would otherwise read as a stalled job.
  if (const std::int64_t retrying = Int(p, "retrying"); retrying > 0) line << retrying << " waiting to retry, ";
  line << Int(p, "failed") << " failed, stage " << Int(p, "stage") << "/" << Int(p, "stages");
  // An ended job that did not succeed: the stage is where it stopped.
  if (const auto s = JobStatusFrom(status); s == JobStatus::kAborted || s == JobStatus::kFailed)
    line << " (" << status << ")";
  const std::string waiting = WaitingForHosts(job.value("waiting_for_plugins", json::array()));
  if (!waiting.empty()) line << "; " << waiting;
  line << ", " << Duration(elapsed_ms);  // last: a non-terminal prints a line when what is before it changes
  return line.str();
}

namespace {

std::string Trimmed(const std::string& line) {
  const std::size_t begin = line.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  return line.substr(begin, line.find_last_not_of(" \t\r") - begin + 1);
}

// The first line of a message; when output lines follow it (a command's last
// output), a note that they are printed above instead: "...; last output:"
// becomes "...; last output above".
std::string FirstLine(const std::string& message) {
  const std::size_t nl = message.find('\n');
  if (nl == std::string::npos) return message;
  std::string first = message.substr(0, nl);
  while (!first.empty() && first.back() == ' ') first.pop_back();
  if (!first.empty() && first.back() == ':') {
    first.pop_back();
    return first + " above";
  }
  return first + " (output above)";
}

}  // namespace

void PrintFailedTask(std::ostream& out, const json& t, const std::string& indent) {
  out << indent << "failed: task " << t.value("id", 0) << " " << Printable(t.value("key", "")) << " (attempt "
      << t.value("attempt", 0) << " on host " << Printable(t.value("host_id", "")) << "): ";
  std::vector<std::pair<std::string, std::string>> tails;  // stream, its last lines
  std::set<std::string> shown;                             // the lines those print, trimmed
  for (const char* stream : {"stdout", "stderr"}) {
    const std::string text = t.value(stream, "");
    if (text.empty()) continue;
    tails.emplace_back(stream, Tail(text, kTailLines));
    std::istringstream in(tails.back().second);
    for (std::string l; std::getline(in, l);) shown.insert(Trimmed(l));
  }
  // A plugin's message may hold lines of its own (a command's last output): each
  // on a line of its own, indented under the first, not joined with '?'; but a
  // line the output below shows is printed there only, so nothing reads twice.
  std::istringstream message(t.value("message", ""));
  std::string line;
  bool first = true;
  for (; std::getline(message, line); first = false) {
    if (!first && shown.count(Trimmed(line))) continue;
    out << (first ? "" : indent + "    ") << Printable(line) << '\n';
  }
  if (first) out << '\n';
  for (const auto& [stream, tail] : tails) {
    out << indent << "  --- " << stream << " (last lines) ---\n";
    std::istringstream in(tail);
    for (std::string l; std::getline(in, l);) out << indent << "  " << Printable(l) << '\n';
  }
}

namespace {

// How long a job took, for its last line: the server's own times for a job
// followed from its start (exact, however often we polled), else what we saw.
// How long the job has run, from its request to its end (or to now, by this
// machine's clock, while it runs): the job's own times from job.get, not how long
// it was watched. A resumed job (job retry --wait) counts from its resumption,
// which is when the watch started.
std::int64_t JobTook(const json& job, bool resumed, std::int64_t watched_ms) {
  const std::int64_t created = job.value("created_at_ms", std::int64_t{0});
  const std::int64_t finished = job.value("finished_at_ms", std::int64_t{0});
  if (resumed || created <= 0) return watched_ms;
  if (finished > 0) return finished >= created ? finished - created : watched_ms;
  return std::max<std::int64_t>(0, SystemClock::Instance().NowMs() - created);
}

// Prints what failed: each failed task with its message and output tails.
void PrintFailures(Context& ctx, const json& job) {
  for (const json& t : job.value("tasks", json::array()))
    if (t.value("state", "") == "failed") PrintFailedTask(ctx.err(), t, "");
}

// A retried job's earlier runs: how each ended and what failed then, with its output.
void PrintHistory(Context& ctx, const json& job) {
  const json history = job.value("history", json::array());
  if (!history.is_array() || history.empty()) return;
  ctx.out() << "\nearlier runs (the job was retried):\n";
  for (const json& run : history) {
    const std::string message = run.value("message", "");
    const std::int64_t ended = run.value("finished_at_ms", std::int64_t{0});
    ctx.out() << "  run " << run.value("run", 0) << ": " << run.value("status", "")
              << (ended ? " after " + Duration(ended - run.value("started_at_ms", ended)) : "") << ", "
              << run.value("succeeded", 0) << " tasks succeeded, " << run.value("failed", 0) << " failed, "
              << run.value("cancelled", 0) << " cancelled; retried by " << Printable(run.value("retried_by", ""))
              << (message.empty() ? "" : "; " + Printable(message)) << '\n';
    for (const json& t : run.value("failed_tasks", json::array())) PrintFailedTask(ctx.out(), t, "    ");
  }
}

Status JobList(Context& ctx, const ParsedArgs& args) {
  json body = json::object();
  if (args.Has("--cluster")) body["cluster"] = args.Get("--cluster");
  // The newest 100 (or N), or with --all every job, a page of 1000 at a time.
  WEFT_ASSIGN_OR_RETURN(const std::optional<std::int64_t> want, LimitOrAll(ctx, args, 100));
  WEFT_ASSIGN_OR_RETURN(json reply, ReadPages(ctx, {.op = "job.list",
                                                    .body = std::move(body),
                                                    .rows = "jobs",
                                                    .want = want,
                                                    .page = 1000,
                                                    .pages_go_back = false}));
  if (ctx.json_output()) {
    ctx.PrintJson(reply);
    return Status::Ok();
  }
  // The cluster by the name people gave it; its id stays in a column of its own (and in -o json).
  Table table({"JOB", "CLUSTER", "CLUSTER ID", "OPERATION", "STATUS", "BY", "TOOK", "MESSAGE"});
  for (const json& j : reply["jobs"]) {
    const std::int64_t end = j.value("finished_at_ms", std::int64_t{0});
    const std::string name = j.value("cluster_name", "");
    table.AddRow({JobId(j["id"]), name.empty() ? "-" : Printable(name), JobId(j["cluster_id"]),
                  j.value("operation", ""), j.value("status", ""),
                  Printable(j.value("requested_by", "")),
                  end ? Duration(end - j.value("created_at_ms", end)) : "-", Printable(j.value("message", ""))});
  }
  table.Print(ctx.out());
  return Status::Ok();
}

Status JobShow(Context& ctx, const ParsedArgs& args) {
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call("job.get", {{"job", args.positionals.at(0)}, {"details", true}}));
  if (ctx.json_output()) {
    ctx.PrintJson(reply);
    return Status::Ok();
  }
  const json& j = reply["job"];
  KeyValues kv;
  kv.Add("job", JobId(j["id"]));
  kv.Add("cluster", JobId(j["cluster_id"]));
  kv.Add("operation", j.value("operation", ""));
  kv.Add("status", j.value("status", ""));
  kv.Add("requested by", Printable(j.value("requested_by", "")));
  if (!j.value("parent_job", "").empty()) kv.Add("undoes job", j.value("parent_job", ""));
  if (!j.value("message", "").empty()) kv.Add("message", Printable(j.value("message", "")));
  const json& p = j["progress"];
  const std::int64_t retrying = Int(p, "retrying");
  kv.Add("tasks", std::to_string(p.value("succeeded", 0)) + "/" + std::to_string(p.value("total", 0)) +
                      " succeeded, " + (retrying > 0 ? std::to_string(retrying) + " waiting to retry, " : "") +
                      std::to_string(p.value("failed", 0)) + " failed, " + std::to_string(p.value("cancelled", 0)) +
                      " cancelled");
  const std::string waiting = WaitingForHosts(j.value("waiting_for_plugins", json::array()));
  if (!waiting.empty()) kv.Add("blocked", waiting);
  kv.Print(ctx.out());
  ctx.out() << '\n';
  Table table({"TASK", "KEY", "PLUGIN", "STATE", "ATTEMPTS", "HOST", "TOOK", "MESSAGE"});
  for (const json& t : j["tasks"]) {
    std::int64_t took = 0;
    for (const json& a : t.value("attempts", json::array()))
      if (a.value("finished_at_ms", std::int64_t{0}) > 0) took += a.value("finished_at_ms", std::int64_t{0}) - a.value("taken_at_ms", std::int64_t{0});
    table.AddRow({std::to_string(t.value("id", 0)), Printable(t.value("key", "")), t.value("plugin", ""),
                  t.value("state", ""),
                  std::to_string(t.value("attempt", 0)) + "/" + std::to_string(t.value("max_attempts", 0)),
                  Printable(t.value("host_id", "")), took ? Duration(took) : "-", Printable(t.value("message", ""))});
  }
  table.Print(ctx.out());
  PrintHistory(ctx, j);
  PrintFailures(ctx, j);
  return Status::Ok();
}

Status JobWatch(Context& ctx, const ParsedArgs& args) { return WaitForJob(ctx, args.positionals.at(0)); }

Status JobAbort(Context& ctx, const ParsedArgs& args) {
  const std::string id = args.positionals.at(0);
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call("job.abort", {{"job", id}}));
  // Running attempts are told to stop; the job is `aborted` once they have.
  auto stopping = [&reply] { return JobStatusFrom(reply["job"].value("status", "")) == JobStatus::kFailing; };
  if (stopping() && !args.Has("--no-wait")) {
    if (!ctx.json_output()) ctx.err() << "job " << id << ": " << reply["job"].value("message", "") << '\n';
    while (stopping()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(kPollMs));
      WEFT_ASSIGN_OR_RETURN(reply, ctx.Call("job.get", {{"job", id}}));
    }
  }
  if (ctx.json_output()) {
    ctx.PrintJson(reply);
  } else if (stopping()) {
    ctx.out() << "job " << id << " is being aborted: its running attempts are told to stop, and it ends aborted "
              << "once they have (" << ctx.Suggest("job watch " + id) << ")\n";
  } else {
    ctx.out() << "job " << id << " aborted; the cluster is left as it is (incomplete)\n";
  }
  return Status::Ok();
}

Status JobRetry(Context& ctx, const ParsedArgs& args) {
  WEFT_ASSIGN_OR_RETURN(json reply, ctx.Call("job.retry", {{"job", args.positionals.at(0)}}));
  if (args.Has("--wait")) return WaitForJob(ctx, args.positionals.at(0), /*resumed=*/true);
  if (ctx.json_output()) {
    ctx.PrintJson(reply);
    return Status::Ok();
  }
  ctx.out() << "job " << args.positionals.at(0) << " resumed; follow it with "
            << ctx.Suggest("job watch " + args.positionals.at(0)) << '\n';
  return Status::Ok();
}

// A job as it ended, and how long it ran (JobTook).
struct Ended {
  json job;
  std::int64_t took_ms = 0;
};

// Follows job `id` with the progress bar (on stderr; none with -o json) until it
// ends, through restarts of weftd.
Result<Ended> FollowJob(Context& ctx, const std::string& id, bool resumed, bool tty) {
  const auto start = std::chrono::steady_clock::now();
  std::string last;
  bool away = false;  // weftd stopped answering; the job goes on without us watching
  while (true) {
    Result<json> reply = ctx.Call("job.get", {{"job", id}});
    if (!reply.ok()) {
      // A restart of weftd loses nothing of the job: wait for it to be back.
      if (reply.status().code() != Code::kUnavailable && reply.status().code() != Code::kTimeout)
        return reply.status();
      if (!away) {
        if (tty) ctx.err() << '\n';
        ctx.err() << "weftd is not answering (" << reply.status().message() << "); reconnecting, job " << id
                  << " goes on meanwhile (Ctrl-C stops watching)\n";
        away = true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(kPollMs));
      continue;
    }
    if (away) {
      ctx.err() << "reconnected to weftd; following job " << id << " again\n";
      away = false;
    }
    json& job = (*reply)["job"];
    const auto elapsed =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
    const std::int64_t took = JobTook(job, resumed, elapsed);
    std::string line = ProgressLine(job, took);
    if (!ctx.json_output()) {
      if (tty) {
        ctx.err() << '\r' << line << "\033[K" << std::flush;
      } else if (line.substr(0, line.rfind(',')) != last.substr(0, last.rfind(','))) {
        ctx.err() << line << '\n';  // not a terminal: one line per change, no carriage returns
      }
    }
    last = line;
    const std::optional<JobStatus> state = JobStatusFrom(job.value("status", ""));
    if (state == JobStatus::kRunning || state == JobStatus::kFailing) {
      std::this_thread::sleep_for(std::chrono::milliseconds(kPollMs));
      continue;
    }
    if (tty) ctx.err() << '\n';
    return Ended{std::move(job), took};
  }
}

// The job that undoes failed job `failed` (its parent_job), among its cluster's
// newest jobs; "" when there is none.
std::string UndoJobOf(Context& ctx, const json& failed) {
  const std::string id = JobId(failed.value("id", json()));
  Result<json> jobs = ctx.Call("job.list", {{"cluster", JobId(failed.value("cluster_id", json()))}, {"limit", 50}});
  if (!jobs.ok()) return "";
  for (const json& j : jobs->value("jobs", json::array()))
    if (j.value("parent_job", "") == id) return JobId(j.value("id", json()));
  return "";
}

}  // namespace

Status WaitForJob(Context& ctx, const std::string& job_id, bool resumed) {
  const bool tty = isatty(STDERR_FILENO) == 1 && !ctx.json_output();
  WEFT_ASSIGN_OR_RETURN(const Ended ended, FollowJob(ctx, job_id, resumed, tty));
  const json& job = ended.job;
  const std::string status = job.value("status", "");
  const std::string operation = job.value("operation", "");
  if (JobStatusFrom(status) == JobStatus::kSucceeded) {
    if (ctx.json_output()) {
      ctx.PrintJson({{"job", job}});
    } else {
      ctx.out() << "job " << job_id << " (" << operation << ") succeeded in " << Duration(ended.took_ms) << '\n';
    }
    // A job that undoes a failed one succeeding still means the operation failed.
    if (!job.value("parent_job", "").empty())
      return Status::Internal("job " + job.value("parent_job", "") + " failed and was undone by job " + job_id);
    return Status::Ok();
  }
  Result<json> detail = ctx.Call("job.get", {{"job", job_id}, {"details", true}});
  if (detail.ok()) PrintFailures(ctx, (*detail)["job"]);
  const std::string message = job.value("message", "");
  // The job's message ends with its failed task's output, which the failures just printed show.
  const std::string summary = detail.ok() ? FirstLine(message) : message;
  const std::string failed = "job " + job_id + " " + status + (summary.empty() ? "" : ": " + summary);
  // A failed job that is being undone: follow the undo job too, and say how it ended.
  std::string undo_id;
  std::optional<Ended> undo;
  if (message.find("undoing it") != std::string::npos) undo_id = UndoJobOf(ctx, job);
  if (!undo_id.empty()) {
    ctx.err() << "job " << job_id << " failed: " << Printable(summary) << "\nundoing it: job " << undo_id << '\n';
    WEFT_ASSIGN_OR_RETURN(undo, FollowJob(ctx, undo_id, /*resumed=*/false, tty));
  }
  const std::string undo_status = undo ? undo->job.value("status", "") : "";
  const bool undone = undo && JobStatusFrom(undo_status) == JobStatus::kSucceeded;
  // The watched job is what is printed, whatever became of it; its undo beside it.
  if (ctx.json_output()) {
    json doc = {{"job", job}};
    if (undo) doc["undo_job"] = undo->job;
    ctx.PrintJson(doc);
  } else {
    ctx.out() << "job " << job_id << " (" << operation << ") " << status << " after " << Duration(ended.took_ms);
    if (undone) {
      ctx.out() << "; undone by job " << undo_id << " in " << Duration(undo->took_ms);
    } else if (undo) {
      ctx.out() << "; its undo, job " << undo_id << ", " << undo_status << " after " << Duration(undo->took_ms);
    }
    ctx.out() << '\n';
  }
  if (undone) return Status::Internal(failed + "; undone by job " + undo_id);
  if (undo) {
    const std::string why = undo->job.value("message", "");
    return Status::Internal(failed + "; its undo, job " + undo_id + ", " + undo_status +
                            (why.empty() ? "" : ": " + FirstLine(why)));
  }
  return Status::Internal(failed);
}

void RegisterJobCommands(CommandTable& table) {
  table.Add({.noun = "job",
             .verb = "list",
             .summary = "List jobs, newest first.",
             .description = "The newest 100 jobs of the tenant (--limit N: N; --all: every one), or of one\n"
                            "cluster with --cluster: its cluster's name and id, what it did, who asked\n"
                            "for it, how it ended and how long it took.",
             .flags = {{.name = "--cluster", .value_name = "C", .help = "only this cluster's jobs (name or id)"},
                       {.name = "--limit", .value_name = "N", .help = "the newest N jobs (default 100)"},
                       {.name = "--all", .value_name = "", .help = "every job, however many"}},
             .args = {},
             .handler = &JobList});
  table.Add({.noun = "job",
             .verb = "show",
             .summary = "Show a job: every task with its plugin, state, attempts, host and timing.",
             .description = "The audit view of one job. Failed tasks are followed by the last lines of\n"
                            "their stdout and stderr; -o json has every task's output tails (stdout,\n"
                            "stderr) and result (secrets redacted).",
             .flags = {},
             .args = {{.name = "JOB", .required = true, .help = "the job id"}},
             .handler = &JobShow});
  table.Add({.noun = "job",
             .verb = "watch",
             .summary = "Follow a job with a progress bar until it ends.",
             .description = "Shows done/total, running and failed tasks, the current stage and the\n"
                            "elapsed time. Exits 0 when the job succeeds; otherwise prints the failed\n"
                            "tasks' output, follows the job that undoes it, and exits 1. When weftd\n"
                            "stops answering (a restart), it says so and keeps trying until weftd is\n"
                            "back, then goes on. -o json prints {\"job\": the job as it ended} and, for a\n"
                            "failed job that was undone, \"undo_job\": the job that undid it.",
             .flags = {},
             .args = {{.name = "JOB", .required = true, .help = "the job id"}},
             .handler = &JobWatch});
  table.Add({.noun = "job",
             .verb = "abort",
             .summary = "Stop a running job; nothing is undone.",
             .description = "Unstarted tasks are cancelled and running attempts are told to stop. The\n"
                            "job ends `aborted` once its hosts have stopped them (a result one still\n"
                            "made is kept); until then the cluster takes no other operation, and this\n"
                            "command waits. The cluster becomes incomplete; `weft job retry` resumes\n"
                            "the job, `weft cluster delete` removes what it made.",
             .flags = {{.name = "--no-wait", .value_name = "", .help = "return once the running attempts are told to stop"}},
             .args = {{.name = "JOB", .required = true, .help = "the job id"}},
             .handler = &JobAbort});
  table.Add({.noun = "job",
             .verb = "retry",
             .summary = "Resume a failed or aborted job from where it stopped.",
             .description = "Failed tasks get new attempts and cancelled ones run again once their\n"
                            "predecessors are done. Only the cluster's latest job, and only one that was\n"
                            "not undone (see --keep-on-failure), can be retried.",
             .flags = {{.name = "--wait", .value_name = "", .help = "follow the job with a progress bar until it ends"}},
             .args = {{.name = "JOB", .required = true, .help = "the job id"}},
             .handler = &JobRetry});
}

}  // namespace weft::cli

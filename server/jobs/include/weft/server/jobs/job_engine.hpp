// weft::jobs::JobEngine: runs cluster operations as DAGs of node tasks.
//
// A job is a plan (domain/planner) turned into tasks in the store. A task is
// `waiting` until every predecessor succeeded, then the engine hands it to the
// TaskQueue; there are no stage barriers. A JOIN (or a task no plugin has to
// run) completes the moment it is ready. A failed attempt is retried with
// exponential backoff until `max_attempts`; a failed CONFIRM first deletes and
// re-creates its node. When a task fails for good the job fails: tasks not yet
// started are cancelled, running ones may finish, and then the job's undo plan
// runs as a job of its own (a create deletes what it created, a scale-up
// removes the new nodes, add-services removes the added services) unless the
// job was started with keep_on_failure.
//
// Everything the engine knows is in the store: it writes through inside the
// caller's transaction and Load() rebuilds the running jobs after a restart.
// Results that tasks return (provider id, ssh auth, addresses, host keys...)
// are merged into their node and handed to every later task of that node
// (Decorate, at take time), with the cluster's config and the service's fields
// macro-expanded for that node.
//
// Not thread-safe: owned by weftd's reactor thread. Borrows the Store, the
// TaskQueue and the Clock, which must outlive it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/server/queue/task_queue.hpp"
#include "weft/server/queue/task_texts.hpp"
#include "weft/server/store/store.hpp"
#include "weft/common/clock.hpp"
#include "weft/common/event.hpp"
#include "weft/common/status.hpp"
#include "weft/planner/macros.hpp"
#include "weft/planner/planner.hpp"

namespace weft::jobs {

using json = nlohmann::json;

struct EngineOptions {
  std::int64_t max_attempts = 3;
  std::int64_t retry_backoff_ms = 1000;
  std::int64_t retry_backoff_max_ms = 30000;
  std::int64_t max_nodes_in_task = 256;
};

// A cluster as a job sees it: {"spec", "layout", "status"}.
//  spec:   {"template":{...}, "provider":{"name","type","fields"}, "services":{name: entity},
//           "config":{...}, "size":N, "overrides":{...}}
//  layout: {"nodes":[{"hostname","hardwaretype","imagetype","flavor","image","sshuser","services"}]}
struct ClusterState {
  json spec = json::object();
  json layout = {{"nodes", json::array()}};
  std::string status;
  json ToJson() const { return {{"spec", spec}, {"layout", layout}, {"status", status}}; }
  static ClusterState FromJson(const json& doc);
};

// What shapes a plan besides the two layouts.
struct PlanExtras {
  std::vector<std::string> only_services;     // start/stop/restart
  std::vector<std::string> changed_services;  // upgrade
  bool restart = false;                       // reconfigure and friends
  // undo: the services the undone job reconfigured on nodes it kept, "node/service".
  std::set<std::string> reconfigured;
};

struct NewJob {
  std::string tenant;
  std::string cluster_id;
  std::string operation;  // a planner operation, "rollback" (to the previous state) or "undo"
  std::string requested_by;
  std::string parent_job;  // "undo": the failed job it undoes
  json options = json::object();  // keep_on_failure
  ClusterState before;
  ClusterState target;
  PlanExtras extras;
  // wire::Dump of target.spec, target.layout and before.spec when the caller
  // made them already (cluster.create, for the cluster's row), else empty:
  // Start dumps what it is not given. A cluster's spec and layout are tens of
  // kilobytes of JSON.
  std::string target_spec_text;
  std::string target_layout_text;
  std::string before_spec_text;
};

// What PlanJob keeps from one call to the next when given one: the planner's
// view of the last specs' services (a tenth of planning a small cluster's
// create), made again only when the services differ.
struct PlanCache {
  json before_services;  // null: the spec has none
  json target_services;
  std::vector<planner::ServiceSpec> services;
  bool valid = false;
};

// The plan a job would run, for dry runs and for Start. `declared`: what the
// registered plugins declare (nullptr: not known), which decides the nodes'
// BOOTSTRAP (planner::BootstrapPlugin). `cache`: nullptr, or one kept between
// calls (not thread-safe).
Result<planner::Plan> PlanJob(const NewJob& job, const planner::DeclaredActions* declared = nullptr,
                              PlanCache* cache = nullptr);
// The plan's JSON (Plan::ToJson) with each task's "plugin" ("" for no work).
json PlanJson(const NewJob& job, const planner::Plan& plan, const planner::DeclaredActions* declared);

// The most a node's merged results may be, as JSON text: with the node's
// record, the config and the node list it leaves room in a task handed out
// under the default 1 MiB frame (limits.max_header_bytes).
inline constexpr std::size_t kMaxNodeResultsBytes = 512 * 1024;

// A layout node's "state" when a job was to delete it and its DELETE failed (or
// never ran): the node, its machine maybe, is still there.
inline constexpr const char* kDeleteFailed = "delete failed";
// Whether a layout node is so marked: only its DELETE is ever planned again.
inline bool IsDeleteFailed(const json& node) { return node.value("state", "") == kDeleteFailed; }

class JobEngine {
 public:
  JobEngine(store::Store& store, queue::TaskQueue& queue, const Clock& clock, EngineOptions options);

  // Rebuilds the running jobs from the store (after the queue's Load).
  [[nodiscard]] Status Load();

  // Plans `job`, records it with its tasks and releases the tasks that have no
  // predecessor. The cluster goes to `pending` (its layout becomes the target's).
  [[nodiscard]] Result<store::JobRecord> Start(NewJob job);
  // Stops a running job now: every unfinished task is cancelled (a running
  // attempt's late finish is refused), the cluster becomes incomplete, nothing is undone.
  [[nodiscard]] Status Abort(const std::string& job_id, const std::string& who);
  // Resumes a failed or aborted job that was not undone: failed tasks get new
  // attempts, cancelled ones wait for their predecessors again. The run that
  // ended is kept in the job's history (its status, message, and the failed
  // tasks with their output, which the new attempts would overwrite).
  [[nodiscard]] Status Retry(const std::string& job_id, const std::string& who = "");

  // The queue's end observer.
  [[nodiscard]] Status OnTaskEnded(const queue::Ended& ended);
  // The queue's result check: a task's result must leave its node's merged
  // results within kMaxNodeResultsBytes, since every later task of the node
  // carries them (once) in the reply that hands it out.
  [[nodiscard]] Status CheckResult(std::int64_t task_id, const std::string& result_json) const;
  // The take decorator: node facts, earlier results, expanded config and fields.
  // Parts many tasks share go into `texts` as JSON text made once.
  [[nodiscard]] Status Decorate(const store::TaskRecord& record, json& task, queue::TaskTexts& texts);
  // Starts a delete job for every cluster whose lease ran out. A cluster whose
  // delete cannot be planned keeps its (due) lease and is tried again on the
  // next call; a warning says so once per cluster and reason. Each delete
  // started leaves an audit entry by weftd, as an undo after a failure does.
  [[nodiscard]] Status ExpireLeases();

  // The plugins that tasks of running job `job_id` wait or are queued for; empty
  // when the job is not running.
  std::set<std::string> PendingPlugins(const std::string& job_id) const;
  // The running (or failing) job of a cluster; empty when none.
  std::string ActiveJob(const std::string& cluster_id) const;
  std::size_t running() const { return runs_.size(); }

  // What the registered plugins a tenant's tasks may use declare (the
  // composition root hands in the host registry's view). Unset: not known.
  using DeclaredActionsFor = std::function<planner::DeclaredActions(const std::string& tenant)>;
  void set_declared_actions(DeclaredActionsFor f) { declared_actions_ = std::move(f); }
  std::optional<planner::DeclaredActions> DeclaredActions(const std::string& tenant) const {
    if (!declared_actions_) return std::nullopt;
    return declared_actions_(tenant);
  }
  // Running jobs by operation.
  std::map<std::string, std::int64_t> RunningByOperation() const;
  std::vector<Event> TakeEvents() { return std::exchange(events_, {}); }
  // Jobs that ended since the last call (for metrics, counted once committed).
  struct Ended {
    std::string operation;
    std::string outcome;  // succeeded, failed, aborted
    std::int64_t duration_ms = 0;  // from the request to the end
  };
  std::vector<Ended> TakeEnded() { return std::exchange(ended_, {}); }

 private:
  struct TaskNode {
    std::int64_t id = 0;
    std::string key;
    std::string node;
    std::string action;
    std::string service;
    std::string plugin;  // empty: no work (a JOIN)
    store::TaskState state = store::TaskState::kWaiting;
    std::int64_t attempt = 0;
    std::int64_t max_attempts = 3;
    std::vector<std::int64_t> after;
    std::vector<std::int64_t> before;  // successors
    std::int64_t waiting_for = 0;      // predecessors not yet succeeded
  };
  // A part that many tasks carry: the JSON text made once, or the tree when
  // the auth decorator, which runs after the engine's, has a sealed value to
  // open in it. Nothing made yet: neither.
  struct Part {
    std::shared_ptr<const std::string> text;
    json tree;
    bool per_node = false;  // a service part that is expanded for each node instead
    bool made() const { return text != nullptr || !tree.is_null() || per_node; }
  };
  struct Run {
    store::JobRecord record;
    json options = json::object();
    ClusterState before;
    ClusterState target;
    // target.spec and target.layout as Start wrote them to the cluster, for
    // Finish to write again (empty for a job resumed at start: dumped then).
    std::string target_spec_text, target_layout_text;
    std::map<std::string, json> results;  // node -> merged results of its tasks
    std::unordered_map<std::int64_t, TaskNode> tasks;
    std::int64_t succeeded = 0;
    bool failing = false;
    std::set<std::int64_t> in_flight;  // attempts still running while failing
    // hostname -> position in target.layout / before.layout nodes (and in the macro contexts).
    std::unordered_map<std::string, std::size_t> target_pos;
    std::unordered_map<std::string, std::size_t> before_pos;
    // Macro contexts over each layout, built on first use; a node's entry is
    // updated when its addresses arrive.
    std::unique_ptr<planner::MacroContext> macros_target;
    std::unique_ptr<planner::MacroContext> macros_before;
    // The per-job parts of a task are made once and handed to every take as
    // the JSON text sent (queue::TaskTexts), not as trees copied and
    // serialized at every take; see Part.
    // The "nodes" list every task of a small cluster gets, from each context:
    // made again after a node's addresses changed, from each node's entry
    // (its text, cleared when its addresses change).
    Part nodes_target;
    Part nodes_before;
    std::vector<std::string> node_entries_target;
    std::vector<std::string> node_entries_before;
    // The "cluster" object of every task, for each spec (its template may differ).
    Part cluster_target;
    Part cluster_before;
    // The "config" of every task, for each spec, when it names no macro;
    // whether it names one is found once per spec.
    Part config_target;
    Part config_before;
    std::optional<bool> config_macros_target;
    std::optional<bool> config_macros_before;
    // The "provider" of every task, for each spec.
    Part provider_target;
    Part provider_before;
    // The "service" of a service's action whose fields name no macro, for
    // each spec, by (service, action); a service whose fields name one is
    // expanded per node (per_node).
    std::map<std::pair<std::string, std::string>, Part> services_target;
    std::map<std::pair<std::string, std::string>, Part> services_before;
    // A node's "node" (its layout entry) and "results", the same for every task
    // of the node: its results until a result changes them (then made again on
    // the next take), the node until its DELETE.
    struct NodeParts {
      Part node;
      Part results;
    };
    std::unordered_map<std::string, NodeParts> node_parts;
    std::string owner;
    std::string cluster_name;
  };

  Status AddTasks(Run& run, const planner::Plan& plan, const planner::DeclaredActions* declared);
  Status Release(Run& run, std::int64_t task_id);
  Status Retry(Run& run, TaskNode& task, const std::string& message);
  Status Recreate(Run& run, TaskNode& confirm, const std::string& message);
  Status Fail(Run& run, const std::string& message);
  // An abort: cancels what has not started and tells running attempts to stop
  // (they stay in `in_flight` until they have).
  Status CancelForAbort(Run& run);
  // A failing job whose last attempt in flight ended is finished; an aborted
  // one still waiting says for how many (StoppingAttempts).
  Status Settle(Run& run);
  Status StoppingAttempts(Run& run);
  Status Finish(Run& run);  // every task is done (or the job failed and nothing runs)
  // The job that removes what a failed `run` may have made; nullopt when it has no undo.
  std::optional<NewJob> UndoJob(const Run& run) const;
  // The layout a failed undo leaves: the nodes (and services) it was to remove
  // whose DELETE (REMOVE) did not succeed (a node's "state" says its DELETE failed).
  static json LeftBehind(const Run& run);
  // The layout any other failed job leaves: the nodes it was to keep, as it
  // wanted them, and every node it was to delete whose DELETE did not succeed
  // (its "state" says so), each with the services whose REMOVE did not.
  static json Remaining(const Run& run);
  // The spec that goes with `left` (LeftBehind): the one the undo went back to,
  // plus the definition of each service still on a node of `left`.
  static json LeftBehindSpec(const Run& run, const json& left);
  Status LoadRun(const store::JobRecord& record);
  // How the last run of a failed or aborted job ended, for its history.
  Result<json> EndedRun(const store::JobRecord& record, const std::string& retried_by);
  Status SetCluster(const std::string& cluster_id, const std::function<void(store::ClusterRecord&)>& change);
  void EmitJob(const Run& run);
  // The audit entry of a job weftd started by itself (an undo, a lease's
  // delete): actor "weftd", role "system", `op` on the job's cluster, in the
  // same transaction as the job.
  Status AuditOwnJob(const store::JobRecord& job, const std::string& cluster, const char* op, json detail);
  void EmitCluster(const store::ClusterRecord& cluster);
  // A cluster was made (its create job `job_id` started): told on its owner's topic.
  void EmitCreated(const store::ClusterRecord& cluster, const std::string& job_id);
  const planner::MacroContext& Macros(Run& run, const std::string& node);
  static void Index(Run& run);
  static void UpdateMacroNode(Run& run, const std::string& node);
  static const json* LayoutNode(const Run& run, const std::string& node);
  // `doc` as a part: its text, or the tree when it may hold a sealed value.
  static Part MakePart(const json& doc);
  // Puts a part in the task: its text in `texts`, or its tree under `name`.
  static void Put(json& task, queue::TaskTexts& texts, const char* name, const Part& part);
  std::int64_t Backoff(std::int64_t attempt) const;

  store::Store& store_;
  queue::TaskQueue& queue_;
  const Clock& clock_;
  EngineOptions options_;
  DeclaredActionsFor declared_actions_;
  std::map<std::string, std::unique_ptr<Run>> runs_;         // job id -> running job
  std::unordered_map<std::int64_t, std::string> task_job_;  // task id -> job id, running jobs only
  std::map<std::string, std::string> cluster_job_;          // cluster id -> running job id
  std::vector<Event> events_;
  std::vector<Ended> ended_;
  PlanCache plan_cache_;  // Start's
  // The result CheckResult parsed, for OnTaskEnded of the same finish (the
  // queue calls one right after the other when it keeps the result): a
  // result is parsed once. Taken (and so cleared) by the next OnTaskEnded.
  struct CheckedResult {
    std::int64_t task_id = 0;
    std::string text;
    json doc;
  };
  mutable std::optional<CheckedResult> checked_;
  // Clusters whose lease ran out but whose delete could not be planned, with
  // why (the warning is logged when that is new).
  std::map<std::string, std::string> lease_blocked_;
};

}  // namespace weft::jobs

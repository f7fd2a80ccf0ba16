// The planner: an operation on a cluster, its layout before and after, and the
// services involved become a DAG of node tasks.
//
// Per node:        CREATE → CONFIRM → BOOTSTRAP → every service task on it
//                  (no BOOTSTRAP where no automator of the node runs one:
//                  see BootstrapPlugin).
// Per service:     INSTALL → CONFIGURE → STOP → REMOVE → INITIALIZE → START
//                  (whichever of them the operation needs and the service defines).
// Across nodes:    a dependency's INSTALL precedes its dependent's INSTALL
//                  (install requires/uses); a dependency's START precedes the
//                  dependent's INITIALIZE and START (runtime requires/uses);
//                  STOP runs the other way round. Names resolve through
//                  `provides`; a dependency that does not define the action is
//                  walked through to its own dependencies.
// A node's DELETE comes after every other task on that node.
// New nodes' addresses: growing, the reconfiguration of the nodes that stay
// waits for every new node's CONFIRM; when the config or a service's fields
// name addresses, every BOOTSTRAP and service task does.
//
// When a group of tasks (every INSTALL of service D) must all precede another
// group (every INSTALL of S) and both have more than one task, the plan holds a
// JOIN: a task with no work that completes when its predecessors do. It keeps a
// 10,000-node plan linear in size instead of quadratic. It is not a stage
// barrier: it only ever joins what the dependency semantics demand.
//
// Pure functions over plain values; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/common/status.hpp"

namespace weft::planner {

enum class Action : int {
  kCreate = 1,
  kConfirm,
  kBootstrap,
  kInstall,
  kConfigure,
  kInitialize,
  kStart,
  kStop,
  kRemove,
  kDelete,
  kJoin,  // no work: completes when its predecessors have
};

std::string_view ActionName(Action action);  // "INSTALL"
Result<Action> ParseAction(std::string_view name);

enum class Operation : int {
  kCreate = 1,
  kDelete,
  kScale,           // grow and/or shrink: nodes in `after` but not `before` are created, the reverse deleted
  kAddServices,     // services in `after` but not `before` on a node are installed and started
  kRemoveServices,  // services in `before` but not `after` on a node are stopped and removed
  kStart,
  kStop,
  kRestart,
  kReconfigure,
  kUpgrade,  // like add-services, plus reinstall + reconfigure + restart of `changed_services`
};

std::string_view OperationName(Operation operation);  // "add-services"
Result<Operation> ParseOperation(std::string_view name);

// What the planner needs to know of a service (the catalog has more).
struct ServiceSpec {
  std::string name;
  std::vector<std::string> install_requires;
  std::vector<std::string> install_uses;
  std::vector<std::string> runtime_requires;
  std::vector<std::string> runtime_uses;
  std::vector<std::string> provides;
  std::vector<Action> actions;  // the service actions it defines (INSTALL ... REMOVE)
};

struct NodeSpec {
  std::string id;
  std::vector<std::string> services;
};

struct PlanRequest {
  Operation operation = Operation::kCreate;
  std::vector<NodeSpec> before;  // the layout now (empty for create)
  std::vector<NodeSpec> after;   // the layout wanted (equal to `before` for start/stop/...)
  std::vector<ServiceSpec> services;  // every service either layout names
  // start/stop/restart: only these services and what they pull in (dependencies
  // for start, dependents for stop and restart); empty means all.
  std::vector<std::string> only_services;
  // upgrade, and going back (rollback, undo): services whose definition changed.
  // Where such a service stays on a node it is installed again (INSTALL →
  // CONFIGURE → STOP → START), in every operation that keeps it.
  std::vector<std::string> changed_services;
  // scale, add-/remove-services, reconfigure, upgrade: restart the services that
  // were reconfigured.
  bool restart = false;
  // undo: the services that stay on a node are reconfigured only where the job
  // being undone reconfigured them, as "node/service"; nullopt: everywhere.
  std::optional<std::set<std::string>> reconfigure_only;
  // The config or a service's fields name nodes' addresses (NamesAddresses),
  // known only once a new node's CONFIRM reported them: every BOOTSTRAP and
  // service task then waits for every CONFIRM of the plan (through one JOIN).
  bool wait_for_addresses = false;
  // New nodes that get no BOOTSTRAP task: no automator on them runs it
  // (BootstrapPlugin is empty). Their service tasks follow their CONFIRM.
  std::set<std::string> without_bootstrap;
};

struct PlannedTask {
  std::string node;     // node id; empty for a JOIN
  Action action = Action::kCreate;
  std::string service;  // empty for node-level actions
  std::vector<std::uint32_t> after;  // indices of tasks that must succeed first
  Action joined = Action::kJoin;     // for a JOIN: the action of the tasks it joins
};

class Plan {
 public:
  // Tasks in a deterministic topological order: every task comes after all of
  // its predecessors.
  const std::vector<PlannedTask>& tasks() const { return tasks_; }
  // "node-1/INSTALL/nginx", "node-1/CREATE", "join/START/redis".
  std::string TaskId(std::uint32_t index) const;
  // Groups of task indices by longest path from the roots, for reading only:
  // execution never waits for a stage. JOINs belong to no stage.
  std::vector<std::vector<std::uint32_t>> Stages() const;
  // {"tasks":[{"id","node","action","service","after":[ids]}], "stages":[[ids]]}
  nlohmann::json ToJson() const;

 private:
  friend Result<Plan> MakePlan(const PlanRequest& request);
  std::vector<PlannedTask> tasks_;
};

// Whether `doc` (a cluster's config, or its services' definitions) names
// nodes' addresses through a macro (`%ip.…%`, `map(ip.…)`).
bool NamesAddresses(const nlohmann::json& doc);

// The actions each registered plugin type declares (weft_action bits, the
// union over the hosts that registered it), by type.
using DeclaredActions = std::map<std::string, std::uint32_t>;

// The automator that runs a new node's BOOTSTRAP (which names no service).
// `automators` are the plugin types of the node's services' actions in the
// order the node lists its services, each service's INSTALL, CONFIGURE,
// INITIALIZE, START. BOOTSTRAP is optional for an automator: the first of
// them that declares it runs it; failing that, the first that no host has
// registered yet (it may declare it; nothing can tell before it registers);
// failing that, none: "" (the node gets no BOOTSTRAP). Without `declared`
// (nothing known of any plugin), the first of `automators`.
std::string BootstrapPlugin(const std::vector<std::string>& automators, const DeclaredActions* declared);

// Fails with INVALID when the request names an unknown service or the
// services' dependencies form a cycle (naming the services on it).
Result<Plan> MakePlan(const PlanRequest& request);

}  // namespace weft::planner

#include "weft/planner/planner.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <queue>
#include <set>
#include <utility>

#include "weft/plugin.h"

namespace weft::planner {
namespace {

using json = nlohmann::json;
using Index = std::uint32_t;

// The plugin actions are weft_action's bits in the same order, so their names
// come from the SDK's one table (weft_action_name); kJoin is the planner's own.
static_assert(1u << (static_cast<int>(Action::kCreate) - 1) == WEFT_ACTION_CREATE &&
                  1u << (static_cast<int>(Action::kBootstrap) - 1) == WEFT_ACTION_BOOTSTRAP &&
                  1u << (static_cast<int>(Action::kDelete) - 1) == WEFT_ACTION_DELETE,
              "planner::Action must follow weft_action's order");

constexpr std::array<std::pair<Operation, std::string_view>, 10> kOperationNames{{
    {Operation::kCreate, "create"},
    {Operation::kDelete, "delete"},
    {Operation::kScale, "scale"},
    {Operation::kAddServices, "add-services"},
    {Operation::kRemoveServices, "remove-services"},
    {Operation::kStart, "start"},
    {Operation::kStop, "stop"},
    {Operation::kRestart, "restart"},
    {Operation::kReconfigure, "reconfigure"},
    {Operation::kUpgrade, "upgrade"},
}};

// The order of one service's tasks on one node. REMOVE and INITIALIZE/START
// never meet in one operation; a restart is CONFIGURE → STOP → START.
constexpr std::array<Action, 6> kServiceOrder{Action::kInstall, Action::kConfigure, Action::kStop,
                                              Action::kRemove,  Action::kInitialize, Action::kStart};
constexpr std::array<Action, 4> kBringUp{Action::kInstall, Action::kConfigure, Action::kInitialize, Action::kStart};

using Layout = std::map<std::string, std::set<std::string>>;  // node id -> services

Layout ToLayout(const std::vector<NodeSpec>& nodes) {
  Layout out;
  for (const auto& n : nodes) out[n.id].insert(n.services.begin(), n.services.end());
  return out;
}

class Builder {
 public:
  explicit Builder(const PlanRequest& request) : req_(request) {}

  Result<std::vector<PlannedTask>> Build() {
    WEFT_RETURN_IF_ERROR(IndexServices());
    WEFT_RETURN_IF_ERROR(ChooseTasks());
    NodeEdges();
    DependencyEdges();
    return Order();
  }

 private:
  Status IndexServices() {
    for (const auto& s : req_.services) specs_[s.name] = &s;
    changed_.insert(req_.changed_services.begin(), req_.changed_services.end());
    for (const auto* nodes : {&req_.before, &req_.after}) {
      for (const auto& n : *nodes) {
        if (n.id.empty()) return Status::Invalid("a node in the layout has an empty id");
        for (const auto& s : n.services) {
          if (!specs_.count(s))
            return Status::Invalid("node '" + n.id + "' runs service '" + s +
                                   "', which the plan request does not describe");
          present_.insert(s);
        }
      }
    }
    for (const auto* names : {&req_.only_services, &req_.changed_services})
      for (const auto& s : *names)
        if (!present_.count(s)) return Status::Invalid("service '" + s + "' is not on this cluster");
    return Status::Ok();
  }

  bool Defines(const std::string& service, Action action) const {
    const auto& actions = specs_.at(service)->actions;
    return std::find(actions.begin(), actions.end(), action) != actions.end();
  }

  Index Add(const std::string& node, Action action, const std::string& service = {}) {
    Index i = static_cast<Index>(tasks_.size());
    tasks_.push_back(PlannedTask{node, action, service, {}});
    if (!service.empty()) groups_[{action, service}].push_back(i);
    if (!node.empty()) by_node_[node].push_back(i);
    return i;
  }

  // Adds each action the service defines.
  void AddServiceTasks(const std::string& node, const std::string& service, std::initializer_list<Action> actions) {
    for (Action a : actions)
      if (Defines(service, a)) Add(node, a, service);
  }

  void AddReconfigure(const std::string& node, const std::string& service) {
    if (changed_.count(service)) {
      // Its definition changed (a new or, going back, an earlier version): install that one.
      AddServiceTasks(node, service, {Action::kInstall, Action::kConfigure, Action::kStop, Action::kStart});
    } else if (req_.reconfigure_only && !req_.reconfigure_only->count(node + "/" + service)) {
      return;  // an undo: the job it undoes never touched this one
    } else if (req_.restart) {
      AddServiceTasks(node, service, {Action::kConfigure, Action::kStop, Action::kStart});
    } else {
      AddServiceTasks(node, service, {Action::kConfigure});
    }
  }

  void AddNewNode(const std::string& node, const std::set<std::string>& services) {
    Add(node, Action::kCreate);
    Add(node, Action::kConfirm);
    if (!req_.without_bootstrap.count(node)) Add(node, Action::kBootstrap);
    for (const auto& s : services)
      for (Action a : kBringUp)
        if (Defines(s, a)) Add(node, a, s);
  }

  Status ChooseTasks() {
    const Layout before = ToLayout(req_.before);
    const Layout after = ToLayout(req_.after);
    auto in_before = [&](const std::string& id) { return before.count(id) > 0; };
    auto in_after = [&](const std::string& id) { return after.count(id) > 0; };

    switch (req_.operation) {
      case Operation::kCreate:
        for (const auto& n : req_.after) AddNewNode(n.id, after.at(n.id));
        break;
      case Operation::kDelete:
        for (const auto& n : req_.before) Add(n.id, Action::kDelete);
        break;
      case Operation::kScale:
        for (const auto& n : req_.after) {
          if (!in_before(n.id)) {
            AddNewNode(n.id, after.at(n.id));
          } else {
            for (const auto& s : after.at(n.id)) AddReconfigure(n.id, s);
          }
        }
        for (const auto& n : req_.before) {
          if (in_after(n.id)) continue;
          for (const auto& s : before.at(n.id)) AddServiceTasks(n.id, s, {Action::kStop});
          Add(n.id, Action::kDelete);
        }
        break;
      case Operation::kAddServices:
      case Operation::kUpgrade:
        for (const auto& n : req_.after) {
          if (!in_before(n.id))
            return Status::Invalid(std::string(OperationName(req_.operation)) + " cannot add node '" + n.id +
                                   "'; use scale to add nodes");
          const auto& had = before.at(n.id);
          for (const auto& s : after.at(n.id)) {
            if (!had.count(s)) {
              AddServiceTasks(n.id, s, {Action::kInstall, Action::kConfigure, Action::kInitialize, Action::kStart});
            } else if (req_.operation == Operation::kUpgrade) {
              if (changed_.count(s)) AddReconfigure(n.id, s);
            } else {
              AddReconfigure(n.id, s);
            }
          }
        }
        break;
      case Operation::kRemoveServices:
        for (const auto& n : req_.before) {
          const std::set<std::string> keep = in_after(n.id) ? after.at(n.id) : std::set<std::string>{};
          for (const auto& s : before.at(n.id)) {
            if (keep.count(s)) {
              AddReconfigure(n.id, s);
            } else {
              AddServiceTasks(n.id, s, {Action::kStop, Action::kRemove});
            }
          }
        }
        break;
      case Operation::kStart:
      case Operation::kStop:
      case Operation::kRestart: {
        std::set<std::string> targets = Targets();
        for (const auto& n : req_.after)
          for (const auto& s : after.at(n.id)) {
            if (!targets.count(s)) continue;
            if (req_.operation == Operation::kStart) AddServiceTasks(n.id, s, {Action::kStart});
            if (req_.operation == Operation::kStop) AddServiceTasks(n.id, s, {Action::kStop});
            if (req_.operation == Operation::kRestart) AddServiceTasks(n.id, s, {Action::kStop, Action::kStart});
          }
        break;
      }
      case Operation::kReconfigure:
        for (const auto& n : req_.after)
          for (const auto& s : after.at(n.id)) AddReconfigure(n.id, s);
        break;
    }
    return Status::Ok();
  }

  // start: the named services and everything they need at runtime;
  // stop/restart: the named services and everything that needs them.
  std::set<std::string> Targets() const {
    if (req_.only_services.empty()) return present_;
    std::set<std::string> out;
    std::vector<std::string> todo(req_.only_services.begin(), req_.only_services.end());
    while (!todo.empty()) {
      std::string s = todo.back();
      todo.pop_back();
      if (!out.insert(s).second) continue;
      if (req_.operation == Operation::kStart) {
        for (const auto& d : DirectDeps(s, /*runtime=*/true)) todo.push_back(d);
      } else {
        for (const auto& d : DirectDependents(s)) todo.push_back(d);
      }
    }
    return out;
  }

  // Present services that are `name` or provide it.
  std::vector<std::string> Resolve(const std::string& name) const {
    std::vector<std::string> out;
    for (const auto& s : present_) {
      const auto& provides = specs_.at(s)->provides;
      if (s == name || std::find(provides.begin(), provides.end(), name) != provides.end()) out.push_back(s);
    }
    return out;
  }

  std::set<std::string> DirectDeps(const std::string& service, bool runtime) const {
    const ServiceSpec& spec = *specs_.at(service);
    std::set<std::string> out;
    for (const auto* names : runtime ? std::array{&spec.runtime_requires, &spec.runtime_uses}
                                     : std::array{&spec.install_requires, &spec.install_uses})
      for (const auto& name : *names)
        for (const auto& d : Resolve(name))
          if (d != service) out.insert(d);
    return out;
  }

  std::set<std::string> DirectDependents(const std::string& service) const {
    std::set<std::string> out;
    for (const auto& s : present_)
      if (s != service && DirectDeps(s, /*runtime=*/true).count(service)) out.insert(s);
    return out;
  }

  // Dependencies of `service` that define `action`, walking through those that don't.
  std::set<std::string> DepsDefining(const std::string& service, bool runtime, Action action) const {
    std::set<std::string> out, seen{service};
    std::vector<std::string> todo;
    for (const auto& d : DirectDeps(service, runtime)) todo.push_back(d);
    while (!todo.empty()) {
      std::string d = todo.back();
      todo.pop_back();
      if (!seen.insert(d).second) continue;
      if (Defines(d, action)) {
        out.insert(d);
      } else {
        for (const auto& up : DirectDeps(d, runtime)) todo.push_back(up);
      }
    }
    return out;
  }

  // Runtime dependents of `service` that define STOP, walking through those that don't.
  std::set<std::string> DependentsDefiningStop(const std::string& service) const {
    std::set<std::string> out, seen{service};
    std::vector<std::string> todo;
    for (const auto& d : DirectDependents(service)) todo.push_back(d);
    while (!todo.empty()) {
      std::string d = todo.back();
      todo.pop_back();
      if (!seen.insert(d).second) continue;
      if (Defines(d, Action::kStop)) {
        out.insert(d);
      } else {
        for (const auto& down : DirectDependents(d)) todo.push_back(down);
      }
    }
    return out;
  }

  void Edge(Index from, Index to) { tasks_[to].after.push_back(from); }

  // Every task of `preds` (the group (action, service)) precedes every task of `succs`.
  void Connect(Action action, const std::string& service, const std::vector<Index>& succs) {
    auto it = groups_.find({action, service});
    if (it == groups_.end() || succs.empty()) return;
    const std::vector<Index> preds = it->second;  // copy: Add() may grow groups_
    if (preds.size() > 1 && succs.size() > 1) {
      auto [j, fresh] = joins_.try_emplace({action, service}, 0);
      if (fresh) {
        j->second = Add({}, Action::kJoin);
        tasks_[j->second].service = service;
        tasks_[j->second].after = preds;
        tasks_[j->second].joined = action;
      }
      for (Index s : succs) Edge(j->second, s);
    } else {
      for (Index p : preds)
        for (Index s : succs) Edge(p, s);
    }
  }

  std::vector<Index> Group(Action action, const std::string& service) const {
    auto it = groups_.find({action, service});
    return it == groups_.end() ? std::vector<Index>{} : it->second;
  }

  void NodeEdges() {
    for (const auto& [node, indices] : by_node_) {
      std::vector<Index> node_level;
      std::map<std::string, std::vector<Index>> per_service;
      Index deletion = 0;
      bool has_delete = false;
      for (Index i : indices) {
        const PlannedTask& t = tasks_[i];
        if (t.action == Action::kDelete) {
          deletion = i;
          has_delete = true;
        } else if (t.service.empty()) {
          node_level.push_back(i);
        } else {
          per_service[t.service].push_back(i);
        }
      }
      for (std::size_t k = 1; k < node_level.size(); ++k) Edge(node_level[k - 1], node_level[k]);
      for (auto& [service, list] : per_service) {
        std::stable_sort(list.begin(), list.end(), [&](Index a, Index b) {
          auto pos = [](Action x) { return std::find(kServiceOrder.begin(), kServiceOrder.end(), x); };
          return pos(tasks_[a].action) < pos(tasks_[b].action);
        });
        if (!node_level.empty()) Edge(node_level.back(), list.front());
        for (std::size_t k = 1; k < list.size(); ++k) Edge(list[k - 1], list[k]);
      }
      if (has_delete)
        for (Index i : indices)
          if (i != deletion) Edge(i, deletion);
    }
  }

  void DependencyEdges() {
    std::vector<std::pair<Action, std::string>> keys;
    for (const auto& [key, list] : groups_) keys.push_back(key);
    for (const auto& [action, service] : keys) {
      if (action == Action::kInstall) {
        for (const auto& d : DepsDefining(service, /*runtime=*/false, Action::kInstall))
          Connect(Action::kInstall, d, Group(Action::kInstall, service));
      } else if (action == Action::kInitialize || action == Action::kStart) {
        for (const auto& d : DepsDefining(service, /*runtime=*/true, Action::kStart))
          Connect(Action::kStart, d, Group(action, service));
      } else if (action == Action::kStop) {
        for (const auto& d : DependentsDefiningStop(service)) Connect(Action::kStop, d, Group(Action::kStop, service));
      }
    }
    ConfirmEdges();
  }

  // A new node's addresses are known once its CONFIRM reported them. Growing:
  // the configuration of the nodes that stay may name the new ones, so it
  // waits until every new node has confirmed. When the config or a service's
  // fields name addresses (`wait_for_addresses`), every BOOTSTRAP and every
  // service task waits for them (a new node's service tasks already follow its
  // BOOTSTRAP; on a new node without one, they wait themselves). One JOIN of every CONFIRM, in the plan, so a dry run shows
  // exactly the tasks its job runs.
  void ConfirmEdges() {
    std::vector<Index> confirms, waiting;
    for (Index i = 0; i < tasks_.size(); ++i) {
      const PlannedTask& t = tasks_[i];
      if (t.action == Action::kConfirm) confirms.push_back(i);
      const bool service_task = t.action >= Action::kInstall && t.action <= Action::kRemove;
      const bool kept_node_service = service_task && !NodeIsNew(t.node);
      const bool unprepared_node_service = service_task && req_.without_bootstrap.count(t.node) > 0;
      const bool kept_configure = req_.operation == Operation::kScale && t.action == Action::kConfigure;
      if (req_.wait_for_addresses
              ? t.action == Action::kBootstrap || kept_node_service || unprepared_node_service
              : kept_node_service && kept_configure)
        waiting.push_back(i);
    }
    if (confirms.empty() || waiting.empty()) return;
    Index join = confirms.front();
    if (confirms.size() > 1) {
      join = Add({}, Action::kJoin);
      tasks_[join].after = confirms;
      tasks_[join].joined = Action::kConfirm;
    }
    for (Index w : waiting) Edge(join, w);
  }

  bool NodeIsNew(const std::string& node) const {
    for (Index i : by_node_.at(node))
      if (tasks_[i].action == Action::kCreate) return true;
    return false;
  }

  // Kahn's algorithm, always releasing the earliest-made ready task, so the
  // order is deterministic.
  Result<std::vector<PlannedTask>> Order() {
    const std::size_t n = tasks_.size();
    std::vector<std::vector<Index>> succs(n);
    std::vector<std::size_t> indegree(n, 0);
    for (Index i = 0; i < n; ++i) {
      auto& after = tasks_[i].after;
      std::sort(after.begin(), after.end());
      after.erase(std::unique(after.begin(), after.end()), after.end());
      indegree[i] = after.size();
      for (Index p : after) succs[p].push_back(i);
    }
    std::priority_queue<Index, std::vector<Index>, std::greater<>> ready;
    for (Index i = 0; i < n; ++i)
      if (indegree[i] == 0) ready.push(i);
    std::vector<Index> order;
    order.reserve(n);
    while (!ready.empty()) {
      Index i = ready.top();
      ready.pop();
      order.push_back(i);
      for (Index s : succs[i])
        if (--indegree[s] == 0) ready.push(s);
    }
    if (order.size() != n) return CycleError(indegree);

    std::vector<Index> new_index(n);
    for (Index k = 0; k < n; ++k) new_index[order[k]] = k;
    std::vector<PlannedTask> out;
    out.reserve(n);
    for (Index old : order) {
      PlannedTask t = std::move(tasks_[old]);
      if (t.action == Action::kJoin) t.node.clear();
      for (Index& p : t.after) p = new_index[p];
      std::sort(t.after.begin(), t.after.end());
      out.push_back(std::move(t));
    }
    return out;
  }

  Status CycleError(const std::vector<std::size_t>& indegree) const {
    // Every task left has a predecessor that is also left: walk back until one repeats.
    Index at = 0;
    while (indegree[at] == 0) ++at;
    std::vector<Index> path;
    std::map<Index, std::size_t> seen;
    while (!seen.count(at)) {
      seen[at] = path.size();
      path.push_back(at);
      for (Index p : tasks_[at].after)
        if (indegree[p] > 0) {
          at = p;
          break;
        }
    }
    std::string cycle;
    std::set<std::string> named;
    for (std::size_t k = seen[at]; k < path.size(); ++k) {
      const PlannedTask& t = tasks_[path[k]];
      // A join stands for the step it joins: named, and counted once, as that step.
      const std::string step =
          std::string(ActionName(t.action == Action::kJoin ? t.joined : t.action)) + " of '" + t.service + "'";
      if (t.service.empty() || !named.insert(step).second) continue;
      if (!cycle.empty()) cycle += " ← ";
      cycle += step;
    }
    return Status::Invalid("service dependencies form a cycle (" + cycle +
                           "); remove one of these requires/uses so the services can be ordered");
  }

  const PlanRequest& req_;
  std::map<std::string, const ServiceSpec*> specs_;
  std::set<std::string> present_;
  std::set<std::string> changed_;
  std::vector<PlannedTask> tasks_;
  std::map<std::pair<Action, std::string>, std::vector<Index>> groups_;
  std::map<std::string, std::vector<Index>> by_node_;
  std::map<std::pair<Action, std::string>, Index> joins_;

};

}  // namespace

std::string_view ActionName(Action action) {
  if (action == Action::kJoin) return "JOIN";
  const int n = static_cast<int>(action);
  const char* name = n >= static_cast<int>(Action::kCreate) && n <= static_cast<int>(Action::kDelete)
                         ? weft_action_name(1u << (n - 1))
                         : nullptr;
  return name ? std::string_view(name) : std::string_view("UNKNOWN");
}

Result<Action> ParseAction(std::string_view name) {
  for (int a = static_cast<int>(Action::kCreate); a <= static_cast<int>(Action::kJoin); ++a)
    if (ActionName(static_cast<Action>(a)) == name) return static_cast<Action>(a);
  return Status::Invalid("unknown action '" + std::string(name) +
                         "'; expected one of CREATE CONFIRM BOOTSTRAP INSTALL CONFIGURE INITIALIZE START STOP "
                         "REMOVE DELETE");
}

std::string_view OperationName(Operation operation) {
  for (const auto& [o, name] : kOperationNames)
    if (o == operation) return name;
  return "unknown";
}

Result<Operation> ParseOperation(std::string_view name) {
  for (const auto& [o, n] : kOperationNames)
    if (n == name) return o;
  std::string known;
  for (const auto& [o, n] : kOperationNames) known += (known.empty() ? "" : ", ") + std::string(n);
  return Status::Invalid("unknown operation '" + std::string(name) + "'; expected one of " + known);
}

std::string Plan::TaskId(std::uint32_t index) const {
  const PlannedTask& t = tasks_.at(index);
  std::string id = t.action == Action::kJoin ? "join" : t.node;
  id += '/';
  id += ActionName(t.action == Action::kJoin ? t.joined : t.action);
  if (!t.service.empty()) {
    id += '/';
    id += t.service;
  } else if (t.action == Action::kJoin) {
    id += "/nodes";
  }
  return id;
}

std::vector<std::vector<std::uint32_t>> Plan::Stages() const {
  std::vector<std::size_t> level(tasks_.size(), 0);
  std::vector<std::vector<std::uint32_t>> stages;
  for (Index i = 0; i < tasks_.size(); ++i) {
    const PlannedTask& t = tasks_[i];
    std::size_t deepest = 0;
    bool any = false;
    for (Index p : t.after) {
      deepest = std::max(deepest, level[p]);
      any = true;
    }
    if (t.action == Action::kJoin) {
      level[i] = deepest;  // a JOIN adds no step of its own
      continue;
    }
    level[i] = any ? deepest + 1 : 0;
    if (stages.size() <= level[i]) stages.resize(level[i] + 1);
    stages[level[i]].push_back(i);
  }
  // A task whose only predecessor is a JOIN of roots sits one past the roots;
  // drop empty levels that such gaps leave.
  stages.erase(std::remove_if(stages.begin(), stages.end(), [](const auto& s) { return s.empty(); }), stages.end());
  return stages;
}

json Plan::ToJson() const {
  json tasks = json::array();
  for (Index i = 0; i < tasks_.size(); ++i) {
    const PlannedTask& t = tasks_[i];
    json after = json::array();
    for (Index p : t.after) after.push_back(TaskId(p));
    tasks.push_back({{"id", TaskId(i)},
                     {"node", t.node},
                     {"action", std::string(ActionName(t.action))},
                     {"service", t.service},
                     {"after", std::move(after)}});
  }
  json stages = json::array();
  for (const auto& stage : Stages()) {
    json ids = json::array();
    for (Index i : stage) ids.push_back(TaskId(i));
    stages.push_back(std::move(ids));
  }
  return {{"tasks", std::move(tasks)}, {"stages", std::move(stages)}};
}

std::string BootstrapPlugin(const std::vector<std::string>& automators, const DeclaredActions* declared) {
  if (!declared) return automators.empty() ? std::string() : automators.front();
  const std::string* unknown = nullptr;
  for (const std::string& type : automators) {
    auto it = declared->find(type);
    if (it == declared->end()) {
      if (!unknown) unknown = &type;
    } else if (it->second & WEFT_ACTION_BOOTSTRAP) {
      return type;
    }
  }
  return unknown ? *unknown : std::string();
}

bool NamesAddresses(const json& doc) {
  if (doc.is_string()) {
    const std::string& text = doc.get_ref<const std::string&>();
    return text.find("%ip.") != std::string::npos || text.find("(ip.") != std::string::npos;
  }
  if (doc.is_object() || doc.is_array())
    for (const json& v : doc)
      if (NamesAddresses(v)) return true;
  return false;
}

Result<Plan> MakePlan(const PlanRequest& request) {
  Builder builder(request);
  Plan plan;
  WEFT_ASSIGN_OR_RETURN(plan.tasks_, builder.Build());
  return plan;
}

}  // namespace weft::planner

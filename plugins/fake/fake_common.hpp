// Shared by the fake provider and the fake automator (test doubles): reading
// their fields and the deterministic waits and failures they simulate.
// Header-only, compiled into each plugin; nothing here crosses the ABI.
// Stateless functions: safe to call from several runs at once.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "weft/plugin.hpp"

namespace weft::fake {

using json = nlohmann::json;

struct Knobs {
  std::int64_t latency_ms = 0;
  std::int64_t jitter_ms = 0;
  double failure_rate = 0;
  std::string fail_actions;  // comma-separated action names
  std::int64_t fail_attempts = 0;  // fail_actions fail attempts 1..N only; 0: every attempt
  bool jitter_by_key = false;  // jitter_by = "task_key": the jitter follows the task's key, not its id
  std::string effects_file;    // each action that succeeds appends a line here (tests count effects)
  std::int64_t result_kb = 0;  // each action that succeeds returns this many KiB as result_field
  std::string result_field = "blob";
  int fail_code = WEFT_ERR_FAILED;  // what fail_actions fail with
};

inline std::vector<weft::sdk::Field> KnobFields() {
  return {
      {.name = "latency_ms",
       .label = "Latency (ms)",
       .type = WEFT_FIELD_INTEGER,
       .default_json = "0",
       .description = "how long every action takes"},
      {.name = "jitter_ms",
       .label = "Jitter (ms)",
       .type = WEFT_FIELD_INTEGER,
       .default_json = "0",
       .description = "extra latency from 0 to jitter_ms, fixed per task id (or per task key, see jitter_by)"},
      {.name = "jitter_by",
       .label = "Jitter by",
       .type = WEFT_FIELD_STRING,
       .default_json = "\"task_id\"",
       .description =
           "what fixes the jitter: \"task_id\", or \"task_key\" so the same planned task waits as long in every job "
           "and in a task enqueued by hand with the same \"task_key\""},
      {.name = "failure_rate",
       .label = "Failure rate",
       .type = WEFT_FIELD_NUMBER,
       .default_json = "0",
       .description = "probability 0..1 that an action fails; decided by task id and attempt, so runs are repeatable"},
      {.name = "fail_actions",
       .label = "Failing actions",
       .type = WEFT_FIELD_STRING,
       .default_json = "\"\"",
       .description = "comma-separated actions that always fail, e.g. \"CONFIRM,START\""},
      {.name = "fail_attempts",
       .label = "Failing attempts",
       .type = WEFT_FIELD_INTEGER,
       .default_json = "0",
       .description = "fail_actions fail only the first N attempts of a task, then succeed; 0: every attempt fails"},
      {.name = "effects_file",
       .label = "Effects file",
       .type = WEFT_FIELD_STRING,
       .default_json = "\"\"",
       .description = "each action that succeeds appends \"<task_id> <attempt> <action> <task_key>\" to this file"},
      {.name = "result_kb",
       .label = "Result size (KiB)",
       .type = WEFT_FIELD_INTEGER,
       .default_json = "0",
       .description = "each action that succeeds returns a string of this many KiB as the result field result_field"},
      {.name = "result_field",
       .label = "Result field",
       .type = WEFT_FIELD_STRING,
       .default_json = "\"blob\"",
       .description = "the result field that result_kb fills"},
      {.name = "fail_code",
       .label = "Failure code",
       .type = WEFT_FIELD_STRING,
       .default_json = "\"FAILED\"",
       .description = "the code fail_actions fail with: FAILED, INVALID, UNSUPPORTED, TIMEOUT or INTERNAL"},
  };
}

// splitmix64: a fixed, well-mixed function so the same task behaves the same way.
inline std::uint64_t Mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

inline std::uint64_t HashString(const std::string& s) {
  std::uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

inline json ParseTask(const weft::sdk::Task& task) {
  json t = json::parse(task.Json(), nullptr, /*allow_exceptions=*/false);
  if (!t.is_object()) throw weft::sdk::Error(WEFT_ERR_INVALID, "the task JSON is not an object");
  return t;
}

// The object at `path` (e.g. {"provider","fields"}), or the top-level "fields", or {}.
inline json FieldsAt(const json& task, std::initializer_list<const char*> path) {
  const json* at = &task;
  for (const char* key : path) {
    auto it = at->find(key);
    if (it == at->end() || !it->is_object()) {
      at = nullptr;
      break;
    }
    at = &*it;
  }
  if (at) return *at;
  auto it = task.find("fields");
  return it != task.end() && it->is_object() ? *it : json::object();
}

inline Knobs ReadKnobs(const json& fields) {
  Knobs k;
  auto integer = [&](const char* name, std::int64_t* out) {
    auto it = fields.find(name);
    if (it == fields.end() || it->is_null()) return;
    if (!it->is_number_integer() || it->get<std::int64_t>() < 0) {
      throw weft::sdk::Error(WEFT_ERR_INVALID,
                             std::string("field '") + name + "' must be a non-negative integer, got " + it->dump());
    }
    *out = it->get<std::int64_t>();
  };
  integer("latency_ms", &k.latency_ms);
  integer("jitter_ms", &k.jitter_ms);
  integer("fail_attempts", &k.fail_attempts);
  if (auto it = fields.find("failure_rate"); it != fields.end() && !it->is_null()) {
    if (!it->is_number() || it->get<double>() < 0 || it->get<double>() > 1) {
      throw weft::sdk::Error(WEFT_ERR_INVALID, "field 'failure_rate' must be a number from 0 to 1, got " + it->dump());
    }
    k.failure_rate = it->get<double>();
  }
  if (auto it = fields.find("fail_actions"); it != fields.end() && !it->is_null()) {
    if (!it->is_string()) {
      throw weft::sdk::Error(WEFT_ERR_INVALID, "field 'fail_actions' must be a string like \"CREATE,START\", got " +
                                                   it->dump());
    }
    k.fail_actions = it->get<std::string>();
  }
  if (auto it = fields.find("jitter_by"); it != fields.end() && !it->is_null()) {
    if (!it->is_string() || (*it != "task_id" && *it != "task_key")) {
      throw weft::sdk::Error(WEFT_ERR_INVALID,
                             "field 'jitter_by' must be \"task_id\" or \"task_key\", got " + it->dump());
    }
    k.jitter_by_key = *it == "task_key";
  }
  if (auto it = fields.find("effects_file"); it != fields.end() && it->is_string()) k.effects_file = it->get<std::string>();
  integer("result_kb", &k.result_kb);
  if (auto it = fields.find("result_field"); it != fields.end() && it->is_string()) k.result_field = it->get<std::string>();
  if (auto it = fields.find("fail_code"); it != fields.end() && !it->is_null()) {
    static const std::pair<const char*, int> kCodes[] = {{"FAILED", WEFT_ERR_FAILED},
                                                         {"INVALID", WEFT_ERR_INVALID},
                                                         {"UNSUPPORTED", WEFT_ERR_UNSUPPORTED},
                                                         {"TIMEOUT", WEFT_ERR_TIMEOUT},
                                                         {"INTERNAL", WEFT_ERR_INTERNAL}};
    bool known = false;
    for (const auto& [name, code] : kCodes)
      if (it->is_string() && *it == name) {
        k.fail_code = code;
        known = true;
      }
    if (!known)
      throw weft::sdk::Error(WEFT_ERR_INVALID, "field 'fail_code' must be one of FAILED, INVALID, UNSUPPORTED, "
                                               "TIMEOUT, INTERNAL, got " + it->dump());
  }
  return k;
}

inline bool ListsAction(const std::string& csv, const std::string& action) {
  std::stringstream in(csv);
  std::string item;
  while (std::getline(in, item, ',')) {
    auto b = item.find_first_not_of(" \t");
    auto e = item.find_last_not_of(" \t");
    if (b != std::string::npos && item.substr(b, e - b + 1) == action) return true;
  }
  return false;
}

// Appends one line for an action that took effect, in one write(2) with
// O_APPEND so that lines of concurrent runs (and processes) never interleave.
inline void RecordEffect(const std::string& path, const json& t, const std::string& action) {
  const std::string line = std::to_string(t.value("task_id", std::int64_t{0})) + " " +
                           std::to_string(t.value("attempt", std::int64_t{1})) + " " + action + " " +
                           t.value("task_key", std::string("-")) + "\n";
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  const bool written = fd >= 0 && ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  if (fd >= 0) ::close(fd);
  if (!written) throw weft::sdk::Error(WEFT_ERR_FAILED, "cannot record the effect in " + path);
}

// Sleeps the configured latency (plus per-task jitter) in small steps so a
// cancel is noticed within ~10 ms, then fails when the knobs say so. The wait
// is logged ("fake: waits N ms") so a benchmark can read what each task slept.
inline void Simulate(const weft::sdk::Task& task, const json& t, const Knobs& k, const std::string& action) {
  const std::int64_t task_id = t.value("task_id", std::int64_t{0});
  const std::int64_t attempt = t.value("attempt", std::int64_t{1});
  std::int64_t wait_ms = k.latency_ms;
  if (k.jitter_ms > 0) {
    const std::uint64_t seed = k.jitter_by_key ? HashString(t.value("task_key", std::string()))
                                               : static_cast<std::uint64_t>(task_id);
    wait_ms += static_cast<std::int64_t>(Mix(seed) % static_cast<std::uint64_t>(k.jitter_ms + 1));
  }
  task.Info("fake: waits " + std::to_string(wait_ms) + " ms");
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  int reported = 0;
  while (std::chrono::steady_clock::now() < end) {
    if (task.Cancelled()) throw weft::sdk::Error(WEFT_ERR_CANCELLED, action + " cancelled by the host");
    auto left = end - std::chrono::steady_clock::now();
    int percent = wait_ms > 0 ? static_cast<int>(100 - 100 * std::chrono::duration_cast<std::chrono::milliseconds>(
                                                                 left).count() / wait_ms)
                              : 100;
    if (percent >= reported + 25) {
      reported = percent - percent % 25;
      task.Progress(reported, action + " in progress");
    }
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(left, std::chrono::milliseconds(10)));
  }
  if (task.Cancelled()) throw weft::sdk::Error(WEFT_ERR_CANCELLED, action + " cancelled by the host");
  if (ListsAction(k.fail_actions, action) && (k.fail_attempts == 0 || attempt <= k.fail_attempts)) {
    throw weft::sdk::Error(k.fail_code, action + " fails because fail_actions lists it (attempt " +
                                                std::to_string(attempt) + ", fake plugin)");
  }
  if (k.failure_rate > 0) {
    std::uint64_t r = Mix(static_cast<std::uint64_t>(task_id) * 1000003ULL + static_cast<std::uint64_t>(attempt));
    double u = static_cast<double>(r >> 11) / static_cast<double>(1ULL << 53);  // [0, 1)
    if (u < k.failure_rate) {
      throw weft::sdk::Error(WEFT_ERR_FAILED, action + " failed at random (failure_rate " +
                                                  std::to_string(k.failure_rate) + ", fake plugin)");
    }
  }
  if (!k.effects_file.empty()) RecordEffect(k.effects_file, t, action);
  if (k.result_kb > 0) task.SetResultString(k.result_field, std::string(static_cast<std::size_t>(k.result_kb) * 1024, 'b'));
}

inline std::string ActionName(weft_action action) {
  const char* name = weft_action_name(action);
  return name ? name : "UNKNOWN";
}

}  // namespace weft::fake

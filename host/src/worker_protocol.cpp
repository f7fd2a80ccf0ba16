#include "weft/host/worker_protocol.hpp"

#include <nlohmann/json.hpp>

namespace weft::host {
namespace {

using json = nlohmann::json;

constexpr struct {
  WorkerMessage::Kind kind;
  const char* key;   // "ev" or "cmd"
  const char* name;
} kKinds[] = {
    {WorkerMessage::Kind::kReady, "ev", "ready"},     {WorkerMessage::Kind::kStart, "ev", "start"},
    {WorkerMessage::Kind::kRan, "ev", "ran"},         {WorkerMessage::Kind::kEnd, "ev", "end"},
    {WorkerMessage::Kind::kDrained, "ev", "drained"}, {WorkerMessage::Kind::kCancel, "cmd", "cancel"},
    {WorkerMessage::Kind::kDrain, "cmd", "drain"},    {WorkerMessage::Kind::kStop, "cmd", "stop"},
    {WorkerMessage::Kind::kRun, "cmd", "run"},        {WorkerMessage::Kind::kSkip, "cmd", "skip"},
    {WorkerMessage::Kind::kDraining, "ev", "draining"},
};

bool HasTask(WorkerMessage::Kind kind) {
  return kind == WorkerMessage::Kind::kStart || kind == WorkerMessage::Kind::kRan ||
         kind == WorkerMessage::Kind::kEnd || kind == WorkerMessage::Kind::kCancel ||
         kind == WorkerMessage::Kind::kRun || kind == WorkerMessage::Kind::kSkip;
}

}  // namespace

std::string EncodeWorkerMessage(const WorkerMessage& m) {
  json j = json::object();
  for (const auto& k : kKinds) {
    if (k.kind == m.kind) j[k.key] = k.name;
  }
  if (HasTask(m.kind)) {
    j["task_id"] = m.task_id;
    j["attempt"] = m.attempt;
  }
  if (m.kind == WorkerMessage::Kind::kStart) {
    j["plugin"] = m.plugin;
    j["action"] = m.action;
    j["tenant"] = m.tenant;
    if (!m.node.empty()) j["node"] = m.node;
  }
  if (m.kind == WorkerMessage::Kind::kRan) {
    j["outcome"] = m.outcome;
    j["cache"] = {m.cache_hits, m.cache_misses, m.cache_fetched_bytes};
  }
  if (m.kind == WorkerMessage::Kind::kCancel || m.kind == WorkerMessage::Kind::kSkip) j["reason"] = m.reason;
  if (m.kind == WorkerMessage::Kind::kReady) j["plugins"] = m.plugins;
  // dump() escapes control characters, so the line never holds a raw '\n'.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<WorkerMessage> ParseWorkerMessage(std::string_view line) {
  json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return Status::Invalid("worker channel: not a JSON object: " + std::string(line.substr(0, 200)));
  }
  WorkerMessage m;
  bool known = false;
  for (const auto& k : kKinds) {
    auto it = j.find(k.key);
    if (it != j.end() && it->is_string() && *it == k.name) {
      m.kind = k.kind;
      known = true;
      break;
    }
  }
  if (!known) return Status::Invalid("worker channel: unknown message " + std::string(line.substr(0, 200)));
  auto integer = [&](const char* key, std::int64_t* out) -> Status {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number_integer() || it->get<std::int64_t>() < 1) {
      return Status::Invalid(std::string("worker channel: '") + key + "' must be a positive integer in " +
                             std::string(line.substr(0, 200)));
    }
    *out = it->get<std::int64_t>();
    return Status::Ok();
  };
  auto string = [&](const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  if (HasTask(m.kind)) {
    WEFT_RETURN_IF_ERROR(integer("task_id", &m.task_id));
    WEFT_RETURN_IF_ERROR(integer("attempt", &m.attempt));
  }
  m.plugin = string("plugin");
  m.action = string("action");
  m.tenant = string("tenant");
  m.node = string("node");
  m.reason = string("reason");
  if (auto it = j.find("plugins"); it != j.end() && it->is_number_integer()) m.plugins = it->get<int>();
  m.outcome = string("outcome");
  // Counts from an older worker may be missing; anything but three counts is ignored.
  if (auto it = j.find("cache"); it != j.end() && it->is_array() && it->size() == 3) {
    std::uint64_t* out[] = {&m.cache_hits, &m.cache_misses, &m.cache_fetched_bytes};
    for (std::size_t i = 0; i < 3; ++i)
      if ((*it)[i].is_number_unsigned()) *out[i] = (*it)[i].get<std::uint64_t>();
  }
  return m;
}

void LineBuffer::Append(std::string_view bytes) {
  while (!bytes.empty()) {
    if (skipping_) {
      auto nl = bytes.find('\n');
      if (nl == std::string_view::npos) return;
      skipping_ = false;
      bytes.remove_prefix(nl + 1);
      continue;
    }
    auto nl = bytes.find('\n');
    std::string_view part = nl == std::string_view::npos ? bytes : bytes.substr(0, nl + 1);
    // Only the unfinished tail can grow past the cap.
    std::size_t tail = buffer_.size() - (buffer_.rfind('\n') == std::string::npos ? 0 : buffer_.rfind('\n') + 1);
    if (nl == std::string_view::npos && tail + part.size() > kMaxLineBytes) {
      buffer_.resize(buffer_.size() - tail);
      ++dropped_;
      skipping_ = true;
      return;
    }
    buffer_.append(part);
    bytes.remove_prefix(part.size());
  }
}

std::optional<std::string> LineBuffer::Next() {
  auto nl = buffer_.find('\n');
  if (nl == std::string::npos) return std::nullopt;
  std::string line = buffer_.substr(0, nl);
  buffer_.erase(0, nl + 1);
  return line;
}

}  // namespace weft::host

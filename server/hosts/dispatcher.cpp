#include "weft/server/hosts/dispatcher.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <functional>
#include <string_view>
#include <utility>
#include <vector>

#include "weft/common/wire.hpp"

namespace weft::hosts {
namespace {

json ParseStored(const std::string& text) {
  json v = json::parse(text, nullptr, false);
  return v.is_discarded() ? json::object() : v;
}

// The same for every attempt of a task, and different for every task: a
// provider that finds a machine it made under this key hands that one back
// instead of making a second one when a lost attempt is run again.
std::string IdempotencyKey(const store::TaskRecord& t) {
  if (t.cluster_id.empty()) return "task/" + std::to_string(t.id);
  return t.cluster_id + "/" + t.node_id + "/" + std::to_string(t.id);
}

// A member of `more`: from the tree, or text a decorator made (TaskTexts).
struct More {
  std::string_view name;
  const json* value = nullptr;
  const std::string* text = nullptr;
};

// The members of `more` and `texts` in key order, as a json object would
// have them; a name in both is the tree's.
std::vector<More> MoreMembers(const json& more, const TaskTexts& texts) {
  static const json kNothing = json::object();
  const json::object_t& tree = (more.is_object() ? more : kNothing).get_ref<const json::object_t&>();
  // A decorator gives a few texts: sorted by name in place, then merged with the tree's (sorted) members.
  std::vector<More> text;
  text.reserve(texts.members.size());
  for (const TaskTexts::Member& m : texts.members)
    if (m.text) text.push_back({m.name, nullptr, m.text.get()});
  for (std::size_t i = 1; i < text.size(); ++i)  // insertion sort: stable, and no buffer for so few
    for (std::size_t j = i; j > 0 && text[j].name < text[j - 1].name; --j) std::swap(text[j], text[j - 1]);
  std::vector<More> out;
  out.reserve(tree.size() + text.size());
  auto t = text.begin();
  for (const auto& [name, value] : tree) {
    for (; t != text.end() && t->name <= name; ++t)
      if (t->name < name && (out.empty() || out.back().name != t->name)) out.push_back(*t);
    out.push_back({name, &value, nullptr});
  }
  for (; t != text.end(); ++t)
    if (out.empty() || out.back().name != t->name) out.push_back(*t);
  return out;
}

// JSON text written straight into a buffer (TaskText): a task is a few
// hundred bytes of short members, and appending them piece by piece to a
// std::string cost a call and a capacity check per piece (a quote, a key, a
// comma), more than the bytes themselves. Room is made ahead of each piece.
class TextWriter {
 public:
  TextWriter(std::string& out, std::size_t room) : out_(out) {
    out_.resize(room);
    p_ = out_.data();
    end_ = p_ + out_.size();
  }
  // The text written; the writer is done.
  void Finish() { out_.resize(static_cast<std::size_t>(p_ - out_.data())); }

  template <std::size_t N>
  void Literal(const char (&text)[N]) {
    Room(N - 1);
    std::memcpy(p_, text, N - 1);
    p_ += N - 1;
  }
  void Raw(std::string_view text) {
    Room(text.size());
    std::memcpy(p_, text.data(), text.size());
    p_ += text.size();
  }
  void Char(char c) {
    Room(1);
    *p_++ = c;
  }
  void Int(std::int64_t v) {
    Room(24);  // every 64-bit integer
    p_ = std::to_chars(p_, end_, v).ptr;
  }
  // `text` as a JSON string, as wire::AppendJsonString writes it: text to copy
  // as it is (all of a task's own members in practice) in one pass; any
  // other is left to AppendJsonString.
  void String(std::string_view text) {
    Room(text.size() + 2);
    char* q = p_;
    *q++ = '"';
    for (const char c : text) {
      const auto u = static_cast<unsigned char>(c);
      if (u < 0x20 || u == '"' || u == '\\' || u >= 0x80) {
        Through([text](std::string& out) { wire::AppendJsonString(out, text); });
        return;
      }
      *q++ = c;
    }
    *q++ = '"';
    p_ = q;
  }
  void Json(const json& value) {
    Through([&value](std::string& out) { wire::AppendJson(out, value); });
  }

 private:
  void Room(std::size_t n) {
    if (static_cast<std::size_t>(end_ - p_) < n) Grow(n);
  }
  void Grow(std::size_t n) {
    const std::size_t at = static_cast<std::size_t>(p_ - out_.data());
    out_.resize(std::max(2 * out_.size(), at + n + 256));
    p_ = out_.data() + at;
    end_ = out_.data() + out_.size();
  }
  // Appends through `append` (to the text so far), then goes on after it.
  template <typename Append>
  void Through(const Append& append) {
    out_.resize(static_cast<std::size_t>(p_ - out_.data()));
    append(out_);
    const std::size_t at = out_.size();
    out_.resize(at + 256);
    p_ = out_.data() + at;
    end_ = out_.data() + out_.size();
  }

  std::string& out_;
  char* p_;
  char* end_;
};

// The task as the plugin sees it, written straight out as JSON text: its own
// members and `more`'s (the payload's and the decorators'), in key order, as
// a json object would have them; a member of `more` under the name of one of
// the task's own is left out. Building a json tree only to write it out cost
// more than the rest of handing the task out, besides the store.
std::string TaskText(const store::TaskRecord& t, std::int64_t lease_ms, const json& more, const TaskTexts& texts) {
  const std::vector<More> extra = MoreMembers(more, texts);
  // Room for all of it at once: the shared parts (JSON text already) are most
  // of a task, and growing the text as it is written copied it several times.
  std::size_t size = 256 + t.action.size() + t.cluster_id.size() * 2 + t.job_id.size() + t.node_id.size() * 2 +
                     t.plugin.size() + t.tenant.size();
  for (const More& m : extra)
    size += m.name.size() + (m.text ? m.text->size() : m.value->is_binary() ? m.value->get_binary().size() : 64);
  std::string out;
  TextWriter w(out, size);
  w.Char('{');
  auto next = extra.begin();
  bool first = true;
  auto comma = [&] {
    if (!first) w.Char(',');
    first = false;
  };
  // Writes the next member of `more`.
  auto write_next = [&] {
    comma();
    w.String(next->name);
    w.Char(':');
    if (next->text) {
      w.Raw(*next->text);
    } else {
      w.Json(*next->value);
    }
    ++next;
  };
  // Writes the members of `more` that sort before `name`, then the key `name` ("\"name\":").
  auto key = [&]<std::size_t N>(const char (&quoted)[N]) {
    const std::string_view name(quoted + 1, N - 4);
    while (next != extra.end() && next->name < name) write_next();
    if (next != extra.end() && next->name == name) ++next;
    comma();
    w.Literal(quoted);
  };
  key("\"action\":");
  w.String(t.action);
  key("\"attempt\":");
  w.Int(t.attempt);
  key("\"cluster_id\":");
  w.String(t.cluster_id);
  key("\"idempotency_key\":");
  // IdempotencyKey's text, without making it first.
  if (t.cluster_id.empty()) {
    w.Literal("\"task/");
    w.Int(t.id);
    w.Char('"');
  } else {
    w.String(IdempotencyKey(t));
  }
  key("\"job_id\":");
  w.String(t.job_id);
  key("\"lease_ms\":");
  w.Int(lease_ms);
  key("\"node_id\":");
  w.String(t.node_id);
  key("\"plugin\":");
  w.String(t.plugin);
  key("\"task_id\":");
  w.Int(t.id);
  key("\"tenant\":");
  w.String(t.tenant);
  while (next != extra.end()) write_next();
  w.Char('}');
  w.Finish();
  return out;
}

// Why a task was not handed out: its size, the limit, and its largest members.
std::string TooLargeToHandOut(const store::TaskRecord& t, std::size_t size, std::size_t limit, const json& more,
                              const TaskTexts& texts) {
  std::vector<std::pair<std::size_t, std::string>> parts;
  for (const More& m : MoreMembers(more, texts))
    parts.emplace_back(m.text ? m.text->size() : wire::Dump(*m.value).size(), std::string(m.name));
  std::sort(parts.begin(), parts.end(), std::greater<>());
  std::string largest;
  for (std::size_t i = 0; i < parts.size() && i < 3; ++i)
    largest += (i ? ", " : "") + parts[i].second + " " + std::to_string(parts[i].first) + " bytes";
  return "task " + std::to_string(t.id) + " attempt " + std::to_string(t.attempt) + " could not be handed out: it is " +
         std::to_string(size) + " bytes as JSON, over the " + std::to_string(limit) +
         " bytes a reply may carry (what weft-host reads, 1 MiB, or limits.max_header_bytes if smaller, "
         "less room for the envelope); its largest parts: " +
         largest + "; the task failed, since every attempt would be as large";
}

}  // namespace

api::Response TakeReply(Taken taken) {
  api::Response r;
  if (taken.task_id > 0) {
    // Around the task's own text, which has room to spare (TaskText): no
    // second buffer, and no copy of the task but a move of its bytes.
    r.body_text = std::move(taken.json);
    r.body_text.insert(0, "{\"task\":");
    r.body_text += '}';
  } else {
    r.body_text = "{\"task\":null}";
  }
  r.hands_out_task_id = taken.task_id;
  r.hands_out_attempt = taken.attempt;
  return r;
}

void Dispatcher::AddTakeDecorator(TakeDecorator decorator) {
  decorators_.push_back([decorator = std::move(decorator)](const store::TaskRecord& record, json& task, TaskTexts&) {
    return decorator(record, task);
  });
}

bool Dispatcher::CanServe(const std::string& host_id, const std::string& tenant) const {
  // Asked for every held take each time the reactor serves them: with a
  // thousand takes held and the queue just emptied, most asks find nothing
  // queued, which needs no host or tenant lookup to know.
  if (queue_.queued() == 0) return false;
  const Host* host = hosts_.Find(host_id);
  return host && !host->record.draining && queue_.HasReady(host->plugins, tenant);
}

Result<Taken> Dispatcher::TryTake(const std::string& host_id, const std::string& tenant, const std::string& runner) {
  const Host* host = hosts_.Find(host_id);
  // A draining host (weft host drain) gets no new task; the ones it runs finish.
  if (!host || host->record.draining) return Taken{};
  // Into the record kept for it: a new one per take cost two moves and the
  // allocations of its strings, for a record read once.
  Result<bool> taken = queue_.Take(host_id, host->plugins, tenant, &taking_);
  if (!taken.ok()) return taken.status();
  if (!*taken) return Taken{};
  const store::TaskRecord& t = taking_;
  // What the payload and the decorators give; the members every task has are
  // written from the record as the text is made (TaskText).
  json more = json::object();
  if (!t.payload_json.empty() && t.payload_json != "{}") {
    json payload = ParseStored(t.payload_json);
    if (payload.is_object()) more = std::move(payload);
  }
  TaskTexts texts;
  texts.members.reserve(8);  // the job engine gives up to 7
  for (const TextDecorator& decorate : decorators_) {
    Status s = decorate(t, more, texts);
    if (s.ok()) continue;
    // What a decorator refuses it will refuse again: the attempt fails here
    // (and is retried or fails the task like any failed attempt).
    queue::FinishRequest f;
    f.host_id = host_id;
    f.task_id = t.id;
    f.attempt = t.attempt;
    f.succeeded = false;
    f.message = "the task could not be handed out: " + s.message();
    queue::Conflict conflict;
    WEFT_RETURN_IF_ERROR(queue_.Finish(f, &conflict));
    return Taken{};
  }
  std::string text = TaskText(t, queue_.lease_ms(), more, texts);
  if (max_task_bytes_ > 0 && text.size() > max_task_bytes_) {
    // The host would drop a reply this large unread and ask again, without end:
    // the task fails instead, for good (its next attempt would be as large).
    queue::FinishRequest f;
    f.host_id = host_id;
    f.task_id = t.id;
    f.attempt = t.attempt;
    f.succeeded = false;
    f.final = true;
    f.message = TooLargeToHandOut(t, text.size(), max_task_bytes_, more, texts);
    queue::Conflict conflict;
    WEFT_RETURN_IF_ERROR(queue_.Finish(f, &conflict));
    return Taken{};
  }
  if (!runner.empty()) {
    unacknowledged_[{host_id, runner}] = {t.id, t.attempt};
    runner_of_[t.id] = {host_id, runner};
  }
  return Taken{t.id, t.attempt, std::move(text)};
}

Status Dispatcher::RunnerTakes(const std::string& host_id, const std::string& runner) {
  if (runner_listener_) runner_listener_(host_id, runner);
  auto it = unacknowledged_.find({host_id, runner});
  if (it == unacknowledged_.end()) return Status::Ok();
  const auto [task_id, attempt] = it->second;
  ForgetTaker(task_id, it->first);
  unacknowledged_.erase(it);
  // Ends it only while it is still that attempt's lease (fencing): one that
  // was finished, expired or handed out again meanwhile is left alone.
  return queue_.Release({task_id, attempt},
                        "attempt " + std::to_string(attempt) + " never reached runner '" + runner + "' of host '" +
                            host_id + "': it asked for a task again without having named this one");
}

void Dispatcher::Acknowledged(std::int64_t task_id, std::int64_t attempt) {
  auto it = runner_of_.find(task_id);
  if (it == runner_of_.end()) return;
  auto handed = unacknowledged_.find(it->second);
  if (handed != unacknowledged_.end() && handed->second.second != attempt) return;
  if (handed != unacknowledged_.end()) unacknowledged_.erase(handed);
  runner_of_.erase(it);
}

void Dispatcher::ForgetHost(const std::string& host_id) {
  auto it = unacknowledged_.lower_bound({host_id, std::string()});
  while (it != unacknowledged_.end() && it->first.first == host_id) {
    ForgetTaker(it->second.first, it->first);
    it = unacknowledged_.erase(it);
  }
}

void Dispatcher::ForgetTaker(std::int64_t task_id, const std::pair<std::string, std::string>& taker) {
  // The task may have gone to another runner since (a later attempt): that one stays.
  auto it = runner_of_.find(task_id);
  if (it != runner_of_.end() && it->second == taker) runner_of_.erase(it);
}

}  // namespace weft::hosts

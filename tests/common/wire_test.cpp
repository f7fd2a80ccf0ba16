#include <catch2/catch.hpp>

#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/flat_json.hpp"
#include "weft/common/json_parse.hpp"
#include "weft/common/raw_json.hpp"
#include "weft/common/wire.hpp"

using nlohmann::json;
using namespace weft::wire;

namespace {

Frames Raw(std::initializer_list<std::string> parts) {
  Frames f;
  for (const auto& p : parts) f.emplace_back(p.data(), p.size());
  return f;
}

weft::Status DecodeError(const Frames& f, std::string* id = nullptr) {
  std::string ignored;
  return DecodeRequest(f, Limits{}, id ? id : &ignored).status();
}

}  // namespace

TEST_CASE("wire: a request survives encode and decode with its payload frames", "[wire]") {
  Request req;
  req.id = "c-1";
  req.op = "task.take";
  req.tenant = "acme";
  req.body = {{"host_id", "h1"}, {"wait_ms", 100}};
  req.blobs = {std::string("\0\1\2", 3), "chunk"};
  Frames frames = EncodeRequest(req);
  REQUIRE(frames.size() == 3);
  std::string id;
  auto back = DecodeRequest(frames, Limits{}, &id);
  REQUIRE(back.ok());
  CHECK(id == "c-1");
  CHECK(back->op == "task.take");
  CHECK(back->tenant == "acme");
  CHECK(back->body == req.body);
  CHECK(back->blobs == req.blobs);
}

TEST_CASE("wire: a request header is the header object dumped, byte for byte, with and without tenant", "[wire]") {
  Request req;
  req.id = "id \"1\"";
  req.op = "job.get";
  req.body = {{"job", "7"}, {"details", true}, {"n", {1, -2, 3.5}}};
  json header = {{"v", 1}, {"id", req.id}, {"op", req.op}, {"body", req.body}};
  CHECK(EncodeRequest(req)[0].to_string() == header.dump());
  req.tenant = "acme";
  header["tenant"] = "acme";
  CHECK(EncodeRequest(req)[0].to_string() == header.dump());
}

TEST_CASE("wire: the session, csrf, token and client address survive encode and decode, byte for byte", "[wire]") {
  Request req;
  req.id = "r1";
  req.op = "cluster.create";
  req.tenant = "acme";
  req.on_behalf = {.session = "sess", .csrf = "cs\"rf", .token = "tok", .client_addr = "198.51.100.4"};
  json header = {{"v", 1},          {"id", "r1"},         {"op", "cluster.create"}, {"body", json::object()},
                 {"tenant", "acme"}, {"session", "sess"}, {"csrf", "cs\"rf"},       {"token", "tok"},
                 {"client_addr", "198.51.100.4"}};
  Frames frames = EncodeRequest(req);
  CHECK(frames[0].to_string() == header.dump());
  std::string id;
  auto back = DecodeRequest(frames, Limits{}, &id);
  REQUIRE(back.ok());
  CHECK(back->on_behalf.session == "sess");
  CHECK(back->on_behalf.csrf == "cs\"rf");
  CHECK(back->on_behalf.token == "tok");
  CHECK(back->on_behalf.client_addr == "198.51.100.4");
  // Without them the header has none of the keys.
  req.on_behalf = {};
  CHECK(EncodeRequest(req)[0].to_string().find("session") == std::string::npos);
  CHECK(DecodeError(Raw({R"({"v":1,"id":"a","op":"x","session":5})"})).message().find("\"session\"") !=
        std::string::npos);
  CHECK(DecodeError(Raw({R"({"v":1,"id":"a","op":"x","token":")" + std::string(300, 'a') + "\"}"}))
            .message()
            .find("\"token\"") != std::string::npos);
}

TEST_CASE("wire: a successful reply header is the header object dumped, byte for byte", "[wire]") {
  const json body = {{"task", {{"task_id", 3}, {"node_id", "n\u00e9\"1"}}}, {"z", nullptr}};
  Frames frames = EncodeReply(Reply::Success("id-\"7\"", body));
  REQUIRE(frames.size() == 1);
  const json header = {{"v", 1}, {"id", "id-\"7\""}, {"ok", true}, {"body", body}};
  CHECK(frames[0].to_string() == Dump(header));
  // Invalid UTF-8 is replaced, as Dump does, instead of throwing.
  Frames odd = EncodeReply(Reply::Success("1", {{"s", std::string("a\xff")}}));
  CHECK(json::parse(odd[0].to_string())["body"]["s"] == "a\xef\xbf\xbd");
}

TEST_CASE("wire: a reply whose body is text is the header object dumped, byte for byte, with its blobs", "[wire]") {
  const json body = {{"task", {{"task_id", 3}, {"node_id", "n\u00e9\"1"}}}};
  // A plain id, one to escape, and one that is not ASCII: each the same bytes as the tree's reply.
  const std::vector<std::string> ids = {"1234567890-17", "id-\"7\"\t", "caf\xc3\xa9"};
  for (const std::string& id : ids) {
    Reply text = Reply::Success(id);
    text.body_text = Dump(body);
    text.blobs = {"one", std::string("\0two", 4)};
    Reply tree = Reply::Success(id, body);
    tree.blobs = text.blobs;
    Frames frames = EncodeReply(text);
    REQUIRE(frames.size() == 3);
    INFO(id);
    CHECK(frames[0].to_string() == EncodeReply(tree)[0].to_string());
    CHECK(frames[0].to_string() == Dump(json{{"v", 1}, {"id", id}, {"ok", true}, {"body", body}}));
    CHECK(frames[1].to_string() == "one");
    CHECK(frames[2].to_string() == std::string("\0two", 4));
  }
}

TEST_CASE("wire: a RawJson value is sent as the text it was made of, the same bytes as the tree", "[wire]") {
  const json nodes = json::array({{{"id", "n1"}, {"services", {"db", "web"}}}, {{"id", "n\u00e9"}, {"bind_v4", ""}}});
  json tree = {{"task", {{"task_id", 3}, {"nodes", nodes}}}};
  json spliced = {{"task", {{"task_id", 3}, {"nodes", RawJson(Dump(nodes))}}}};
  CHECK(Dump(spliced) == Dump(tree));
  Frames frames = EncodeReply(Reply::Success("9", spliced));
  REQUIRE(frames.size() == 1);
  CHECK(frames[0].to_string() == EncodeReply(Reply::Success("9", tree))[0].to_string());
  // Another binary value is still written as nlohmann writes binary values.
  const json other = json::binary({1, 2}, 7);
  CHECK(Dump(other) == other.dump());
}

TEST_CASE("wire: replies carry a body or an error with code, message and details", "[wire]") {
  auto ok = DecodeReply(EncodeReply(Reply::Success("7", {{"x", 1}})), Limits{});
  REQUIRE(ok.ok());
  CHECK(ok->ok);
  CHECK(ok->body["x"] == 1);
  auto bad = DecodeReply(
      EncodeReply(Reply::Failure("8", weft::Status::Conflict("attempt 1 is stale"), {{"current_attempt", 2}})),
      Limits{});
  REQUIRE(bad.ok());
  CHECK_FALSE(bad->ok);
  CHECK(bad->error.code == weft::Code::kConflict);
  CHECK(bad->error.message == "attempt 1 is stale");
  CHECK(bad->error.details["current_attempt"] == 2);
  CHECK(bad->ToStatus().code() == weft::Code::kConflict);
}

TEST_CASE("wire: malformed requests are refused with a reason, keeping the id when readable", "[wire]") {
  CHECK(DecodeError(Frames{}).message().find("empty message") != std::string::npos);
  CHECK(DecodeError(Raw({""})).message().find("frame 0 is empty") != std::string::npos);
  CHECK(DecodeError(Raw({"\xff\xfe garbage"})).message() == "frame 0 is not valid JSON");
  CHECK(DecodeError(Raw({"[1,2]"})).message() == "frame 0 must be a JSON object");
  CHECK(DecodeError(Raw({R"({"id":"a","op":"x"})"})).message().find("lacks \"v\"") != std::string::npos);
  CHECK(DecodeError(Raw({R"({"v":2,"id":"a","op":"x"})"})).message().find("version 1") != std::string::npos);
  CHECK(DecodeError(Raw({R"({"v":1,"op":"x"})"})).message().find("lacks \"id\"") != std::string::npos);
  CHECK(DecodeError(Raw({R"({"v":1,"id":5,"op":"x"})"})).message().find("\"id\" must be a string") !=
        std::string::npos);
  std::string id;
  auto no_op = DecodeError(Raw({R"({"v":1,"id":"r9"})"}), &id);
  CHECK(no_op.message().find("lacks \"op\"") != std::string::npos);
  CHECK(id == "r9");
  // A wrong or missing version is answered with the id too.
  id.clear();
  CHECK(DecodeError(Raw({R"({"v":2,"id":"a","op":"x"})"}), &id).message().find("version 1") != std::string::npos);
  CHECK(id == "a");
  id.clear();
  CHECK(DecodeError(Raw({R"({"id":"b","op":"x"})"}), &id).message().find("lacks \"v\"") != std::string::npos);
  CHECK(id == "b");
  CHECK(DecodeError(Raw({R"({"v":2,"id":5,"op":"x"})"}), &id).message().find("version 1") != std::string::npos);
  CHECK(id.empty());  // not a string: nothing to echo
  CHECK(DecodeError(Raw({R"({"v":1,"id":"a","op":"x","body":[1]})"})).message().find("\"body\" must be a JSON object") !=
        std::string::npos);
  CHECK(DecodeError(Raw({R"({"v":1,"id":"a","op":"x","tenant":7})"})).message().find("\"tenant\"") !=
        std::string::npos);
}

TEST_CASE("wire: limits on frame count and sizes give TOO_LARGE", "[wire]") {
  Limits small;
  small.max_frames = 3;
  small.max_header_bytes = 64;
  small.max_frame_bytes = 8;
  small.max_total_bytes = 100;
  std::string header = R"({"v":1,"id":"a","op":"x"})";
  std::string id;
  CHECK(DecodeRequest(Raw({header, "1", "2", "3"}), small, &id).status().code() == weft::Code::kTooLarge);
  CHECK(id == "a");  // the header could be read: the reply carries its id
  id.clear();
  CHECK(DecodeRequest(Raw({header, "123456789"}), small, &id).status().code() == weft::Code::kTooLarge);
  CHECK(id == "a");
  CHECK(DecodeRequest(Raw({std::string(65, ' ')}), small, &id).status().code() == weft::Code::kTooLarge);
  CHECK(id.empty());  // a header over its limit is not read
  CHECK(DecodeRequest(Raw({header, "12345678"}), small, &id).ok());
  Limits tiny_total = small;
  tiny_total.max_total_bytes = 30;
  CHECK(DecodeRequest(Raw({header, "12345678"}), tiny_total, &id).status().code() == weft::Code::kTooLarge);
}

TEST_CASE("wire: Dump never throws on invalid UTF-8", "[wire]") {
  json j = std::string("bad \xff byte");
  CHECK_NOTHROW(Dump(j));
}

TEST_CASE("wire: ROUTER envelopes split off with and without a REQ delimiter", "[wire]") {
  Frames dealer = Raw({"rid", "{}"});
  Frames env;
  SplitEnvelope(dealer, env);
  CHECK(env.size() == 1);
  CHECK(dealer.size() == 1);
  Frames req = Raw({"rid", "", "{}", "blob"});
  SplitEnvelope(req, env);
  CHECK(env.size() == 2);
  CHECK(req.size() == 2);
  Frames back = WithEnvelope(env, std::move(req));
  CHECK(back.size() == 4);
}

namespace {

// Same value and the same JSON types all the way down (5 unsigned is not 5 signed).
bool SameTree(const json& a, const json& b) {
  if (a.type() != b.type()) return false;
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto it = a.begin(); it != a.end(); ++it) {
      auto other = b.find(it.key());
      if (other == b.end() || !SameTree(*it, *other)) return false;
    }
    return true;
  }
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (!SameTree(a[i], b[i])) return false;
    return true;
  }
  return a == b;
}

// Random JSON text: the subset the fast header parser takes and a bit beyond
// (\u escapes, UTF-8, fractions, huge integers, duplicate keys, odd spacing).
struct TextGen {
  std::uint64_t state;
  std::uint64_t Next() {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  }
  int Pick(int n) { return static_cast<int>(Next() % static_cast<std::uint64_t>(n)); }
  std::string Space() {
    static const char* kSpaces[] = {"", "", "", " ", "\n", "\t ", "\r\n  "};
    return kSpaces[Pick(7)];
  }
  std::string Str() {
    static const char* kPieces[] = {"a", "host", "-", "_", " ", "\\\"", "\\\\", "\\/", "\\n", "\\t", "\\b", "\\f",
                                    "\\r", "\\u00e9", "\\u0041", "\xc3\xa9", "0", "id", "task_id", "{", "]", ":"};
    std::string s = "\"";
    for (int n = Pick(6); n > 0; --n) s += kPieces[Pick(21)];
    return s + "\"";
  }
  std::string Num() {
    static const char* kNums[] = {"0", "-0", "7", "-7", "42", "1234567890123", "-9223372036854775808",
                                  "9223372036854775807", "9223372036854775808", "18446744073709551615",
                                  "18446744073709551616", "-9223372036854775809", "1.5", "-2e3", "1E2", "0.0"};
    return kNums[Pick(16)];
  }
  std::string Value(int depth) {
    switch (depth > 4 ? 3 + Pick(4) : Pick(7)) {
      case 0:
      case 1: {
        std::string s = "{" + Space();
        const int n = Pick(5);
        for (int i = 0; i < n; ++i) {
          if (i) s += "," + Space();
          s += (Pick(4) == 0 ? std::string("\"k\"") : Str()) + Space() + ":" + Space() + Value(depth + 1) + Space();
        }
        return s + "}";
      }
      case 2: {
        std::string s = "[" + Space();
        const int n = Pick(4);
        for (int i = 0; i < n; ++i) s += (i ? "," + Space() : std::string()) + Value(depth + 1) + Space();
        return s + "]";
      }
      case 3: return Str();
      case 4: return Num();
      case 5: return Pick(2) ? "true" : "false";
      default: return "null";
    }
  }
};

}  // namespace

TEST_CASE("wire: headers decode to exactly what nlohmann parses, valid or not", "[wire][slow]") {
  TextGen gen{0x9E3779B97F4A7C15ULL};
  int valid = 0, invalid = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string text = "{\"v\":1," + gen.Space() + "\"id\":\"r1\",\"ok\":true,\"body\":" + gen.Value(0) + gen.Space() + "}";
    if (i % 3 == 0) {
      // A damaged copy: a byte changed, dropped or cut off.
      const std::size_t at = static_cast<std::size_t>(gen.Pick(static_cast<int>(text.size())));
      static const char kBytes[] = "{}[]\",:\\ 0a-\x01\xff";
      switch (gen.Pick(3)) {
        case 0: text[at] = kBytes[gen.Pick(static_cast<int>(sizeof kBytes) - 1)]; break;
        case 1: text.erase(at, 1); break;
        default: text.resize(at); break;
      }
    }
    if (text.empty()) continue;
    INFO(text);
    const json expected = json::parse(text, nullptr, false);
    weft::Result<Reply> got = DecodeReply(Raw({text}), Limits{});
    const bool usable = !expected.is_discarded() && expected.is_object() && expected.contains("v") &&
                        expected["v"] == 1 && expected.contains("id") && expected["id"].is_string() &&
                        expected.contains("ok") && expected["ok"].is_boolean();
    if (!usable) {
      ++invalid;
      if (expected.is_discarded()) {
        REQUIRE_FALSE(got.ok());
        REQUIRE(got.status().message() == "frame 0 is not valid JSON");
      }
      continue;
    }
    ++valid;
    REQUIRE(got.ok());
    if (!expected["ok"].get<bool>()) continue;
    const json body = expected.contains("body") && !expected["body"].is_null() ? expected["body"] : json::object();
    REQUIRE(SameTree(got->body, body));
  }
  CHECK(valid > 10000);
  CHECK(invalid > 1000);
}

TEST_CASE("wire: a repeated key keeps its last value and deep nesting is still refused", "[wire]") {
  weft::Result<Reply> r = DecodeReply(Raw({R"({"v":1,"id":"a","ok":true,"body":{"k":1,"k":-2,"s":"x\ty"}})"}), Limits{});
  REQUIRE(r.ok());
  CHECK(r->body["k"] == -2);
  CHECK(r->body["k"].is_number_integer());
  CHECK(r->body["s"] == "x\ty");
  Limits limits;
  limits.max_depth = 3;
  std::string deep = R"({"v":1,"id":"a","ok":true,"body":{"a":[{"b":1}]}})";
  weft::Result<Reply> refused = DecodeReply(Raw({deep}), limits);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == weft::Code::kTooLarge);
}

TEST_CASE("wire: Dump writes exactly the bytes nlohmann's dump writes", "[wire][slow]") {
  TextGen gen{0xD1B54A32D192ED03ULL};
  const auto reference = [](const json& v) { return v.dump(-1, ' ', false, json::error_handler_t::replace); };
  int compared = 0;
  for (int i = 0; i < 5000; ++i) {
    const json v = json::parse(gen.Value(0), nullptr, false);
    if (v.is_discarded()) continue;
    ++compared;
    INFO(reference(v));
    REQUIRE(Dump(v) == reference(v));
  }
  CHECK(compared > 4000);
  // What random text does not reach: every control character, DEL, UTF-8
  // (valid and not), floats, and strings that turn non-ASCII late.
  std::string controls;
  for (int c = 0; c < 0x20; ++c) controls += static_cast<char>(c);
  const json odd = {{"controls", controls},
                    {"del", "a\x7f" "b"},
                    {"utf8", "caf\xc3\xa9 \xe2\x82\xac"},
                    {"bad", "x\"\\\n\xff\xfe"},
                    {"late", std::string(40, 'q') + "\t\xc3\xa9"},
                    {"float", 1.5},
                    {"small", -0.0001},
                    {"ints", {0, -1, INT64_MIN, INT64_MAX, UINT64_MAX}},
                    {"k\xc3\xa9y", nullptr},
                    {"empty", {json::object(), json::array(), ""}}};
  CHECK(Dump(odd) == reference(odd));
}

TEST_CASE("wire: a request header reads the same on the fast way and the general one", "[wire]") {
  // A member the fast reading leaves to the general one (a \u escape, here
  // in a key: "v" written as "\u0076"): the same header so must decode to the same request.
  const auto general = [](std::string h) { return h.replace(h.find(R"("v")"), 3, R"("\u0076")"); };
  const std::vector<std::string> headers = {
      R"({"body":{"attempt":1,"host_id":"h1","result":{"a":[1,-2,true,null]},"take":{"runner":"r1"}},"id":"c-1","op":"task.finish","v":1})",
      R"({ "v" : 1 , "op" : "server.status" , "id" : "x" })",
      R"({"body":null,"id":"a","op":"b","tenant":null,"v":1})",
      R"({"body":{"y":"two\n"},"client_addr":"10.0.0.1","csrf":"c","id":"i","op":"o","session":"s","tenant":"t","token":"k","v":1})",
      R"({"body":{"deep":[[{}]]},"id":"i","op":"o","tenant":null,"v":1})",
  };
  for (const std::string& h : headers) {
    INFO(h);
    std::string fast_id, general_id;
    auto fast = DecodeRequest(Raw({h, "blob"}), Limits{}, &fast_id);
    auto slow = DecodeRequest(Raw({general(h), "blob"}), Limits{}, &general_id);
    REQUIRE(fast.ok());
    REQUIRE(slow.ok());
    CHECK(fast_id == general_id);
    CHECK(fast->id == slow->id);
    CHECK(fast->op == slow->op);
    CHECK(fast->tenant == slow->tenant);
    CHECK(fast->on_behalf.session == slow->on_behalf.session);
    CHECK(fast->on_behalf.csrf == slow->on_behalf.csrf);
    CHECK(fast->on_behalf.token == slow->on_behalf.token);
    CHECK(fast->on_behalf.client_addr == slow->on_behalf.client_addr);
    CHECK(fast->body == slow->body);
    CHECK(fast->blobs == slow->blobs);
  }
  // What the general reading refuses, the fast one does not let through.
  for (const char* bad : {R"({"id":"","op":"o","v":1})", R"({"id":"i","op":"o","tenant":"","v":1})",
                                 R"({"id":"i","op":"o","v":2})", R"({"id":"i","op":"o","v":1,"body":[]})",
                                 R"({"id":"i","op":"o"})", R"({"id":"i","op":"o","v":1} x)",
                                 R"({"id":"i","op":"o","v":1,"zz":1})", R"({"id":"i","op":"o","tenant":"t","tenant":null,"v":1})",
                                 R"({"body":{"x":1},"body":{"y":2},"id":"i","op":"o","v":1})"}) {
    INFO(bad);
    CHECK_FALSE(DecodeError(Raw({bad})).ok());
  }
}

TEST_CASE("wire: a body kept as text is refused and read exactly as the tree would be", "[wire][slow]") {
  // DecodeRequest keeps the body of the ops its caller names as text: the
  // same headers must be refused with the same words, and the text must read
  // back (BodyTree, BodyString, the flat reader) as the tree does.
  TextGen gen{0xD1B54A32D192ED03ULL};
  static constexpr std::string_view kOps[] = {"task.finish", "task.take"};
  int kept = 0, refused = 0;
  for (int i = 0; i < 20000; ++i) {
    const std::string op = gen.Pick(4) == 0 ? "task.progress" : std::string(kOps[gen.Pick(2)]);
    std::string body = gen.Value(0);
    if (gen.Pick(3) == 0) body = "{\"host_id\":" + gen.Str() + "," + body.substr(1);
    std::string text = "{\"body\":" + gen.Space() + body + gen.Space() + ",\"id\":\"r1\",\"op\":\"" + op + "\",\"v\":1}";
    if (i % 3 == 0) {
      const std::size_t at = static_cast<std::size_t>(gen.Pick(static_cast<int>(text.size())));
      static const char kBytes[] = "{}[]\",:\\ 0a-\x01\xff";
      switch (gen.Pick(3)) {
        case 0: text[at] = kBytes[gen.Pick(static_cast<int>(sizeof kBytes) - 1)]; break;
        case 1: text.erase(at, 1); break;
        default: text.resize(at); break;
      }
    }
    if (text.empty()) continue;
    INFO(text);
    std::string tree_id = "x", text_id = "y";
    auto tree = DecodeRequest(Raw({text}), Limits{}, &tree_id);
    auto lean = DecodeRequest(Raw({text}), Limits{}, &text_id, kOps);
    REQUIRE(tree_id == text_id);
    REQUIRE(tree.ok() == lean.ok());
    if (!tree.ok()) {
      ++refused;
      REQUIRE(tree.status().code() == lean.status().code());
      REQUIRE(tree.status().message() == lean.status().message());
      continue;
    }
    REQUIRE(tree->body_text.empty());
    REQUIRE(lean->op == tree->op);
    const bool named = lean->op == "task.finish" || lean->op == "task.take";
    if (!named) REQUIRE(lean->body_text.empty());
    if (lean->body_text.empty()) {
      REQUIRE(SameTree(lean->body, tree->body));
      continue;
    }
    ++kept;
    REQUIRE(lean->body.empty());
    REQUIRE(SameTree(BodyTree(*lean), tree->body));
    for (const char* key : {"host_id", "k", "id", "a"}) {
      auto it = tree->body.find(key);
      const std::optional<std::string> want =
          it != tree->body.end() && it->is_string() ? std::optional(it->get<std::string>()) : std::nullopt;
      REQUIRE(BodyString(*lean, key) == want);
    }
    // Every member the flat reader calls a plain string or integer is what the tree holds there.
    weft::flatjson::Reader reader(lean->body_text);
    weft::flatjson::Member m;
    std::map<std::string, int> count;
    std::vector<weft::flatjson::Member> members;
    while (reader.Next(m)) {
      members.push_back(m);
      ++count[std::string(m.key)];
    }
    REQUIRE(reader.ok());
    REQUIRE(members.size() >= tree->body.size());
    for (const weft::flatjson::Member& member : members) {
      const std::string key(member.key);
      if (count[key] != 1 || member.key.find('\\') != std::string_view::npos) continue;
      const json& value = tree->body.at(key);
      if (member.kind == weft::flatjson::Kind::kString) {
        std::string s;
        if (!weft::flatjson::Unescape(member.text, s)) continue;  // a \u escape: never in a body kept as text
        REQUIRE(value == s);
      } else if (member.kind == weft::flatjson::Kind::kUnsigned) {
        REQUIRE(value.is_number_unsigned());
        REQUIRE(value.get<std::uint64_t>() == member.number);
      } else if (member.kind == weft::flatjson::Kind::kObject) {
        REQUIRE(value.is_object());
        REQUIRE(SameTree(json::parse(member.text), value));
      }
    }
  }
  CHECK(kept > 500);
  CHECK(refused > 1000);
}

TEST_CASE("wire: a request whose body is kept as text encodes as the tree would", "[wire]") {
  static constexpr std::string_view kOps[] = {"task.finish"};
  const std::string header =
      R"({"body": {"status":"ok","attempt":2, "s":"a\tb"},"id":"c","op":"task.finish","v":1})";
  std::string id;
  auto req = DecodeRequest(Raw({header}), Limits{}, &id, kOps);
  REQUIRE(req.ok());
  REQUIRE(req->body_text == R"({"status":"ok","attempt":2, "s":"a\tb"})");
  Frames again = EncodeRequest(*req);
  CHECK(again[0].to_string() == R"({"body":{"attempt":2,"s":"a\tb","status":"ok"},"id":"c","op":"task.finish","v":1})");
}

TEST_CASE("flat json: members are read without a tree, anything not plain is kOther, bad text stops", "[wire]") {
  using weft::flatjson::Kind;
  weft::flatjson::Reader r(R"( { "a" : "x\"y" , "n":18446744073709551615,"big":18446744073709551616,"neg":-1,)"
                           R"("f":1.5,"o":{"p":[1,{"q":"}"}]},"z":null,"t":true,"l":[]} )");
  weft::flatjson::Member m;
  std::vector<std::pair<std::string, Kind>> seen;
  while (r.Next(m)) seen.emplace_back(std::string(m.key), m.kind);
  CHECK(r.ok());
  CHECK(seen == std::vector<std::pair<std::string, Kind>>{{"a", Kind::kString},  {"n", Kind::kUnsigned},
                                                          {"big", Kind::kOther}, {"neg", Kind::kOther},
                                                          {"f", Kind::kOther},   {"o", Kind::kObject},
                                                          {"z", Kind::kOther},   {"t", Kind::kOther},
                                                          {"l", Kind::kOther}});
  std::string s;
  CHECK(weft::flatjson::Unescape(R"(x\"y\\\/\n)", s));
  CHECK(s == "x\"y\\/\n");
  CHECK_FALSE(weft::flatjson::Unescape(R"(\u0041)", s));
  for (const char* bad : {"", "[]", "{", "{\"a\"", "{\"a\":", "{\"a\":1", "{\"a\":1,}", "{\"a\":\"x}", "{\"a\" 1}",
                          "{\"a\":{\"b\":1}", "{} x", "{\"a\":1}}", "{\"a\":[1,}"}) {
    INFO(bad);
    weft::flatjson::Reader b(bad);
    while (b.Next(m)) {
    }
    CHECK_FALSE(b.ok());
  }
  CHECK(weft::flatjson::EmptyObject(" { } "));
  CHECK_FALSE(weft::flatjson::EmptyObject("{\"a\":1}"));
}

TEST_CASE("wire: Parse gives the value nlohmann's parser gives, in and out of the fast parser's subset", "[wire]") {
  const std::string deep = std::string(150, '[') + std::string(150, ']');  // past the fast parser's depth
  for (const std::string& text : std::vector<std::string>{
           R"({"provider_id":"vm-1","ssh_auth":{"user":"root"},"ports":[22,-1,0],"ok":true,"none":null})",
           R"({"b":1,"a":2,"b":3})", R"(  {"x" : [ ] , "y" : { } }  )", R"("caf\u00e9")", "\"caf\xc3\xa9\"",
           R"({"ratio":0.25,"big":1e3,"huge":18446744073709551615,"neg":-9223372036854775808})", "12", "[]", deep}) {
    INFO(text);
    const json parsed = Parse(text);
    REQUIRE_FALSE(parsed.is_discarded());
    CHECK(parsed == json::parse(text));
    CHECK(Dump(parsed) == Dump(json::parse(text)));
  }
  // What is not JSON is discarded, as nlohmann's parser without exceptions does.
  for (const std::string& text :
       std::vector<std::string>{"", "{", R"({"a":1}x)", R"({"a":01})", "[1,]", "nul", R"({"a" 1})"}) {
    INFO(text);
    CHECK(Parse(text).is_discarded());
  }
}

TEST_CASE("wire: a header field that is not one of the request's is refused, with the one it likely meant", "[wire]") {
  std::string id;
  // A superadmin's misspelt tenant would otherwise act in its own tenant.
  weft::Status s = DecodeError(Raw({R"({"v":1,"id":"b1","op":"cluster.list","tenat":"acme","body":{}})"}), &id);
  CHECK(s.code() == weft::Code::kInvalid);
  CHECK_THAT(s.message(), Catch::StartsWith("header field \"tenat\" is unknown (did you mean \"tenant\"?)"));
  CHECK(id == "b1");  // answered with the request's id
  s = DecodeError(Raw({R"({"v":1,"id":"b2","op":"server.status","foo":1})"}));
  CHECK(s.code() == weft::Code::kInvalid);
  CHECK_THAT(s.message(), Catch::StartsWith("header field \"foo\" is unknown; a request's header has v, id, op"));
  // Every field a request may carry is still read.
  CHECK(DecodeError(Raw({R"({"v":1,"id":"b3","op":"server.status","body":{},"tenant":"acme","session":"s",)"
                         R"("csrf":"c","token":"t","client_addr":"10.0.0.1"})"}))
            .ok());
}

TEST_CASE("wire: a key a request names twice is refused, the fast way, the general one and with the body kept as text",
          "[wire]") {
  static constexpr std::string_view kOps[] = {"task.finish"};
  // The same header read the general way: its op with a \u escape, which the fast reading leaves to it.
  const auto general = [](std::string h) {
    for (const auto& [op, escaped] : std::vector<std::pair<std::string, std::string>>{
             {R"("op":"x")", R"("op":"\u0078")"}, {R"("op":"task.finish")", R"("op":"task.finis\u0068")"}}) {
      const std::size_t at = h.find(op);
      if (at != std::string::npos) return h.replace(at, op.size(), escaped);
    }
    FAIL("no op to escape in " << h);
    return h;
  };
  struct Case {
    std::string header;
    std::string says;
    std::string id;  // what the error reply echoes
  };
  const std::vector<Case> cases = {
      {R"({"v":1,"id":"a","op":"x","tenant":"acme","tenant":"default"})", R"(header field "tenant" appears twice)", "a"},
      {R"({"body":{},"body":{"x":1},"id":"b","op":"x","v":1})", R"(header field "body" appears twice)", "b"},
      {R"({"v":1,"id":"c","op":"x","v":1})", R"(header field "v" appears twice)", "c"},
      {R"({"session":"s","id":"d","op":"x","v":1,"session":null})", R"(header field "session" appears twice)", "d"},
      // Which id would the reply echo? Neither.
      {R"({"id":"e1","id":"e2","op":"x","v":1})", R"(header field "id" appears twice)", ""},
      {R"({"body":{"x":1,"y":2,"x":1},"id":"f","op":"x","v":1})", R"(body field "x" appears twice)", "f"},
      {R"({"body":{"a":{"b":[1,{"c":1,"d":{},"c":2}]}},"id":"g","op":"x","v":1})",
       R"(body field "a.b[1].c" appears twice)", "g"},
      // The first named twice, in the order of the text.
      {R"({"body":{"z":{"q":1,"q":2},"a":1,"a":2},"id":"h","op":"x","v":1})", R"(body field "z.q" appears twice)", "h"},
      // "\/" is "/".
      {R"({"body":{"a/b":1,"a\/b":2},"id":"i","op":"x","v":1})", R"(body field "a/b" appears twice)", "i"},
      {R"({"body":{"attempt":1,"host_id":"h1","task_id":1,"task_id":2},"id":"j","op":"task.finish","v":1})",
       R"(body field "task_id" appears twice)", "j"},
      {R"({"body":{"host_id":"h1","result":{"ssh":{"port":22,"user":"a","user":"b"}}},"id":"k","op":"task.finish","v":1})",
       R"(body field "result.ssh.user" appears twice)", "k"},
      {R"({"body":{"result":{"keys":[{"t":"rsa"},{"t":"ed25519","t":"rsa"}]}},"id":"l","op":"task.finish","v":1})",
       R"(body field "result.keys[1].t" appears twice)", "l"},
  };
  for (const Case& c : cases) {
    for (const std::string& header : {c.header, general(c.header)}) {
      for (const std::span<const std::string_view> ops : {std::span<const std::string_view>(), std::span<const std::string_view>(kOps)}) {
        INFO(header << (ops.empty() ? "" : " (body kept as text)"));
        std::string id = "stale";
        auto decoded = DecodeRequest(Raw({header}), Limits{}, &id, ops);
        REQUIRE_FALSE(decoded.ok());
        CHECK(decoded.status().code() == weft::Code::kInvalid);
        CHECK(decoded.status().message() ==
              c.says + "; name each field once (JSON parsers differ on which of the two they take)");
        CHECK(id == c.id);
      }
    }
  }
  // The same names in different objects are not the same key.
  auto fine = DecodeRequest(
      Raw({R"({"body":{"host_id":"h1","result":{"host_id":"x","a":{"host_id":1},"b":[{"a":1},{"a":2}]},"task_id":3},"id":"m","op":"task.finish","v":1})"}),
      Limits{}, nullptr, kOps);
  REQUIRE(fine.ok());
  CHECK_FALSE(fine->body_text.empty());  // read the lean way, as a host's finish is
}

TEST_CASE("wire: a body kept as text with more keys than the lean reading tracks is still checked for repeats",
          "[wire]") {
  static constexpr std::string_view kOps[] = {"task.finish"};
  std::string many = "{";
  for (int i = 0; i < 300; ++i) many += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + std::to_string(i);
  const std::string fine = R"({"body":{"host_id":"h1","result":)" + many + R"(}},"id":"n","op":"task.finish","v":1})";
  auto read = DecodeRequest(Raw({fine}), Limits{}, nullptr, kOps);
  REQUIRE(read.ok());
  CHECK(BodyTree(*read)["result"].size() == 300);
  CHECK(BodyTree(*read)["result"]["k299"] == 299);
  const std::string twice =
      R"({"body":{"host_id":"h1","result":)" + many + R"(,"k7":0}},"id":"o","op":"task.finish","v":1})";
  std::string id;
  auto refused = DecodeRequest(Raw({twice}), Limits{}, &id, kOps);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.status().message(), Catch::StartsWith(R"(body field "result.k7" appears twice)"));
  CHECK(id == "o");
}

#include <catch2/catch.hpp>

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
  CHECK(DecodeRequest(Raw({header, "123456789"}), small, &id).status().code() == weft::Code::kTooLarge);
  CHECK(DecodeRequest(Raw({std::string(65, ' ')}), small, &id).status().code() == weft::Code::kTooLarge);
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

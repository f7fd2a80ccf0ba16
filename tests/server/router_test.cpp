#include <catch2/catch.hpp>

#include "weft/server/api/router.hpp"

using namespace weft::api;
using json = nlohmann::json;

namespace {

Router MakeRouter() {
  Router r;
  r.Add("debug.enqueue", {Role::kAdmin, Role::kSuperadmin}, {Endpoint::kApi},
        [](const Call&) { return Response::Ok({{"done", true}}); });
  r.Add("task.take", {Role::kHost}, {Endpoint::kProvisioner}, [](const Call&) { return Response::Ok({}); });
  return r;
}

Response RouteOp(const Router& r, const std::string& op, Endpoint e, Role role) {
  weft::wire::Request req;
  req.id = "1";
  req.op = op;
  Call c;
  c.endpoint = e;
  c.principal = Principal{"default", role};
  c.request = &req;
  return r.Route(c);
}

}  // namespace

TEST_CASE("router: an unknown op is INVALID, names the nearest op and lists the ops the caller may send there",
          "[api]") {
  Router router = MakeRouter();
  Response r = RouteOp(router, "debug.enqeue", Endpoint::kApi, Role::kSuperadmin);
  CHECK(r.status.code() == weft::Code::kInvalid);
  CHECK(r.status.message() == "unknown op 'debug.enqeue' (did you mean 'debug.enqueue'?); the ops you may send here "
                              "are debug.enqueue");
  CHECK(r.details["did_you_mean"] == "debug.enqueue");
  CHECK(r.details["known_ops"] == json({"debug.enqueue"}));

  // A host's op is not offered on the api endpoint, nor an admin's op to a host.
  Response host = RouteOp(router, "task.tkae", Endpoint::kProvisioner, Role::kHost);
  CHECK(host.status.message() == "unknown op 'task.tkae' (did you mean 'task.take'?); the ops you may send here are "
                                 "task.take");
  Response user = RouteOp(router, "task.tkae", Endpoint::kApi, Role::kUser);
  CHECK(user.status.message() == "unknown op 'task.tkae'");
  CHECK_FALSE(user.details.contains("did_you_mean"));
  CHECK(user.details["known_ops"] == json::array());
}

TEST_CASE("router: an admin op is DENIED on the provisioner endpoint and to hosts", "[api]") {
  Router router = MakeRouter();
  CHECK(RouteOp(router, "debug.enqueue", Endpoint::kProvisioner, Role::kHost).status.code() == weft::Code::kDenied);
  CHECK(RouteOp(router, "debug.enqueue", Endpoint::kApi, Role::kUser).status.code() == weft::Code::kDenied);
  CHECK(RouteOp(router, "task.take", Endpoint::kApi, Role::kSuperadmin).status.code() == weft::Code::kDenied);
  Response ok = RouteOp(router, "debug.enqueue", Endpoint::kApi, Role::kSuperadmin);
  REQUIRE(ok.status.ok());
  CHECK(ok.body["done"] == true);
}

TEST_CASE("router: a handler that throws becomes INTERNAL, not a crash", "[api]") {
  Router r;
  r.Add("x.y", {Role::kUser}, {Endpoint::kApi}, [](const Call&) -> Response {
    json j = 5;
    return Response::Ok({{"v", j.at("missing")}});
  });
  CHECK(RouteOp(r, "x.y", Endpoint::kApi, Role::kUser).status.code() == weft::Code::kInternal);
}

TEST_CASE("router: requests are counted per op when they reach the handler, refusals are not", "[api]") {
  Router router = MakeRouter();
  CHECK(router.Served().empty());
  (void)RouteOp(router, "task.tkae", Endpoint::kProvisioner, Role::kHost);    // unknown
  (void)RouteOp(router, "task.take", Endpoint::kApi, Role::kSuperadmin);      // wrong endpoint
  (void)RouteOp(router, "debug.enqueue", Endpoint::kApi, Role::kUser);        // wrong role
  CHECK(router.Served().empty());
  for (int i = 0; i < 3; ++i) (void)RouteOp(router, "task.take", Endpoint::kProvisioner, Role::kHost);
  (void)RouteOp(router, "debug.enqueue", Endpoint::kApi, Role::kAdmin);
  CHECK(router.Served() == std::map<std::string, std::int64_t>{{"debug.enqueue", 1}, {"task.take", 3}});
}

TEST_CASE("router: only successful calls of ops that change state reach the audit recorder, a failed record "
          "fails the call",
          "[api]") {
  Router r;
  r.Add("x.change", {Role::kUser}, {Endpoint::kApi}, [](const Call&) { return Response::Ok({}); });
  r.Add("x.read", {Role::kUser}, {Endpoint::kApi}, [](const Call&) { return Response::Ok({}); }, Effect::kReads);
  r.Add("x.take", {Role::kHost}, {Endpoint::kProvisioner}, [](const Call&) { return Response::Ok({}); },
        Effect::kHostTraffic);
  r.Add("x.refuse", {Role::kUser}, {Endpoint::kApi},
        [](const Call&) { return Response::Error(weft::Status::Conflict("no")); });
  std::vector<std::string> recorded;
  weft::Status next = weft::Status::Ok();
  r.set_audit_recorder([&](const Call& c, const Response&) {
    recorded.push_back(c.request->op);
    return next;
  });
  CHECK(RouteOp(r, "x.change", Endpoint::kApi, Role::kUser).status.ok());
  CHECK(RouteOp(r, "x.read", Endpoint::kApi, Role::kUser).status.ok());
  CHECK(RouteOp(r, "x.take", Endpoint::kProvisioner, Role::kHost).status.ok());
  CHECK(RouteOp(r, "x.refuse", Endpoint::kApi, Role::kUser).status.code() == weft::Code::kConflict);
  CHECK(RouteOp(r, "x.change", Endpoint::kApi, Role::kHost).status.code() == weft::Code::kDenied);
  CHECK(recorded == std::vector<std::string>{"x.change"});
  // No change without its entry: INTERNAL makes weftd roll the batch back.
  next = weft::Status::Unavailable("disk full");
  Response failed = RouteOp(r, "x.change", Endpoint::kApi, Role::kUser);
  CHECK(failed.status.code() == weft::Code::kInternal);
  CHECK_THAT(failed.status.message(), Catch::Contains("audit log") && Catch::Contains("disk full"));
}

namespace {

Response RouteBody(const Router& r, const std::string& op, json body, Endpoint e = Endpoint::kApi) {
  weft::wire::Request req;
  req.id = "1";
  req.op = op;
  req.body = std::move(body);
  Call c;
  c.endpoint = e;
  c.principal = Principal{"default", e == Endpoint::kApi ? Role::kUser : Role::kHost};
  c.request = &req;
  return r.Route(c);
}

}  // namespace

TEST_CASE("router: a body field an op does not declare is INVALID before the handler runs, naming the nearest "
          "field, and ops without a field list take any body",
          "[api]") {
  Router r;
  int ran = 0;
  r.Add("cluster.delete", {Role::kUser}, {Endpoint::kApi}, [&](const Call&) { ++ran; return Response::Ok({}); },
        Effect::kChanges, {"cluster", "dry_run", "keep_on_failure"});
  r.Add("x.any", {Role::kUser}, {Endpoint::kApi}, [&](const Call&) { ++ran; return Response::Ok({}); });
  r.Add("x.host", {Role::kHost}, {Endpoint::kProvisioner}, [&](const Call&) { ++ran; return Response::Ok({}); },
        Effect::kHostTraffic, {"a"});

  // A misspelt dry_run, in any spelling, never reaches the handler (which would delete the cluster).
  for (const char* wrong : {"dryrun", "dryRun", "dry-run", "dry_rn"}) {
    INFO(wrong);
    Response refused = RouteBody(r, "cluster.delete", {{"cluster", "victim"}, {wrong, true}});
    CHECK(refused.status.code() == weft::Code::kInvalid);
    CHECK(refused.status.message() ==
          "\"" + std::string(wrong) + "\" is not a field of cluster.delete; did you mean \"dry_run\"?");
    CHECK(refused.details["field"] == wrong);
    CHECK(refused.details["did_you_mean"] == "dry_run");
    CHECK(refused.details["known_fields"] == json({"cluster", "dry_run", "keep_on_failure"}));
  }
  // Nothing near: the message lists the fields instead.
  Response far = RouteBody(r, "cluster.delete", {{"cluster", "victim"}, {"colour", "red"}, {"zz", 1}});
  CHECK(far.status.code() == weft::Code::kInvalid);
  CHECK_THAT(far.status.message(), Catch::StartsWith("\"colour\" is not a field of cluster.delete; its fields are "
                                                     "cluster, dry_run, keep_on_failure"));
  CHECK(far.details["unknown_fields"] == json({"colour", "zz"}));
  CHECK_FALSE(far.details.contains("did_you_mean"));
  CHECK(ran == 0);
  CHECK(r.Served().empty());

  // Declared fields pass, as does an empty body; an op without a list and the provisioner endpoint are not checked.
  CHECK(RouteBody(r, "cluster.delete", {{"cluster", "victim"}, {"dry_run", true}}).status.ok());
  CHECK(RouteBody(r, "cluster.delete", json::object()).status.ok());
  CHECK(RouteBody(r, "x.any", {{"whatever", 1}}).status.ok());
  CHECK(RouteBody(r, "x.host", {{"b", 1}}, Endpoint::kProvisioner).status.ok());
  CHECK(ran == 4);
}

TEST_CASE("router: an op added with {} takes no field, a free-form op takes any, and the router says which ops "
          "declared their fields",
          "[api]") {
  Router r;
  int ran = 0;
  r.Add("x.none", {Role::kUser}, {Endpoint::kApi}, [&](const Call&) { ++ran; return Response::Ok({}); },
        Effect::kReads, {});
  r.Add("x.document", {Role::kUser}, {Endpoint::kApi}, [&](const Call&) { ++ran; return Response::Ok({}); },
        Effect::kChanges, Fields::FreeForm());
  r.Add("x.old", {Role::kUser}, {Endpoint::kApi}, [&](const Call&) { ++ran; return Response::Ok({}); });
  r.Add("x.host", {Role::kHost}, {Endpoint::kProvisioner}, [&](const Call&) { ++ran; return Response::Ok({}); },
        Effect::kHostTraffic);

  Response refused = RouteBody(r, "x.none", {{"verbose", true}});
  CHECK(refused.status.code() == weft::Code::kInvalid);
  CHECK(refused.status.message() == "\"verbose\" is not a field of x.none; it takes no fields (its body is {})");
  CHECK(refused.details["known_fields"] == json::array());
  CHECK(ran == 0);
  CHECK(RouteBody(r, "x.none", json::object()).status.ok());
  CHECK(RouteBody(r, "x.document", {{"name", "a"}, {"colour", "red"}}).status.ok());
  CHECK(ran == 2);

  CHECK(r.FieldsOf("x.none").declared());
  CHECK(r.FieldsOf("x.none").checked());
  CHECK(r.FieldsOf("x.document").declared());
  CHECK_FALSE(r.FieldsOf("x.document").checked());
  CHECK_FALSE(r.FieldsOf("x.old").declared());
  CHECK_FALSE(r.FieldsOf("x.nosuch").declared());
  CHECK(r.OpsOn(Endpoint::kApi) == std::vector<std::string>{"x.document", "x.none", "x.old"});
  CHECK(r.OpsOn(Endpoint::kProvisioner) == std::vector<std::string>{"x.host"});
}

TEST_CASE("router: payload frames an op does not take are INVALID on both endpoints, before the handler runs",
          "[api]") {
  Router r;
  int ran = 0;
  r.Add("x.read", {Role::kUser}, {Endpoint::kApi}, [&](const Call&) { ++ran; return Response::Ok({}); },
        Effect::kReads, {});
  r.Add("x.upload", {Role::kUser}, {Endpoint::kApi}, [&](const Call&) { ++ran; return Response::Ok({}); },
        Effect::kChanges, {"name"}, /*payload_frames=*/1);
  r.Add("x.host", {Role::kHost}, {Endpoint::kProvisioner}, [&](const Call&) { ++ran; return Response::Ok({}); },
        Effect::kHostTraffic);
  const auto route = [&](const std::string& op, std::vector<std::string> blobs, Endpoint e, Role role) {
    weft::wire::Request req;
    req.id = "p1";
    req.op = op;
    req.blobs = std::move(blobs);
    Call c;
    c.endpoint = e;
    c.principal = Principal{"default", role};
    c.request = &req;
    return r.Route(c);
  };

  Response two = route("x.read", {"a", "b"}, Endpoint::kApi, Role::kUser);
  CHECK(two.status.code() == weft::Code::kInvalid);
  CHECK(two.status.message() == "op \"x.read\" takes no payload frame, and 2 were sent; send the JSON header alone");
  CHECK(two.details == json{{"op", "x.read"}, {"payload_frames", 2}, {"takes", 0}});
  Response host = route("x.host", {""}, Endpoint::kProvisioner, Role::kHost);
  CHECK(host.status.code() == weft::Code::kInvalid);
  CHECK(host.status.message() == "op \"x.host\" takes no payload frame, and 1 was sent; send the JSON header alone");
  Response extra = route("x.upload", {"chunk", "more"}, Endpoint::kApi, Role::kUser);
  CHECK(extra.status.code() == weft::Code::kInvalid);
  CHECK(extra.status.message() == "op \"x.upload\" takes exactly one payload frame after the JSON header, and 2 were sent");
  Response none = route("x.upload", {}, Endpoint::kApi, Role::kUser);
  CHECK(none.status.message() == "op \"x.upload\" takes exactly one payload frame after the JSON header, and 0 were sent");
  CHECK(ran == 0);
  CHECK(r.Served().empty());

  CHECK(route("x.read", {}, Endpoint::kApi, Role::kUser).status.ok());
  CHECK(route("x.upload", {"chunk"}, Endpoint::kApi, Role::kUser).status.ok());
  CHECK(route("x.host", {}, Endpoint::kProvisioner, Role::kHost).status.ok());
  CHECK(ran == 3);
  CHECK(r.PayloadFramesOf("x.upload") == 1);
  CHECK(r.PayloadFramesOf("x.read") == 0);
}

#include <catch2/catch.hpp>

#include "weft/server/api/router.hpp"

using namespace weft::api;

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

TEST_CASE("router: an unknown op is INVALID and lists the known ops", "[api]") {
  Response r = RouteOp(MakeRouter(), "task.tkae", Endpoint::kApi, Role::kSuperadmin);
  CHECK(r.status.code() == weft::Code::kInvalid);
  CHECK_THAT(r.status.message(), Catch::Contains("'task.tkae'") && Catch::Contains("debug.enqueue") &&
                                     Catch::Contains("task.take"));
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

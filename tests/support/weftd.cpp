#include "support/weftd.hpp"

#include <chrono>

#include <catch2/catch.hpp>
#include <zmq.hpp>

#include "weft/client/client.hpp"

namespace weft::testing {

using json = nlohmann::json;

Weftd::Weftd(const std::string& name, const std::string& extra_toml) : dir_(name) {
  WriteFile(dir_ / "weftd.toml",
            "[server]\n"
            "data_dir = \"" + (dir_ / "data").string() + "\"\n"
            "[endpoints]\n"
            "api = \"tcp://127.0.0.1:*\"\n"
            "provisioner = \"tcp://127.0.0.1:*\"\n"
            "events = \"tcp://127.0.0.1:*\"\n" +
                // CurveZMQ is tested in tests/security; other tests opt in with their own [security].
                (extra_toml.find("[security]") == std::string::npos ? "[security]\ncurve = false\n" : "") +
                extra_toml);
  ProcessOptions o;
  o.stdout_path = dir_ / "weftd.out";
  o.stderr_path = dir_ / "weftd.err";
  weftd_ = Process(BuildPath("bin/weftd"), {"--config", (dir_ / "weftd.toml").string()}, o);
  const auto endpoints_file = dir_ / "data" / "endpoints.json";
  bool up = WaitFor(
      [&] {
        json j = json::parse(ReadFile(endpoints_file), nullptr, false);
        if (!j.is_object() || !j.contains("api") || !j.contains("provisioner")) return false;
        if (j["pid"] != weftd_.pid()) return false;  // a file left by another run
        endpoints_ = j;
        return true;
      },
      std::chrono::seconds(15));
  INFO(weftd_.Output());
  REQUIRE(up);
}

RunResult Weftd::Weft(std::vector<std::string> args) const {
  args.insert(args.begin(), {"--server", api()});
  return Run(BuildPath("bin/weft"), args);
}

json Weftd::WeftJson(std::vector<std::string> args) const {
  args.insert(args.begin(), {"-o", "json"});
  RunResult r = Weft(args);
  INFO(r.err << Log());
  REQUIRE(r.exit_code == 0);
  json j = json::parse(r.out, nullptr, false);
  REQUIRE(j.is_object());
  return j;
}

void Weftd::RegisterHost(const std::string& host_id, const json& plugins, int capacity) const {
  zmq::context_t ctx(1);
  client::Client c(ctx, client::Options{.endpoint = provisioner(), .timeout_ms = 5000, .tenant = "", .limits = {}});
  Result<json> reply =
      c.Call("host.register", json{{"host_id", host_id}, {"capacity", capacity}, {"version", "0.1.0"}, {"plugins", plugins}});
  INFO(reply.status().ToString());
  REQUIRE(reply.ok());
}

}  // namespace weft::testing

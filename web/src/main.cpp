// weft-web: the HTTPS gateway and UI server (docs/web.md).
#include <iostream>
#include <string>
#include <vector>

#include "weft/common/log.hpp"
#include "weft/web/config.hpp"
#include "weft/web/gateway.hpp"

namespace {

constexpr const char* kUsage =
    "usage: weft-web [--config FILE]\n"
    "\n"
    "Serves the Weft web UI and its JSON API for weftd (docs/web.md).\n"
    "  -c, --config FILE   weft-web.toml (default /etc/weft/weft-web.toml)\n"
    "      --version       print the version\n";

}  // namespace

int main(int argc, char** argv) {
  using namespace weft;
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string config_path = "/etc/weft/weft-web.toml";
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--help" || args[i] == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (args[i] == "--version") {
      std::cout << "weft-web 0.1.0 (protocol 1)\n";
      return 0;
    }
    if ((args[i] == "--config" || args[i] == "-c") && i + 1 < args.size()) {
      config_path = args[++i];
      continue;
    }
    std::cerr << "weft-web: unexpected argument '" << args[i] << "'\n" << kUsage;
    return 2;
  }
  Result<web::Config> config = web::LoadConfigFile(config_path);
  if (!config.ok()) {
    std::cerr << "weft-web: " << config.status().message() << "\n";
    return 2;
  }
  log::SetLevel(config->server.log_level);
  web::Gateway gateway(std::move(config).value());
  Status started = gateway.Start();
  if (!started.ok()) {
    WEFT_LOG(kError, "weft-web") << started.message();
    return 1;
  }
  gateway.Run();
  return 0;
}

#include "weft/server/daemon/ports.hpp"

#include <fstream>
#include <sstream>

namespace weft::server {
namespace {

// "tcp://HOST:PORT" split at the last colon (so "[::1]" stays whole).
bool SplitTcp(const std::string& address, std::string* host, std::string* port) {
  constexpr std::string_view kTcp = "tcp://";
  if (address.rfind(kTcp, 0) != 0) return false;
  const std::size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon < kTcp.size()) return false;
  *host = address.substr(kTcp.size(), colon - kTcp.size());
  *port = address.substr(colon + 1);
  return !host->empty() && !port->empty();
}

bool AllDigits(const std::string& s) { return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos; }

}  // namespace

std::filesystem::path BoundPortsPath(const std::filesystem::path& data_dir) { return data_dir / "ports.json"; }

nlohmann::json ReadBoundPorts(const std::filesystem::path& data_dir) {
  std::ifstream in(BoundPortsPath(data_dir));
  if (!in) return nlohmann::json::object();
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  return j.is_object() ? j : nlohmann::json::object();
}

std::string PreviousAddress(const nlohmann::json& bound, const std::string& name, const std::string& configured) {
  std::string host, port;
  if (!SplitTcp(configured, &host, &port) || port != "*") return configured;
  auto it = bound.find(name);
  if (it == bound.end() || !it->is_string()) return configured;
  std::string old_host, old_port;
  if (!SplitTcp(it->get<std::string>(), &old_host, &old_port) || !AllDigits(old_port)) return configured;
  // ZeroMQ reports a wildcard interface ("*") as 0.0.0.0.
  const bool same_interface = old_host == host || (host == "*" && old_host == "0.0.0.0");
  return same_interface ? "tcp://" + host + ":" + old_port : configured;
}

}  // namespace weft::server

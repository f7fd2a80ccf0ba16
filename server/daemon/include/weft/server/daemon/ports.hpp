// Ports that outlive a weftd process. An endpoint configured with TCP port `*`
// gets a free port from the system; hosts and clients then know that address.
// weftd records the addresses it bound in <data_dir>/ports.json and, when the
// configuration still says `*` for the same interface, binds the same port
// again after a restart, so they find the new process where the old one was.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace weft::server {

// {"api": "tcp://127.0.0.1:40123", ...} from the last run; an empty object when
// there is none or it cannot be read (the ports are then new ones).
nlohmann::json ReadBoundPorts(const std::filesystem::path& data_dir);

// The address to bind first for endpoint `name` configured as `configured`: the
// one bound last time when `configured` is tcp://HOST:* and the remembered
// address has the same HOST; otherwise `configured` itself.
std::string PreviousAddress(const nlohmann::json& bound, const std::string& name, const std::string& configured);

// The path of the record (for messages).
std::filesystem::path BoundPortsPath(const std::filesystem::path& data_dir);

}  // namespace weft::server

// Command-line parsing for `weft`: the global options every command shares and
// the flags and positional arguments one command declares. Parsing never prints;
// a failure is a Status whose message is the one sentence shown to the user,
// hint included, and always means "usage error" (exit code 2).
// Plain functions over values; thread-safe.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.hpp"

namespace weft::cli {

inline constexpr char kDefaultServer[] = "tcp://127.0.0.1:7420";
inline constexpr int kDefaultTimeoutMs = 5000;
// The local weftd's data directory when $WEFT_DATA_DIR does not name another: the
// packaged weftd's, where it writes credentials/superadmin.json.
inline constexpr char kDefaultDataDir[] = "/var/lib/weft";

enum class OutputFormat : int { kTable = 1, kJson };

struct GlobalOptions {
  std::string server = kDefaultServer;  // resolved: --server > $WEFT_SERVER > default
  OutputFormat output = OutputFormat::kTable;
  int timeout_ms = kDefaultTimeoutMs;
  std::string tenant;  // empty: the server's default tenant
  bool server_given = false;  // --server or $WEFT_SERVER (else a credential file's endpoint wins)
  // --credentials > $WEFT_CREDENTIALS; empty: Context looks in the default places,
  // and uses what it finds there only for the server it was made for.
  std::string credentials;
  // --no-credentials: no credential at all, not even one named by $WEFT_CREDENTIALS.
  bool no_credentials = false;
  // The local weftd's data directory ($WEFT_DATA_DIR), whose credentials/superadmin.json
  // is one of the default places.
  std::string data_dir = kDefaultDataDir;
  bool help = false;
  bool version = false;
};

// Looks up an environment variable; nullopt when unset. Injected so tests need
// not touch the process environment.
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;

// Global options may appear anywhere before a lone "--"; everything else is left
// in `*rest`, in order (the command words and the command's own arguments).
Result<GlobalOptions> ParseGlobalOptions(const std::vector<std::string>& argv, const EnvLookup& env,
                                         std::vector<std::string>* rest);

// A flag a command accepts: "--state STATE" (value_name set) or "--all" (boolean).
struct FlagSpec {
  std::string name;        // with the dashes: "--state"
  std::string value_name;  // empty for a boolean flag
  std::string help;
};

// A positional argument a command accepts, in order.
struct ArgSpec {
  std::string name;  // shown in usage: "NAME"
  bool required = true;
  std::string help;
};

struct ParsedArgs {
  std::map<std::string, std::string> flags;  // boolean flags map to "true"
  std::vector<std::string> positionals;

  bool Has(const std::string& flag) const { return flags.count(flag) != 0; }
  std::string Get(const std::string& flag, std::string fallback = "") const;
};

// Parses a command's own arguments against its declared flags and positionals.
// `command_name` ("host list") names the command in error messages.
Result<ParsedArgs> ParseCommandArgs(const std::vector<std::string>& argv, const std::vector<FlagSpec>& flags,
                                    const std::vector<ArgSpec>& args, std::string_view command_name);

// True for "tcp://...", "ipc://..." and the other ZeroMQ transports.
bool LooksLikeEndpoint(std::string_view endpoint);
// For a tcp:// endpoint: a host and a port from 1 to 65535 ("tcp://h:99999" would
// otherwise only show as a server that never answers). Other transports pass.
Status CheckEndpointPort(std::string_view endpoint);

// Whether a connection to `server` (--server: one endpoint or several, comma-separated)
// reaches the weftd whose api endpoint is `api` (a credential's "api", as weftd bound
// it or as `weft credentials` was pointed at it; also a list). The same endpoint
// written alike, or tcp:// endpoints with the same port whose hosts share an address
// (localhost and 127.0.0.1); a weftd bound to every interface (0.0.0.0, *, ::) is
// reached at any address of this machine. With several endpoints on either side, one
// pair that matches is enough (several weftd on one database are one server to weft).
bool SameWeftd(std::string_view api, std::string_view server);

}  // namespace weft::cli

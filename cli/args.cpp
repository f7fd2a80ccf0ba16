#include "weft/cli/args.hpp"

#include <ifaddrs.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>

#include "weft/cli/format.hpp"
#include "weft/client/client.hpp"

namespace weft::cli {
namespace {

const char kHelpHint[] = "; run 'weft help' for usage";

// The value of -o/--output, which `value` holds unless taking it failed.
Result<OutputFormat> ParseOutputFormat(const std::string& flag, const Result<std::string>& value) {
  if (!value.ok()) return value.status();
  if (*value == "json") return OutputFormat::kJson;
  if (*value == "table") return OutputFormat::kTable;
  return Status::Invalid(flag + " must be json or table, got '" + *value + "'");
}

// Splits "--name=value" into name and value; returns false when there is no '='.
bool SplitInline(const std::string& arg, std::string* name, std::string* value) {
  if (arg.rfind("--", 0) != 0) return false;
  auto eq = arg.find('=');
  if (eq == std::string::npos) return false;
  *name = arg.substr(0, eq);
  *value = arg.substr(eq + 1);
  return true;
}

Result<int> ParseTimeout(const std::string& text) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 1 || value > 3'600'000) {
    return Status::Invalid("--timeout needs a number of milliseconds from 1 to 3600000, got '" + text + "'" +
                           kHelpHint);
  }
  return value;
}

// A tcp:// endpoint's host (without IPv6 brackets) and port; the source address of
// "tcp://source;host:port" is left out. False for other transports and no port.
bool SplitTcp(std::string_view endpoint, std::string* host, int* port) {
  if (endpoint.substr(0, 6) != "tcp://") return false;
  std::string_view address = endpoint.substr(6);
  if (auto semi = address.find(';'); semi != std::string_view::npos) address = address.substr(semi + 1);
  const std::size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) return false;
  const std::string_view digits = address.substr(colon + 1);
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), *port);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) return false;
  std::string_view name = address.substr(0, colon);
  if (name.size() >= 2 && name.front() == '[' && name.back() == ']') name = name.substr(1, name.size() - 2);
  *host = std::string(name);
  return true;
}

// The numeric addresses a host name or address stands for ("localhost": 127.0.0.1, ::1).
std::vector<std::string> Addresses(const std::string& host) {
  std::vector<std::string> out;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return out;
  for (addrinfo* a = found; a; a = a->ai_next) {
    char text[NI_MAXHOST];
    if (getnameinfo(a->ai_addr, a->ai_addrlen, text, sizeof text, nullptr, 0, NI_NUMERICHOST) == 0)
      out.emplace_back(text);
  }
  freeaddrinfo(found);
  return out;
}

bool IsWildcard(const std::string& host) { return host == "*" || host == "0.0.0.0" || host == "::"; }

// An address of this machine: loopback, or one of its interfaces'.
bool IsLocalAddress(const std::string& address) {
  if (address.rfind("127.", 0) == 0 || address == "::1" || address.rfind("::ffff:127.", 0) == 0) return true;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool local = false;
  for (ifaddrs* i = list; i && !local; i = i->ifa_next) {
    if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6)) continue;
    const socklen_t len = i->ifa_addr->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    char text[NI_MAXHOST];
    if (getnameinfo(i->ifa_addr, len, text, sizeof text, nullptr, 0, NI_NUMERICHOST) != 0) continue;
    std::string mine = text;
    mine = mine.substr(0, mine.find('%'));  // fe80::1%eth0
    local = mine == address.substr(0, address.find('%'));
  }
  freeifaddrs(list);
  return local;
}

bool SameEndpoint(std::string_view bound, std::string_view target) {
  if (bound == target) return true;
  std::string bound_host, target_host;
  int bound_port = 0, target_port = 0;
  if (!SplitTcp(bound, &bound_host, &bound_port) || !SplitTcp(target, &target_host, &target_port)) return false;
  if (bound_port != target_port) return false;
  if (bound_host == target_host) return true;
  const std::vector<std::string> targets = Addresses(target_host);
  if (IsWildcard(bound_host)) return std::any_of(targets.begin(), targets.end(), IsLocalAddress);
  const std::vector<std::string> bounds = Addresses(bound_host);
  return std::any_of(targets.begin(), targets.end(), [&](const std::string& a) {
    return std::find(bounds.begin(), bounds.end(), a) != bounds.end();
  });
}

}  // namespace

bool SameWeftd(std::string_view api, std::string_view server) {
  for (const std::string& bound : client::SplitEndpoints(api))
    for (const std::string& target : client::SplitEndpoints(server))
      if (SameEndpoint(bound, target)) return true;
  return false;
}

std::string ParsedArgs::Get(const std::string& flag, std::string fallback) const {
  auto it = flags.find(flag);
  return it == flags.end() ? fallback : it->second;
}

bool LooksLikeEndpoint(std::string_view endpoint) {
  for (std::string_view scheme : {"tcp://", "ipc://", "inproc://", "ws://", "wss://", "tipc://", "vmci://"}) {
    if (endpoint.substr(0, scheme.size()) == scheme && endpoint.size() > scheme.size()) return true;
  }
  return false;
}

Status CheckEndpointPort(std::string_view endpoint) {
  if (endpoint.substr(0, 6) != "tcp://") return Status::Ok();
  std::string_view address = endpoint.substr(6);
  if (auto semi = address.find(';'); semi != std::string_view::npos) address = address.substr(semi + 1);  // source;peer
  const std::size_t colon = address.rfind(':');
  const bool bracketed_host_only = !address.empty() && address.back() == ']';
  if (colon == std::string_view::npos || bracketed_host_only)
    return Status::Invalid("'" + std::string(endpoint) + "' has no port; give one like tcp://127.0.0.1:7420");
  const std::string_view port = address.substr(colon + 1);
  int n = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), n);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || n < 1 || n > 65535)
    return Status::Invalid("'" + std::string(endpoint) + "' has no valid port: '" + std::string(port) +
                           "' is not a number from 1 to 65535");
  if (colon == 0) return Status::Invalid("'" + std::string(endpoint) + "' has no host; give one like tcp://127.0.0.1:7420");
  return Status::Ok();
}

Result<GlobalOptions> ParseGlobalOptions(const std::vector<std::string>& argv, const EnvLookup& env,
                                         std::vector<std::string>* rest) {
  GlobalOptions opts;
  std::optional<std::string> server_flag;
  bool credentials_flag = false;
  rest->clear();
  for (std::size_t i = 0; i < argv.size(); ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      rest->insert(rest->end(), argv.begin() + static_cast<std::ptrdiff_t>(i), argv.end());
      break;
    }
    std::string name = arg;
    std::optional<std::string> value;
    std::string inline_value;
    if (SplitInline(arg, &name, &inline_value)) value = inline_value;
    // "-ojson" is the short form with the value attached.
    if (name.size() > 2 && name.rfind("-o", 0) == 0 && name[2] != '-') {
      value = name.substr(2);
      name = "-o";
    }

    auto take_value = [&](const std::string& flag, const char* what) -> Result<std::string> {
      if (value) return *value;
      if (i + 1 >= argv.size()) {
        return Status::Invalid(flag + " needs " + what + kHelpHint);
      }
      return argv[++i];
    };

    if (name == "--server") {
      WEFT_ASSIGN_OR_RETURN(std::string v, take_value(name, "an endpoint such as tcp://127.0.0.1:7420"));
      server_flag = v;
    } else if (name == "-o" || name == "--output") {
      WEFT_ASSIGN_OR_RETURN(opts.output, ParseOutputFormat(name, take_value(name, "a format: json or table")));
    } else if (name == "--timeout") {
      WEFT_ASSIGN_OR_RETURN(std::string v, take_value(name, "a number of milliseconds"));
      WEFT_ASSIGN_OR_RETURN(int ms, ParseTimeout(v));
      opts.timeout_ms = ms;
    } else if (name == "--credentials") {
      WEFT_ASSIGN_OR_RETURN(std::string v, take_value(name, "a credential file (weft credentials writes one)"));
      opts.credentials = v;
      credentials_flag = true;
    } else if (name == "--no-credentials" && !value) {
      opts.no_credentials = true;
    } else if (name == "--tenant") {
      WEFT_ASSIGN_OR_RETURN(std::string v, take_value(name, "a tenant name"));
      if (v.empty()) return Status::Invalid(std::string("--tenant needs a non-empty tenant name") + kHelpHint);
      opts.tenant = v;
    } else if ((name == "-h" || name == "--help") && !value) {
      opts.help = true;
    } else if (name == "--version" && !value && rest->empty()) {
      // Only before the command words: after them, --version is the command's
      // own flag (`weft provider get NAME --version 2`).
      opts.version = true;
    } else {
      rest->push_back(arg);
    }
  }

  if (opts.no_credentials) {
    // $WEFT_CREDENTIALS gives way to the flag, as --server beats $WEFT_SERVER.
    if (credentials_flag)
      return Status::Invalid(std::string("--credentials and --no-credentials contradict each other; give one") +
                             kHelpHint);
  } else if (opts.credentials.empty()) {
    if (auto from_env = env ? env("WEFT_CREDENTIALS") : std::nullopt; from_env) opts.credentials = *from_env;
  }
  if (auto from_env = env ? env("WEFT_DATA_DIR") : std::nullopt; from_env && !from_env->empty())
    opts.data_dir = *from_env;
  opts.server_given = server_flag.has_value();
  if (server_flag) {
    opts.server = *server_flag;
    // Several weftd on one database (docs/failover.md): a comma-separated list, each checked.
    for (const std::string& one : client::SplitEndpoints(opts.server)) {
      if (!LooksLikeEndpoint(one)) {
        return Status::Invalid("--server '" + one + "' is not a ZeroMQ endpoint; give one like tcp://127.0.0.1:7420");
      }
      if (Status port = CheckEndpointPort(one); !port.ok()) return Status::Invalid("--server " + port.message());
    }
    if (client::SplitEndpoints(opts.server).empty())
      return Status::Invalid("--server needs an endpoint such as tcp://127.0.0.1:7420");
  } else if (auto from_env = env ? env("WEFT_SERVER") : std::nullopt; from_env && !from_env->empty()) {
    opts.server_given = true;
    opts.server = *from_env;
    for (const std::string& one : client::SplitEndpoints(opts.server)) {
      if (!LooksLikeEndpoint(one)) {
        return Status::Invalid("WEFT_SERVER '" + one +
                               "' is not a ZeroMQ endpoint; set it to one like tcp://127.0.0.1:7420");
      }
      if (Status port = CheckEndpointPort(one); !port.ok()) return Status::Invalid("WEFT_SERVER " + port.message());
    }
  }
  return opts;
}

Result<ParsedArgs> ParseCommandArgs(const std::vector<std::string>& argv, const std::vector<FlagSpec>& flags,
                                    const std::vector<ArgSpec>& args, std::string_view command_name) {
  // Built with append: GCC 12 misreports `"literal" + std::string&&` under -O3 (-Wrestrict).
  std::string quoted = "'weft ";
  quoted.append(command_name).append("'");
  std::string hint = "; run 'weft ";
  hint.append(command_name).append(" --help' for usage");
  ParsedArgs parsed;
  bool only_positionals = false;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (!only_positionals && arg == "--") {
      only_positionals = true;
      continue;
    }
    if (!only_positionals && arg.size() > 1 && arg[0] == '-') {
      std::string name = arg;
      std::string inline_value;
      bool has_inline = SplitInline(arg, &name, &inline_value);
      const FlagSpec* spec = nullptr;
      for (const FlagSpec& f : flags) {
        if (f.name == name) spec = &f;
      }
      if (!spec) {
        std::vector<std::string> names;
        for (const FlagSpec& f : flags) names.push_back(f.name);
        const std::string match = ClosestMatch(name, names);
        if (match.empty()) return Status::Invalid(quoted + " has no option '" + name + "'" + hint);
        return Status::Invalid(quoted + " has no option '" + name + "'; did you mean '" + match + "'? (" +
                               hint.substr(2) + ")");
      }
      if (spec->value_name.empty()) {
        if (has_inline) return Status::Invalid(name + " takes no value" + hint);
        parsed.flags[name] = "true";
      } else if (has_inline) {
        parsed.flags[name] = inline_value;
      } else if (i + 1 < argv.size()) {
        parsed.flags[name] = argv[++i];
      } else {
        return Status::Invalid(name + " needs a value (" + spec->value_name + ")" + hint);
      }
      continue;
    }
    parsed.positionals.push_back(arg);
  }

  std::size_t required = 0;
  for (const ArgSpec& a : args) required += a.required ? 1 : 0;
  if (parsed.positionals.size() < required) {
    return Status::Invalid(quoted + " needs " + args[parsed.positionals.size()].name +
                           hint);
  }
  if (parsed.positionals.size() > args.size()) {
    return Status::Invalid(quoted + " does not take '" +
                           parsed.positionals[args.size()] + "'" + hint);
  }
  return parsed;
}

}  // namespace weft::cli

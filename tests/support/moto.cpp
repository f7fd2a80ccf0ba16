#include "support/moto.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "support/temp_dir.hpp"
#include "support/weftd.hpp"

namespace weft::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

const fs::path kScripts = fs::path(WEFT_SOURCE_DIR) / "tests" / "aws";

bool Executable(const fs::path& p) { return !p.empty() && ::access(p.c_str(), X_OK) == 0; }

sockaddr_in Loopback(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  return a;
}

// A port nothing listens on now (moto_server takes a port number, not 0).
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = Loopback(0);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("no free loopback port for moto_server");
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

bool Accepts(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = Loopback(port);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

ProcessOptions LoggedTo(const fs::path& log, std::vector<std::string> env = {}) {
  ProcessOptions o;
  o.env = std::move(env);
  o.stdout_path = log;
  o.stderr_path = log;
  return o;
}

}  // namespace

std::optional<MotoTools> FindMoto() {
  std::vector<fs::path> dirs;
  const char* named = std::getenv("WEFT_MOTO_SERVER");
  if (named) {
    if (*named) dirs.push_back(fs::path(named).parent_path());
  } else {
    if (const char* path = std::getenv("PATH")) {
      std::istringstream in(path);
      for (std::string d; std::getline(in, d, ':');) dirs.emplace_back(d);
    }
    dirs.emplace_back("/root/.pyenv/shims");
  }
  for (const fs::path& d : dirs) {
    if (!Executable(d / "moto_server")) continue;
    for (const char* py : {"python3", "python"}) {
      const fs::path python = d / py;
      if (Executable(python) && Run(python, {"-c", "import moto, boto3"}, 60s).exit_code == 0)
        return MotoTools{d / "moto_server", python};
    }
  }
  return std::nullopt;
}

Moto::Moto(const MotoTools& tools, const fs::path& dir) : tools_(tools), dir_(dir) {
  fs::create_directories(dir_);
  const int port = FreePort();
  url_ = "http://127.0.0.1:" + std::to_string(port);
  server_ = Process(tools_.server, {"-H", "127.0.0.1", "-p", std::to_string(port)},
                    LoggedTo(dir_ / "moto.log", {"INITIAL_NO_AUTH_ACTION_COUNT=3", "MOTO_ENABLE_KEYPAIR_VALIDATION=true"}));
  if (!WaitFor([&] { return Accepts(port); }, 60s))
    throw std::runtime_error("moto_server did not listen on " + url_ + ":\n" + Logs());
  const RunResult setup = Tool({"setup", url_});
  if (setup.exit_code != 0) throw std::runtime_error("moto_tool.py setup failed:\n" + setup.out + setup.err);
  setup_ = json::parse(setup.out);
  proxy_ = Process(tools_.python,
                   {(kScripts / "ec2_fault_proxy.py").string(), url_, (dir_ / "proxy.port").string(),
                    (dir_ / "rules.json").string(), (dir_ / "calls.log").string()},
                   LoggedTo(dir_ / "proxy.log"));
  if (!WaitFor([&] { return fs::exists(dir_ / "proxy.port"); }, 30s))
    throw std::runtime_error("the fault proxy did not start:\n" + Logs());
  proxy_url_ = "http://127.0.0.1:" + ReadFile(dir_ / "proxy.port");
}

RunResult Moto::Tool(std::vector<std::string> args) const {
  args.insert(args.begin(), (kScripts / "moto_tool.py").string());
  return Run(tools_.python, args, 120s);
}

json Moto::Fields() const {
  return {{"api_user", setup_["access_key_id"]},
          {"api_password", setup_["secret_access_key"]},
          {"aws_region", "us-east-1"},
          {"endpoint_url", proxy_url_},
          {"confirm_timeout_s", 30},
          {"api_backoff_ms", 20}};
}

json Moto::State() const {
  const RunResult r = Tool({"state", url_, setup_["access_key_id"], setup_["secret_access_key"]});
  if (r.exit_code != 0) throw std::runtime_error("moto_tool.py state failed:\n" + r.out + r.err);
  return json::parse(r.out);
}

void Moto::ImportKeyPair(const std::string& name, const fs::path& public_key) const {
  const RunResult r =
      Tool({"import-key", url_, setup_["access_key_id"], setup_["secret_access_key"], name, public_key.string()});
  if (r.exit_code != 0) throw std::runtime_error("moto_tool.py import-key failed:\n" + r.out + r.err);
}

void Moto::Faults(const json& rules) const {
  std::ofstream(dir_ / "rules.tmp") << rules.dump();
  fs::rename(dir_ / "rules.tmp", dir_ / "rules.json");
}

std::vector<std::string> Moto::Calls() const {
  std::vector<std::string> out;
  std::ifstream in(dir_ / "calls.log");
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::string Moto::Logs() const {
  return "--- moto ---\n" + Tail(ReadFile(dir_ / "moto.log"), 3000) + "--- proxy ---\n" +
         Tail(ReadFile(dir_ / "proxy.log"), 2000);
}

}  // namespace weft::testing

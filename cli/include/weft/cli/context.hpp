// What a command handler works with: the global options, the output streams and
// a connection to weftd made on first use (so `weft help` never touches the
// network). Call() turns every failure into the one sentence the user sees.
// One per run of `weft`; not thread-safe.
#pragma once

#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "weft/cli/args.hpp"
#include "weft/client/client.hpp"
#include "weft/common/status.hpp"

namespace weft::cli {

using json = nlohmann::json;

class Context {
 public:
  Context(GlobalOptions options, std::ostream& out, std::ostream& err);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const GlobalOptions& options() const { return options_; }
  bool json_output() const { return options_.output == OutputFormat::kJson; }
  std::ostream& out() { return out_; }
  std::ostream& err() { return err_; }

  // Sends one request to the api endpoint and returns the reply body. Errors read
  // as one sentence: the server's own message, or what went wrong on the way.
  Result<json> Call(std::string_view op, json body = json::object());
  // The same with payload frames after the header (resource.upload) and a
  // timeout of its own (-1: --timeout).
  Result<json> Call(std::string_view op, json body, std::vector<std::string> blobs, int timeout_ms = -1);

  // Prints a reply body for `-o json`: indented, one value, newline-terminated.
  void PrintJson(const json& value);
  // Whether PrintJson printed anything: a run that fails prints its error as JSON
  // on stdout (-o json) only when nothing else is there.
  bool printed_json() const { return printed_json_; }

  // The `details` of the server's error reply that made Call return `error`
  // (CONFLICT's cluster_id, ...); an empty object when `error` is no reply's
  // (a failure on the way, or a sentence a command made of its own).
  json ErrorDetails(const Status& error) const;

  // The credential file in use (loaded on first Call), if any: --credentials or
  // $WEFT_CREDENTIALS; else ~/.config/weft/credentials.json, then the local weftd's
  // <$WEFT_DATA_DIR or /var/lib/weft>/credentials/superadmin.json, each only when
  // --server (or $WEFT_SERVER) is not given or names the weftd it is for; none
  // with --no-credentials.
  const std::optional<curve::Credential>& credential() const { return credential_; }
  // The options of weft's connection to weftd: --server, --timeout, --tenant and
  // the credential in use (after the first Call, which loads it). `weft events`
  // gives them to its event stream, whose own questions go where weft's do.
  client::Options ClientOptions() const;
  std::string server() const { return options_.server; }
  // The api endpoint the last request went to (one of --server's; before any: --server).
  std::string endpoint() const { return client_ ? client_->endpoint() : options_.server; }

  // A command to suggest, as the user must type it: `weft ARGS`, with this run's --tenant.
  std::string Suggest(std::string_view args) const;
  // The same without the backticks, for a line to copy as it is.
  std::string CommandLine(std::string_view args) const;

  // For handlers that find a usage problem in their arguments: the run exits 2.
  Status UsageError(std::string message);
  bool usage_error() const { return usage_error_; }

 private:
  GlobalOptions options_;
  std::ostream& out_;
  std::ostream& err_;
  std::unique_ptr<zmq::context_t> zmq_;
  std::unique_ptr<client::Client> client_;
  std::optional<curve::Credential> credential_;
  std::string credential_path_;
  // The credentials found in the default places but not used: made for another weftd.
  struct Skipped {
    std::string path;
    std::string api;
  };
  std::vector<Skipped> skipped_;
  bool usage_error_ = false;
  bool printed_json_ = false;
  // The error replies of this run: code, sentence (as Call returned it), details.
  struct ErrorReply {
    Code code;
    std::string message;
    json details;
  };
  std::vector<ErrorReply> errors_;

  Status LoadCredential();
  // What to say after "weftd at X needs a credential": why none was sent and how to give one.
  std::string CredentialAdvice() const;
  // The error for a request that got no answer, after probing what is at the endpoint.
  Status NoAnswer(int timeout_ms);
};

}  // namespace weft::cli

// weft-status: the smallest program that drives weftd through the C++ client
// library. It connects to weftd's api endpoint as the credential file says
// (CurveZMQ), calls server.status and prints a few of its fields.
//
//   weft-status CREDENTIAL_FILE [ENDPOINT]
//
// Every op of docs/protocol.md is called the same way: client.Call("noun.verb",
// body) returns the reply's body, or a Status with weftd's error code and message.
#include <cstdio>
#include <string>

#include <zmq.hpp>

#include "weft/client/client.hpp"
#include "weft/common/curve.hpp"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: weft-status CREDENTIAL_FILE [ENDPOINT]\n");
    return 2;
  }
  weft::Result<weft::curve::Credential> credential = weft::curve::LoadCredential(argv[1]);
  if (!credential.ok()) {
    std::fprintf(stderr, "weft-status: %s\n", credential.status().message().c_str());
    return 1;
  }
  weft::client::Options options = weft::client::FromCredential(*credential);
  if (argc == 3) options.endpoint = argv[2];

  zmq::context_t context;  // must outlive the client
  weft::client::Client client(context, options);
  weft::Result<nlohmann::json> status = client.Call("server.status");
  if (!status.ok()) {
    std::fprintf(stderr, "weft-status: %s\n", status.status().message().c_str());
    return 1;
  }
  std::printf("weftd %s at %s\n", status->value("version", std::string("?")).c_str(), options.endpoint.c_str());
  std::printf("%s\n", status->dump(2).c_str());
  return 0;
}

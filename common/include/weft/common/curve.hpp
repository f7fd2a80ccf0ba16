// CurveZMQ keys and the files that hold them (docs/security.md).
//
// A key travels as Z85 text (40 characters for 32 bytes), as libzmq prints
// it. Three kinds of file, all JSON, all written mode 0600 through a temporary
// file and a rename:
//   * a key file ({"public_key","secret_key"}): weftd's server key pair, a
//     host's own key pair;
//   * a credential file: what a client needs to reach weftd's api endpoint as
//     one principal (the endpoint, the server's public key, the client's key
//     pair, and for display the tenant, user and role it was made for);
//   * an enrollment token (text, not a file): "weft1." + hex(secret key of a
//     one-time key pair) + "." + hex(server public key).
// Free functions, thread-safe.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include <zmq.hpp>

#include "weft/common/status.hpp"

namespace weft::curve {

struct KeyPair {
  std::string public_key;  // Z85
  std::string secret_key;  // Z85
};

// A fresh key pair from libzmq (libsodium underneath).
[[nodiscard]] Result<KeyPair> Generate();
// The public half of a Z85 secret key.
[[nodiscard]] Result<std::string> PublicFromSecret(std::string_view secret_z85);
// True for 40 characters that decode as Z85.
bool IsKey(std::string_view z85);
// The Z85 text of 32 binary bytes (a ZAP request carries keys in binary).
std::string Z85FromBinary(std::string_view bytes);
// A short, stable name for a key in logs and listings (its first 8 characters).
std::string ShortKey(std::string_view z85);
// What an admin compares before letting a key in (`weft host requests`,
// `weft host accept --fingerprint`): 16 hex digits of the SHA-256 of the
// binary key, in groups of four ("3f2a-91bc-04de-77a1"). Unlike ShortKey, a
// key that matches another's fingerprint cannot be made by trying keys.
std::string Fingerprint(std::string_view z85);

// A socket that connects to a CURVE server (`server_key`) as `keys`.
void SetClientKeys(zmq::socket_t& socket, std::string_view server_key, const KeyPair& keys);
// A socket that serves CURVE with `secret_key`; ZAP requests carry `domain`.
void SetServerKey(zmq::socket_t& socket, std::string_view secret_key, const std::string& domain);

// Reads a key file; NOT_FOUND if it does not exist.
[[nodiscard]] Result<KeyPair> LoadKeyFile(const std::filesystem::path& path);
// Reads the key file, or creates it (and its directory) with a fresh pair.
[[nodiscard]] Result<KeyPair> LoadOrCreateKeyFile(const std::filesystem::path& path, bool* created = nullptr);

struct Credential {
  std::string api;         // weftd's api endpoint
  std::string server_key;  // weftd's public key
  KeyPair keys;            // the client's
  std::string tenant;
  std::string user;
  std::string role;
};
[[nodiscard]] Result<Credential> LoadCredential(const std::filesystem::path& path);
[[nodiscard]] Status SaveCredential(const std::filesystem::path& path, const Credential& credential);

struct Token {
  KeyPair keys;            // the one-time pair the host enrolls with
  std::string server_key;  // weftd's public key
};
std::string EncodeToken(const Token& token);
[[nodiscard]] Result<Token> DecodeToken(std::string_view text);

// Writes `text` to `path` with mode 0600 (temporary file, fsync, rename).
[[nodiscard]] Status WritePrivateFile(const std::filesystem::path& path, std::string_view text);

}  // namespace weft::curve

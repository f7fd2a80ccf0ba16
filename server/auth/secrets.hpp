// Secrets at rest (docs/security.md, "Secrets"): values that must never be
// stored, logged or shown in the clear are sealed with libsodium's secretbox
// (XSalsa20-Poly1305) under a key in <data_dir>/keys/secrets.key, and opened
// only when a task is handed to its host.
//
// A sealed value is the string "enc:v1:" + base64(nonce || box). What is
// sealed: a task result's ssh_auth.private_key, .passphrase and .password, and
// every catalog provider field that a registered plugin declares sensitive.
//
// SecretBox is immutable after Open and thread-safe.
#pragma once

#include <array>
#include <filesystem>
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "weft/common/status.hpp"

namespace weft::auth {

class SecretBox {
 public:
  // Reads the key, or makes it (mode 0600) on first use.
  [[nodiscard]] static Result<SecretBox> Open(const std::filesystem::path& key_file);

  std::string Seal(std::string_view plaintext) const;
  [[nodiscard]] Result<std::string> Unseal(std::string_view sealed) const;
  static bool IsSealed(std::string_view value);

  // Seals the secrets of a task result (ssh_auth's private key, passphrase, password).
  void SealResult(nlohmann::json& result) const;
  // Seals the string values of `fields` whose names are in `sensitive`.
  void SealFields(nlohmann::json& fields, const std::set<std::string>& sensitive) const;
  // Opens every sealed string anywhere in `value`; one that does not open is an error.
  [[nodiscard]] Status OpenAll(nlohmann::json& value) const;

 private:
  std::array<unsigned char, 32> key_{};
};

}  // namespace weft::auth

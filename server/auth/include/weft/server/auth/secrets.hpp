// Secrets at rest (docs/security.md, "Secrets"): values that must never be
// stored, logged or shown in the clear are sealed under a key in
// <data_dir>/keys/secrets.key, and opened only in the task handed to a host.
//
// A sealed value is bound to its place: the tenant, the kind and name of what
// holds it and the field. "enc:v2:" + base64(nonce || box) is the JSON text of
// the value sealed with XChaCha20-Poly1305, the place as additional data, so
// it opens only where it was sealed for: copied into another field, entity or
// tenant it does not open at all. Values an older weftd sealed ("enc:v1:",
// secretbox, bound to nothing) are still opened, as strings, at the places
// weftd sealed them (a provider's fields, a node's SSH secrets); a provider's
// are sealed again as v2 when a host registers its plugin.
//
// What is sealed: a task result's ssh_auth.private_key, .passphrase and
// .password, every catalog provider field and every service action field that
// the plugin declares sensitive.
//
// SecretBox is immutable after Open and thread-safe.
#pragma once

#include <array>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "weft/common/status.hpp"

namespace weft::auth {

// Where a sealed value belongs.
struct SealPlace {
  std::string tenant;
  std::string kind;   // "provider", "service" or "node"
  std::string name;   // the entity's name; a node's: "<cluster id>/<node id>"
  std::string field;  // "api_token"; a service's "install.password"; a node's "ssh_auth.private_key"

  SealPlace At(const std::string& sub) const;  // the place of `sub` inside this one's field
  std::string Describe() const;                // for error sentences
};

class SecretBox {
 public:
  // Reads the key, or makes it (mode 0600) on first use.
  [[nodiscard]] static Result<SecretBox> Open(const std::filesystem::path& key_file);

  // Any JSON value, sealed for `place` (enc:v2:).
  std::string Seal(const nlohmann::json& value, const SealPlace& place) const;
  // The value sealed for `place`: a v2 value sealed for another place does not open.
  [[nodiscard]] Result<nlohmann::json> Open(std::string_view sealed, const SealPlace& place) const;
  // Whether `value` is sealed text (any "enc:" prefix, including versions this weftd cannot open).
  static bool LooksSealed(std::string_view value);
  // The path ("provisioner.note") of the first string in `value` that looks sealed.
  static std::optional<std::string> FindSealedText(const nlohmann::json& value, const std::string& path);

  // Seals the SSH secrets of a task result (ssh_auth's private key,
  // passphrase, password) for the node `node` (its field left empty), even
  // those that look sealed already: what a plugin reports is never opened as is.
  void SealResult(nlohmann::json& result, const SealPlace& node) const;
  // Opens what SealResult sealed, in a node's results.
  [[nodiscard]] Status OpenResult(nlohmann::json& results, const SealPlace& node) const;

  // Seals the values of `fields` named in `sensitive` for `base`.At(name).
  // A value the client sent already sealed is kept only if it was sealed for
  // exactly that place (a catalog export put back); any other sealed text in
  // `fields` is refused. A clear value equal to what `previous` (the same
  // fields as stored last, sealed for the same places; may be null) holds at
  // its name keeps that sealed text, so a put of an equal entity stores equal text.
  [[nodiscard]] Status SealFields(nlohmann::json& fields, const std::set<std::string>& sensitive,
                                  const SealPlace& base, const nlohmann::json* previous = nullptr) const;
  // For a plugin registered after its entities were stored: seals `sensitive`
  // values still in the clear and re-seals v1 ones as v2, in place. Whether it changed anything.
  bool ResealFields(nlohmann::json& fields, const std::set<std::string>& sensitive, const SealPlace& base) const;
  // Opens every sealed value of `fields` (one level: the entity's own fields)
  // for `base`.At(name); v1 values only with `open_v1` (where an older weftd sealed them).
  [[nodiscard]] Status OpenFields(nlohmann::json& fields, const SealPlace& base, bool open_v1 = true) const;

 private:
  [[nodiscard]] Result<std::string> OpenV1(std::string_view sealed) const;

  std::array<unsigned char, 32> key_{};   // secretbox (v1) and the root of the v2 key
  std::array<unsigned char, 32> aead_{};  // XChaCha20-Poly1305 (v2), derived from key_
};

}  // namespace weft::auth

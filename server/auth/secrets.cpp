#include "weft/server/auth/secrets.hpp"

#include <sodium.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "weft/common/curve.hpp"

namespace weft::auth {
namespace {

using json = nlohmann::json;
constexpr std::string_view kAnySealed = "enc:";
constexpr std::string_view kV1 = "enc:v1:";
constexpr std::string_view kV2 = "enc:v2:";
constexpr const char* kSshSecrets[] = {"private_key", "passphrase", "password"};

std::string Base64(const unsigned char* data, std::size_t size) {
  std::string out(sodium_base64_encoded_len(size, sodium_base64_VARIANT_ORIGINAL), '\0');
  sodium_bin2base64(out.data(), out.size(), data, size, sodium_base64_VARIANT_ORIGINAL);
  out.resize(std::strlen(out.c_str()));
  return out;
}

// The bytes after a version prefix, or nullopt when they are not base64 of at least `min` bytes.
std::optional<std::string> Unbase64(std::string_view text, std::size_t min) {
  std::string bin(text.size(), '\0');
  std::size_t size = 0;
  if (sodium_base642bin(reinterpret_cast<unsigned char*>(bin.data()), bin.size(), text.data(), text.size(), nullptr,
                        &size, nullptr, sodium_base64_VARIANT_ORIGINAL) != 0 ||
      size < min)
    return std::nullopt;
  bin.resize(size);
  return bin;
}

// The additional data that binds a v2 value to its place: unambiguous for any names.
std::string AdditionalData(const SealPlace& place) {
  return json::array({"weft-seal", place.tenant, place.kind, place.name, place.field}).dump();
}

}  // namespace

SealPlace SealPlace::At(const std::string& sub) const {
  SealPlace p = *this;
  p.field = field.empty() ? sub : field + "." + sub;
  return p;
}

std::string SealPlace::Describe() const {
  return "field '" + field + "' of " + kind + " '" + name + "' in tenant '" + tenant + "'";
}

Result<SecretBox> SecretBox::Open(const std::filesystem::path& key_file) {
  if (sodium_init() < 0) return Status::Internal("libsodium cannot start");
  SecretBox box;
  std::ifstream in(key_file, std::ios::binary);
  if (in) {
    std::stringstream text;
    text << in.rdbuf();
    std::string hex = text.str();
    while (!hex.empty() && (hex.back() == '\n' || hex.back() == ' ')) hex.pop_back();
    std::size_t used = 0;
    if (sodium_hex2bin(box.key_.data(), box.key_.size(), hex.data(), hex.size(), nullptr, &used, nullptr) != 0 ||
        used != box.key_.size())
      return Status::Invalid(key_file.string() + " is not a secrets key (64 hex digits)");
  } else {
    crypto_secretbox_keygen(box.key_.data());
    std::string hex(box.key_.size() * 2 + 1, '\0');
    sodium_bin2hex(hex.data(), hex.size(), box.key_.data(), box.key_.size());
    hex.pop_back();
    std::error_code ec;
    std::filesystem::create_directories(key_file.parent_path(), ec);
    WEFT_RETURN_IF_ERROR(curve::WritePrivateFile(key_file, hex + "\n"));
  }
  // One key file for both versions; v2 uses a key of its own derived from it.
  static_assert(crypto_kdf_KEYBYTES == 32 && crypto_aead_xchacha20poly1305_ietf_KEYBYTES == 32);
  crypto_kdf_derive_from_key(box.aead_.data(), box.aead_.size(), 2, "weftseal", box.key_.data());
  return box;
}

bool SecretBox::LooksSealed(std::string_view value) { return value.substr(0, kAnySealed.size()) == kAnySealed; }

std::optional<std::string> SecretBox::FindSealedText(const json& value, const std::string& path) {
  if (value.is_string()) {
    if (LooksSealed(value.get_ref<const std::string&>())) return path;
  } else if (value.is_object()) {
    for (const auto& [key, item] : value.items())
      if (auto at = FindSealedText(item, path.empty() ? key : path + "." + key)) return at;
  } else if (value.is_array()) {
    for (std::size_t i = 0; i < value.size(); ++i)
      if (auto at = FindSealedText(value[i], path + "[" + std::to_string(i) + "]")) return at;
  }
  return std::nullopt;
}

std::string SecretBox::Seal(const json& value, const SealPlace& place) const {
  const std::string plain = value.dump();
  const std::string ad = AdditionalData(place);
  constexpr std::size_t kNonce = crypto_aead_xchacha20poly1305_ietf_NPUBBYTES;
  std::string buf(kNonce + plain.size() + crypto_aead_xchacha20poly1305_ietf_ABYTES, '\0');
  auto* nonce = reinterpret_cast<unsigned char*>(buf.data());
  randombytes_buf(nonce, kNonce);
  unsigned long long size = 0;
  crypto_aead_xchacha20poly1305_ietf_encrypt(nonce + kNonce, &size, reinterpret_cast<const unsigned char*>(plain.data()),
                                             plain.size(), reinterpret_cast<const unsigned char*>(ad.data()),
                                             ad.size(), nullptr, nonce, aead_.data());
  return std::string(kV2) + Base64(nonce, kNonce + size);
}

Result<std::string> SecretBox::OpenV1(std::string_view sealed) const {
  sealed.remove_prefix(kV1.size());
  std::optional<std::string> bin = Unbase64(sealed, crypto_secretbox_NONCEBYTES + crypto_secretbox_MACBYTES);
  if (!bin) return Status::Invalid("a sealed secret is damaged");
  const auto* nonce = reinterpret_cast<const unsigned char*>(bin->data());
  std::string plain(bin->size() - crypto_secretbox_NONCEBYTES - crypto_secretbox_MACBYTES, '\0');
  if (crypto_secretbox_open_easy(reinterpret_cast<unsigned char*>(plain.data()), nonce + crypto_secretbox_NONCEBYTES,
                                 bin->size() - crypto_secretbox_NONCEBYTES, nonce, key_.data()) != 0)
    return Status::Invalid("a sealed secret does not open with this weftd's key (keys/secrets.key replaced?)");
  return plain;
}

Result<json> SecretBox::Open(std::string_view sealed, const SealPlace& place) const {
  if (sealed.substr(0, kV1.size()) == kV1) {
    Result<std::string> plain = OpenV1(sealed);
    if (!plain.ok()) return plain.status().WithContext(place.Describe());
    return json(std::move(*plain));
  }
  if (sealed.substr(0, kV2.size()) != kV2)
    return Status::Invalid(place.Describe() + " holds sealed text of a kind this weftd does not know");
  constexpr std::size_t kNonce = crypto_aead_xchacha20poly1305_ietf_NPUBBYTES;
  std::optional<std::string> bin =
      Unbase64(sealed.substr(kV2.size()), kNonce + crypto_aead_xchacha20poly1305_ietf_ABYTES);
  if (!bin) return Status::Invalid(place.Describe() + " holds a damaged sealed value");
  const std::string ad = AdditionalData(place);
  const auto* nonce = reinterpret_cast<const unsigned char*>(bin->data());
  std::string plain(bin->size() - kNonce - crypto_aead_xchacha20poly1305_ietf_ABYTES, '\0');
  unsigned long long size = 0;
  if (crypto_aead_xchacha20poly1305_ietf_decrypt(reinterpret_cast<unsigned char*>(plain.data()), &size, nullptr,
                                                 nonce + kNonce, bin->size() - kNonce,
                                                 reinterpret_cast<const unsigned char*>(ad.data()), ad.size(), nonce,
                                                 aead_.data()) != 0)
    return Status::Invalid(place.Describe() +
                           " holds a sealed value that was not sealed for it (or keys/secrets.key was replaced)");
  plain.resize(size);
  json value = json::parse(plain, nullptr, false);
  if (value.is_discarded()) return Status::Invalid(place.Describe() + " holds a damaged sealed value");
  return value;
}

void SecretBox::SealResult(json& result, const SealPlace& node) const {
  if (!result.is_object()) return;
  auto auth = result.find("ssh_auth");
  if (auth == result.end() || !auth->is_object()) return;
  for (const char* key : kSshSecrets) {
    auto v = auth->find(key);
    if (v != auth->end() && !v->is_null()) *v = Seal(*v, node.At(std::string("ssh_auth.") + key));
  }
}

Status SecretBox::OpenResult(json& results, const SealPlace& node) const {
  if (!results.is_object()) return Status::Ok();
  auto auth = results.find("ssh_auth");
  if (auth == results.end() || !auth->is_object()) return Status::Ok();
  for (const char* key : kSshSecrets) {
    auto v = auth->find(key);
    if (v == auth->end() || !v->is_string() || !LooksSealed(v->get_ref<const std::string&>())) continue;
    WEFT_ASSIGN_OR_RETURN(json plain, Open(v->get_ref<const std::string&>(), node.At(std::string("ssh_auth.") + key)));
    *v = std::move(plain);
  }
  return Status::Ok();
}

Status SecretBox::SealFields(json& fields, const std::set<std::string>& sensitive, const SealPlace& base,
                             const json* previous) const {
  if (!fields.is_object()) return Status::Ok();
  for (auto& [name, value] : fields.items()) {
    const SealPlace place = base.At(name);
    if (value.is_string() && LooksSealed(value.get_ref<const std::string&>())) {
      // Only a v2 value sealed for exactly this place: putting back what weftd showed reveals nothing.
      const std::string& text = value.get_ref<const std::string&>();
      if (text.starts_with(kV2) && Open(text, place).ok()) continue;
      return Status::Invalid(place.Describe() +
                             " holds sealed text (enc:...) that was not sealed for it by this weftd; put the clear "
                             "value instead, weftd seals it");
    }
    if (auto at = FindSealedText(value, name))
      return Status::Invalid(base.At(*at).Describe() +
                             " holds sealed text (enc:...); weftd takes no sealed text from clients, put the clear "
                             "value instead");
    if (!sensitive.count(name) || value.is_null()) continue;
    if (previous && previous->is_object()) {
      auto before = previous->find(name);
      if (before != previous->end() && before->is_string() && before->get_ref<const std::string&>().starts_with(kV2)) {
        Result<json> plain = Open(before->get_ref<const std::string&>(), place);
        if (plain.ok() && *plain == value) {
          value = *before;
          continue;
        }
      }
    }
    value = Seal(value, place);
  }
  return Status::Ok();
}

bool SecretBox::ResealFields(json& fields, const std::set<std::string>& sensitive, const SealPlace& base) const {
  if (!fields.is_object()) return false;
  bool changed = false;
  for (auto& [name, value] : fields.items()) {
    if (!sensitive.count(name) || value.is_null()) continue;
    const SealPlace place = base.At(name);
    if (value.is_string() && LooksSealed(value.get_ref<const std::string&>())) {
      const std::string& text = value.get_ref<const std::string&>();
      if (text.substr(0, kV1.size()) != kV1) continue;
      Result<std::string> plain = OpenV1(text);
      if (!plain.ok()) continue;  // stays as it was; the task that needs it will say why
      value = Seal(json(std::move(*plain)), place);
    } else {
      value = Seal(value, place);
    }
    changed = true;
  }
  return changed;
}

Status SecretBox::OpenFields(json& fields, const SealPlace& base, bool open_v1) const {
  if (!fields.is_object()) return Status::Ok();
  for (auto& [name, value] : fields.items()) {
    if (!value.is_string() || !LooksSealed(value.get_ref<const std::string&>())) continue;
    if (!open_v1 && value.get_ref<const std::string&>().substr(0, kV1.size()) == kV1)
      return Status::Invalid(base.At(name).Describe() + " holds a value sealed by an older weftd, which never sealed "
                             "anything there; put the clear value again");
    WEFT_ASSIGN_OR_RETURN(json plain, Open(value.get_ref<const std::string&>(), base.At(name)));
    value = std::move(plain);
  }
  return Status::Ok();
}

}  // namespace weft::auth

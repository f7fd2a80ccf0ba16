#include "server/auth/secrets.hpp"

#include <sodium.h>

#include <fstream>
#include <sstream>

#include "weft/common/curve.hpp"

namespace weft::auth {
namespace {

using json = nlohmann::json;
constexpr std::string_view kPrefix = "enc:v1:";

std::string Base64(const unsigned char* data, std::size_t size) {
  std::string out(sodium_base64_encoded_len(size, sodium_base64_VARIANT_ORIGINAL), '\0');
  sodium_bin2base64(out.data(), out.size(), data, size, sodium_base64_VARIANT_ORIGINAL);
  out.resize(std::strlen(out.c_str()));
  return out;
}

}  // namespace

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
    return box;
  }
  crypto_secretbox_keygen(box.key_.data());
  std::string hex(box.key_.size() * 2 + 1, '\0');
  sodium_bin2hex(hex.data(), hex.size(), box.key_.data(), box.key_.size());
  hex.pop_back();
  std::error_code ec;
  std::filesystem::create_directories(key_file.parent_path(), ec);
  WEFT_RETURN_IF_ERROR(curve::WritePrivateFile(key_file, hex + "\n"));
  return box;
}

bool SecretBox::IsSealed(std::string_view value) { return value.substr(0, kPrefix.size()) == kPrefix; }

std::string SecretBox::Seal(std::string_view plaintext) const {
  std::string buf(crypto_secretbox_NONCEBYTES + crypto_secretbox_MACBYTES + plaintext.size(), '\0');
  auto* nonce = reinterpret_cast<unsigned char*>(buf.data());
  randombytes_buf(nonce, crypto_secretbox_NONCEBYTES);
  crypto_secretbox_easy(nonce + crypto_secretbox_NONCEBYTES, reinterpret_cast<const unsigned char*>(plaintext.data()),
                        plaintext.size(), nonce, key_.data());
  return std::string(kPrefix) + Base64(nonce, buf.size());
}

Result<std::string> SecretBox::Unseal(std::string_view sealed) const {
  if (!IsSealed(sealed)) return std::string(sealed);
  sealed.remove_prefix(kPrefix.size());
  std::string bin(sealed.size(), '\0');
  std::size_t size = 0;
  if (sodium_base642bin(reinterpret_cast<unsigned char*>(bin.data()), bin.size(), sealed.data(), sealed.size(),
                        nullptr, &size, nullptr, sodium_base64_VARIANT_ORIGINAL) != 0 ||
      size < crypto_secretbox_NONCEBYTES + crypto_secretbox_MACBYTES)
    return Status::Invalid("a sealed secret is damaged");
  const auto* nonce = reinterpret_cast<const unsigned char*>(bin.data());
  std::string plain(size - crypto_secretbox_NONCEBYTES - crypto_secretbox_MACBYTES, '\0');
  if (crypto_secretbox_open_easy(reinterpret_cast<unsigned char*>(plain.data()), nonce + crypto_secretbox_NONCEBYTES,
                                 size - crypto_secretbox_NONCEBYTES, nonce, key_.data()) != 0)
    return Status::Invalid("a sealed secret does not open with this weftd's key (keys/secrets.key replaced?)");
  return plain;
}

void SecretBox::SealResult(json& result) const {
  if (!result.is_object()) return;
  auto auth = result.find("ssh_auth");
  if (auth == result.end() || !auth->is_object()) return;
  for (const char* key : {"private_key", "passphrase", "password"}) {
    auto v = auth->find(key);
    if (v != auth->end() && v->is_string() && !IsSealed(v->get<std::string>())) *v = Seal(v->get<std::string>());
  }
}

void SecretBox::SealFields(json& fields, const std::set<std::string>& sensitive) const {
  if (!fields.is_object()) return;
  for (auto& [name, value] : fields.items()) {
    if (sensitive.count(name) && value.is_string() && !IsSealed(value.get<std::string>()))
      value = Seal(value.get<std::string>());
  }
}

Status SecretBox::OpenAll(json& value) const {
  if (value.is_string()) {
    if (!IsSealed(value.get_ref<const std::string&>())) return Status::Ok();
    Result<std::string> plain = Unseal(value.get_ref<const std::string&>());
    if (!plain.ok()) return plain.status();
    value = std::move(*plain);
    return Status::Ok();
  }
  if (value.is_object() || value.is_array()) {
    for (auto& item : value) WEFT_RETURN_IF_ERROR(OpenAll(item));
  }
  return Status::Ok();
}

}  // namespace weft::auth

#include "weft/cloud/ssh_keys.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstdint>
#include <memory>
#include <stdexcept>

namespace weft::cloud {
namespace {

void PutU32(std::string& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xFF));
}

// SSH's "string": a 32-bit big-endian length, then the bytes.
void PutString(std::string& out, std::string_view bytes) {
  PutU32(out, static_cast<std::uint32_t>(bytes.size()));
  out.append(bytes);
}

std::string PublicBlob(std::string_view public_raw) {
  std::string blob;
  PutString(blob, "ssh-ed25519");
  PutString(blob, public_raw);
  return blob;
}

// openssh-key-v1 (OpenSSH's PROTOCOL.key), unencrypted, one key.
std::string OpenSshPrivateKey(std::string_view seed, std::string_view public_raw, std::string_view comment) {
  std::string secret;
  // The two check integers only have to match each other; derive them from the
  // key so the text is the same every time.
  const std::uint32_t check = (static_cast<std::uint8_t>(seed[0]) << 24) | (static_cast<std::uint8_t>(seed[1]) << 16) |
                              (static_cast<std::uint8_t>(seed[2]) << 8) | static_cast<std::uint8_t>(seed[3]);
  PutU32(secret, check);
  PutU32(secret, check);
  PutString(secret, "ssh-ed25519");
  PutString(secret, public_raw);
  PutString(secret, std::string(seed) + std::string(public_raw));
  PutString(secret, comment);
  for (char pad = 1; secret.size() % 8 != 0; ++pad) secret.push_back(pad);

  std::string body("openssh-key-v1", 15);  // with its NUL
  PutString(body, "none");
  PutString(body, "none");
  PutString(body, "");
  PutU32(body, 1);
  PutString(body, PublicBlob(public_raw));
  PutString(body, secret);

  const std::string b64 = Base64(body);
  std::string text = "-----BEGIN OPENSSH PRIVATE KEY-----\n";
  for (std::size_t i = 0; i < b64.size(); i += 70) text += b64.substr(i, 70) + "\n";
  text += "-----END OPENSSH PRIVATE KEY-----\n";
  return text;
}

}  // namespace

std::string Base64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

SshKeyPair DerivedEd25519(std::string_view secret, std::string_view label, std::string_view comment) {
  unsigned char seed[EVP_MAX_MD_SIZE];
  unsigned int seed_size = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), reinterpret_cast<const unsigned char*>(label.data()),
       label.size(), seed, &seed_size);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, seed, 32), &EVP_PKEY_free);
  if (!key) throw std::runtime_error("libcrypto could not make an ed25519 key");
  unsigned char public_raw[32];
  std::size_t public_size = sizeof public_raw;
  if (EVP_PKEY_get_raw_public_key(key.get(), public_raw, &public_size) != 1 || public_size != 32) {
    throw std::runtime_error("libcrypto could not give the ed25519 public key");
  }
  const std::string_view seed_view(reinterpret_cast<const char*>(seed), 32);
  const std::string_view public_view(reinterpret_cast<const char*>(public_raw), 32);
  SshKeyPair pair;
  pair.public_key = "ssh-ed25519 " + Base64(PublicBlob(public_view));
  pair.public_line = pair.public_key + (comment.empty() ? "" : " " + std::string(comment));
  pair.private_key = OpenSshPrivateKey(seed_view, public_view, comment);
  return pair;
}

}  // namespace weft::cloud

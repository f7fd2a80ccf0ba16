#include "weft/common/curve.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "weft/common/digest.hpp"
#include "weft/common/log.hpp"

namespace weft::curve {
namespace {

using json = nlohmann::json;
constexpr std::size_t kKeyBytes = 32;
constexpr std::size_t kZ85Chars = 40;
constexpr std::string_view kTokenPrefix = "weft1.";

std::string Hex(std::string_view bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

bool Unhex(std::string_view hex, std::string* out) {
  if (hex.size() % 2) return false;
  auto value = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  out->clear();
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    int hi = value(hex[i]), lo = value(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
  }
  return true;
}

bool Decode(std::string_view z85, std::array<std::uint8_t, kKeyBytes>* out) {
  if (z85.size() != kZ85Chars) return false;
  char text[kZ85Chars + 1];
  std::memcpy(text, z85.data(), kZ85Chars);
  text[kZ85Chars] = '\0';
  return zmq_z85_decode(out->data(), text) != nullptr;
}

// Keys are set in binary: 32 bytes are unambiguous, Z85 text needs its NUL.
template <class Option>
void SetKey(zmq::socket_t& socket, Option option, std::string_view z85) {
  std::array<std::uint8_t, kKeyBytes> binary{};
  Decode(z85, &binary);  // callers pass checked keys; a bad one is all zeros and fails the handshake
  socket.set(option, zmq::const_buffer(binary.data(), binary.size()));
}

Result<json> ReadJsonFile(const std::filesystem::path& path, std::string_view what) {
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return Status::NotFound(std::string(what) + " " + path.string() + " does not exist");
    return Status::Unavailable("cannot read " + std::string(what) + " " + path.string() + ": " + std::strerror(errno));
  }
  std::stringstream text;
  text << in.rdbuf();
  json j = json::parse(text.str(), nullptr, false);
  if (!j.is_object()) return Status::Invalid(std::string(what) + " " + path.string() + " is not a JSON object");
  return j;
}

Result<std::string> KeyField(const json& j, const char* key, const std::filesystem::path& path) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string() || !IsKey(it->get<std::string>()))
    return Status::Invalid(path.string() + ": '" + key + "' must be a 40-character Z85 key");
  return it->get<std::string>();
}

}  // namespace

Result<KeyPair> Generate() {
  char pub[kZ85Chars + 1], sec[kZ85Chars + 1];
  if (zmq_curve_keypair(pub, sec) != 0)
    return Status::Unavailable(std::string("cannot make a CURVE key pair: ") + zmq_strerror(zmq_errno()));
  return KeyPair{pub, sec};
}

Result<std::string> PublicFromSecret(std::string_view secret_z85) {
  if (!IsKey(secret_z85)) return Status::Invalid("a secret key must be 40 characters of Z85");
  char sec[kZ85Chars + 1], pub[kZ85Chars + 1];
  std::memcpy(sec, secret_z85.data(), kZ85Chars);
  sec[kZ85Chars] = '\0';
  if (zmq_curve_public(pub, sec) != 0)
    return Status::Unavailable(std::string("cannot derive a CURVE public key: ") + zmq_strerror(zmq_errno()));
  return std::string(pub);
}

bool IsKey(std::string_view z85) {
  std::array<std::uint8_t, kKeyBytes> binary{};
  return Decode(z85, &binary);
}

std::string Z85FromBinary(std::string_view bytes) {
  if (bytes.size() != kKeyBytes) return std::string();
  char text[kZ85Chars + 1];
  if (!zmq_z85_encode(text, reinterpret_cast<const std::uint8_t*>(bytes.data()), kKeyBytes)) return std::string();
  return text;
}

std::string ShortKey(std::string_view z85) { return std::string(z85.substr(0, 8)); }

std::string Fingerprint(std::string_view z85) {
  std::array<std::uint8_t, kKeyBytes> binary{};
  if (!Decode(z85, &binary)) return std::string();
  Result<std::string> digest =
      digest::Sha256Of(std::string_view(reinterpret_cast<const char*>(binary.data()), binary.size()));
  if (!digest.ok()) return std::string();
  const std::string hex = digest->substr(digest::kSha256Prefix.size(), 16);
  return hex.substr(0, 4) + "-" + hex.substr(4, 4) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4);
}

void SetClientKeys(zmq::socket_t& socket, std::string_view server_key, const KeyPair& keys) {
  SetKey(socket, zmq::sockopt::curve_serverkey, server_key);
  SetKey(socket, zmq::sockopt::curve_publickey, keys.public_key);
  SetKey(socket, zmq::sockopt::curve_secretkey, keys.secret_key);
}

void SetServerKey(zmq::socket_t& socket, std::string_view secret_key, const std::string& domain) {
  socket.set(zmq::sockopt::curve_server, 1);
  SetKey(socket, zmq::sockopt::curve_secretkey, secret_key);
  socket.set(zmq::sockopt::zap_domain, domain);
}

Result<KeyPair> LoadKeyFile(const std::filesystem::path& path) {
  WEFT_ASSIGN_OR_RETURN(json j, ReadJsonFile(path, "key file"));
  WEFT_ASSIGN_OR_RETURN(std::string pub, KeyField(j, "public_key", path));
  WEFT_ASSIGN_OR_RETURN(std::string sec, KeyField(j, "secret_key", path));
  WEFT_ASSIGN_OR_RETURN(std::string derived, PublicFromSecret(sec));
  if (derived != pub) return Status::Invalid(path.string() + ": public_key is not the public half of secret_key");
  return KeyPair{pub, sec};
}

Result<KeyPair> LoadOrCreateKeyFile(const std::filesystem::path& path, bool* created) {
  if (created) *created = false;
  Result<KeyPair> existing = LoadKeyFile(path);
  if (existing.ok() || existing.status().code() != Code::kNotFound) return existing;
  WEFT_ASSIGN_OR_RETURN(KeyPair fresh, Generate());
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) return Status::Unavailable("cannot create " + path.parent_path().string() + ": " + ec.message());
  WEFT_RETURN_IF_ERROR(
      WritePrivateFile(path, json{{"public_key", fresh.public_key}, {"secret_key", fresh.secret_key}}.dump(2) + "\n"));
  if (created) *created = true;
  return fresh;
}

Result<Credential> LoadCredential(const std::filesystem::path& path) {
  WEFT_ASSIGN_OR_RETURN(json j, ReadJsonFile(path, "credential file"));
  // Whoever reads the file acts with its key. A warning, not a refusal: a copy
  // made by hand (cp, a redirection) has the umask's mode and still works.
  struct stat st {};
  if (stat(path.c_str(), &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    WEFT_LOG(kWarn, "credentials") << "credential file " << path.string() << " may be read by other users (mode "
                                   << mode << "): whoever reads it acts with its key; chmod 600 " << path.string();
  }
  Credential c;
  auto text = [&](const char* key) { return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : ""; };
  c.api = text("api");
  c.tenant = text("tenant");
  c.user = text("user");
  c.role = text("role");
  WEFT_ASSIGN_OR_RETURN(std::string server, KeyField(j, "server_key", path));
  WEFT_ASSIGN_OR_RETURN(std::string pub, KeyField(j, "public_key", path));
  WEFT_ASSIGN_OR_RETURN(std::string sec, KeyField(j, "secret_key", path));
  // A pair that does not match passes for a stranger's key at the handshake,
  // which a client only sees as no answer: say what is wrong with the file.
  WEFT_ASSIGN_OR_RETURN(std::string derived, PublicFromSecret(sec));
  if (derived != pub)
    return Status::Invalid("credential file " + path.string() +
                           ": public_key is not the public half of secret_key (the file was edited, or mixes two "
                           "credentials); make it again with `weft credentials USER -f FILE`");
  c.server_key = server;
  c.keys = {pub, sec};
  return c;
}

Status SaveCredential(const std::filesystem::path& path, const Credential& c) {
  json j = {{"api", c.api},         {"server_key", c.server_key}, {"public_key", c.keys.public_key},
            {"secret_key", c.keys.secret_key}, {"tenant", c.tenant}, {"user", c.user},
            {"role", c.role}};
  return WritePrivateFile(path, j.dump(2) + "\n");
}

std::string EncodeToken(const Token& token) {
  std::array<std::uint8_t, kKeyBytes> secret{}, server{};
  Decode(token.keys.secret_key, &secret);
  Decode(token.server_key, &server);
  return std::string(kTokenPrefix) + Hex({reinterpret_cast<const char*>(secret.data()), secret.size()}) + "." +
         Hex({reinterpret_cast<const char*>(server.data()), server.size()});
}

Result<Token> DecodeToken(std::string_view text) {
  const Status bad = Status::Invalid("not an enrollment token (expected weft1.<64 hex digits>.<64 hex digits>, as "
                                     "`weft host token create` prints it)");
  if (text.substr(0, kTokenPrefix.size()) != kTokenPrefix) return bad;
  text.remove_prefix(kTokenPrefix.size());
  const auto dot = text.find('.');
  if (dot == std::string_view::npos) return bad;
  std::string secret, server;
  if (!Unhex(text.substr(0, dot), &secret) || !Unhex(text.substr(dot + 1), &server) || secret.size() != kKeyBytes ||
      server.size() != kKeyBytes)
    return bad;
  Token t;
  t.keys.secret_key = Z85FromBinary(secret);
  t.server_key = Z85FromBinary(server);
  WEFT_ASSIGN_OR_RETURN(std::string pub, PublicFromSecret(t.keys.secret_key));
  t.keys.public_key = pub;
  return t;
}

Status WritePrivateFile(const std::filesystem::path& path, std::string_view text) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::Unavailable("cannot write " + tmp.string() + ": " + std::strerror(errno));
  fchmod(fd, 0600);  // an old file of the same name may have had other modes
  std::string_view left = text;
  while (!left.empty()) {
    ssize_t n = write(fd, left.data(), left.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      close(fd);
      return Status::Unavailable("cannot write " + tmp.string() + ": " + std::strerror(err));
    }
    left.remove_prefix(static_cast<std::size_t>(n));
  }
  if (fsync(fd) != 0 || close(fd) != 0)
    return Status::Unavailable("cannot write " + tmp.string() + ": " + std::strerror(errno));
  if (rename(tmp.c_str(), path.c_str()) != 0)
    return Status::Unavailable("cannot rename " + tmp.string() + " to " + path.string() + ": " + std::strerror(errno));
  return Status::Ok();
}

}  // namespace weft::curve

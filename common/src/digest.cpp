#include "weft/common/digest.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <openssl/evp.h>

namespace weft::digest {

struct Sha256::Ctx {
  EVP_MD_CTX* md = nullptr;
  bool ok = false;
  ~Ctx() {
    if (md) EVP_MD_CTX_free(md);
  }
};

Sha256::Sha256() : ctx_(std::make_unique<Ctx>()) {
  ctx_->md = EVP_MD_CTX_new();
  ctx_->ok = ctx_->md && EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr) == 1;
}

Sha256::~Sha256() = default;
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;

void Sha256::Update(std::string_view bytes) {
  if (!ctx_ || !ctx_->ok || bytes.empty()) return;
  if (EVP_DigestUpdate(ctx_->md, bytes.data(), bytes.size()) != 1) ctx_->ok = false;
}

Result<std::string> Sha256::Finish() {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (!ctx_ || !ctx_->ok || EVP_DigestFinal_ex(ctx_->md, out, &n) != 1 || n != 32) {
    if (ctx_) ctx_->ok = false;
    return Status::Internal("OpenSSL could not compute a SHA-256 digest (EVP_sha256 failed)");
  }
  ctx_->ok = false;  // finished
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text(kSha256Prefix);
  text.reserve(kSha256Prefix.size() + 2 * n);
  for (unsigned int i = 0; i < n; ++i) {
    text.push_back(kHex[out[i] >> 4]);
    text.push_back(kHex[out[i] & 0xF]);
  }
  return text;
}

Result<std::string> Sha256Of(std::string_view bytes) {
  Sha256 h;
  h.Update(bytes);
  return h.Finish();
}

Result<FileDigest> Sha256OfFile(const std::filesystem::path& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Internal("cannot open " + path.string() + ": " + std::strerror(errno));
  Sha256 h;
  FileDigest out;
  std::vector<char> buf(1 << 20);
  while (true) {
    ssize_t n = read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      close(fd);
      return Status::Internal("cannot read " + path.string() + ": " + std::strerror(e));
    }
    if (n == 0) break;
    h.Update(std::string_view(buf.data(), static_cast<std::size_t>(n)));
    out.size_bytes += n;
  }
  close(fd);
  WEFT_ASSIGN_OR_RETURN(std::string d, h.Finish());
  out.digest = std::move(d);
  return out;
}

Result<std::string> NormalizeSha256(std::string_view text, std::string_view what) {
  std::string_view hex = text;
  if (hex.substr(0, kSha256Prefix.size()) == kSha256Prefix) hex.remove_prefix(kSha256Prefix.size());
  bool ok = hex.size() == 64;
  std::string out(kSha256Prefix);
  for (char c : hex) {
    if (!ok) break;
    if (c >= '0' && c <= '9') {
      out.push_back(c);
    } else if (c >= 'a' && c <= 'f') {
      out.push_back(c);
    } else if (c >= 'A' && c <= 'F') {
      out.push_back(static_cast<char>(c - 'A' + 'a'));
    } else {
      ok = false;
    }
  }
  if (!ok)
    return Status::Invalid(std::string(what) + " must be a SHA-256 digest: \"sha256:\" and 64 hex digits, got \"" +
                           std::string(text.substr(0, 100)) + "\"");
  return out;
}

}  // namespace weft::digest

// SHA-256 digests of resource files, as the server's resource store records them
// and weft-host checks them (docs/protocol.md, "Resources"). Computed with
// OpenSSL libcrypto's EVP interface.
//
// A digest travels as text: "sha256:" followed by 64 lower-case hex digits.
// Sha256 is a plain value owned by one thread at a time; the free functions are
// thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "weft/common/status.hpp"

namespace weft::digest {

inline constexpr std::string_view kSha256Prefix = "sha256:";

// An incremental SHA-256.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(std::string_view bytes);
  // "sha256:<hex>" of everything given so far; the object must not be updated afterwards.
  [[nodiscard]] Result<std::string> Finish();

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

// "sha256:<hex>" of `bytes`.
[[nodiscard]] Result<std::string> Sha256Of(std::string_view bytes);
// "sha256:<hex>" of a file's content, and its size in bytes.
struct FileDigest {
  std::string digest;
  std::int64_t size_bytes = 0;
};
[[nodiscard]] Result<FileDigest> Sha256OfFile(const std::filesystem::path& path);

// Accepts "sha256:<64 hex>" or bare 64 hex digits, either case; returns the
// canonical "sha256:<lower-case hex>", or INVALID naming `what`.
[[nodiscard]] Result<std::string> NormalizeSha256(std::string_view text, std::string_view what);

}  // namespace weft::digest

// The aws provider's derived SSH keys: the same inputs give the same key, and
// OpenSSH itself reads the private key text and derives the same public key.
#include <filesystem>
#include <string>

#include <catch2/catch.hpp>

#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "weft/cloud/ssh_keys.hpp"

namespace fs = std::filesystem;
using weft::cloud::DerivedEd25519;

TEST_CASE("aws ssh keys: derived from secret and label, the same every time, different for another node",
          "[aws][keys]") {
  const auto a = DerivedEd25519("secret", "weft aws login key\ndefault/3/web-1", "weft-default-3-web-1");
  const auto again = DerivedEd25519("secret", "weft aws login key\ndefault/3/web-1", "weft-default-3-web-1");
  CHECK(a.private_key == again.private_key);
  CHECK(a.public_line == again.public_line);
  CHECK(DerivedEd25519("secret", "weft aws login key\ndefault/3/web-2", "x").public_key != a.public_key);
  CHECK(DerivedEd25519("other secret", "weft aws login key\ndefault/3/web-1", "x").public_key != a.public_key);
  // "ssh-ed25519 " + base64 of (string "ssh-ed25519", string 32 bytes): always this prefix and length.
  CHECK(a.public_key.rfind("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI", 0) == 0);
  CHECK(a.public_key.size() == std::string("ssh-ed25519 ").size() + 68);
  CHECK(a.public_line == a.public_key + " weft-default-3-web-1");
  CHECK(a.private_key.rfind("-----BEGIN OPENSSH PRIVATE KEY-----\n", 0) == 0);
  CHECK(a.private_key.find("-----END OPENSSH PRIVATE KEY-----\n") != std::string::npos);
}

TEST_CASE("aws ssh keys: ssh-keygen reads the private key and derives the same public key", "[aws][keys]") {
  const auto key = DerivedEd25519("s3cr3t", "weft aws host key\ndefault/7/db-1", "db-1.weft.test");
  weft::testing::TempDir tmp("weft-aws-keys");
  const fs::path file = tmp / "id_ed25519";
  weft::testing::WriteFile(file, key.private_key);
  fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
  const weft::testing::RunResult r = weft::testing::Run("/usr/bin/ssh-keygen", {"-y", "-f", file.string()});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out == key.public_line + "\n");
}

TEST_CASE("aws ssh keys: base64 as RFC 4648 spells it", "[aws][keys]") {
  CHECK(weft::cloud::Base64("") == "");
  CHECK(weft::cloud::Base64("f") == "Zg==");
  CHECK(weft::cloud::Base64("fo") == "Zm8=");
  CHECK(weft::cloud::Base64("foo") == "Zm9v");
  CHECK(weft::cloud::Base64("foobar") == "Zm9vYmFy");
}

// The sealing primitives (server/auth/secrets.cpp) on their own: a value opens
// only at the place it was sealed for, keeps its JSON type, and the values an
// older weftd sealed (enc:v1:) still open where weftd put them.
// security_test drives the same paths through the real processes.
#include <catch2/catch.hpp>

#include <sodium.h>

#include <string>

#include <nlohmann/json.hpp>

#include "weft/server/auth/secrets.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"

namespace {

using json = nlohmann::json;
using weft::auth::SealPlace;
using weft::auth::SecretBox;

// A value as an older weftd sealed it: secretbox under the key file's key, bound to nothing.
std::string SealV1(const std::filesystem::path& key_file, const std::string& plain) {
  std::string hex = weft::testing::ReadFile(key_file);
  unsigned char key[crypto_secretbox_KEYBYTES];
  REQUIRE(sodium_hex2bin(key, sizeof key, hex.data(), hex.size(), "\n", nullptr, nullptr) == 0);
  std::string buf(crypto_secretbox_NONCEBYTES + crypto_secretbox_MACBYTES + plain.size(), '\0');
  auto* nonce = reinterpret_cast<unsigned char*>(buf.data());
  randombytes_buf(nonce, crypto_secretbox_NONCEBYTES);
  crypto_secretbox_easy(nonce + crypto_secretbox_NONCEBYTES, reinterpret_cast<const unsigned char*>(plain.data()),
                        plain.size(), nonce, key);
  std::string b64(sodium_base64_encoded_len(buf.size(), sodium_base64_VARIANT_ORIGINAL), '\0');
  sodium_bin2base64(b64.data(), b64.size(), nonce, buf.size(), sodium_base64_VARIANT_ORIGINAL);
  b64.resize(b64.size() - 1);
  return "enc:v1:" + b64;
}

}  // namespace

TEST_CASE("secrets: a sealed value opens only at its place, with its JSON type", "[security]") {
  weft::testing::TempDir tmp("weft-secrets");
  auto box = SecretBox::Open(tmp.path() / "secrets.key");
  REQUIRE(box.ok());
  const SealPlace place{"acme", "provider", "aws", "api_token"};
  const json value = {{"keys", json::array({"SECRET", 7})}};
  const std::string sealed = box->Seal(value, place);
  CHECK(sealed.rfind("enc:v2:", 0) == 0);
  CHECK(sealed.find("SECRET") == std::string::npos);
  auto opened = box->Open(sealed, place);
  REQUIRE(opened.ok());
  CHECK(*opened == value);
  for (const SealPlace& elsewhere : {SealPlace{"globex", "provider", "aws", "api_token"},
                                     SealPlace{"acme", "service", "aws", "api_token"},
                                     SealPlace{"acme", "provider", "aws2", "api_token"},
                                     SealPlace{"acme", "provider", "aws", "note"}}) {
    auto wrong = box->Open(sealed, elsewhere);
    REQUIRE_FALSE(wrong.ok());
    CHECK_THAT(wrong.status().message(), Catch::Contains("was not sealed for it"));
  }
  // The same key file, read again by a restarted weftd, opens it.
  auto again = SecretBox::Open(tmp.path() / "secrets.key");
  REQUIRE(again.ok());
  CHECK(again->Open(sealed, place).ok());
}

TEST_CASE("secrets: fields are sealed for their place, sealed text from elsewhere is refused", "[security]") {
  weft::testing::TempDir tmp("weft-secrets");
  auto box = SecretBox::Open(tmp.path() / "secrets.key");
  REQUIRE(box.ok());
  const SealPlace aws{"acme", "provider", "aws", ""};
  json fields = {{"api_token", "T0KEN"}, {"credentials", {{"k", 1}}}, {"region", "eu"}};
  REQUIRE(box->SealFields(fields, {"api_token", "credentials"}, aws).ok());
  CHECK(fields["region"] == "eu");
  CHECK(fields.dump().find("T0KEN") == std::string::npos);
  // Put back as it was shown: kept. Moved to another field or entity: refused.
  json again = fields;
  REQUIRE(box->SealFields(again, {"api_token", "credentials"}, aws).ok());
  CHECK(again == fields);
  json moved = {{"region", fields["api_token"]}};
  CHECK_THAT(box->SealFields(moved, {"api_token"}, aws).message(),
             Catch::Contains("field 'region' of provider 'aws' in tenant 'acme' holds sealed text"));
  json nested = {{"tags", {{"x", fields["api_token"]}}}};
  CHECK_THAT(box->SealFields(nested, {}, aws).message(), Catch::Contains("field 'tags.x' of provider 'aws'"));
  json opened = fields;
  REQUIRE(box->OpenFields(opened, aws).ok());
  CHECK(opened == json({{"api_token", "T0KEN"}, {"credentials", {{"k", 1}}}, {"region", "eu"}}));
  json elsewhere = fields;
  CHECK_FALSE(box->OpenFields(elsewhere, {"acme", "provider", "gcp", ""}).ok());
}

TEST_CASE("secrets: a clear value equal to the one stored keeps its sealed text, any other is sealed anew",
          "[security]") {
  weft::testing::TempDir tmp("weft-secrets");
  auto box = SecretBox::Open(tmp.path() / "secrets.key");
  REQUIRE(box.ok());
  const SealPlace aws{"acme", "provider", "aws", ""};
  const json clear = {{"api_token", "T0KEN"}, {"credentials", {{"k", 1}}}, {"region", "eu"}};
  json stored = clear;
  REQUIRE(box->SealFields(stored, {"api_token", "credentials"}, aws).ok());

  // The same clear values again: the stored sealed text, so the entity is equal to the stored one.
  json same = clear;
  REQUIRE(box->SealFields(same, {"api_token", "credentials"}, aws, &stored).ok());
  CHECK(same == stored);
  // Without the stored fields, sealing draws a new nonce: not equal text.
  json fresh = clear;
  REQUIRE(box->SealFields(fresh, {"api_token", "credentials"}, aws).ok());
  CHECK(fresh["api_token"] != stored["api_token"]);

  // A changed value is sealed anew (and opens to the new value); the unchanged one is kept.
  json changed = clear;
  changed["api_token"] = "N3W";
  REQUIRE(box->SealFields(changed, {"api_token", "credentials"}, aws, &stored).ok());
  CHECK(changed["api_token"] != stored["api_token"]);
  CHECK(changed["credentials"] == stored["credentials"]);
  json opened = changed;
  REQUIRE(box->OpenFields(opened, aws).ok());
  CHECK(opened["api_token"] == "N3W");

  // Stored text sealed for another entity is not taken over, even for an equal value.
  const SealPlace gcp{"acme", "provider", "gcp", ""};
  json other = clear;
  REQUIRE(box->SealFields(other, {"api_token", "credentials"}, gcp, &stored).ok());
  CHECK(other["api_token"] != stored["api_token"]);
  json other_opened = other;
  REQUIRE(box->OpenFields(other_opened, gcp).ok());
  CHECK(other_opened["api_token"] == "T0KEN");
}

TEST_CASE("secrets: SSH secrets a plugin reports are sealed anew, even when they look sealed", "[security]") {
  weft::testing::TempDir tmp("weft-secrets");
  auto box = SecretBox::Open(tmp.path() / "secrets.key");
  REQUIRE(box.ok());
  const std::string foreign = box->Seal(json("OTHER TENANT'S KEY"), {"globex", "node", "1/n1", "ssh_auth.private_key"});
  const SealPlace node{"acme", "node", "7/web-1", ""};
  json result = {{"ssh_auth", {{"user", "root"}, {"private_key", foreign}, {"password", "pw"}}}};
  box->SealResult(result, node);
  CHECK(result["ssh_auth"]["user"] == "root");
  REQUIRE(box->OpenResult(result, node).ok());
  CHECK(result["ssh_auth"]["private_key"] == foreign);  // the plugin's own text, not opened
  CHECK(result["ssh_auth"]["password"] == "pw");
}

TEST_CASE("secrets: values an older weftd sealed open where it put them, and are sealed again as v2",
          "[security]") {
  weft::testing::TempDir tmp("weft-secrets");
  auto box = SecretBox::Open(tmp.path() / "secrets.key");
  REQUIRE(box.ok());
  const std::string v1 = SealV1(tmp.path() / "secrets.key", "OLD TOKEN");
  const SealPlace aws{"acme", "provider", "aws", ""};
  json fields = {{"api_token", v1}};
  json opened = fields;
  REQUIRE(box->OpenFields(opened, aws).ok());
  CHECK(opened["api_token"] == "OLD TOKEN");
  // Never where an older weftd sealed nothing (service fields), and never from a client.
  json service = fields;
  CHECK_THAT(box->OpenFields(service, {"acme", "service", "db", "install"}, false).message(),
             Catch::Contains("sealed by an older weftd"));
  json put = fields;
  CHECK_FALSE(box->SealFields(put, {"api_token"}, aws).ok());
  // A registration re-seals it for its place.
  REQUIRE(box->ResealFields(fields, {"api_token"}, aws));
  CHECK(fields["api_token"].get<std::string>().rfind("enc:v2:", 0) == 0);
  REQUIRE(box->OpenFields(fields, aws).ok());
  CHECK(fields["api_token"] == "OLD TOKEN");
}

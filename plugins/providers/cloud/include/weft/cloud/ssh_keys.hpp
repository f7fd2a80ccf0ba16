// weft::cloud SSH keys, shared by the aws and openstack providers: ed25519 key
// pairs derived from a secret, so a CREATE run again (a lost attempt, a retried
// job) makes exactly the key it made the first time and the cloud's key pair
// import (EC2's ImportKeyPair, Nova's os-keypairs) finds it already there.
// The node's login key and its SSH host key (handed to cloud-init, so the host
// key is known before the machine boots and is checked from the first
// connection) are both made this way.
//
// Thread-safety: free functions on values.
#pragma once

#include <string>
#include <string_view>

namespace weft::cloud {

struct SshKeyPair {
  std::string public_line;  // "ssh-ed25519 AAAA... comment", as authorized_keys and ImportKeyPair take it
  std::string public_key;   // "ssh-ed25519 AAAA..." without the comment, as host_keys list it
  std::string private_key;  // OpenSSH text ("-----BEGIN OPENSSH PRIVATE KEY-----"), unencrypted
};

// The key pair whose 32-byte seed is HMAC-SHA256(secret, label).
SshKeyPair DerivedEd25519(std::string_view secret, std::string_view label, std::string_view comment);

// Standard base64 with padding, one line.
std::string Base64(std::string_view bytes);

}  // namespace weft::cloud

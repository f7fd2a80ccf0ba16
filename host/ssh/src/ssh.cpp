#include "weft/ssh/ssh.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <libssh2.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>

namespace weft::host::ssh {
namespace {

using Clock = std::chrono::steady_clock;

// libssh2_init is not thread-safe and must run once per process.
void InitLibssh2Once() {
  static std::once_flag once;
  std::call_once(once, [] { (void)libssh2_init(0); });
}

constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

bool Base64Decode(std::string_view in, std::string* out) {
  out->clear();
  int val = 0;
  int bits = -8;
  for (char c : in) {
    if (c == '=') break;
    const char* p = std::strchr(kB64, c);
    if (c == '\0' || p == nullptr) return false;
    val = (val << 6) + static_cast<int>(p - kB64);
    bits += 6;
    if (bits >= 0) {
      out->push_back(static_cast<char>((val >> bits) & 0xFF));
      bits -= 8;
    }
  }
  return !out->empty();
}

std::string HostKeyTypeName(int type) {
  switch (type) {
    case LIBSSH2_HOSTKEY_TYPE_RSA: return "ssh-rsa";
    case LIBSSH2_HOSTKEY_TYPE_DSS: return "ssh-dss";
    case LIBSSH2_HOSTKEY_TYPE_ECDSA_256: return "ecdsa-sha2-nistp256";
    case LIBSSH2_HOSTKEY_TYPE_ECDSA_384: return "ecdsa-sha2-nistp384";
    case LIBSSH2_HOSTKEY_TYPE_ECDSA_521: return "ecdsa-sha2-nistp521";
    case LIBSSH2_HOSTKEY_TYPE_ED25519: return "ssh-ed25519";
    default: return "unknown";
  }
}

int SignalNumber(std::string_view name) {
  static const std::pair<std::string_view, int> kSignals[] = {
      {"HUP", 1}, {"INT", 2}, {"QUIT", 3}, {"ILL", 4}, {"ABRT", 6}, {"FPE", 8}, {"KILL", 9},
      {"SEGV", 11}, {"PIPE", 13}, {"ALRM", 14}, {"TERM", 15}, {"USR1", 10}, {"USR2", 12}};
  for (const auto& [n, v] : kSignals) {
    if (n == name) return v;
  }
  return 127;
}

}  // namespace

std::string Sha256Hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr) != 1) return "sha256-unavailable";
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[md[i] >> 4]);
    out.push_back(kHex[md[i] & 0xF]);
  }
  return out;
}

bool ParseHostKey(std::string_view line, std::string* type, std::string* blob) {
  auto skip_space = [&] {
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
  };
  auto word = [&] {
    skip_space();
    std::size_t n = 0;
    while (n < line.size() && line[n] != ' ' && line[n] != '\t' && line[n] != '\n' && line[n] != '\r') ++n;
    std::string_view w = line.substr(0, n);
    line.remove_prefix(n);
    return w;
  };
  std::string_view t = word();
  std::string_view b = word();
  if (t.empty() || b.empty()) return false;
  std::string decoded;
  if (!Base64Decode(b, &decoded)) return false;
  *type = std::string(t);
  *blob = std::move(decoded);
  return true;
}

// ---------------------------------------------------------------------------

struct Session::Impl {
  int fd = -1;
  LIBSSH2_SESSION* session = nullptr;
  std::string name;  // "node web-1 (127.0.2.1:22)"

  ~Impl() {
    if (session) {
      // Best effort and bounded: the socket is non-blocking, so a disconnect
      // that would block is simply dropped.
      (void)libssh2_session_disconnect(session, "weft: closing");
      // In non-blocking mode libssh2_session_free returns EAGAIN (and frees
      // nothing) while it still wants to send, e.g. the close of a channel
      // abandoned on timeout. With the socket shut down every send fails at
      // once, so the loop ends after a turn or two.
      if (fd >= 0) (void)::shutdown(fd, SHUT_RDWR);
      for (int i = 0; i < 100 && libssh2_session_free(session) == LIBSSH2_ERROR_EAGAIN; ++i) {
        (void)::poll(nullptr, 0, 1);
      }
    }
    if (fd >= 0) ::close(fd);
  }

  std::string LastError() const {
    char* msg = nullptr;
    int len = 0;
    (void)libssh2_session_last_error(session, &msg, &len, 0);
    return msg && len > 0 ? std::string(msg, static_cast<std::size_t>(len)) : std::string("unknown libssh2 error");
  }

  // Waits until the socket is ready in the direction libssh2 is blocked on.
  // Returns false once the deadline passed.
  bool Wait(Clock::time_point deadline, int max_wait_ms = 100) const {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{};
    p.fd = fd;
    int dir = session ? libssh2_session_block_directions(session) : LIBSSH2_SESSION_BLOCK_OUTBOUND;
    if (dir & LIBSSH2_SESSION_BLOCK_INBOUND) p.events |= POLLIN;
    if (dir & LIBSSH2_SESSION_BLOCK_OUTBOUND) p.events |= POLLOUT;
    if (p.events == 0) p.events = POLLIN;
    int wait_ms = static_cast<int>(std::min<long long>(left, max_wait_ms));
    (void)::poll(&p, 1, wait_ms);
    return true;
  }

  // Closes `channel` and waits until the node confirms. kTimeout (with no
  // message: the caller words it) once the deadline passes; kUnavailable,
  // prefixed with `what` ("SSH to node x"), when libssh2 fails.
  Status CloseChannel(LIBSSH2_CHANNEL* channel, Clock::time_point deadline, const std::string& what) const {
    int rc;
    while ((rc = libssh2_channel_close(channel)) == LIBSSH2_ERROR_EAGAIN) {
      if (!Wait(deadline)) return Status::Timeout("");
    }
    if (rc != 0) return Status::Unavailable(what + ": closing the channel failed: " + LastError());
    while ((rc = libssh2_channel_wait_closed(channel)) == LIBSSH2_ERROR_EAGAIN) {
      if (!Wait(deadline)) return Status::Timeout("");
    }
    if (rc != 0) return Status::Unavailable(what + ": waiting for the channel to close failed: " + LastError());
    return Status::Ok();
  }
};

Result<std::unique_ptr<Session>> Session::Connect(const Target& target, int timeout_ms) {
  InitLibssh2Once();
  const auto deadline = Clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 1));
  std::string name = "node " + target.Name() + " (" + target.address + ":" + std::to_string(target.port) + ")";

  if (target.address.empty()) return Status::Invalid("SSH to node " + target.Name() + ": no address to connect to");
  if (target.host_keys.empty()) {
    return Status::Invalid("SSH to " + name +
                           ": no expected host keys; Weft never connects without host-key checking (the provider's "
                           "CONFIRM must report host_keys)");
  }
  if (target.private_key.empty() && target.private_key_path.empty()) {
    return Status::Invalid("SSH to " + name + ": no private key for user '" + target.user +
                           "'; set ssh_auth.private_key (or a key file)");
  }
  // Decode the expected keys first: a malformed one is the caller's error.
  std::vector<std::pair<std::string, std::string>> expected;
  for (const std::string& line : target.host_keys) {
    std::string type, blob;
    if (!ParseHostKey(line, &type, &blob)) {
      return Status::Invalid("SSH to " + name + ": expected host key '" + line.substr(0, 40) +
                             "' is not of the form 'type base64'");
    }
    expected.emplace_back(std::move(type), std::move(blob));
  }

  auto s = std::unique_ptr<Session>(new Session());
  s->impl_ = std::make_unique<Impl>();
  s->target_ = target;
  Impl& im = *s->impl_;
  im.name = name;

  // ---- TCP connect with a deadline ----
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int gai = ::getaddrinfo(target.address.c_str(), std::to_string(target.port).c_str(), &hints, &res);
  if (gai != 0 || res == nullptr) {
    return Status::Unavailable("SSH to " + name + ": cannot resolve the address: " + gai_strerror(gai));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> res_guard(res, &freeaddrinfo);
  im.fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (im.fd < 0) return Status::Unavailable("SSH to " + name + ": socket() failed: " + std::strerror(errno));
  if (::connect(im.fd, res->ai_addr, res->ai_addrlen) != 0) {
    if (errno != EINPROGRESS) {
      return Status::Unavailable("SSH to " + name + ": cannot connect: " + std::strerror(errno) +
                                 " (is the node's sshd running?)");
    }
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) {
        return Status::Timeout("SSH to " + name + ": connect timed out after " + std::to_string(timeout_ms) + " ms");
      }
      pollfd p{im.fd, POLLOUT, 0};
      int n = ::poll(&p, 1, static_cast<int>(left));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Status::Unavailable("SSH to " + name + ": poll failed: " + std::strerror(errno));
      if (n > 0) break;
    }
    int so_error = 0;
    socklen_t len = sizeof so_error;
    if (::getsockopt(im.fd, SOL_SOCKET, SO_ERROR, &so_error, &len) != 0 || so_error != 0) {
      return Status::Unavailable("SSH to " + name + ": cannot connect: " + std::strerror(so_error ? so_error : errno) +
                                 " (is the node's sshd running?)");
    }
  }

  // ---- SSH handshake ----
  im.session = libssh2_session_init();
  if (!im.session) return Status::Internal("SSH to " + name + ": libssh2_session_init failed (out of memory?)");
  libssh2_session_set_blocking(im.session, 0);
  // Offer only the host key types we can check, so the server shows one of them.
  std::string prefs;
  for (const auto& [type, blob] : expected) {
    if (prefs.find(type) == std::string::npos) prefs += (prefs.empty() ? "" : ",") + type;
  }
  if (libssh2_session_method_pref(im.session, LIBSSH2_METHOD_HOSTKEY, prefs.c_str()) != 0) {
    return Status::Invalid("SSH to " + name + ": this libssh2 supports none of the expected host key types (" + prefs +
                           "): " + im.LastError());
  }
  int rc;
  while ((rc = libssh2_session_handshake(im.session, im.fd)) == LIBSSH2_ERROR_EAGAIN) {
    if (!im.Wait(deadline)) {
      return Status::Timeout("SSH to " + name + ": handshake timed out after " + std::to_string(timeout_ms) + " ms");
    }
  }
  if (rc != 0) return Status::Unavailable("SSH to " + name + ": handshake failed: " + im.LastError());

  // ---- host key check, before anything is sent that proves who we are ----
  std::size_t key_len = 0;
  int key_type = 0;
  const char* key = libssh2_session_hostkey(im.session, &key_len, &key_type);
  if (!key || key_len == 0) return Status::Unavailable("SSH to " + name + ": the server presented no host key");
  const std::string_view presented(key, key_len);
  bool match = std::any_of(expected.begin(), expected.end(), [&](const auto& e) { return e.second == presented; });
  if (!match) {
    return Status::Denied("SSH to " + name + ": host key mismatch: the server presented " +
                          HostKeyTypeName(key_type) + " key SHA256:" + Sha256Hex(presented).substr(0, 16) +
                          "..., which is not among the " + std::to_string(expected.size()) +
                          " key(s) the node reported at CONFIRM; refusing to connect (the node was replaced or "
                          "someone is in the middle)");
  }

  // ---- authentication ----
  std::string key_text = target.private_key;
  if (key_text.empty()) {
    std::ifstream in(target.private_key_path, std::ios::binary);
    if (!in) {
      return Status::Invalid("SSH to " + name + ": cannot read the private key file " + target.private_key_path);
    }
    key_text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  while ((rc = libssh2_userauth_publickey_frommemory(
              im.session, target.user.c_str(), target.user.size(), nullptr, 0, key_text.data(), key_text.size(),
              target.passphrase.empty() ? nullptr : target.passphrase.c_str())) == LIBSSH2_ERROR_EAGAIN) {
    if (!im.Wait(deadline)) {
      return Status::Timeout("SSH to " + name + ": authentication timed out after " + std::to_string(timeout_ms) +
                             " ms");
    }
  }
  // Scrub our copy of the key text (the Target keeps its own for reconnects).
  std::fill(key_text.begin(), key_text.end(), '\0');
  if (rc != 0) {
    // libssh2's messages never contain key material, only what went wrong.
    return Status::Denied("SSH to " + name + ": key authentication as '" + target.user + "' failed: " +
                          im.LastError() + " (check that ssh_auth.private_key belongs to the node's authorized key)");
  }
  return s;
}

Session::~Session() = default;

Result<ExecResult> Session::Exec(const std::string& command, int timeout_ms, const OutputFn& on_stdout,
                                 const OutputFn& on_stderr, const CancelledFn& cancelled) {
  Impl& im = *impl_;
  const std::string& name = im.name;
  if (!healthy_) return Status::Unavailable("SSH to " + name + ": the connection is broken; reconnect");
  command_started_ = false;
  const auto deadline = Clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 1));
  auto timed_out = [&] {
    healthy_ = false;  // the channel may be half-open: never reuse this session
    return Status::Timeout("command timed out after " + std::to_string(timeout_ms) + " ms on node " +
                           target_.Name());
  };

  LIBSSH2_CHANNEL* ch = nullptr;
  while ((ch = libssh2_channel_open_session(im.session)) == nullptr) {
    if (libssh2_session_last_errno(im.session) != LIBSSH2_ERROR_EAGAIN) {
      healthy_ = false;
      return Status::Unavailable("SSH to " + name + ": cannot open a channel: " + im.LastError());
    }
    if (!im.Wait(deadline)) return timed_out();
  }
  // Frees the channel on every path. A closed channel is freed normally; a
  // channel abandoned on timeout is freed with the session.
  struct ChannelGuard {
    LIBSSH2_CHANNEL* ch;
    bool* healthy;
    ~ChannelGuard() {
      if (ch && *healthy) (void)libssh2_channel_free(ch);
    }
  } guard{ch, &healthy_};

  int rc;
  while ((rc = libssh2_channel_exec(ch, command.c_str())) == LIBSSH2_ERROR_EAGAIN) {
    if (!im.Wait(deadline)) return timed_out();
  }
  if (rc != 0) {
    healthy_ = false;
    return Status::Unavailable("SSH to " + name + ": cannot start the command: " + im.LastError());
  }
  command_started_ = true;

  char buf[16384];
  for (;;) {
    bool progressed = false;
    for (int stream = 0; stream < 2; ++stream) {
      for (;;) {
        ssize_t n = stream == 0 ? libssh2_channel_read(ch, buf, sizeof buf) : libssh2_channel_read_stderr(ch, buf, sizeof buf);
        if (n > 0) {
          progressed = true;
          const OutputFn& fn = stream == 0 ? on_stdout : on_stderr;
          if (fn) fn(std::string_view(buf, static_cast<std::size_t>(n)));
          continue;
        }
        if (n == 0 || n == LIBSSH2_ERROR_EAGAIN) break;
        healthy_ = false;
        return Status::Unavailable("SSH to " + name + ": reading the command's output failed: " + im.LastError());
      }
    }
    if (libssh2_channel_eof(ch)) break;
    if (cancelled && cancelled()) {
      healthy_ = false;
      return Status::Conflict("command cancelled on node " + target_.Name() + ": the task was asked to stop");
    }
    if (Clock::now() >= deadline) return timed_out();
    if (!progressed && !im.Wait(deadline)) return timed_out();
  }

  if (Status closed = im.CloseChannel(ch, deadline, "SSH to " + name); !closed.ok()) {
    if (closed.code() == Code::kTimeout) return timed_out();
    healthy_ = false;
    return closed;
  }

  ExecResult result;
  result.exit_status = libssh2_channel_get_exit_status(ch);
  char* sig = nullptr;
  std::size_t sig_len = 0;
  if (libssh2_channel_get_exit_signal(ch, &sig, &sig_len, nullptr, nullptr, nullptr, nullptr) == 0 && sig) {
    result.exit_signal.assign(sig, sig_len);
    libssh2_free(im.session, sig);
    result.exit_status = 128 + SignalNumber(result.exit_signal);
  }
  return result;
}

Status Session::Write(std::string_view bytes, const std::string& remote_path, int mode, int timeout_ms,
                      std::string_view op) {
  Impl& im = *impl_;
  const std::string& name = im.name;
  if (!healthy_) return Status::Unavailable("SSH to " + name + ": the connection is broken; reconnect");
  if (remote_path.empty() || remote_path.find('\n') != std::string::npos) {
    return Status::Invalid(std::string(op) + " to " + name + ": the remote path '" + remote_path +
                           "' is empty or has a newline");
  }
  const auto deadline = Clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 1));
  auto timed_out = [&] {
    healthy_ = false;
    return Status::Timeout(std::string(op) + " of " + remote_path + " timed out after " + std::to_string(timeout_ms) +
                           " ms on node " + target_.Name());
  };
  LIBSSH2_CHANNEL* ch = nullptr;
  while ((ch = libssh2_scp_send64(im.session, remote_path.c_str(), mode & 0777,
                                  static_cast<libssh2_int64_t>(bytes.size()), 0, 0)) == nullptr) {
    if (libssh2_session_last_errno(im.session) != LIBSSH2_ERROR_EAGAIN) {
      // An SCP refusal (no such directory, permission) leaves the session usable.
      return Status::Unavailable(std::string(op) + " to " + name + ": cannot create " + remote_path + ": " +
                                 im.LastError() + " (does the directory exist and is it writable?)");
    }
    if (!im.Wait(deadline)) return timed_out();
  }
  struct ChannelGuard {
    LIBSSH2_CHANNEL* ch;
    bool* healthy;
    ~ChannelGuard() {
      if (ch && *healthy) (void)libssh2_channel_free(ch);
    }
  } guard{ch, &healthy_};

  // The SCP protocol ends a file with one NUL byte; libssh2 leaves sending it
  // to us, and OpenSSH's scp exits 1 ("lost connection") without it.
  std::string data(bytes);
  data.push_back('\0');
  std::size_t off = 0;
  while (off < data.size()) {
    ssize_t n = libssh2_channel_write(ch, data.data() + off, data.size() - off);
    if (n == LIBSSH2_ERROR_EAGAIN) {
      if (!im.Wait(deadline)) return timed_out();
      continue;
    }
    if (n < 0) {
      healthy_ = false;
      return Status::Unavailable(std::string(op) + " to " + name + ": writing " + remote_path +
                                 " failed: " + im.LastError());
    }
    off += static_cast<std::size_t>(n);
  }
  int rc;
  while ((rc = libssh2_channel_send_eof(ch)) == LIBSSH2_ERROR_EAGAIN) {
    if (!im.Wait(deadline)) return timed_out();
  }
  if (rc != 0) {
    healthy_ = false;
    return Status::Unavailable(std::string(op) + " to " + name + ": finishing " + remote_path +
                               " failed: " + im.LastError());
  }
  while ((rc = libssh2_channel_wait_eof(ch)) == LIBSSH2_ERROR_EAGAIN) {
    if (!im.Wait(deadline)) return timed_out();
  }
  if (rc != 0) {
    healthy_ = false;
    return Status::Unavailable(std::string(op) + " to " + name + ": the node did not confirm " + remote_path + ": " +
                               im.LastError());
  }
  if (Status closed = im.CloseChannel(ch, deadline, std::string(op) + " to " + name); !closed.ok()) {
    if (closed.code() == Code::kTimeout) return timed_out();
    healthy_ = false;
    return closed;
  }
  int exit_status = libssh2_channel_get_exit_status(ch);
  if (exit_status != 0) {
    return Status::Unavailable(std::string(op) + " to " + name + ": the node's scp exited with status " +
                               std::to_string(exit_status) + " writing " + remote_path);
  }
  return Status::Ok();
}

Status Session::Upload(const std::string& local_path, const std::string& remote_path, int mode, int timeout_ms) {
  std::ifstream in(local_path, std::ios::binary);
  if (!in) return Status::NotFound("upload to node " + target_.Name() + ": cannot read the local file " + local_path);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return Status::Unavailable("upload to node " + target_.Name() + ": reading " + local_path + " failed");
  return Write(bytes, remote_path, mode, timeout_ms, "upload");
}

}  // namespace weft::host::ssh

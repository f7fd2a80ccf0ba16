// Status and Result<T>: how every Weft component reports failure.
//
// A Status is either ok or carries a code plus a human sentence that names the
// thing at fault and the fix. Codes map one-to-one onto the wire protocol's
// error codes (see docs/protocol.md). Both types are plain values: copyable,
// thread-compatible (no shared state), never throw.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace weft {

enum class Code : int {
  kOk = 1,
  kInvalid,      // the caller sent something malformed or inconsistent
  kNotFound,     // the named thing does not exist
  kConflict,     // the request is valid but the current state forbids it
  kDenied,       // the principal may not do this
  kUnavailable,  // a peer or resource is not reachable right now; retrying may help
  kTimeout,      // a deadline passed
  kTooLarge,     // a size or count limit was exceeded
  kInternal,     // a bug or an unexpected failure of a dependency
};

// Wire name of a code ("NOT_FOUND"), and the reverse (unknown names map to kInternal).
std::string_view CodeName(Code code);
Code CodeFromName(std::string_view name);

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok

  static Status Ok() { return Status(); }
  static Status Invalid(std::string msg) { return Status(Code::kInvalid, std::move(msg)); }
  static Status NotFound(std::string msg) { return Status(Code::kNotFound, std::move(msg)); }
  static Status Conflict(std::string msg) { return Status(Code::kConflict, std::move(msg)); }
  static Status Denied(std::string msg) { return Status(Code::kDenied, std::move(msg)); }
  static Status Unavailable(std::string msg) { return Status(Code::kUnavailable, std::move(msg)); }
  static Status Timeout(std::string msg) { return Status(Code::kTimeout, std::move(msg)); }
  static Status TooLarge(std::string msg) { return Status(Code::kTooLarge, std::move(msg)); }
  static Status Internal(std::string msg) { return Status(Code::kInternal, std::move(msg)); }

  Status(Code code, std::string msg) : code_(code), message_(std::move(msg)) {}

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "NOT_FOUND: host 'h1' is not registered", or "OK".
  std::string ToString() const;

  // Returns a copy whose message is "<prefix>: <message>"; ok stays ok.
  Status WithContext(std::string_view prefix) const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT: must not be ok

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace weft

// Propagate a non-ok Status from an expression yielding Status.
#define WEFT_RETURN_IF_ERROR(expr)             \
  do {                                         \
    ::weft::Status weft_status_ = (expr);      \
    if (!weft_status_.ok()) return weft_status_; \
  } while (0)

// Evaluate an expression yielding Result<T>; on failure return its Status, otherwise
// bind the value: `WEFT_ASSIGN_OR_RETURN(auto rows, store.Rows(tenant));`. The left
// side may be a declaration or an existing variable. Expands to several statements, so
// it cannot be the lone body of an unbraced if or loop.
#define WEFT_ASSIGN_OR_RETURN(lhs, expr) \
  WEFT_ASSIGN_OR_RETURN_IMPL_(WEFT_STATUS_CONCAT_(weft_result_, __LINE__), lhs, expr)
#define WEFT_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()
#define WEFT_STATUS_CONCAT_(a, b) WEFT_STATUS_CONCAT_INNER_(a, b)
#define WEFT_STATUS_CONCAT_INNER_(a, b) a##b

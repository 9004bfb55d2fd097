// Status and StatusOr: how errors cross module boundaries in rankd.
//
// A Status is OK or carries a code and a message. The codes map one-to-one to HTTP and gRPC codes;
// that mapping lives in frontend/ only. Bugs are not Statuses: they abort through RANKD_CHECK.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace rankd {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // bad request or bad model file: HTTP 400, gRPC INVALID_ARGUMENT
  kNotFound,           // unknown model, version, input or file: 404 / NOT_FOUND
  kUnimplemented,      // an op or attribute rankd does not support: 501 / UNIMPLEMENTED
  kUnavailable,        // overload or not ready: 503 / UNAVAILABLE
  kDeadlineExceeded,   // the request's deadline passed: 504 / DEADLINE_EXCEEDED
  kResourceExhausted,  // a configured limit was hit: 400 / RESOURCE_EXHAUSTED
  kInternal,           // should not happen: 500 / INTERNAL
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: message", or "OK".
  std::string ToString() const;
  // Returns a copy whose message is "prefix: message" (no-op when OK).
  Status WithContext(const std::string& prefix) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

Status InvalidArgument(std::string message);
Status NotFound(std::string message);
Status Unimplemented(std::string message);
Status Unavailable(std::string message);
Status Internal(std::string message);
Status ResourceExhausted(std::string message);
Status DeadlineExceeded(std::string message);

// Holds a T or a non-OK Status. Accessing value() on an error is a bug and aborts.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status);                         // NOLINT: implicit by design, REQUIRES: !status.ok()
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() &;
  const T& value() const&;
  T&& value() &&;
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

[[noreturn]] void CheckFailed(const char* file, int line, const char* condition, const std::string& message);

}  // namespace rankd

#define RANKD_CHECK(cond)                                             \
  do {                                                                \
    if (!(cond)) ::rankd::CheckFailed(__FILE__, __LINE__, #cond, ""); \
  } while (0)

#define RANKD_CHECK_MSG(cond, msg)                                       \
  do {                                                                   \
    if (!(cond)) ::rankd::CheckFailed(__FILE__, __LINE__, #cond, (msg)); \
  } while (0)

#define RANKD_CONCAT_INNER(a, b) a##b
#define RANKD_CONCAT(a, b) RANKD_CONCAT_INNER(a, b)

// Returns the Status of `expr` from the enclosing function when it is not OK.
#define RANKD_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::rankd::Status rankd_status_ = (expr);        \
    if (!rankd_status_.ok()) return rankd_status_; \
  } while (0)

#define RANKD_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()

// Declares or assigns `lhs` from the value of the StatusOr `expr`, or returns its Status from the
// enclosing function. One statement: not usable as the body of an unbraced if.
#define RANKD_ASSIGN_OR_RETURN(lhs, expr) \
  RANKD_ASSIGN_OR_RETURN_IMPL(RANKD_CONCAT(rankd_statusor_, __LINE__), lhs, expr)

namespace rankd {

template <typename T>
StatusOr<T>::StatusOr(Status status) : status_(std::move(status)) {
  RANKD_CHECK_MSG(!status_.ok(), "StatusOr constructed from an OK Status");
}
template <typename T>
T& StatusOr<T>::value() & {
  RANKD_CHECK_MSG(ok(), status_.ToString());
  return *value_;
}
template <typename T>
const T& StatusOr<T>::value() const& {
  RANKD_CHECK_MSG(ok(), status_.ToString());
  return *value_;
}
template <typename T>
T&& StatusOr<T>::value() && {
  RANKD_CHECK_MSG(ok(), status_.ToString());
  return std::move(*value_);
}

}  // namespace rankd

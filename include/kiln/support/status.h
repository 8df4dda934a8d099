// Status helpers. abseil 20220623 has no RETURN_IF_ERROR / ASSIGN_OR_RETURN, so kiln
// defines its own, prefixed. Internal errors carry file:line via KILN_INTERNAL.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"

#define KILN_CONCAT_INNER_(a, b) a##b
#define KILN_CONCAT_(a, b) KILN_CONCAT_INNER_(a, b)

#define KILN_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::absl::Status kiln_status_ = (expr);        \
    if (!kiln_status_.ok()) return kiln_status_; \
  } while (0)

#define KILN_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return std::move(tmp).status();    \
  lhs = std::move(tmp).value()

#define KILN_ASSIGN_OR_RETURN(lhs, expr) \
  KILN_ASSIGN_OR_RETURN_IMPL_(KILN_CONCAT_(kiln_statusor_, __LINE__), lhs, expr)

// An internal (programming) error with the source location attached.
#define KILN_INTERNAL(...)                                                 \
  ::absl::InternalError(::absl::StrFormat("%s:%d: ", __FILE__, __LINE__) + \
                        ::absl::StrFormat(__VA_ARGS__))

namespace kiln {

// Overflow-safe arithmetic for limits checked before allocation.
inline bool MulOverflows(int64_t a, int64_t b, int64_t* out) {
  return __builtin_mul_overflow(a, b, out);
}
inline bool AddOverflows(int64_t a, int64_t b, int64_t* out) {
  return __builtin_add_overflow(a, b, out);
}

}  // namespace kiln

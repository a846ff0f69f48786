#ifndef RINGMASTER_COMMON_STATUS_MACROS_H_
#define RINGMASTER_COMMON_STATUS_MACROS_H_

// RETURN_IF_ERROR / ASSIGN_OR_RETURN for absl::Status and absl::StatusOr
// (Abseil 20220623 has neither).
//
//   RETURN_IF_ERROR(store.Put(job));
//   ASSIGN_OR_RETURN(JobSpec spec, LoadSpec(path));
//   ASSIGN_OR_RETURN(auto rows, db.Query(sql));

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define RM_STATUS_CONCAT_INNER_(a, b) a##b
#define RM_STATUS_CONCAT_(a, b) RM_STATUS_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status); returns it from the calling function if not OK.
#define RETURN_IF_ERROR(expr)                                  \
  do {                                                         \
    ::absl::Status rm_status_ = (expr);                        \
    if (!rm_status_.ok()) return rm_status_;                   \
  } while (0)

// Evaluates `rexpr` (an absl::StatusOr<T>); on error returns its status from
// the calling function, otherwise moves the value into `lhs` (a declaration or
// an existing variable).
#define ASSIGN_OR_RETURN(lhs, rexpr) \
  RM_ASSIGN_OR_RETURN_IMPL_(RM_STATUS_CONCAT_(rm_statusor_, __LINE__), lhs, rexpr)

#define RM_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                              \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

#endif  // RINGMASTER_COMMON_STATUS_MACROS_H_

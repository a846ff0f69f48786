#include "common/status_macros.h"

#include <string>

#include "gtest/gtest.h"

namespace ringmaster {
namespace {

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError("odd");
  return x / 2;
}

absl::StatusOr<int> Quarter(int x) {
  ASSIGN_OR_RETURN(int h, Half(x));
  ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

absl::Status CheckQuarter(int x, int* out) {
  RETURN_IF_ERROR(Half(x).status());
  ASSIGN_OR_RETURN(*out, Quarter(x));
  return absl::OkStatus();
}

TEST(StatusMacrosTest, AssignOrReturnPropagatesTheFirstError) {
  EXPECT_EQ(*Quarter(8), 2);
  absl::StatusOr<int> r = Quarter(6);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "odd");
}

TEST(StatusMacrosTest, ReturnIfErrorAndAssignIntoExistingVariable) {
  int out = -1;
  EXPECT_TRUE(CheckQuarter(12, &out).ok());
  EXPECT_EQ(out, 3);
  out = -1;
  EXPECT_EQ(CheckQuarter(7, &out).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out, -1);
}

}  // namespace
}  // namespace ringmaster

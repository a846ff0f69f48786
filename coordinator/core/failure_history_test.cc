#include "coordinator/core/failure_history.h"

#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

TEST(NodeFailureLog, CountsTheFailuresOfTheGivenNodesSinceATime) {
  NodeFailureLog log;
  const absl::Time t0 = absl::FromUnixSeconds(1000000);
  log.Record("n1", t0, absl::Hours(24));
  log.Record("n1", t0 + absl::Hours(2), absl::Hours(24));
  log.Record("n2", t0 + absl::Hours(3), absl::Hours(24));
  log.Record("n3", t0 + absl::Hours(3), absl::Hours(24));
  EXPECT_EQ(log.CountSince({"n1", "n2"}, t0), 3);
  EXPECT_EQ(log.CountSince({"n1", "n2"}, t0 + absl::Hours(1)), 2);
  EXPECT_EQ(log.CountSince({"n4"}, t0), 0);
}

TEST(NodeFailureLog, ForgetsWhatLeftTheWindow) {
  NodeFailureLog log;
  const absl::Time t0 = absl::FromUnixSeconds(1000000);
  log.Record("n1", t0, absl::Hours(1));
  log.Record("n1", t0 + absl::Hours(2), absl::Hours(1));  // drops the first
  EXPECT_EQ(log.CountSince({"n1"}, absl::InfinitePast()), 1);
}

}  // namespace
}  // namespace ringmaster::coordinator

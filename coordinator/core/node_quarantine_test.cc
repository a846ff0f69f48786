#include "coordinator/core/node_quarantine.h"

#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000000);

TEST(NodeQuarantineTest, DistinctJobsWithinTheWindowQuarantineOnce) {
  const QuarantinePolicy policy{3, absl::Hours(1)};
  NodeQuarantine q;
  EXPECT_FALSE(q.Record("n-1", "job-a", kT0, policy).has_value());
  EXPECT_FALSE(q.Record("n-1", "job-b", kT0 + absl::Minutes(10), policy).has_value());
  EXPECT_FALSE(q.Record("n-2", "job-c", kT0 + absl::Minutes(20), policy).has_value());  // another node
  std::optional<std::string> reason = q.Record("n-1", "job-c", kT0 + absl::Minutes(30), policy);
  ASSERT_TRUE(reason.has_value());
  EXPECT_EQ(*reason,
            "quarantined: ranks of 3 jobs failed here within 1h (job-a, job-b, job-c); uncordon it once the node is "
            "checked");
  // Once: the node is cordoned already.
  EXPECT_FALSE(q.Record("n-1", "job-d", kT0 + absl::Minutes(31), policy).has_value());
}

TEST(NodeQuarantineTest, OneJobFailingOftenIsNotEnough) {
  const QuarantinePolicy policy{3, absl::Hours(1)};
  NodeQuarantine q;
  for (int i = 0; i < 10; ++i) {
    EXPECT_FALSE(q.Record("n-1", "job-a", kT0 + absl::Minutes(i), policy).has_value()) << i;
  }
  EXPECT_FALSE(q.Record("n-1", "job-b", kT0 + absl::Minutes(11), policy).has_value());
}

TEST(NodeQuarantineTest, FailuresOlderThanTheWindowNoLongerCount) {
  const QuarantinePolicy policy{2, absl::Hours(1)};
  NodeQuarantine q;
  EXPECT_FALSE(q.Record("n-1", "job-a", kT0, policy).has_value());
  EXPECT_FALSE(q.Record("n-1", "job-b", kT0 + absl::Hours(1), policy).has_value());  // job-a's is an hour old
  // job-a failing again renews its time.
  EXPECT_TRUE(q.Record("n-1", "job-a", kT0 + absl::Hours(1) + absl::Minutes(1), policy).has_value());
}

TEST(NodeQuarantineTest, ForgetStartsTheCountAfresh) {
  const QuarantinePolicy policy{2, absl::Hours(1)};
  NodeQuarantine q;
  EXPECT_FALSE(q.Record("n-1", "job-a", kT0, policy).has_value());
  EXPECT_TRUE(q.Record("n-1", "job-b", kT0 + absl::Minutes(1), policy).has_value());
  q.Forget("n-1");  // an operator uncordoned it
  EXPECT_FALSE(q.Record("n-1", "job-c", kT0 + absl::Minutes(2), policy).has_value());
  EXPECT_TRUE(q.Record("n-1", "job-d", kT0 + absl::Minutes(3), policy).has_value());
}

TEST(NodeQuarantineTest, ZeroJobsNeverQuarantines) {
  const QuarantinePolicy policy{0, absl::Hours(1)};
  NodeQuarantine q;
  EXPECT_FALSE(q.Record("n-1", "job-a", kT0, policy).has_value());
  EXPECT_FALSE(q.Record("n-1", "job-b", kT0, policy).has_value());
}

}  // namespace
}  // namespace ringmaster::coordinator

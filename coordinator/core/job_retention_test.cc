// Which finished jobs retention lets go (SelectExpired): by age, by count,
// both, neither, and ties in end time.
#include "coordinator/core/job_retention.h"

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1'000'000);

FinishedJob EndedHoursAgo(const std::string& id, int hours, int64_t submit_seq) {
  return {id, kNow - absl::Hours(hours), submit_seq};
}

// Ended 40, 30, 20 and 10 hours ago, submitted in that order.
std::vector<FinishedJob> FourJobs() {
  return {EndedHoursAgo("a", 40, 1), EndedHoursAgo("b", 30, 2), EndedHoursAgo("c", 20, 3),
          EndedHoursAgo("d", 10, 4)};
}

TEST(JobRetentionTest, NothingPastTheLimitsIsKept) {
  EXPECT_TRUE(SelectExpired(FourJobs(), {absl::Hours(100), 10}, kNow).empty());
  EXPECT_TRUE(SelectExpired({}, {absl::Hours(1), 0}, kNow).empty());
}

TEST(JobRetentionTest, OlderThanMaxAgeGoes) {
  EXPECT_EQ(SelectExpired(FourJobs(), {absl::Hours(25), -1}, kNow), (std::vector<std::string>{"b", "a"}));
  // Exactly max_age old stays.
  EXPECT_EQ(SelectExpired(FourJobs(), {absl::Hours(30), -1}, kNow), (std::vector<std::string>{"a"}));
}

TEST(JobRetentionTest, BeyondTheNewestMaxCountGoes) {
  EXPECT_EQ(SelectExpired(FourJobs(), {absl::ZeroDuration(), 1}, kNow), (std::vector<std::string>{"c", "b", "a"}));
  EXPECT_EQ(SelectExpired(FourJobs(), {absl::ZeroDuration(), 0}, kNow),
            (std::vector<std::string>{"d", "c", "b", "a"}));
}

TEST(JobRetentionTest, AgeAndCountTogether) {
  // Older than 25 hours: a and b; beyond the newest one: c too.
  EXPECT_EQ(SelectExpired(FourJobs(), {absl::Hours(25), 1}, kNow), (std::vector<std::string>{"c", "b", "a"}));
}

TEST(JobRetentionTest, NoLimitsKeepEverything) {
  EXPECT_TRUE(SelectExpired(FourJobs(), {absl::ZeroDuration(), -1}, kNow).empty());
  EXPECT_TRUE(SelectExpired(FourJobs(), {absl::Hours(-1), -1}, kNow).empty());
}

TEST(JobRetentionTest, JobsThatEndedTogetherKeepTheLaterSubmission) {
  const std::vector<FinishedJob> same_end = {EndedHoursAgo("late", 5, 9), EndedHoursAgo("early", 5, 2)};
  EXPECT_EQ(SelectExpired(same_end, {absl::ZeroDuration(), 1}, kNow), (std::vector<std::string>{"early"}));
}

}  // namespace
}  // namespace ringmaster::coordinator

#include "coordinator/core/node_strikes.h"

#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000000);

TEST(NodeStrikesTest, TheLimitWithinTheCooldownExcludesUntilItEnds) {
  NodeStrikePolicy policy{2, absl::Minutes(10)};
  NodeStrikes strikes;
  EXPECT_FALSE(strikes.Record("n-1", kT0, policy));
  EXPECT_TRUE(strikes.Excluded(kT0, policy).empty());
  EXPECT_TRUE(strikes.Record("n-1", kT0 + absl::Minutes(3), policy));  // the second: cool-down starts
  EXPECT_EQ(strikes.Excluded(kT0 + absl::Minutes(3), policy), std::set<std::string>{"n-1"});
  // Until 10 minutes after the failure that started it.
  EXPECT_EQ(strikes.Excluded(kT0 + absl::Minutes(12), policy), std::set<std::string>{"n-1"});
  EXPECT_TRUE(strikes.Excluded(kT0 + absl::Minutes(13), policy).empty());
}

TEST(NodeStrikesTest, FailuresFartherApartThanTheCooldownNeverAddUp) {
  NodeStrikePolicy policy{2, absl::Minutes(10)};
  NodeStrikes strikes;
  EXPECT_FALSE(strikes.Record("n-1", kT0, policy));
  EXPECT_FALSE(strikes.Record("n-1", kT0 + absl::Minutes(11), policy));
  EXPECT_FALSE(strikes.Record("n-2", kT0 + absl::Minutes(12), policy));  // another node: its own count
  EXPECT_TRUE(strikes.Excluded(kT0 + absl::Minutes(12), policy).empty());
}

TEST(NodeStrikesTest, ALimitOfZeroNeverExcludes) {
  NodeStrikePolicy policy{0, absl::Minutes(10)};
  NodeStrikes strikes;
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(strikes.Record("n-1", kT0 + absl::Seconds(i), policy));
  EXPECT_TRUE(strikes.Excluded(kT0 + absl::Seconds(5), policy).empty());
}

}  // namespace
}  // namespace ringmaster::coordinator

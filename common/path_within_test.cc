#include "common/path_within.h"

#include "gtest/gtest.h"

namespace ringmaster {
namespace {

TEST(PathWithinTest, ByComponentsNotByPrefix) {
  EXPECT_TRUE(PathWithin("/data/fmnist", "/data"));
  EXPECT_TRUE(PathWithin("/data", "/data"));
  EXPECT_TRUE(PathWithin("/data/a/b", "/data/"));
  EXPECT_FALSE(PathWithin("/data2/x", "/data"));
  EXPECT_FALSE(PathWithin("/dat", "/data"));
  EXPECT_FALSE(PathWithin("/", "/data"));
}

TEST(PathWithinTest, DotDotCannotEscape) {
  EXPECT_FALSE(PathWithin("/data/../etc/shadow", "/data"));
  EXPECT_TRUE(PathWithin("/data/x/../y", "/data"));
  EXPECT_TRUE(PathWithin("/other/../data/y", "/data"));
}

TEST(PathWithinTest, RelativePathsAreNeverWithin) {
  EXPECT_FALSE(PathWithin("data/x", "/data"));
  EXPECT_FALSE(PathWithin("/data/x", "data"));
}

TEST(PathWithinTest, AnyOfSeveralRoots) {
  EXPECT_TRUE(PathWithinAny("/srv/ckpt/j-1", {"/var/lib/ringmaster", "/srv/ckpt"}));
  EXPECT_FALSE(PathWithinAny("/etc", {"/var/lib/ringmaster", "/srv/ckpt"}));
  EXPECT_FALSE(PathWithinAny("/etc", {}));
}

}  // namespace
}  // namespace ringmaster

#include "coordinator/store/disk_space.h"

#include "coordinator/store/fake_disk_space.h"
#include "coordinator/testing/test_util.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

TEST(DiskReserveTest, TheReserveIsTheSmallerOfItsSizeAndItsFraction) {
  FakeDiskSpace disk(/*free=*/800 << 20, /*total=*/10 * kGiB);
  // 1 GiB or 5% of 10 GiB (512 MiB): 512 MiB; 800 MiB free is enough.
  DiskReserve reserve(&disk, DiskReserveOptions{});
  DiskReserve::State state = reserve.Check();
  EXPECT_EQ(state.reserve_bytes, (10 * kGiB) / 20);
  EXPECT_FALSE(state.low);
  EXPECT_TRUE(reserve.CheckRoomForLogs().ok());
  // On a 1 TiB disk, 1 GiB.
  disk.Set(/*free=*/900 << 20, /*total=*/1024 * kGiB);
  state = reserve.Check();
  EXPECT_EQ(state.reserve_bytes, kGiB);
  EXPECT_TRUE(state.low);
  absl::Status refused = reserve.CheckRoomForLogs();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.message(),
            "the coordinator's disk is low: 900 MiB free on /fake-disk, under its reserve of 1 GiB "
            "(--disk-reserve): new log lines are refused until space is freed");
}

TEST(DiskReserveTest, AFailedMeasurementRefusesNothing) {
  FakeDiskSpace disk;
  disk.Fail(absl::UnavailableError("statvfs: Input/output error"));
  DiskReserve reserve(&disk, DiskReserveOptions{});
  EXPECT_FALSE(reserve.Check().low);
  EXPECT_EQ(reserve.Check().measure.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(reserve.CheckRoomForLogs().ok());
}

TEST(DiskReserveTest, NoReserve) {
  FakeDiskSpace disk(/*free=*/0, /*total=*/kGiB);
  DiskReserve reserve(&disk, DiskReserveOptions{0, 0});
  EXPECT_FALSE(reserve.Check().low);
  EXPECT_EQ(DescribeDiskReserve({0, 0}), "none");
}

TEST(DiskReserveTest, ParsesSizesAndPercentages) {
  absl::StatusOr<DiskReserveOptions> o = ParseDiskReserve("2GiB");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->bytes, 2 * kGiB);
  EXPECT_EQ(o->fraction, 0);
  EXPECT_EQ(DescribeDiskReserve(*o), "2 GiB");
  o = ParseDiskReserve("5%");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->bytes, 0);
  EXPECT_DOUBLE_EQ(o->fraction, 0.05);
  EXPECT_EQ(DescribeDiskReserve(*o), "5% of the filesystem");
  EXPECT_EQ(DescribeDiskReserve(DiskReserveOptions{}), "1 GiB or 5% of the filesystem, whichever is smaller");
  o = ParseDiskReserve("0");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(DescribeDiskReserve(*o), "none");
  for (const char* bad : {"", "lots", "-1GiB", "120%", "5 %%", "1 GiBs"}) {
    o = ParseDiskReserve(bad);
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(o.status().message().find("--disk-reserve"), absl::string_view::npos) << o.status();
  }
}

TEST(StatvfsDiskSpaceTest, MeasuresARealDirectory) {
  StatvfsDiskSpace disk(testing::NewTempDir("disk"));
  absl::StatusOr<DiskUsage> usage = disk.Measure();
  ASSERT_TRUE(usage.ok()) << usage.status();
  EXPECT_GT(usage->total_bytes, 0);
  EXPECT_GE(usage->free_bytes, 0);
  EXPECT_LE(usage->free_bytes, usage->total_bytes);
  StatvfsDiskSpace missing("/nonexistent/ringmaster");
  EXPECT_EQ(missing.Measure().status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace ringmaster::coordinator

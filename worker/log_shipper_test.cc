// LogShipper: lines from growing files, sequence numbers, partial and long
// lines, invalid UTF-8, the bounded buffer.
#include "worker/log_shipper.h"

#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/testing/test_util.h"

namespace ringmaster::worker {
namespace {

using testing::TempDir;

void Append(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out << text;
}

std::vector<v1::LogLine> Drain(LogShipper& shipper) {
  std::vector<v1::LogLine> lines;
  while (std::optional<v1::LogChunk> chunk = shipper.NextChunk(absl::ZeroDuration())) {
    for (const v1::LogLine& line : chunk->lines()) lines.push_back(line);
  }
  return lines;
}

std::vector<std::string> Texts(const std::vector<v1::LogLine>& lines) {
  std::vector<std::string> out;
  for (const v1::LogLine& line : lines) out.push_back(line.text());
  return out;
}

class LogShipperTest : public ::testing::Test {
 protected:
  TempDir dir_;
  FakeClock clock_;
};

TEST_F(LogShipperTest, ShipsCompleteLinesAsTheyAppearAndTheLastOneAtFinish) {
  LogShipper shipper(&clock_);
  const std::string path = dir_.Join("rank-0.log");
  Append(path, "from an earlier run\n");
  shipper.Watch(LogSource{"j", 2, 0, path, 20});
  Append(path, "step 1\r\nstep 2\npart");
  shipper.Poll();
  std::vector<v1::LogLine> lines = Drain(shipper);
  EXPECT_THAT(Texts(lines), ::testing::ElementsAre("step 1", "step 2"));
  EXPECT_EQ(lines[0].job_id(), "j");
  EXPECT_EQ(lines[0].generation(), 2);
  EXPECT_EQ(lines[0].rank(), 0);
  EXPECT_EQ(lines[0].stream(), v1::LOG_STREAM_UNSPECIFIED);
  EXPECT_EQ(lines[0].sequence(), 1);
  EXPECT_EQ(lines[1].sequence(), 2);
  EXPECT_EQ(lines[0].time().seconds(), absl::ToUnixSeconds(clock_.Now()));

  Append(path, "ial\nlast words");
  shipper.Poll();
  EXPECT_THAT(Texts(Drain(shipper)), ::testing::ElementsAre("partial"));
  shipper.Finish("j", 2, 0);
  lines = Drain(shipper);
  EXPECT_THAT(Texts(lines), ::testing::ElementsAre("last words"));
  EXPECT_EQ(lines[0].sequence(), 4);

  // Finished: watching it again does nothing.
  EXPECT_FALSE(shipper.Watch(LogSource{"j", 2, 0, path, 0}));
  Append(path, "more\n");
  shipper.Poll();
  EXPECT_TRUE(Drain(shipper).empty());
}

TEST_F(LogShipperTest, AFileThatAppearsLaterIsPickedUp) {
  LogShipper shipper(&clock_);
  const std::string path = dir_.Join("later.log");
  EXPECT_TRUE(shipper.Watch(LogSource{"j", 1, 3, path, 0}));
  EXPECT_FALSE(shipper.Watch(LogSource{"j", 1, 3, path, 0}));
  shipper.Poll();
  Append(path, "hello\n");
  shipper.Poll();
  EXPECT_THAT(Texts(Drain(shipper)), ::testing::ElementsAre("hello"));
}

TEST_F(LogShipperTest, LongLinesAreSplitAndInvalidUtf8Replaced) {
  LogShipperOptions options;
  options.max_line_bytes = 8;
  LogShipper shipper(&clock_, options);
  const std::string path = dir_.Join("rank.log");
  shipper.Watch(LogSource{"j", 1, 0, path, 0});
  Append(path, "abcdefghijkl\nx\xffy\nabcdefg\xff\n");
  shipper.Poll();
  EXPECT_THAT(Texts(Drain(shipper)),
              ::testing::ElementsAre("abcdefgh", "ijkl", "x\xEF\xBF\xBDy", "abcdefg", "\xEF\xBF\xBD"));
}

TEST_F(LogShipperTest, AFullBufferDropsLinesAndLeavesASequenceGap) {
  LogShipperOptions options;
  options.max_buffered_bytes = 10;
  options.max_chunk_lines = 2;
  LogShipper shipper(&clock_, options);
  const std::string path = dir_.Join("rank.log");
  shipper.Watch(LogSource{"j", 1, 0, path, 0});
  Append(path, "12345\n67890\nXXXXX\n");
  shipper.Poll();
  EXPECT_EQ(shipper.dropped_lines(), 1u);
  EXPECT_EQ(shipper.buffered_bytes(), 10u);
  std::optional<v1::LogChunk> chunk = shipper.NextChunk(absl::ZeroDuration());
  ASSERT_TRUE(chunk.has_value());
  EXPECT_EQ(chunk->lines_size(), 2);
  Append(path, "abc\n");
  shipper.Poll();
  std::vector<v1::LogLine> lines = Drain(shipper);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].text(), "abc");
  EXPECT_EQ(lines[0].sequence(), 4);  // 3 was dropped
}

TEST_F(LogShipperTest, TheThreadPollsAndCloseFlushes) {
  LogShipperOptions options;
  options.poll_interval = absl::Milliseconds(10);
  LogShipper shipper(&clock_, options);
  const std::string path = dir_.Join("rank.log");
  shipper.Watch(LogSource{"j", 1, 0, path, 0});
  shipper.Start();
  Append(path, "one\n");
  std::optional<v1::LogChunk> chunk = shipper.NextChunk(absl::Seconds(10));
  ASSERT_TRUE(chunk.has_value());
  EXPECT_EQ(chunk->lines(0).text(), "one");
  Append(path, "two\n");
  shipper.Close();
  EXPECT_TRUE(shipper.closed());
  std::vector<v1::LogLine> rest = Drain(shipper);
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].text(), "two");
  EXPECT_FALSE(shipper.NextChunk(absl::Seconds(10)).has_value());  // closed: no waiting
}

}  // namespace
}  // namespace ringmaster::worker

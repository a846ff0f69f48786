#include "coordinator/store/log_store.h"

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/proto_time.h"
#include "coordinator/testing/test_util.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

using testing::NewTempDir;

v1::LogLine Line(int64_t gen, int32_t rank, int64_t seq, const std::string& text, int64_t ms) {
  v1::LogLine line;
  line.set_job_id("j-1");
  line.set_generation(gen);
  line.set_rank(rank);
  line.set_sequence(seq);
  line.set_stream(v1::LOG_STREAM_STDOUT);
  *line.mutable_time() = ToProtoTime(absl::FromUnixMillis(ms));
  line.set_text(text);
  return line;
}

std::vector<std::string> Texts(const v1::LogChunk& chunk) {
  std::vector<std::string> out;
  for (const auto& l : chunk.lines()) out.push_back(absl::StrCat(l.generation(), "/", l.rank(), " ", l.text()));
  return out;
}

class LogStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }
  void Open() {
    store_.reset();
    absl::StatusOr<std::unique_ptr<LogStore>> store = LogStore::Open({root_, 4, 64 << 10});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }
  void Append(std::vector<v1::LogLine> lines, int64_t expect_appended) {
    v1::LogChunk chunk;
    for (auto& l : lines) *chunk.add_lines() = std::move(l);
    absl::StatusOr<AppendResult> r = store_->Append(chunk);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->appended, expect_appended);
  }
  const std::string root_ = NewTempDir("logs");
  std::unique_ptr<LogStore> store_;
};

TEST_F(LogStoreTest, ReadsMergeByTimeAndAdvanceTheCursor) {
  Append({Line(1, 0, 1, "a0", 10), Line(1, 1, 1, "a1", 11), Line(1, 0, 2, "b0", 20), Line(1, 1, 2, "b1", 21)}, 4);
  LogQuery query{"j-1"};
  LogCursor cursor;
  absl::StatusOr<v1::LogChunk> chunk = store_->Read(query, &cursor, 3, 1 << 20);
  ASSERT_TRUE(chunk.ok());
  EXPECT_EQ(Texts(*chunk), (std::vector<std::string>{"1/0 a0", "1/1 a1", "1/0 b0"}));
  chunk = store_->Read(query, &cursor, 3, 1 << 20);
  EXPECT_EQ(Texts(*chunk), (std::vector<std::string>{"1/1 b1"}));
  chunk = store_->Read(query, &cursor, 3, 1 << 20);
  EXPECT_EQ(chunk->lines_size(), 0);
  EXPECT_EQ(chunk.ok(), true);
}

TEST_F(LogStoreTest, DeleteJobRemovesItsFilesAndIndexOnly) {
  Append({Line(1, 0, 1, "a0", 10), Line(1, 1, 1, "a1", 11)}, 2);
  v1::LogChunk other;
  *other.add_lines() = Line(1, 0, 1, "other", 12);
  other.mutable_lines(0)->set_job_id("j-2");
  ASSERT_TRUE(store_->Append(other).ok());
  ASSERT_EQ(store_->LineCount("j-1"), 2);
  ASSERT_TRUE(store_->DeleteJob("j-1").ok());
  EXPECT_EQ(store_->LineCount("j-1"), 0);
  EXPECT_FALSE(std::filesystem::exists(root_ + "/j-1"));
  EXPECT_EQ(store_->LineCount("j-2"), 1);
  Open();  // nothing of it comes back from disk
  EXPECT_EQ(store_->LineCount("j-1"), 0);
  EXPECT_EQ(store_->LineCount("j-2"), 1);
  EXPECT_EQ(store_->DeleteJob("../x").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(store_->DeleteJob("j-9").ok());
}

TEST_F(LogStoreTest, DuplicatesAndInvalidLinesAreDropped) {
  Append({Line(1, 0, 1, "a", 1), Line(1, 0, 2, "b", 2)}, 2);
  v1::LogChunk chunk;
  *chunk.add_lines() = Line(1, 0, 2, "b", 2);  // again
  *chunk.add_lines() = Line(1, 0, 3, "c", 3);
  v1::LogLine bad = Line(1, 0, 4, "x", 4);
  bad.set_job_id("a/b");
  *chunk.add_lines() = bad;
  absl::StatusOr<AppendResult> r = store_->Append(chunk);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->appended, 1);
  EXPECT_EQ(r->duplicates, 1);
  EXPECT_EQ(r->invalid, 1);
  EXPECT_EQ(store_->LineCount("j-1"), 3);
}

TEST_F(LogStoreTest, TailUsesTheSparseIndexAndSurvivesAReopen) {
  std::vector<v1::LogLine> lines;
  for (int i = 1; i <= 10; ++i)
    lines.push_back(Line(1, 0, i, absl::StrCat("line ", i, i == 5 ? "\nwith newline \\ " : ""), i));
  Append(lines, 10);
  Open();  // index rebuilt from the files
  LogQuery query{"j-1"};
  for (int tail : {1, 3, 4, 5, 9, 10, 20}) {
    absl::StatusOr<LogCursor> cursor = store_->TailCursor(query, tail);
    ASSERT_TRUE(cursor.ok());
    absl::StatusOr<v1::LogChunk> chunk = store_->Read(query, &*cursor, 100, 1 << 20);
    ASSERT_TRUE(chunk.ok());
    ASSERT_EQ(chunk->lines_size(), std::min(tail, 10)) << tail;
    EXPECT_EQ(chunk->lines(0).sequence(), 10 - std::min(tail, 10) + 1);
  }
  LogCursor all;
  absl::StatusOr<v1::LogChunk> chunk = store_->Read(query, &all, 100, 1 << 20);
  EXPECT_EQ(chunk->lines(4).text(), "line 5\nwith newline \\ ");
  EXPECT_EQ(chunk->lines(4).stream(), v1::LOG_STREAM_STDOUT);
  EXPECT_EQ(FromProtoTime(chunk->lines(4).time()), absl::FromUnixMillis(5));
  Append({Line(1, 0, 10, "dup after reopen", 10)}, 0);
}

TEST_F(LogStoreTest, AHalfWrittenLastLineIsCutAtOpen) {
  Append({Line(2, 3, 1, "whole", 1)}, 1);
  const std::string path = root_ + "/j-1/gen-2/rank-3.log";
  { std::ofstream(path, std::ios::app) << "2027-01-01T00:00:00.000000Z out 2 half"; }
  Open();
  EXPECT_EQ(store_->LineCount("j-1"), 1);
  Append({Line(2, 3, 2, "next", 2)}, 1);
  LogCursor cursor;
  absl::StatusOr<v1::LogChunk> chunk = store_->Read({"j-1", 3, 2, 2}, &cursor, 100, 1 << 20);
  EXPECT_EQ(Texts(*chunk), (std::vector<std::string>{"2/3 whole", "2/3 next"}));
}

TEST_F(LogStoreTest, GenerationAndRankFiltersAndSubscribers) {
  std::atomic<int> calls{0};
  const int64_t id = store_->Subscribe("j-1", [&] { ++calls; });
  const int64_t other = store_->Subscribe("j-2", [&] { calls += 100; });
  Append({Line(1, 0, 1, "g1", 1), Line(2, 0, 1, "g2r0", 2), Line(2, 1, 1, "g2r1", 3)}, 3);
  EXPECT_EQ(calls.load(), 1);
  store_->Unsubscribe(id);
  store_->Unsubscribe(other);
  Append({Line(3, 0, 1, "g3", 4)}, 1);
  EXPECT_EQ(calls.load(), 1);
  LogCursor cursor;
  absl::StatusOr<v1::LogChunk> chunk = store_->Read({"j-1", 0, 2, INT64_MAX}, &cursor, 100, 1 << 20);
  EXPECT_EQ(Texts(*chunk), (std::vector<std::string>{"2/0 g2r0", "3/0 g3"}));
}

}  // namespace
}  // namespace ringmaster::coordinator

// The LogStore's disk limits: the per-job quota (oldest lines dropped, one
// marker per rank where they were, counts kept across a reopen) and the disk
// reserve (new lines refused, then a stored marker).
#include <atomic>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/proto_time.h"
#include "coordinator/store/fake_disk_space.h"
#include "coordinator/store/log_store.h"
#include "coordinator/testing/test_util.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

using testing::NewTempDir;

constexpr int64_t kQuota = 4096;
constexpr int64_t kSegment = 1024;

// About 100 bytes on disk: "<27-byte time> out <seq> step NNNNN ...".
v1::LogLine Line(const std::string& job, int32_t rank, int64_t seq, int64_t ms) {
  v1::LogLine line;
  line.set_job_id(job);
  line.set_generation(1);
  line.set_rank(rank);
  line.set_sequence(seq);
  line.set_stream(v1::LOG_STREAM_STDOUT);
  // Nanoseconds, as a worker's clock gives them; the file keeps microseconds.
  *line.mutable_time() = ToProtoTime(absl::FromUnixMillis(ms) + absl::Nanoseconds(789));
  line.set_text(absl::StrFormat("step %05d of rank %d: loss 2.3456 | 1234 samples/s | lr 0.001", seq, rank));
  return line;
}

class RecordingListener : public LogStoreListener {
 public:
  void OnJobLogBytes(const std::string& job_id, int64_t bytes) override { bytes_[job_id] = bytes; }
  void OnLinesDropped(const std::string& job_id, const std::string& reason, int64_t lines) override {
    dropped_[{job_id, reason}] += lines;
  }
  void OnJobDeleted(const std::string& job_id) override { deleted_.push_back(job_id); }

  std::map<std::string, int64_t> bytes_;
  std::map<std::pair<std::string, std::string>, int64_t> dropped_;
  std::vector<std::string> deleted_;
};

class LogStoreQuotaTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }
  void Open() {
    store_.reset();
    LogStoreOptions options{root_, 4, 64 << 10, kQuota, kSegment, &reserve_, &listener_};
    absl::StatusOr<std::unique_ptr<LogStore>> store = LogStore::Open(options);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }
  absl::StatusOr<AppendResult> Append(std::vector<v1::LogLine> lines) {
    v1::LogChunk chunk;
    for (auto& l : lines) *chunk.add_lines() = std::move(l);
    return store_->Append(chunk);
  }
  // Appends lines seq in [from, to] of (job, rank), one chunk of `per_chunk` at a time.
  void AppendRange(const std::string& job, int32_t rank, int64_t from, int64_t to, int per_chunk = 1,
                   int64_t base_ms = 0) {
    std::vector<v1::LogLine> lines;
    for (int64_t seq = from; seq <= to; ++seq) {
      lines.push_back(Line(job, rank, seq, base_ms + seq * 10 + rank));
      if (static_cast<int>(lines.size()) == per_chunk || seq == to) {
        absl::StatusOr<AppendResult> r = Append(std::move(lines));
        ASSERT_TRUE(r.ok()) << r.status();
        lines.clear();
      }
    }
  }
  // Every line of the query from `cursor` on.
  std::vector<v1::LogLine> ReadAll(const LogQuery& query, LogCursor* cursor) {
    std::vector<v1::LogLine> out;
    while (true) {
      absl::StatusOr<v1::LogChunk> chunk = store_->Read(query, cursor, 7, 1 << 20);
      EXPECT_TRUE(chunk.ok()) << chunk.status();
      if (!chunk.ok() || chunk->lines_size() == 0) return out;
      for (const auto& l : chunk->lines()) out.push_back(l);
    }
  }
  std::vector<v1::LogLine> ReadAll(const LogQuery& query) {
    LogCursor cursor;
    return ReadAll(query, &cursor);
  }
  int64_t BytesOnDisk(const std::string& job) {
    int64_t n = 0;
    for (const auto& e : std::filesystem::recursive_directory_iterator(root_ + "/" + job)) {
      if (e.is_regular_file()) n += static_cast<int64_t>(e.file_size());
    }
    return n;
  }

  const std::string root_ = NewTempDir("logs");
  FakeDiskSpace disk_;
  DiskReserve reserve_{&disk_, DiskReserveOptions{1 << 20, 0}};
  RecordingListener listener_;
  std::unique_ptr<LogStore> store_;
};

TEST_F(LogStoreQuotaTest, AJobPastItsQuotaKeepsItsNewestLinesBehindOneMarker) {
  AppendRange("j-1", 0, 1, 500);
  EXPECT_LE(store_->JobBytes("j-1"), kQuota);
  EXPECT_GE(store_->JobBytes("j-1"), kQuota - kSegment - 200);
  EXPECT_EQ(BytesOnDisk("j-1"), store_->JobBytes("j-1"));
  EXPECT_EQ(listener_.bytes_["j-1"], store_->JobBytes("j-1"));

  for (bool reopened : {false, true}) {
    SCOPED_TRACE(reopened ? "after a reopen" : "as written");
    if (reopened) Open();
    std::vector<v1::LogLine> lines = ReadAll({"j-1"});
    ASSERT_GE(lines.size(), 2u);
    const v1::LogLine& marker = lines[0];
    const int64_t kept = static_cast<int64_t>(lines.size()) - 1;
    EXPECT_EQ(kept, store_->LineCount("j-1"));
    EXPECT_EQ(marker.dropped_lines(), 500 - kept);
    EXPECT_GT(marker.dropped_bytes(), 90 * (500 - kept));
    EXPECT_EQ(marker.sequence(), 0);
    EXPECT_EQ(marker.rank(), 0);
    // At the time of the first line kept, so that a reader sorting by time
    // (the CLI does) keeps it first.
    EXPECT_EQ(FromProtoTime(marker.time()), FromProtoTime(lines[1].time()));
    EXPECT_EQ(marker.text(), absl::StrCat("... ", 500 - kept, " lines (", marker.dropped_bytes(),
                                          " bytes) dropped: the job's log quota of 4 KiB is full "
                                          "(--log-quota-per-job; the oldest lines go first) ..."));
    // The newest lines, in order, none missing.
    for (int64_t i = 1; i <= kept; ++i) EXPECT_EQ(lines[i].sequence(), 500 - kept + i);
    EXPECT_EQ((listener_.dropped_[{"j-1", "quota"}]), 500 - kept);
  }
  // Appends go on after a reopen, and the count of the dropped lines with them.
  AppendRange("j-1", 0, 501, 700);
  std::vector<v1::LogLine> lines = ReadAll({"j-1"});
  EXPECT_EQ(lines[0].dropped_lines() + static_cast<int64_t>(lines.size()) - 1, 700);
  EXPECT_EQ(lines.back().sequence(), 700);
  EXPECT_LE(BytesOnDisk("j-1"), kQuota);
}

TEST_F(LogStoreQuotaTest, OtherJobsAreUntouched) {
  AppendRange("j-2", 0, 1, 10);
  AppendRange("j-1", 0, 1, 300, 5);
  std::vector<v1::LogLine> lines = ReadAll({"j-2"});
  ASSERT_EQ(lines.size(), 10u);
  for (const auto& l : lines) EXPECT_EQ(l.dropped_lines(), 0);
  EXPECT_EQ(store_->LineCount("j-2"), 10);
  EXPECT_EQ((listener_.dropped_.count({"j-2", "quota"})), 0u);
}

TEST_F(LogStoreQuotaTest, TheOldestLinesGoFirstAcrossRanksAndAMarkerPerRank) {
  // Rank 0 logs first, then rank 1: rank 0's lines are the oldest.
  AppendRange("j-1", 0, 1, 30);
  AppendRange("j-1", 1, 1, 60, 1, /*base_ms=*/100000);
  std::vector<v1::LogLine> lines = ReadAll({"j-1", 0});
  ASSERT_EQ(lines.size(), 1u) << "rank 0's lines, the oldest, are all dropped";
  EXPECT_EQ(lines[0].dropped_lines(), 30);
  lines = ReadAll({"j-1", 1});
  ASSERT_GE(lines.size(), 2u);
  EXPECT_GT(lines[0].dropped_lines(), 0);
  EXPECT_EQ(lines[0].dropped_lines() + static_cast<int64_t>(lines.size()) - 1, 60);
  EXPECT_EQ(lines.back().sequence(), 60);
  // Both ranks merged: rank 0's marker comes first (where its lines were).
  lines = ReadAll({"j-1"});
  EXPECT_EQ(lines[0].rank(), 0);
  EXPECT_EQ(lines[0].dropped_lines(), 30);
  // Reopened: rank 0's count survives in the name of its empty segment.
  Open();
  lines = ReadAll({"j-1", 0});
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].dropped_lines(), 30);
}

TEST_F(LogStoreQuotaTest, AFollowerPassedByTheQuotaIsToldWhatItMissed) {
  AppendRange("j-1", 0, 1, 5);
  LogCursor cursor;
  std::vector<v1::LogLine> seen = ReadAll({"j-1"}, &cursor);
  ASSERT_EQ(seen.size(), 5u);
  AppendRange("j-1", 0, 6, 400, 3);
  std::vector<v1::LogLine> more = ReadAll({"j-1"}, &cursor);
  ASSERT_FALSE(more.empty());
  EXPECT_GT(more[0].dropped_lines(), 0);
  EXPECT_EQ(5 + more[0].dropped_lines() + static_cast<int64_t>(more.size()) - 1, 400);
  EXPECT_EQ(more[1].sequence(), 6 + more[0].dropped_lines());
}

TEST_F(LogStoreQuotaTest, TailCountsOnlyKeptLines) {
  AppendRange("j-1", 0, 1, 300, 4);
  LogQuery query{"j-1"};
  absl::StatusOr<LogCursor> cursor = store_->TailCursor(query, 3);
  ASSERT_TRUE(cursor.ok()) << cursor.status();
  std::vector<v1::LogLine> lines = ReadAll(query, &*cursor);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].sequence(), 298);
  // More than is kept: the marker, then every kept line.
  cursor = store_->TailCursor(query, 1000);
  ASSERT_TRUE(cursor.ok());
  lines = ReadAll(query, &*cursor);
  EXPECT_GT(lines[0].dropped_lines(), 0);
  EXPECT_EQ(lines[0].dropped_lines() + static_cast<int64_t>(lines.size()) - 1, 300);
  // Exactly what is kept: no marker.
  const int64_t kept = store_->LineCount("j-1");
  cursor = store_->TailCursor(query, kept);
  lines = ReadAll(query, &*cursor);
  ASSERT_EQ(static_cast<int64_t>(lines.size()), kept);
  EXPECT_EQ(lines[0].dropped_lines(), 0);
  EXPECT_EQ(lines[0].sequence(), 300 - kept + 1);
}

TEST_F(LogStoreQuotaTest, AChunkLargerThanTheQuotaKeepsItsNewestLines) {
  AppendRange("j-1", 0, 1, 3);
  std::vector<v1::LogLine> big;
  for (int seq = 4; seq <= 103; ++seq) big.push_back(Line("j-1", 0, seq, seq * 10));
  absl::StatusOr<AppendResult> r = Append(std::move(big));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LE(store_->JobBytes("j-1"), kQuota);
  EXPECT_EQ(r->appended + r->dropped, 100 + 3);
  std::vector<v1::LogLine> lines = ReadAll({"j-1"});
  ASSERT_GE(lines.size(), 2u);
  EXPECT_EQ(lines[0].dropped_lines() + static_cast<int64_t>(lines.size()) - 1, 103);
  EXPECT_EQ(lines.back().sequence(), 103);
  Open();
  lines = ReadAll({"j-1"});
  EXPECT_EQ(lines[0].dropped_lines() + static_cast<int64_t>(lines.size()) - 1, 103);
}

TEST_F(LogStoreQuotaTest, UnderTheDiskReserveLinesAreRefusedThenMarked) {
  AppendRange("j-1", 0, 1, 2);
  disk_.SetFree(1000);  // under the 1 MiB reserve
  absl::StatusOr<AppendResult> r = Append({Line("j-1", 0, 3, 30), Line("j-1", 0, 4, 40), Line("j-1", 1, 1, 41)});
  ASSERT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(r.status().message(),
            "the coordinator's disk is low: 1000 B free on /fake-disk, under its reserve of 1 MiB (--disk-reserve): "
            "new log lines are refused until space is freed");
  EXPECT_EQ(store_->LineCount("j-1"), 2);
  EXPECT_EQ((listener_.dropped_[{"j-1", "disk_low"}]), 3);

  disk_.SetFree(int64_t{1} << 30);
  AppendRange("j-1", 0, 5, 5);
  AppendRange("j-1", 1, 2, 2);
  for (bool reopened : {false, true}) {
    SCOPED_TRACE(reopened ? "after a reopen" : "as written");
    if (reopened) Open();
    std::vector<v1::LogLine> lines = ReadAll({"j-1", 0});
    ASSERT_EQ(lines.size(), 4u);
    EXPECT_EQ(lines[2].dropped_lines(), 2);
    EXPECT_GT(lines[2].dropped_bytes(), 150);
    EXPECT_EQ(lines[2].text(), absl::StrCat("... 2 lines (", lines[2].dropped_bytes(),
                                            " bytes) dropped: the coordinator's disk was under its reserve "
                                            "(--disk-reserve) ..."));
    EXPECT_EQ(lines[3].sequence(), 5);
    // Rank 1's refused line is marked where rank 1 logged again.
    lines = ReadAll({"j-1", 1});
    ASSERT_EQ(lines.size(), 2u);
    EXPECT_EQ(lines[0].dropped_lines(), 1);
    EXPECT_EQ(lines[1].sequence(), 2);
  }
}

TEST_F(LogStoreQuotaTest, DeleteJobTellsTheListener) {
  AppendRange("j-1", 0, 1, 3);
  ASSERT_TRUE(store_->DeleteJob("j-1").ok());
  EXPECT_EQ(listener_.deleted_, std::vector<std::string>{"j-1"});
  EXPECT_EQ(store_->JobBytes("j-1"), 0);
}

TEST_F(LogStoreQuotaTest, AReaderFollowingWhileTheQuotaDropsSeesEveryLineOrItsCount) {
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (int64_t seq = 1; seq <= 3000; ++seq) {
      v1::LogChunk chunk;
      *chunk.add_lines() = Line("j-1", 0, seq, seq);
      ASSERT_TRUE(store_->Append(chunk).ok());
    }
    done = true;
  });
  LogCursor cursor;
  int64_t seen = 0, dropped = 0, last = 0;
  while (true) {
    const bool finished = done.load();
    absl::StatusOr<v1::LogChunk> chunk = store_->Read({"j-1"}, &cursor, 50, 1 << 20);
    ASSERT_TRUE(chunk.ok()) << chunk.status();
    for (const auto& l : chunk->lines()) {
      if (l.dropped_lines() > 0) {
        dropped += l.dropped_lines();
        last += l.dropped_lines();
      } else {
        ++seen;
        EXPECT_EQ(l.sequence(), last + 1);
        last = l.sequence();
      }
    }
    if (finished && chunk->lines_size() == 0) break;
  }
  writer.join();
  EXPECT_EQ(seen + dropped, 3000);
  EXPECT_LE(store_->JobBytes("j-1"), kQuota);
}

}  // namespace
}  // namespace ringmaster::coordinator

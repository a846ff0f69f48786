#include "engine/checkpoint/checkpoint.h"

#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "absl/strings/str_format.h"
#include "engine/checkpoint/file_io.h"
#include "gtest/gtest.h"

namespace ringmaster::engine {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test.
std::string NewDir(const std::string& name) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  fs::remove_all(dir);
  return dir;
}

Tensor Filled(const Shape& shape, DType dtype, int seed) {
  Tensor t = Tensor::Empty(shape, dtype);
  auto* bytes = static_cast<unsigned char*>(t.raw());
  for (size_t i = 0; i < t.bytes(); ++i) bytes[i] = static_cast<unsigned char>(i * 31 + seed * 17 + 5);
  return t;
}

CheckpointContents Contents(int seed, int64_t weights = 64) {
  CheckpointContents c;
  c.model = {{"layers.0.weight", Filled({weights, 3}, DType::kF32, seed)},
             {"layers.0.bias", Filled({3}, DType::kF16, seed)},
             {"norm.weight", Filled({2, 2}, DType::kBF16, seed)}};
  c.optimizer = {{"layers.0.weight.exp_avg", Filled({weights, 3}, DType::kF32, seed + 1)}};
  c.state = {{"step", std::to_string(seed)}, {"loss_scale", "65536"}, {"data_loader", "epoch=1 batch=2 seed=3"}};
  return c;
}

void ExpectSameTensors(const NamedTensors& got, const NamedTensors& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].first, want[i].first);
    EXPECT_EQ(got[i].second.dtype(), want[i].second.dtype());
    EXPECT_EQ(got[i].second.shape(), want[i].second.shape());
    ASSERT_EQ(got[i].second.bytes(), want[i].second.bytes());
    EXPECT_EQ(std::memcmp(got[i].second.raw(), want[i].second.raw(), want[i].second.bytes()), 0) << want[i].first;
  }
}

std::vector<int64_t> Steps(const std::string& dir) {
  absl::StatusOr<std::vector<CheckpointInfo>> checkpoints = ListCheckpoints(dir);
  EXPECT_TRUE(checkpoints.ok()) << checkpoints.status();
  std::vector<int64_t> steps;
  for (const CheckpointInfo& info : checkpoints.value_or(std::vector<CheckpointInfo>{})) steps.push_back(info.step);
  return steps;
}

TEST(CheckpointTest, WriteThenLoadIsBitwiseAndTheManifestDescribesTheFiles) {
  const std::string dir = NewDir("round-trip");
  const CheckpointContents contents = Contents(1230);
  absl::StatusOr<std::string> path = WriteCheckpoint(dir, 1230, contents, 3);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, dir + "/step-000001230");

  absl::StatusOr<LoadedCheckpoint> loaded = LoadNewestCheckpoint(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->step, 1230);
  EXPECT_EQ(loaded->path, *path);
  EXPECT_TRUE(loaded->skipped.empty());
  ExpectSameTensors(loaded->contents.model, contents.model);
  ExpectSameTensors(loaded->contents.optimizer, contents.optimizer);
  EXPECT_EQ(loaded->contents.state, contents.state);

  absl::StatusOr<std::string> manifest_text = ReadFile(*path + "/MANIFEST.json");
  ASSERT_TRUE(manifest_text.ok());
  absl::StatusOr<Manifest> manifest = ParseManifest(*manifest_text, "MANIFEST.json");
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->step, 1230);
  ASSERT_EQ(manifest->files.size(), 3u);
  for (const ManifestEntry& file : manifest->files) {
    absl::StatusOr<std::string> bytes = ReadFile(*path + "/" + file.name);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    EXPECT_EQ(file.size, static_cast<int64_t>(bytes->size())) << file.name;
    EXPECT_EQ(file.sha256, Sha256Hex(*bytes)) << file.name;
  }
  EXPECT_FALSE(fs::exists(dir + "/.tmp-step-000001230"));
}

TEST(CheckpointTest, KeepsTheNewestK) {
  const std::string dir = NewDir("keep");
  for (int64_t step = 1; step <= 5; ++step) ASSERT_TRUE(WriteCheckpoint(dir, step * 10, Contents(step), 3).ok());
  EXPECT_EQ(Steps(dir), (std::vector<int64_t>{30, 40, 50}));
  // Rewriting an existing step replaces it.
  ASSERT_TRUE(WriteCheckpoint(dir, 50, Contents(99), 3).ok());
  absl::StatusOr<LoadedCheckpoint> loaded = LoadNewestCheckpoint(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->contents.state.at("step"), "99");
  EXPECT_EQ(Steps(dir), (std::vector<int64_t>{30, 40, 50}));
  ASSERT_TRUE(WriteCheckpoint(dir, 60, Contents(6), 0).ok());  // keep <= 0 keeps all
  EXPECT_EQ(Steps(dir), (std::vector<int64_t>{30, 40, 50, 60}));
}

// Writes checkpoints 1 and 2, damages 2 with `damage` (which returns why it
// no longer loads), and expects 1 to load instead.
void ExpectFallbackAfter(const std::string& name, const std::function<std::string(const std::string&)>& damage) {
  const std::string dir = NewDir(name);
  ASSERT_TRUE(WriteCheckpoint(dir, 1, Contents(1), 5).ok());
  absl::StatusOr<std::string> newest = WriteCheckpoint(dir, 2, Contents(2), 5);
  ASSERT_TRUE(newest.ok()) << newest.status();
  const std::string why = damage(*newest);
  absl::StatusOr<LoadedCheckpoint> loaded = LoadNewestCheckpoint(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->step, 1);
  ExpectSameTensors(loaded->contents.model, Contents(1).model);
  ASSERT_EQ(loaded->skipped.size(), 1u);
  EXPECT_EQ(loaded->skipped[0], *newest + ": " + why);
  // Loading it directly reports the same damage.
  EXPECT_EQ(LoadCheckpoint(*newest).status().message(), why);
}

TEST(CheckpointTest, TruncatedNewestFallsBackToThePrevious) {
  ExpectFallbackAfter("truncated", [](const std::string& path) {
    const std::string file = path + "/model.safetensors";
    const auto size = fs::file_size(file);
    fs::resize_file(file, size - 1);
    return absl::StrFormat("%s: %d bytes, the manifest says %d", file, size - 1, size);
  });
}

TEST(CheckpointTest, FlippedByteFallsBackToThePrevious) {
  ExpectFallbackAfter("flipped", [](const std::string& path) {
    const std::string file = path + "/optimizer.safetensors";
    std::fstream stream(file, std::ios::in | std::ios::out | std::ios::binary);
    stream.seekg(200);
    const char c = static_cast<char>(stream.get());
    stream.seekp(200);
    stream.put(static_cast<char>(c ^ 0x10));
    return file + ": SHA-256 differs from the manifest's";
  });
}

TEST(CheckpointTest, MissingManifestOrFileFallsBackToThePrevious) {
  ExpectFallbackAfter("no-manifest", [](const std::string& path) {
    fs::remove(path + "/MANIFEST.json");
    return "open " + path + "/MANIFEST.json: No such file or directory (errno 2)";
  });
  ExpectFallbackAfter("no-state", [](const std::string& path) {
    fs::remove(path + "/state.json");
    return "open " + path + "/state.json: No such file or directory (errno 2)";
  });
}

TEST(CheckpointTest, NothingValidIsNotFound) {
  const std::string dir = NewDir("nothing");
  EXPECT_EQ(LoadNewestCheckpoint(dir).status(), absl::NotFoundError("no valid checkpoint in " + dir));
  ASSERT_TRUE(WriteCheckpoint(dir, 7, Contents(7), 1).ok());
  fs::remove(dir + "/step-000000007/MANIFEST.json");
  EXPECT_EQ(LoadNewestCheckpoint(dir).status(),
            absl::NotFoundError("no valid checkpoint in " + dir + " (damaged: " + dir + "/step-000000007: open " + dir +
                                "/step-000000007/MANIFEST.json: No such file or directory (errno 2))"));
}

TEST(CheckpointTest, StaleTemporaryDirectoriesAreIgnoredThenCleaned) {
  const std::string dir = NewDir("stale");
  ASSERT_TRUE(WriteCheckpoint(dir, 3, Contents(3), 5).ok());
  // A crash while writing step 4: a complete-looking copy under the temporary name.
  fs::copy(dir + "/step-000000003", dir + "/.tmp-step-000000004");
  fs::create_directory(dir + "/.tmp-step-000000005");
  absl::StatusOr<LoadedCheckpoint> loaded = LoadNewestCheckpoint(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->step, 3);
  EXPECT_EQ(Steps(dir), (std::vector<int64_t>{3}));
  EXPECT_EQ(*RemoveStaleTemporaries(dir), 2);
  EXPECT_FALSE(fs::exists(dir + "/.tmp-step-000000004"));
  EXPECT_FALSE(fs::exists(dir + "/.tmp-step-000000005"));
  // A write cleans them too.
  fs::create_directory(dir + "/.tmp-step-000000009");
  ASSERT_TRUE(WriteCheckpoint(dir, 4, Contents(4), 5).ok());
  EXPECT_FALSE(fs::exists(dir + "/.tmp-step-000000009"));
}

TEST(CheckpointTest, UnusableDirectoryIsAClearError) {
  const std::string file = NewDir("a-file");
  std::ofstream(file) << "not a directory";
  const std::string dir = file + "/checkpoints";
  EXPECT_EQ(WriteCheckpoint(dir, 1, Contents(1), 3).status(),
            absl::FailedPreconditionError("create directory " + dir + ": Not a directory (errno 20)"));
}

TEST(CheckpointTest, ReadOnlyDirectoryIsPermissionDenied) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  const std::string dir = NewDir("read-only");
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec);
  EXPECT_EQ(WriteCheckpoint(dir, 1, Contents(1), 3).status(),
            absl::PermissionDeniedError("mkdir " + dir + "/.tmp-step-000000001: Permission denied (errno 13)"));
  fs::permissions(dir, fs::perms::owner_all);
}

// Lowers the file-size limit for the test's lifetime: writes beyond it fail with EFBIG.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &saved_);
    previous_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit limit = saved_;
    limit.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &limit);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, previous_handler_);
  }

 private:
  rlimit saved_;
  void (*previous_handler_)(int);
};

TEST(CheckpointTest, WriteErrorNamesThePathAndLeavesThePreviousIntact) {
  const std::string dir = NewDir("io-error");
  ASSERT_TRUE(WriteCheckpoint(dir, 1, Contents(1), 1).ok());
  absl::Status status;
  {
    FileSizeLimit limit(64 * 1024);
    status = WriteCheckpoint(dir, 2, Contents(2, /*weights=*/100000), 1).status();
  }
  EXPECT_EQ(status, absl::OutOfRangeError("write " + dir +
                                          "/.tmp-step-000000002/model.safetensors: File too large (errno 27)"));
  EXPECT_FALSE(fs::exists(dir + "/.tmp-step-000000002"));
  EXPECT_EQ(Steps(dir), (std::vector<int64_t>{1}));
  absl::StatusOr<LoadedCheckpoint> loaded = LoadNewestCheckpoint(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->step, 1);
  ExpectSameTensors(loaded->contents.model, Contents(1).model);
}

TEST(CheckpointTest, BadContentsAreRejectedBeforeWriting) {
  const std::string dir = NewDir("bad-contents");
  CheckpointContents contents = Contents(1);
  contents.optimizer.push_back(contents.optimizer[0]);
  EXPECT_EQ(WriteCheckpoint(dir, 1, contents, 3).status(),
            absl::InvalidArgumentError("tensor name \"layers.0.weight.exp_avg\" is reserved or repeated"));
  EXPECT_EQ(WriteCheckpoint(dir, -1, Contents(1), 3).status(),
            absl::InvalidArgumentError("checkpoint step -1 is negative"));
  EXPECT_FALSE(fs::exists(dir));
}

}  // namespace
}  // namespace ringmaster::engine

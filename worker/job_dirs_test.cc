// The directories a job's ranks own: made private, as the run account,
// without following links; removed as their owner. The parts that act as
// another account need root and skip otherwise.
#include "worker/job_dirs.h"

#include <linux/capability.h>
#include <pwd.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/stat.h>
#include <unistd.h>

#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "worker/paths.h"
#include "worker/run_as.h"
#include "worker/testing/test_util.h"

namespace ringmaster::worker {
namespace {

using testing::FileExists;
using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

struct stat Stat(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
  return st;
}

// nobody, when this test may act as it.
std::optional<RunAccount> Nobody() {
  std::string why;
  if (!testing::CanActAsOtherAccounts(&why) || getpwnam("nobody") == nullptr) return std::nullopt;
  absl::StatusOr<RunAccount> account = LookupAccount("nobody", "test");
  if (!account.ok()) return std::nullopt;
  return *account;
}

TEST(JobDirsTest, TheWorkersOwnRanksGetPrivateDirectoriesToo) {
  TempDir dir;
  absl::StatusOr<RankFiles> files = PrepareRankFiles(dir.path(), "j-1", 2, 3, WorkerAccount(), "{\"x\": 1}");
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(files->work_dir, dir.Join("ranks/j-1/gen-2/rank-3"));
  EXPECT_EQ(files->context_path, dir.Join("ranks/j-1/gen-2/rank-3/rank.json"));
  EXPECT_EQ(files->tmp_dir, dir.Join("ranks/j-1/tmp"));
  EXPECT_EQ(ReadFile(files->context_path), "{\"x\": 1}");
  EXPECT_EQ(Stat(files->context_path).st_mode & 0777, 0600u);
  for (const std::string& d : {dir.Join("ranks/j-1"), files->tmp_dir, files->work_dir}) {
    EXPECT_EQ(Stat(d).st_mode & 0777, 0700u) << d;
    EXPECT_EQ(Stat(d).st_uid, geteuid()) << d;
  }
  // Again (a retried start order): the context is rewritten whole.
  ASSERT_TRUE(PrepareRankFiles(dir.path(), "j-1", 2, 3, WorkerAccount(), "{\"x\": 2}").ok());
  EXPECT_EQ(ReadFile(files->context_path), "{\"x\": 2}");
  EXPECT_FALSE(FileExists(files->context_path + ".tmp"));
  // Nothing to do for the checkpoint directory: the trainer makes it.
  EXPECT_TRUE(PrepareCheckpointDir(dir.Join("ckpt/j-1/gen-2"), {dir.Join("ckpt")}, WorkerAccount()).ok());
  EXPECT_FALSE(FileExists(dir.Join("ckpt")));
}

TEST(JobDirsTest, ALinkWhereADirectoryGoesIsRefused) {
  TempDir dir;
  ASSERT_TRUE(PrepareRankFiles(dir.path(), "j-1", 1, 0, WorkerAccount(), "{}").ok());
  const std::string target = dir.Join("target");
  ASSERT_EQ(mkdir(target.c_str(), 0700), 0);
  ASSERT_EQ(symlink(target.c_str(), dir.Join("ranks/j-1/gen-2").c_str()), 0);
  absl::Status refused = PrepareRankFiles(dir.path(), "j-1", 2, 0, WorkerAccount(), "{}").status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied) << refused;
  EXPECT_NE(refused.message().find(dir.Join("ranks/j-1/gen-2")), std::string::npos) << refused;
  EXPECT_FALSE(FileExists(target + "/rank-0"));
}

TEST(JobDirsTest, AnotherAccountOwnsItsJobDirectoryAndWhatIsInIt) {
  std::optional<RunAccount> nobody = Nobody();
  if (!nobody.has_value()) GTEST_SKIP() << "needs root (outside a sandbox) and the account nobody";
  TempDir dir;
  absl::StatusOr<RankFiles> files = PrepareRankFiles(dir.path(), "j-1", 1, 0, *nobody, "{\"secret\": \"s\"}");
  ASSERT_TRUE(files.ok()) << files.status();
  for (const std::string& path : {dir.Join("ranks/j-1"), files->tmp_dir, dir.Join("ranks/j-1/gen-1"), files->work_dir,
                                  files->context_path}) {
    EXPECT_EQ(Stat(path).st_uid, nobody->uid) << path;
    EXPECT_EQ(Stat(path).st_gid, nobody->gid) << path;
  }
  EXPECT_EQ(Stat(dir.Join("ranks/j-1")).st_mode & 0777, 0700u);
  EXPECT_EQ(Stat(files->context_path).st_mode & 0777, 0600u);
  EXPECT_EQ(Stat(dir.Join("ranks")).st_uid, 0u);  // the worker's
  // A second generation goes in as nobody too.
  ASSERT_TRUE(PrepareRankFiles(dir.path(), "j-1", 2, 0, *nobody, "{}").ok());
  EXPECT_EQ(Stat(dir.Join("ranks/j-1/gen-2/rank-0/rank.json")).st_uid, nobody->uid);
  // A job directory of a third account is not taken over.
  ASSERT_EQ(mkdir(dir.Join("ranks/j-2").c_str(), 0700), 0);
  ASSERT_EQ(chown(dir.Join("ranks/j-2").c_str(), 54321, 54321), 0);
  absl::Status refused = PrepareRankFiles(dir.path(), "j-2", 1, 0, *nobody, "{}").status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_NE(refused.message().find("belongs to uid 54321"), std::string::npos) << refused;
}

TEST(JobDirsTest, TheCheckpointDirectoryIsTheAccounts) {
  std::optional<RunAccount> nobody = Nobody();
  if (!nobody.has_value()) GTEST_SKIP() << "needs root (outside a sandbox) and the account nobody";
  TempDir dir;
  const std::string root = dir.Join("ckpt");
  EXPECT_EQ(PrepareCheckpointDir(root + "/j-1/gen-1", {root}, *nobody).code(), absl::StatusCode::kFailedPrecondition)
      << "the root is the operator's to make";
  ASSERT_EQ(mkdir(root.c_str(), 0711), 0);
  ASSERT_TRUE(PrepareCheckpointDir(root + "/j-1/gen-1", {root}, *nobody).ok());
  for (const std::string& path : {root + "/j-1", root + "/j-1/gen-1"}) {
    EXPECT_EQ(Stat(path).st_uid, nobody->uid) << path;
    EXPECT_EQ(Stat(path).st_mode & 0777, 0700u) << path;
  }
  EXPECT_EQ(Stat(root).st_uid, 0u);
  ASSERT_TRUE(PrepareCheckpointDir(root + "/j-1/gen-2", {root}, *nobody).ok());
  // A link in the root where a job's directory goes.
  ASSERT_EQ(symlink("/etc", (root + "/j-9").c_str()), 0);
  absl::Status refused = PrepareCheckpointDir(root + "/j-9/gen-1", {root}, *nobody);
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied) << refused;
  EXPECT_EQ(Stat("/etc").st_uid, 0u);
}

// Kubernetes gives the worker root without CAP_DAC_OVERRIDE and
// CAP_DAC_READ_SEARCH: it cannot open an account's 0700 directory, and must
// still start a job's second generation there, and clean up after it.
TEST(JobDirsTest, ARootWorkerWithoutDacOverrideStillWorksInTheAccountsDirectories) {
  std::optional<RunAccount> nobody = Nobody();
  if (!nobody.has_value()) GTEST_SKIP() << "needs root (outside a sandbox) and the account nobody";
  TempDir dir;
  const std::string root = dir.Join("ckpt");
  ASSERT_EQ(mkdir(root.c_str(), 0755), 0);
  chmod(dir.path().c_str(), 0711);
  ASSERT_EQ(mkdir(RanksDir(dir.path()).c_str(), 0711), 0);  // as the worker makes it for other accounts
  absl::Status result;
  // Capabilities are per thread: this one drops the two for good.
  std::thread worker([&] {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct caps[_LINUX_CAPABILITY_U32S_3] = {};
    if (syscall(SYS_capget, &header, caps) != 0) {
      result = absl::InternalError("capget");
      return;
    }
    for (int cap : {CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH}) {
      caps[CAP_TO_INDEX(cap)].effective &= ~CAP_TO_MASK(cap);
      caps[CAP_TO_INDEX(cap)].permitted &= ~CAP_TO_MASK(cap);
      caps[CAP_TO_INDEX(cap)].inheritable &= ~CAP_TO_MASK(cap);
    }
    if (syscall(SYS_capset, &header, caps) != 0) {
      result = absl::InternalError("capset");
      return;
    }
    for (int generation : {1, 2}) {
      absl::StatusOr<RankFiles> files = PrepareRankFiles(dir.path(), "j-1", generation, 0, *nobody, "{}");
      if (!files.ok()) {
        result = files.status();
        return;
      }
      result = PrepareCheckpointDir(absl::StrCat(root, "/j-1/gen-", generation), {root}, *nobody);
      if (!result.ok()) return;
    }
    result = RemoveOwnedTree(RanksDir(dir.path()), "j-1");
  });
  worker.join();
  ASSERT_TRUE(result.ok()) << result;
  EXPECT_FALSE(FileExists(dir.Join("ranks/j-1")));
  EXPECT_EQ(Stat(root + "/j-1/gen-2").st_uid, nobody->uid);
}

TEST(JobDirsTest, RemovingATreeAsItsOwnerNeverFollowsALink) {
  TempDir dir;
  const std::string keep = dir.Join("keep");
  WriteFile(keep, "not the job's");
  std::optional<RunAccount> nobody = Nobody();
  const RunAccount account = nobody.value_or(WorkerAccount());
  chmod(dir.path().c_str(), 0711);  // the account passes through, as through a state directory
  ASSERT_TRUE(PrepareRankFiles(dir.path(), "j-1", 1, 0, account, "{}").ok());
  chmod(RanksDir(dir.path()).c_str(), 0711);  // as the worker makes it when ranks run as other accounts
  {
    ScopedFsIdentity as_account(account);
    ASSERT_TRUE(as_account.ok());
    // What a rank may leave: a link out, a file, a directory it closed.
    ASSERT_EQ(symlink(keep.c_str(), dir.Join("ranks/j-1/tmp/link").c_str()), 0);
    WriteFile(dir.Join("ranks/j-1/gen-1/rank-0/out"), "x");
    ASSERT_EQ(mkdir(dir.Join("ranks/j-1/tmp/closed").c_str(), 0700), 0);
    WriteFile(dir.Join("ranks/j-1/tmp/closed/f"), "y");
    ASSERT_EQ(chmod(dir.Join("ranks/j-1/tmp/closed").c_str(), 0), 0);
  }
  ASSERT_TRUE(RemoveOwnedTree(RanksDir(dir.path()), "j-1").ok());
  EXPECT_FALSE(FileExists(dir.Join("ranks/j-1")));
  EXPECT_EQ(ReadFile(keep), "not the job's");
  EXPECT_TRUE(RemoveOwnedTree(RanksDir(dir.path()), "j-1").ok()) << "a missing tree is removed already";
}

}  // namespace
}  // namespace ringmaster::worker

// RunAsPolicy: which account a job's ranks run as, the account map, the
// worker's choice when --run-as is not given, and acting as an account on
// files (as root only).
#include "worker/run_as.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gtest/gtest.h"
#include "worker/testing/test_util.h"

namespace ringmaster::worker {
namespace {

using testing::TempDir;
using testing::WriteFile;

bool HasNobody() { return getpwnam("nobody") != nullptr; }

TEST(RunAsTest, TheAccountMapIsUserAccountLines) {
  absl::StatusOr<std::map<std::string, std::string>> map =
      ParseAccountMap("# users\nalice   nobody\n\nbob 1001:1001  # a bare uid\n", "/etc/accounts");
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(*map, (std::map<std::string, std::string>{{"alice", "nobody"}, {"bob", "1001:1001"}}));
  EXPECT_EQ(ParseAccountMap("alice\n", "/etc/accounts").status().message(),
            "/etc/accounts:1: expected \"user account\", got \"alice\"");
  EXPECT_EQ(ParseAccountMap("alice a\nalice b\n", "/etc/accounts").status().message(),
            "/etc/accounts:2: user alice is mapped twice");
}

TEST(RunAsTest, AccountsAreNamesUidsOrUidGidButNeverRoot) {
  absl::StatusOr<RunAccount> bare = LookupAccount("54321:54322", "--run-as");
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_EQ(bare->uid, 54321u);
  EXPECT_EQ(bare->gid, 54322u);
  EXPECT_TRUE(bare->groups.empty());
  EXPECT_FALSE(bare->is_worker);
  for (const char* root : {"root", "0", "0:5", "5:0"}) {
    absl::StatusOr<RunAccount> refused = LookupAccount(root, "--run-as");
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << root;
  }
  EXPECT_EQ(LookupAccount("root", "--run-as").status().message(),
            "--run-as: root is root (uid 0, gid 0); ranks run as an unprivileged account");
  EXPECT_EQ(LookupAccount("no-such-account-here", "--run-as").status().message(),
            "--run-as: no account \"no-such-account-here\" on this node");
  EXPECT_EQ(LookupAccount("4000000", "--run-as").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(LookupAccount("a:b", "--run-as").status().code(), absl::StatusCode::kInvalidArgument);
  if (!HasNobody()) GTEST_SKIP() << "no account nobody";
  absl::StatusOr<RunAccount> nobody = LookupAccount("nobody", "--run-as");
  ASSERT_TRUE(nobody.ok()) << nobody.status();
  const passwd* pw = getpwnam("nobody");
  EXPECT_EQ(nobody->uid, pw->pw_uid);
  EXPECT_EQ(nobody->gid, pw->pw_gid);
  EXPECT_EQ(nobody->home, pw->pw_dir);
  ASSERT_FALSE(nobody->groups.empty());
  EXPECT_EQ(nobody->groups.front(), pw->pw_gid);  // its own groups, never the worker's
  EXPECT_EQ(LookupAccount(std::to_string(pw->pw_uid), "--run-as")->name, "nobody");
}

// In a cluster the ranks of the worker's own account could read its key and
// join token: that is never the default, root or not; local mode keeps the
// invoking user.
TEST(RunAsTest, InAClusterTheWorkerMustBeToldWhoRanksRunAsUnlessLocal) {
  absl::StatusOr<RunAsPolicy> cluster = ResolveRunAs("", "", /*worker_euid=*/0, /*local_mode=*/false);
  EXPECT_EQ(cluster.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cluster.status().message(),
            "--run-as: the worker runs as root and serves a cluster (TLS): say which account ranks run as (--run-as "
            "ACCOUNT, or --run-as owner with --run-as-map FILE), or --run-as self to run them as the worker's own "
            "account, which can read its key and join token");
  absl::StatusOr<RunAsPolicy> unprivileged = ResolveRunAs("", "", /*worker_euid=*/1000, /*local_mode=*/false);
  EXPECT_EQ(unprivileged.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(unprivileged.status().message(),
            "--run-as: the worker serves a cluster (TLS): say which account ranks run as (--run-as ACCOUNT, or "
            "--run-as owner with --run-as-map FILE), or --run-as self to run them as the worker's own account, "
            "which can read its key and join token");
  EXPECT_EQ(ResolveRunAs("", "", 0, /*local_mode=*/true)->mode(), RunAsPolicy::Mode::kSelf);
  EXPECT_EQ(ResolveRunAs("", "", 1000, /*local_mode=*/true)->mode(), RunAsPolicy::Mode::kSelf);
  EXPECT_EQ(ResolveRunAs("self", "", 1000, false)->mode(), RunAsPolicy::Mode::kSelf);
  EXPECT_EQ(ResolveRunAs("self", "", 0, false)->mode(), RunAsPolicy::Mode::kSelf);
  EXPECT_FALSE(ResolveRunAs("self", "", 0, false)->drops_privileges());
  EXPECT_EQ(ResolveRunAs("owner", "", 0, false).status().message(),
            "--run-as owner needs --run-as-map FILE (\"user account\" per line)");
  EXPECT_EQ(ResolveRunAs("nobody", "/etc/map", 0, false).status().message(),
            "--run-as-map is used only with --run-as owner");
}

TEST(RunAsTest, OwnerMapsEachJobsOwnerAndRefusesTheRest) {
  if (!HasNobody()) GTEST_SKIP() << "no account nobody";
  if (getpwnam("nobody")->pw_uid == geteuid()) GTEST_SKIP() << "the test runs as nobody";
  TempDir dir;
  const std::string map = dir.Join("accounts");
  WriteFile(map, "alice nobody\nbob 54321:54321\n");
  chmod(map.c_str(), 0644);
  absl::StatusOr<RunAsPolicy> policy = ResolveRunAs("owner", map, geteuid(), false);
  ASSERT_TRUE(policy.ok()) << policy.status();
  EXPECT_TRUE(policy->drops_privileges());
  EXPECT_EQ(policy->AccountFor("alice")->name, "nobody");
  EXPECT_EQ(policy->AccountFor("bob")->uid, 54321u);
  absl::Status refused = policy->AccountFor("carol").status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(refused.message(), "user carol has no account on this node (not in " + map +
                                   "); ask the operator to map it (ringmaster-worker --run-as-map)");
  EXPECT_EQ(policy->AccountFor("").status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(policy->Describe(), "each job's owner's account (2 user(s) in " + map + ")");
  // Whoever may write the map picks the accounts: group/other-writable is refused.
  chmod(map.c_str(), 0666);
  EXPECT_EQ(ResolveRunAs("owner", map, geteuid(), false).status().code(), absl::StatusCode::kFailedPrecondition);
  // An account that does not exist fails at startup, not at a job's start.
  WriteFile(map, "alice no-such-account-here\n");
  chmod(map.c_str(), 0644);
  EXPECT_EQ(ResolveRunAs("owner", map, geteuid(), false).status().code(), absl::StatusCode::kNotFound);
}

TEST(RunAsTest, ActingAsAnAccountCreatesItsFilesWithItsPermissions) {
  std::string why;
  if (!testing::CanActAsOtherAccounts(&why)) GTEST_SKIP() << why;
  if (!HasNobody()) GTEST_SKIP() << "no account nobody";
  TempDir dir;
  chmod(dir.path().c_str(), 0777);
  const std::string secret = dir.Join("secret");
  WriteFile(secret, "root only");
  chmod(secret.c_str(), 0600);
  const RunAccount nobody = *LookupAccount("nobody", "test");
  {
    ScopedFsIdentity as_nobody(nobody);
    ASSERT_TRUE(as_nobody.ok()) << as_nobody.status();
    const int fd = open(dir.Join("made").c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
    ASSERT_GE(fd, 0);
    close(fd);
    // Root's file is closed to it: the checks are nobody's, not root's.
    EXPECT_LT(open(secret.c_str(), O_RDONLY), 0);
    EXPECT_EQ(errno, EACCES);
  }
  struct stat st;
  ASSERT_EQ(stat(dir.Join("made").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, nobody.uid);
  EXPECT_EQ(st.st_gid, nobody.gid);
  // And back: root again.
  const int fd = open(secret.c_str(), O_RDONLY);
  EXPECT_GE(fd, 0);
  if (fd >= 0) close(fd);
  const int again = open(dir.Join("made-after").c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(again, 0);
  close(again);
  ASSERT_EQ(stat(dir.Join("made-after").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
}

}  // namespace
}  // namespace ringmaster::worker

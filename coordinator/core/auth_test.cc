#include "coordinator/core/auth.h"

#include <string>

#include "absl/time/clock.h"
#include "common/clock.h"
#include "common/dev_ca_for_test.h"
#include "common/tls.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

using ::ringmaster::testing::MakeDevCa;
using ::ringmaster::testing::ReadFileOrDie;

constexpr char kAliceToken[] = "alice-token-0123456789";
constexpr char kBobToken[] = "bob-token-0123456789ab";
constexpr char kJoin[] = "join-token-abcdefghijkl";

TokenTable Table() {
  const std::string text = std::string("# users\n\nsha256:") + Sha256Hex(kAliceToken) + "  alice\n" + kBobToken +
                           "\tbob admin\n";
  absl::StatusOr<TokenTable> table = TokenTable::Parse(text, "tokens");
  EXPECT_TRUE(table.ok()) << table.status();
  return *table;
}

CallCredentials Call(const std::string& method, const std::string& authorization = "") {
  CallCredentials call;
  call.method = method;
  call.authorization = authorization;
  return call;
}

TEST(TokenTableTest, ParsesHashesAndPlainTokensAndAdmins) {
  TokenTable table = Table();
  EXPECT_EQ(table.size(), 2u);
  std::optional<TokenUser> alice = table.Authenticate(kAliceToken);
  ASSERT_TRUE(alice.has_value());
  EXPECT_EQ(alice->name, "alice");
  EXPECT_FALSE(alice->admin);
  std::optional<TokenUser> bob = table.Authenticate(kBobToken);
  ASSERT_TRUE(bob.has_value());
  EXPECT_EQ(bob->name, "bob");
  EXPECT_TRUE(bob->admin);
  EXPECT_FALSE(table.Authenticate("alice-token-012345678").has_value());
  EXPECT_FALSE(table.Authenticate("").has_value());
  // The hash itself is not a token.
  EXPECT_FALSE(table.Authenticate(Sha256Hex(kAliceToken)).has_value());
}

TEST(TokenTableTest, ErrorsNameTheLineButNeverTheToken) {
  struct Case {
    std::string text;
    std::string expect;
  };
  for (const Case& c : std::vector<Case>{
           {"short-token alice\n", "line 1: a token must be at least 16 characters"},
           {"# c\nsha256:abc alice\n", "line 2: sha256: needs 64 hex digits"},
           {"secret-token-123456789\n", "line 1: expected"},
           {"secret-token-123456789 al/ice\n", "line 1: user \"al/ice\""},
           {"secret-token-123456789 alice root\n", "line 1: the third field can only be \"admin\""},
           {"secret-token-123456789 alice\nsecret-token-123456789 bob\n", "line 2: the same token as user alice"},
       }) {
    absl::StatusOr<TokenTable> table = TokenTable::Parse(c.text, "/etc/rm/tokens");
    ASSERT_EQ(table.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_NE(table.status().message().find("/etc/rm/tokens: " + c.expect), std::string::npos) << table.status();
    EXPECT_EQ(table.status().message().find("secret-token"), std::string::npos) << table.status();
  }
}

TEST(AuthenticatorTest, UserCallsNeedAValidBearerToken) {
  FakeClock clock;
  AuthPolicy policy;
  policy.users = Table();
  Authenticator auth(policy, &clock);
  const std::string submit = "/ringmaster.v1.JobService/Submit";

  absl::StatusOr<Caller> none = auth.Authenticate(Call(submit));
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(none.status().message().find("no bearer token"), std::string::npos);
  EXPECT_EQ(auth.Authenticate(Call(submit, "Bearer not-a-token-at-all")).status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(auth.Authenticate(Call(submit, kAliceToken)).status().code(), absl::StatusCode::kUnauthenticated)
      << "the Bearer scheme is required";

  absl::StatusOr<Caller> alice = auth.Authenticate(Call(submit, std::string("Bearer ") + kAliceToken));
  ASSERT_TRUE(alice.ok()) << alice.status();
  EXPECT_EQ(alice->user, "alice");
  EXPECT_FALSE(alice->admin);
  // Read-only calls: any valid token.
  absl::StatusOr<Caller> list = auth.Authenticate(Call("/ringmaster.v1.JobService/ListJobs", std::string("bearer ") + kBobToken));
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->user, "bob");
  EXPECT_TRUE(list->admin);
  EXPECT_EQ(auth.Authenticate(Call("/ringmaster.v1.JobService/ListJobs")).status().code(),
            absl::StatusCode::kUnauthenticated);
}

TEST(AuthenticatorTest, WithoutTokenFileUsersAreAnonymous) {
  FakeClock clock;
  Authenticator auth(AuthPolicy{}, &clock);
  absl::StatusOr<Caller> caller = auth.Authenticate(Call("/ringmaster.v1.JobService/Submit"));
  ASSERT_TRUE(caller.ok());
  EXPECT_EQ(caller->user, "");
  EXPECT_FALSE(auth.authenticates_users());
}

TEST(AuthenticatorTest, HealthIsPublicAndUnknownMethodsAreDenied) {
  FakeClock clock;
  AuthPolicy policy;
  policy.users = Table();
  policy.join_token_sha256 = Sha256Hex(kJoin);
  Authenticator auth(policy, &clock);
  EXPECT_TRUE(auth.Authenticate(Call("/grpc.health.v1.Health/Check")).ok());
  EXPECT_EQ(auth.Authenticate(Call("/other.Service/Method", std::string("Bearer ") + kBobToken)).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ClassifyMethod("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"), MethodKind::kUser);
  EXPECT_EQ(ClassifyMethod("/ringmaster.v1.RendezvousService/KvWait"), MethodKind::kWorker);
  EXPECT_EQ(ClassifyMethod("/ringmaster.v1.CheckpointService/Commit"), MethodKind::kWorker);
}

TEST(AuthenticatorTest, WorkerCallsNeedTheJoinToken) {
  FakeClock clock;
  AuthPolicy policy;
  policy.users = Table();
  policy.join_token_sha256 = Sha256Hex(kJoin);
  Authenticator auth(policy, &clock);
  CallCredentials call = Call("/ringmaster.v1.NodeService/Register");
  absl::StatusOr<Caller> none = auth.Authenticate(call);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(none.status().message().find("no join token"), std::string::npos);
  call.join_token = "join-token-abcdefghijkX";
  EXPECT_EQ(auth.Authenticate(call).status().code(), absl::StatusCode::kUnauthenticated);
  call.join_token = kJoin;
  absl::StatusOr<Caller> worker = auth.Authenticate(call);
  ASSERT_TRUE(worker.ok()) << worker.status();
  EXPECT_TRUE(worker->worker);
  // A user's token does not make a worker.
  EXPECT_EQ(auth.Authenticate(Call("/ringmaster.v1.NodeService/Register", std::string("Bearer ") + kBobToken))
                .status()
                .code(),
            absl::StatusCode::kUnauthenticated);
}

TEST(AuthenticatorTest, WithTlsWorkerCallsNeedAValidClientCertificate) {
  const std::string ca = MakeDevCa("auth");
  const std::string other = MakeDevCa("auth-other");
  FakeClock clock(absl::Now());
  AuthPolicy policy;
  policy.join_token_sha256 = Sha256Hex(kJoin);
  policy.client_ca_pem = ReadFileOrDie(ca + "/ca.crt");
  Authenticator auth(policy, &clock);
  CallCredentials call = Call("/ringmaster.v1.NodeService/Session");
  call.join_token = kJoin;

  absl::StatusOr<Caller> none = auth.Authenticate(call);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(none.status().message().find("no client certificate"), std::string::npos) << none.status();

  call.client_cert_pem = ReadFileOrDie(other + "/worker.crt");
  absl::StatusOr<Caller> foreign = auth.Authenticate(call);
  EXPECT_EQ(foreign.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(foreign.status().message().find("not issued by the cluster CA"), std::string::npos);

  call.client_cert_pem = ReadFileOrDie(ca + "/worker-expired.crt");
  absl::StatusOr<Caller> expired = auth.Authenticate(call);
  EXPECT_EQ(expired.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(expired.status().message().find("expired"), std::string::npos);

  call.client_cert_pem = ReadFileOrDie(ca + "/worker.crt");
  EXPECT_TRUE(auth.Authenticate(call).ok());
  // The same certificate, once the clock passes its end: expired.
  clock.Advance(absl::Hours(24 * 900));
  EXPECT_EQ(auth.Authenticate(call).status().code(), absl::StatusCode::kUnauthenticated);
}

TEST(AuthorizeCancelTest, OwnerAndAdminsOnly) {
  EXPECT_TRUE(AuthorizeCancel(Caller{"alice", false, false}, "alice", "j-1").ok());
  EXPECT_TRUE(AuthorizeCancel(Caller{"bob", true, false}, "alice", "j-1").ok());
  absl::Status denied = AuthorizeCancel(Caller{"carol", false, false}, "alice", "j-1");
  EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(denied.message().find("job j-1 belongs to alice"), std::string::npos) << denied;
  // Users not authenticated: jobs have no owner, anyone may cancel.
  EXPECT_TRUE(AuthorizeCancel(Caller{}, "", "j-2").ok());
  // A job submitted before tokens were required belongs to nobody: admins only.
  EXPECT_EQ(AuthorizeCancel(Caller{"carol", false, false}, "", "j-3").code(), absl::StatusCode::kPermissionDenied);
}

QueueConfig ThreeQueues() {
  absl::StatusOr<QueueConfig> config = QueueConfig::Parse(
      "queues:\n"
      "  - name: team-a\n"
      "    members: [alice, bob]\n"
      "    nominal: {gpus: 0}\n"
      "  - name: team-b\n"
      "    members: [mallory]\n"
      "    nominal: {gpus: 0}\n"
      "  - name: everyone\n"
      "    members: ['*']\n"
      "    nominal: {gpus: 0}\n",
      "queues.yaml");
  if (!config.ok()) {
    ADD_FAILURE() << config.status();
    return QueueConfig::Default();
  }
  return *std::move(config);
}

TEST(AuthorizeReadTest, OwnerQueueMembersAndAdmins) {
  const QueueConfig queues = ThreeQueues();
  const JobReadScope alices{"j-3", "alice", "team-a"};
  EXPECT_TRUE(AuthorizeRead(Caller{"alice", false, false}, alices, queues, Visibility::kTeam).ok());
  EXPECT_TRUE(AuthorizeRead(Caller{"bob", false, false}, alices, queues, Visibility::kTeam).ok()) << "a member";
  EXPECT_TRUE(AuthorizeRead(Caller{"root", true, false}, alices, queues, Visibility::kTeam).ok()) << "an admin";
  absl::Status denied = AuthorizeRead(Caller{"mallory", false, false}, alices, queues, Visibility::kTeam);
  EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(denied.message().find("job j-3 belongs to queue team-a; user mallory is not a member"), std::string::npos)
      << denied;
  // The owner reads her job in a queue she is not a member of (any more).
  EXPECT_TRUE(AuthorizeRead(Caller{"mallory", false, false}, {"j-4", "mallory", "team-a"}, queues, Visibility::kTeam)
                  .ok());
  // "*" admits every user.
  EXPECT_TRUE(AuthorizeRead(Caller{"carol", false, false}, {"j-5", "alice", "everyone"}, queues, Visibility::kTeam)
                  .ok());
}

TEST(AuthorizeReadTest, OpenVisibilityAndUnauthenticatedCallersReadEverything) {
  const QueueConfig queues = ThreeQueues();
  const JobReadScope alices{"j-3", "alice", "team-a"};
  EXPECT_TRUE(AuthorizeRead(Caller{"mallory", false, false}, alices, queues, Visibility::kOpen).ok());
  EXPECT_TRUE(AuthorizeRead(Caller{}, alices, queues, Visibility::kTeam).ok()) << "no token file";
}

TEST(AuthorizeReadTest, QueueNoLongerConfiguredHasNoMembers) {
  const QueueConfig queues = ThreeQueues();
  absl::Status denied =
      AuthorizeRead(Caller{"bob", false, false}, {"j-6", "alice", "gone"}, queues, Visibility::kTeam);
  EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(denied.message().find("queue gone (no longer configured)"), std::string::npos) << denied;
  EXPECT_TRUE(AuthorizeRead(Caller{"alice", false, false}, {"j-6", "alice", "gone"}, queues, Visibility::kTeam).ok());
  // A job from before queues counts as the default queue's: everyone's without a queues file.
  EXPECT_TRUE(
      AuthorizeRead(Caller{"bob", false, false}, {"j-7", "alice", ""}, QueueConfig::Default(), Visibility::kTeam).ok());
}

TEST(ParseVisibilityTest, TeamOrOpen) {
  EXPECT_EQ(*ParseVisibility("team"), Visibility::kTeam);
  EXPECT_EQ(*ParseVisibility("open"), Visibility::kOpen);
  absl::StatusOr<Visibility> bad = ParseVisibility("public");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("got \"public\""), std::string::npos) << bad.status();
}

}  // namespace
}  // namespace ringmaster::coordinator

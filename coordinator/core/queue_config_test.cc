#include "coordinator/core/queue_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace ringmaster::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kUnlimited = QueueResources::kUnlimited;

constexpr char kTwoTeams[] = R"(
fair_share:
  half_life: 3d
  cpu_slot_weight: 0.5
queues:
  - name: team-a
    members: [alice, bob]
    nominal: {gpus: 16, cpu_slots: 64}
    borrowing_limit: {gpus: 8}
    weight: 2
    preemption: {within_queue: true}
  - name: team-b
    members: [bob, carol]
    nominal: {gpus: 16}
  - name: scavenger
    members: ["*"]
    nominal: {gpus: 0, cpu_slots: unlimited}
    borrowing_limit: {gpus: unlimited, cpu_slots: 0}
default_queues: {bob: team-b}
)";

QueueConfig MustParse(const std::string& yaml) {
  absl::StatusOr<QueueConfig> config = QueueConfig::Parse(yaml, "queues.yaml");
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *config : QueueConfig::Default();
}

// --- Parsing ---------------------------------------------------------------

TEST(QueueConfigTest, ParsesEveryField) {
  const QueueConfig config = MustParse(kTwoTeams);
  EXPECT_EQ(config.fair_share().half_life, absl::Hours(72));
  EXPECT_EQ(config.fair_share().cpu_slot_weight, 0.5);
  ASSERT_EQ(config.queues().size(), 3u);

  const Queue& a = config.queues()[0];
  EXPECT_EQ(a.name, "team-a");
  EXPECT_THAT(a.members, ElementsAre("alice", "bob"));
  EXPECT_EQ(a.nominal, (QueueResources{16, 64}));
  EXPECT_EQ(a.borrowing_limit, (QueueResources{8, kUnlimited}));  // an absent field is unlimited
  EXPECT_EQ(a.weight, 2.0);
  EXPECT_TRUE(a.preempt_within_queue);

  const Queue& b = config.queues()[1];
  EXPECT_EQ(b.nominal, (QueueResources{16, 0}));  // an absent nominal field is 0
  EXPECT_EQ(b.borrowing_limit, (QueueResources{kUnlimited, kUnlimited}));
  EXPECT_EQ(b.weight, 1.0);
  EXPECT_FALSE(b.preempt_within_queue);

  const Queue& s = config.queues()[2];
  EXPECT_EQ(s.nominal, (QueueResources{0, kUnlimited}));
  EXPECT_EQ(s.borrowing_limit, (QueueResources{kUnlimited, 0}));
  EXPECT_TRUE(s.HasMember("anyone"));
  EXPECT_FALSE(a.HasMember("carol"));

  EXPECT_EQ(config.default_queues().at("bob"), "team-b");
  EXPECT_EQ(config.Find("team-b"), &config.queues()[1]);
  EXPECT_EQ(config.Find("team-c"), nullptr);
}

TEST(QueueConfigTest, FairShareDefaultsAndDurations) {
  const std::string queues = "queues: [{name: q, members: [a], nominal: {}}]\n";
  EXPECT_EQ(MustParse(queues).fair_share().half_life, absl::Hours(7 * 24));
  EXPECT_EQ(MustParse(queues).fair_share().cpu_slot_weight, 1.0 / 16);
  EXPECT_EQ(MustParse("fair_share: {half_life: 36h}\n" + queues).fair_share().half_life, absl::Hours(36));
  EXPECT_EQ(MustParse("fair_share: {half_life: 1.5d}\n" + queues).fair_share().half_life, absl::Hours(36));
  EXPECT_EQ(MustParse("fair_share: {half_life: 90m}\n" + queues).fair_share().half_life, absl::Minutes(90));
  EXPECT_EQ(MustParse("fair_share: {half_life: inf}\n" + queues).fair_share().half_life, absl::InfiniteDuration());
}

struct BadFile {
  std::string yaml;
  std::string error;  // a substring of the message, after "queues.yaml: "
};

std::string Queue0(const std::string& extra) {
  return absl::StrCat("queues:\n  - name: a\n    members: [alice]\n    nominal: {gpus: 1}\n", extra);
}

TEST(QueueConfigTest, EveryValidationErrorNamesTheField) {
  const std::vector<BadFile> cases = {
      {"", "the file is empty"},
      {"- a\n", "expected a mapping, got a list"},
      {"queue: []\n", "queue: unknown key (expected one of: fair_share, queues, default_queues)"},
      {"fair_share: {}\n", "queues: required"},
      {"queues: []\n", "queues: expected a list of at least one queue"},
      {"queues: {a: 1}\n", "queues: expected a list of at least one queue, got a mapping"},
      {"queues: [7]\n", "queues[0]: expected a mapping, got \"7\""},
      {"queues: [{members: [a], nominal: {}}]\n", "queues[0].name: required"},
      {"queues: [{name: a, nominal: {}}]\n", "queues[0].members: required"},
      {"queues: [{name: a, members: [x]}]\n", "queues[0].nominal: required"},
      {Queue0("    wieght: 2\n"), "queues[0].wieght: unknown key"},
      {Queue0("    weight: 2\n    weight: 3\n"), "queues[0].weight: given twice"},
      {"queues: [{name: team a, members: [x], nominal: {}}]\n",
       "queues[0].name: \"team a\" must be 1 to 63 characters of [A-Za-z0-9._/-]"},
      {absl::StrCat("queues: [{name: ", std::string(64, 'q'), ", members: [x], nominal: {}}]\n"),
       absl::StrCat("queues[0].name: \"", std::string(64, 'q'), "\" must be 1 to 63 characters")},
      {absl::StrCat("queues: [{name: ", std::string(5000, 'q'), ", members: [x], nominal: {}}]\n"),
       absl::StrCat("queues[0].name: \"", std::string(64, 'q'), "...\" (5000 bytes) must be 1 to 63")},
      {"queues: [{name: [a], members: [x], nominal: {}}]\n", "queues[0].name: expected a name, got a list"},
      {Queue0("  - name: a\n    members: [bob]\n    nominal: {}\n"),
       "queues[1].name: duplicate queue \"a\" (also queues[0])"},
      {Queue0("  - name: b\n    members: [bob]\n    nominal: {gpus: -2}\n"),
       "queues[1].nominal.gpus: must be >= 0, got -2"},
      {Queue0("  - name: b\n    members: [bob]\n    nominal: {gpu: 2}\n"), "queues[1].nominal.gpu: unknown key"},
      {"queues: [{name: a, members: [x], nominal: {cpu_slots: 1.5}}]\n",
       "queues[0].nominal.cpu_slots: expected an integer or \"unlimited\", got \"1.5\""},
      {"queues: [{name: a, members: [x], nominal: {gpus: 1000000001}}]\n",
       "queues[0].nominal.gpus: must be <= 1000000000 or \"unlimited\", got 1000000001"},
      {"queues: [{name: a, members: [x], nominal: 4}]\n", "queues[0].nominal: expected a mapping, got \"4\""},
      {Queue0("    borrowing_limit: {cpu_slots: -1}\n"), "queues[0].borrowing_limit.cpu_slots: must be >= 0, got -1"},
      {Queue0("    weight: 0\n"), "queues[0].weight: must be > 0, got 0"},
      {Queue0("    weight: -1.5\n"), "queues[0].weight: must be > 0, got -1.5"},
      {Queue0("    weight: heavy\n"), "queues[0].weight: expected a number, got \"heavy\""},
      {Queue0("    weight: .nan\n"), "queues[0].weight: expected a number"},
      {Queue0("    preemption: {within_queue: maybe}\n"),
       "queues[0].preemption.within_queue: expected true or false, got \"maybe\""},
      {Queue0("    preemption: {within: true}\n"), "queues[0].preemption.within: unknown key"},
      {"queues: [{name: a, members: [], nominal: {}}]\n", "queues[0].members: expected a list of user names"},
      {"queues: [{name: a, members: alice, nominal: {}}]\n",
       "queues[0].members: expected a list of user names or \"*\", got \"alice\""},
      {"queues: [{name: a, members: [x, y, x], nominal: {}}]\n", "queues[0].members[2]: \"x\" listed twice"},
      {"queues: [{name: a, members: [\"x y\"], nominal: {}}]\n", "queues[0].members[0]: \"x y\" is not a user name"},
      {"fair_share: {half_life: 0s}\n" + Queue0(""), "fair_share.half_life: must be > 0, got 0s"},
      {"fair_share: {half_life: -1h}\n" + Queue0(""), "fair_share.half_life: must be > 0, got -1h"},
      {"fair_share: {half_life: soon}\n" + Queue0(""),
       "fair_share.half_life: expected a duration such as 7d, 36h or inf, got \"soon\""},
      {"fair_share: {cpu_slot_weight: 0}\n" + Queue0(""), "fair_share.cpu_slot_weight: must be > 0, got 0"},
      {"fair_share: {halflife: 1d}\n" + Queue0(""), "fair_share.halflife: unknown key"},
      {Queue0("default_queues: {alice: b}\n"), "default_queues.alice: unknown queue \"b\" (queues: a)"},
      {Queue0("default_queues: {bob: a}\n"), "default_queues.bob: bob is not a member of queue a"},
      {Queue0("default_queues: [alice]\n"), "default_queues: expected a mapping, got a list"},
      {Queue0("default_queues: {alice: [a]}\n"), "default_queues.alice: expected a queue name, got a list"},
      {"queues: [{name: a\n", "malformed YAML at line"},
  };
  for (const BadFile& c : cases) {
    absl::StatusOr<QueueConfig> config = QueueConfig::Parse(c.yaml, "queues.yaml");
    ASSERT_FALSE(config.ok()) << c.yaml;
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument) << c.yaml;
    EXPECT_THAT(config.status().message(), HasSubstr("queues.yaml: " + c.error)) << c.yaml;
  }
}

TEST(QueueConfigTest, ErrorsGiveTheLine) {
  absl::StatusOr<QueueConfig> config = QueueConfig::Parse(
      Queue0("  - name: b\n    members: [bob]\n    nominal: {gpus: -2}\n"), "/etc/ringmaster/queues.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(),
            "/etc/ringmaster/queues.yaml: queues[1].nominal.gpus: must be >= 0, got -2 (line 7)");
}

TEST(QueueConfigTest, SumOfNominalQuotasMayExceedAnyCluster) {
  const QueueConfig config = MustParse(
      "queues:\n"
      "  - {name: a, members: [x], nominal: {gpus: 1000000000}}\n"
      "  - {name: b, members: [y], nominal: {gpus: 1000000000}}\n");
  EXPECT_EQ(config.queues().size(), 2u);
}

TEST(QueueConfigTest, LoadReadsTheFileAndNamesIt) {
  const std::string path = absl::StrCat(std::getenv("TEST_TMPDIR"), "/queues.yaml");
  {
    std::ofstream out(path);
    out << "queues:\n  - name: a\n    members: [alice]\n    nominal: {gpus: -1}\n";
  }
  absl::StatusOr<QueueConfig> bad = QueueConfig::Load(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr(path + ": queues[0].nominal.gpus: must be >= 0"));
  {
    std::ofstream out(path);
    out << kTwoTeams;
  }
  absl::StatusOr<QueueConfig> good = QueueConfig::Load(path);
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(good->queues().size(), 3u);

  absl::StatusOr<QueueConfig> missing = QueueConfig::Load(path + ".absent");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(path + ".absent"));
}

// Every ```yaml block of the operator's guide is a valid queues file.
TEST(QueueConfigTest, TheGuidesExamplesParse) {
  std::ifstream in("docs/operations.md");
  ASSERT_TRUE(in) << "docs/operations.md";
  std::string line, block;
  bool inside = false;
  int blocks = 0;
  while (std::getline(in, line)) {
    if (!inside && line == "```yaml") {
      inside = true;
      block.clear();
    } else if (inside && line == "```") {
      inside = false;
      ++blocks;
      absl::StatusOr<QueueConfig> config = QueueConfig::Parse(block, "operations.md block " + std::to_string(blocks));
      EXPECT_TRUE(config.ok()) << config.status();
    } else if (inside) {
      block += line + "\n";
    }
  }
  EXPECT_GE(blocks, 3);
}

// --- Default() and ResolveQueue ----------------------------------------------

TEST(QueueConfigTest, DefaultIsOneUnlimitedQueueForEveryone) {
  const QueueConfig config = QueueConfig::Default();
  ASSERT_EQ(config.queues().size(), 1u);
  const Queue& queue = config.queues()[0];
  EXPECT_EQ(queue.name, "default");
  EXPECT_EQ(queue.nominal, (QueueResources{kUnlimited, kUnlimited}));
  EXPECT_EQ(queue.borrowing_limit, (QueueResources{kUnlimited, kUnlimited}));
  EXPECT_EQ(queue.weight, 1.0);
  EXPECT_FALSE(queue.preempt_within_queue);
  EXPECT_EQ(config.ResolveQueue("alice", "").value(), "default");
  EXPECT_EQ(config.ResolveQueue("", "").value(), "default");
  EXPECT_EQ(config.ResolveQueue("alice", "default").value(), "default");
  EXPECT_EQ(config.ResolveQueue("alice", "gpu").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(QueueConfigTest, ResolveNamedQueue) {
  const QueueConfig config = MustParse(kTwoTeams);
  EXPECT_EQ(config.ResolveQueue("alice", "team-a").value(), "team-a");
  EXPECT_EQ(config.ResolveQueue("dave", "scavenger").value(), "scavenger");  // "*"

  const absl::Status unknown = config.ResolveQueue("alice", "team-x").status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(unknown.message(), "spec.queue: unknown queue \"team-x\" (queues: team-a, team-b, scavenger)");

  const absl::Status denied = config.ResolveQueue("carol", "team-a").status();
  EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(denied.message(), "user carol is not a member of queue team-a");
}

TEST(QueueConfigTest, ResolveDefaultQueue) {
  const QueueConfig config = MustParse(kTwoTeams);
  EXPECT_EQ(config.ResolveQueue("bob", "").value(), "team-b");    // default_queues
  EXPECT_EQ(config.ResolveQueue("alice", "").value(), "team-a");  // the first queue naming her
  EXPECT_EQ(config.ResolveQueue("carol", "").value(), "team-b");
  EXPECT_EQ(config.ResolveQueue("dave", "").value(), "scavenger");  // only "*" has him

  // A queue naming the user beats an earlier "*".
  const QueueConfig wildcard_first = MustParse(
      "queues:\n"
      "  - {name: all, members: [\"*\"], nominal: {}}\n"
      "  - {name: mine, members: [erin], nominal: {}}\n");
  EXPECT_EQ(wildcard_first.ResolveQueue("erin", "").value(), "mine");
  EXPECT_EQ(wildcard_first.ResolveQueue("frank", "").value(), "all");
}

TEST(QueueConfigTest, UserInNoQueueIsDenied) {
  const QueueConfig config = MustParse("queues: [{name: a, members: [alice], nominal: {}}]\n");
  const absl::Status status = config.ResolveQueue("mallory", "").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(status.message(), "user mallory is not a member of any queue (queues: a)");
}

TEST(QueueConfigTest, UnauthenticatedCallersSkipMembership) {
  const QueueConfig config = MustParse(kTwoTeams);
  EXPECT_EQ(config.ResolveQueue("", "team-b").value(), "team-b");
  EXPECT_EQ(config.ResolveQueue("", "").value(), "team-a");  // the first queue
  EXPECT_EQ(config.ResolveQueue("", "nope").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(QueueConfigTest, ValidateWarnsAboutUsersNotInTheTokenFile) {
  const QueueConfig config = MustParse(kTwoTeams);
  EXPECT_THAT(config.Validate({"alice", "bob", "carol"}), ElementsAre());
  EXPECT_THAT(config.Validate({"alice", "carol"}), ElementsAre("queue team-a: member bob is not in the token file",
                                                               "queue team-b: member bob is not in the token file",
                                                               "default_queues: user bob is not in the token file"));
}

// --- Decay -----------------------------------------------------------------

const absl::Time kNow = absl::FromUnixSeconds(1'700'000'000);

// Midpoint rule over [start, min(end, now)], `steps` pieces.
double Numeric(absl::Time start, absl::Time end, int64_t slots, absl::Time now, absl::Duration half_life) {
  const absl::Time stop = std::min(end, now);
  if (stop <= start) return 0;
  constexpr int kSteps = 200'000;
  const double a = absl::ToDoubleSeconds(start - now);
  const double b = absl::ToDoubleSeconds(stop - now);
  const double h = absl::ToDoubleSeconds(half_life);
  const double dt = (b - a) / kSteps;
  double sum = 0;
  for (int i = 0; i < kSteps; ++i) sum += std::exp2((a + (i + 0.5) * dt) / h);
  return static_cast<double>(slots) * sum * dt;
}

TEST(DecayTest, MatchesNumericIntegration) {
  struct Case {
    absl::Duration start_ago, end_ago, half_life;
    int64_t slots;
  };
  const std::vector<Case> cases = {
      {absl::Hours(10), absl::Hours(2), absl::Hours(24), 8},
      {absl::Hours(24 * 30), absl::Hours(24 * 20), absl::Hours(24 * 7), 64},
      {absl::Seconds(90), absl::ZeroDuration(), absl::Seconds(60), 1},
      {absl::Hours(3), absl::Hours(-5), absl::Hours(1), 4},  // ends after now: counted up to now
      {absl::Hours(24 * 365), absl::Hours(1), absl::Hours(24), 2},
  };
  for (const Case& c : cases) {
    const double closed = DecayedSlotSeconds(kNow - c.start_ago, kNow - c.end_ago, c.slots, kNow, c.half_life);
    const double numeric = Numeric(kNow - c.start_ago, kNow - c.end_ago, c.slots, kNow, c.half_life);
    EXPECT_NEAR(closed, numeric, 1e-6 * numeric) << c.start_ago << " " << c.end_ago << " " << c.half_life;
  }
}

TEST(DecayTest, KnownValuesAndLimits) {
  // One half-life ending now: h (1 - 1/2) / ln 2 per slot.
  const absl::Duration day = absl::Hours(24);
  EXPECT_NEAR(DecayedSlotSeconds(kNow - day, kNow, 1, kNow, day), 86400 * 0.5 / std::log(2.0), 1e-6);
  // A second, a half-life ago, counts half.
  EXPECT_NEAR(DecayedSlotSeconds(kNow - day - absl::Milliseconds(1), kNow - day, 1000, kNow, day), 0.5, 1e-6);
  // No decay: slots x duration.
  EXPECT_DOUBLE_EQ(DecayedSlotSeconds(kNow - absl::Hours(2), kNow - absl::Hours(1), 8, kNow, absl::InfiniteDuration()),
                   8 * 3600.0);
  // A half-life far longer than the interval tends to slots x duration,
  // without losing precision to cancellation.
  // (To first order 30 (1 - 5 ln 2 / h); 1 - 2^(-10 / h) computed directly
  // would be off by about 1e-5 here.)
  const absl::Duration millennium = absl::Hours(24 * 365 * 1000);
  const double slow = DecayedSlotSeconds(kNow - absl::Seconds(10), kNow, 3, kNow, millennium);
  EXPECT_NEAR(slow, 30.0 * (1 - 5 * std::log(2.0) / absl::ToDoubleSeconds(millennium)), 1e-12);
  EXPECT_NEAR(slow, DecayedSlotSeconds(kNow - absl::Seconds(10), kNow, 3, kNow, absl::InfiniteDuration()), 1e-8);
  // A running interval counts up to now, as one that ends now.
  EXPECT_DOUBLE_EQ(DecayedSlotSeconds(kNow - absl::Hours(5), absl::InfiniteFuture(), 8, kNow, day),
                   DecayedSlotSeconds(kNow - absl::Hours(5), kNow, 8, kNow, day));
  // Empty or future intervals, no slots.
  EXPECT_EQ(DecayedSlotSeconds(kNow, kNow, 8, kNow, day), 0);
  EXPECT_EQ(DecayedSlotSeconds(kNow - absl::Hours(1), kNow - absl::Hours(2), 8, kNow, day), 0);
  EXPECT_EQ(DecayedSlotSeconds(kNow + absl::Hours(1), absl::InfiniteFuture(), 8, kNow, day), 0);
  EXPECT_EQ(DecayedSlotSeconds(kNow - absl::Hours(1), kNow, 0, kNow, day), 0);
}

TEST(DecayTest, SplittingAnIntervalChangesNothing) {
  const absl::Duration h = absl::Hours(7 * 24);
  const absl::Time a = kNow - absl::Hours(100), m = kNow - absl::Hours(37), b = kNow - absl::Hours(3);
  EXPECT_NEAR(DecayedSlotSeconds(a, b, 8, kNow, h),
              DecayedSlotSeconds(a, m, 8, kNow, h) + DecayedSlotSeconds(m, b, 8, kNow, h), 1e-6);
}

TEST(DecayTest, UsageCombinesGpusAndWeightedCpuSlots) {
  FairShareConfig config;
  config.half_life = absl::InfiniteDuration();
  config.cpu_slot_weight = 0.25;
  const std::vector<UsageInterval> intervals = {
      {"a", kNow - absl::Seconds(100), kNow - absl::Seconds(50), 2, 0},
      {"a", kNow - absl::Seconds(10), absl::InfiniteFuture(), 0, 8},
      {"b", kNow - absl::Seconds(10), kNow, 1, 4},
  };
  const std::map<std::string, double> usage = DecayedUsageByQueue(intervals, kNow, config);
  EXPECT_DOUBLE_EQ(usage.at("a"), 2 * 50 + 0.25 * 8 * 10);
  EXPECT_DOUBLE_EQ(usage.at("b"), 10 + 0.25 * 4 * 10);
  EXPECT_EQ(usage.count("c"), 0u);
}

TEST(FairShareLedgerTest, FoldedUsageEqualsTheSumOverAllIntervals) {
  FairShareConfig config;
  config.half_life = absl::Hours(24);
  std::mt19937 rng(28);
  std::uniform_int_distribution<int> minutes(0, 14 * 24 * 60), length(1, 3 * 24 * 60), slots(0, 8);
  std::vector<UsageInterval> all;
  FairShareLedger ledger(config);
  for (int i = 0; i < 500; ++i) {  // recorded in random, not time, order
    const absl::Time start = kNow - absl::Hours(24 * 20) + absl::Minutes(minutes(rng));
    UsageInterval interval{i % 3 == 0 ? "a" : "b", start, start + absl::Minutes(length(rng)), slots(rng), slots(rng)};
    interval.end = std::min(interval.end, kNow);
    ASSERT_TRUE(ledger.RecordFinished(interval).ok());
    all.push_back(interval);
  }
  const std::vector<UsageInterval> running = {{"a", kNow - absl::Hours(5), absl::InfiniteFuture(), 8, 0}};
  all.insert(all.end(), running.begin(), running.end());
  for (const absl::Duration later : {absl::ZeroDuration(), absl::Hours(1), absl::Hours(24 * 9)}) {
    const std::map<std::string, double> expected = DecayedUsageByQueue(all, kNow + later, config);
    for (const std::string queue : {"a", "b"}) {
      EXPECT_NEAR(ledger.Usage(queue, kNow + later, running), expected.at(queue), 1e-9 * expected.at(queue))
          << queue << " at +" << later;
    }
  }
  EXPECT_EQ(ledger.Usage("c", kNow, running), 0);
}

TEST(FairShareLedgerTest, WeightsRunningIntervalsAndClockSteps) {
  FairShareConfig config;
  config.half_life = absl::Hours(1);
  config.cpu_slot_weight = 1;
  FairShareLedger ledger(config);
  const UsageInterval running{"a", kNow - absl::Hours(1), absl::InfiniteFuture(), 1, 0};
  EXPECT_EQ(ledger.RecordFinished(running).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(ledger.RecordFinished({"a", kNow - absl::Hours(1), kNow, 2, 0}).ok());
  const double at_now = ledger.Usage("a", kNow);
  EXPECT_NEAR(at_now, 2 * 3600 * 0.5 / std::log(2.0), 1e-6);
  EXPECT_NEAR(ledger.Usage("a", kNow + absl::Hours(1)), at_now / 2, 1e-6);  // one half-life later
  EXPECT_EQ(ledger.Usage("a", kNow - absl::Hours(1)), at_now);              // a clock stepped back
  Queue heavy;
  heavy.name = "a";
  heavy.weight = 4;
  EXPECT_NEAR(ledger.WeightedUsage(heavy, kNow), at_now / 4, 1e-9);
}

}  // namespace
}  // namespace ringmaster::coordinator

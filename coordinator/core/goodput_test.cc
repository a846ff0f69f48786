#include "coordinator/core/goodput.h"

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/proto_time.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1700000000);

// One timeline entry: at `t` seconds after kT0, from -> to.
struct Ev {
  double t;
  v1::JobEventKind kind;
  v1::JobState from;
  v1::JobState to;
  double write_seconds = 0;  // CHECKPOINT_COMMITTED only
  double stall_seconds = -1;  // CHECKPOINT_COMMITTED only; < 0: unset (a synchronous writer)
};

struct Expect {
  double queued = 0, starting = 0, training = 0, stall = 0, restart = 0, recomputed = 0;
  double goodput = 0;
  v1::GoodputPhase phase = v1::GOODPUT_PHASE_UNSPECIFIED;
};

struct Case {
  std::string name;
  std::vector<Ev> events;
  double now;  // seconds after kT0
  Expect want;
};

constexpr auto Q = v1::JOB_STATE_QUEUED;
constexpr auto P = v1::JOB_STATE_PLACED;
constexpr auto S = v1::JOB_STATE_STARTING;
constexpr auto R = v1::JOB_STATE_RUNNING;
constexpr auto X = v1::JOB_STATE_RESTARTING;
constexpr auto OK = v1::JOB_STATE_SUCCEEDED;
constexpr auto CANCELLED = v1::JOB_STATE_CANCELLED;

// Submitted at 0, placed at `placed`, RUNNING at `running`.
std::vector<Ev> Started(double placed, double running) {
  return {{0, v1::JOB_EVENT_KIND_SUBMITTED, v1::JOB_STATE_UNSPECIFIED, Q},
          {placed, v1::JOB_EVENT_KIND_PLACED, Q, P},
          {placed, v1::JOB_EVENT_KIND_STARTING, P, S},
          {running, v1::JOB_EVENT_KIND_RUNNING, S, R}};
}

std::vector<Ev> Then(std::vector<Ev> head, const std::vector<Ev>& tail) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

v1::GoodputBreakdown Replay(const Case& c) {
  v1::GoodputBreakdown b;
  for (const Ev& ev : c.events) {
    v1::JobEvent e;
    *e.mutable_time() = ToProtoTime(kT0 + absl::Seconds(ev.t));
    e.set_kind(ev.kind);
    e.set_from_state(ev.from);
    e.set_to_state(ev.to);
    e.set_checkpoint_write_seconds(ev.write_seconds);
    if (ev.stall_seconds >= 0) e.set_checkpoint_stall_seconds(ev.stall_seconds);
    ApplyGoodputEvent(e, &b);
  }
  return GoodputAt(b, kT0 + absl::Seconds(c.now));
}

TEST(GoodputTest, Table) {
  const std::vector<Case> cases = {
      {"queued only", {{0, v1::JOB_EVENT_KIND_SUBMITTED, v1::JOB_STATE_UNSPECIFIED, Q}}, 30,
       {.queued = 30, .phase = v1::GOODPUT_PHASE_QUEUED}},
      {"starting",
       {{0, v1::JOB_EVENT_KIND_SUBMITTED, v1::JOB_STATE_UNSPECIFIED, Q},
        {10, v1::JOB_EVENT_KIND_PLACED, Q, P},
        {10, v1::JOB_EVENT_KIND_STARTING, P, S}},
       14, {.queued = 10, .starting = 4, .phase = v1::GOODPUT_PHASE_STARTING}},
      {"clean run", Then(Started(10, 15), {{115, v1::JOB_EVENT_KIND_SUCCEEDED, R, OK}}), 500,
       {.queued = 10, .starting = 5, .training = 100, .goodput = 100.0 / 105, .phase = v1::GOODPUT_PHASE_ENDED}},
      {"running, open phase extended to now", Started(0, 5), 45,
       {.starting = 5, .training = 40, .goodput = 40.0 / 45, .phase = v1::GOODPUT_PHASE_TRAINING}},
      {"checkpoint stall",
       Then(Started(0, 0), {{50, v1::JOB_EVENT_KIND_CHECKPOINT_COMMITTED, R, R, 5},
                            {100, v1::JOB_EVENT_KIND_SUCCEEDED, R, OK}}),
       100, {.training = 95, .stall = 5, .goodput = 0.95, .phase = v1::GOODPUT_PHASE_ENDED}},
      {"a background write: only the training thread's stall counts",
       Then(Started(0, 0), {{50, v1::JOB_EVENT_KIND_CHECKPOINT_COMMITTED, R, R, 5, 0.25},
                            {100, v1::JOB_EVENT_KIND_SUCCEEDED, R, OK}}),
       100, {.training = 99.75, .stall = 0.25, .goodput = 0.9975, .phase = v1::GOODPUT_PHASE_ENDED}},
      {"a stall is never more than the time since the last commit",
       Then(Started(0, 0), {{10, v1::JOB_EVENT_KIND_CHECKPOINT_COMMITTED, R, R, 5},
                            {12, v1::JOB_EVENT_KIND_CHECKPOINT_COMMITTED, R, R, 30}}),
       20, {.training = 13, .stall = 7, .goodput = 13.0 / 20, .phase = v1::GOODPUT_PHASE_TRAINING}},
      {"one failure: restart and recomputed work",
       Then(Started(0, 5), {{65, v1::JOB_EVENT_KIND_CHECKPOINT_COMMITTED, R, R, 0},
                            {95, v1::JOB_EVENT_KIND_RANK_EXITED, R, X},
                            {100, v1::JOB_EVENT_KIND_RESTARTING, X, S},
                            {105, v1::JOB_EVENT_KIND_RUNNING, S, R},
                            {205, v1::JOB_EVENT_KIND_SUCCEEDED, R, OK}}),
       205,
       {.starting = 5, .training = 160, .restart = 10, .recomputed = 30, .goodput = 160.0 / 205,
        .phase = v1::GOODPUT_PHASE_ENDED}},
      {"loading until every rank stepped is starting, after a failure restart",
       Then(Started(0, 5), {{8, v1::JOB_EVENT_KIND_STEPPING, R, R},
                            {65, v1::JOB_EVENT_KIND_CHECKPOINT_COMMITTED, R, R, 0},
                            {95, v1::JOB_EVENT_KIND_RANK_EXITED, R, X},
                            {100, v1::JOB_EVENT_KIND_RESTARTING, X, S},
                            {105, v1::JOB_EVENT_KIND_RUNNING, S, R},
                            {107, v1::JOB_EVENT_KIND_STEPPING, R, R},
                            {205, v1::JOB_EVENT_KIND_SUCCEEDED, R, OK}}),
       205,
       {.starting = 8, .training = 155, .restart = 12, .recomputed = 30, .goodput = 155.0 / 205,
        .phase = v1::GOODPUT_PHASE_ENDED}},
      {"a failure before any checkpoint loses the whole generation",
       Then(Started(0, 0), {{40, v1::JOB_EVENT_KIND_NODE_LOST, R, X}}), 50,
       {.restart = 10, .recomputed = 40, .phase = v1::GOODPUT_PHASE_RESTART}},
      {"preempted: a restart, its next generation starting included",
       Then(Started(0, 0), {{20, v1::JOB_EVENT_KIND_CHECKPOINT_COMMITTED, R, R, 2},
                            {30, v1::JOB_EVENT_KIND_PREEMPTED, R, X},
                            {50, v1::JOB_EVENT_KIND_RESTARTING, X, S}}),
       53,
       {.training = 18, .stall = 2, .restart = 23, .recomputed = 10, .goodput = 18.0 / 53,
        .phase = v1::GOODPUT_PHASE_RESTART}},
      {"cancelled while running: nothing is done again",
       Then(Started(0, 0), {{30, v1::JOB_EVENT_KIND_CANCELLED, R, CANCELLED}}), 90,
       {.training = 30, .goodput = 1, .phase = v1::GOODPUT_PHASE_ENDED}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const v1::GoodputBreakdown got = Replay(c);
    EXPECT_DOUBLE_EQ(got.queued_seconds(), c.want.queued);
    EXPECT_DOUBLE_EQ(got.starting_seconds(), c.want.starting);
    EXPECT_DOUBLE_EQ(got.training_seconds(), c.want.training);
    EXPECT_DOUBLE_EQ(got.checkpoint_stall_seconds(), c.want.stall);
    EXPECT_DOUBLE_EQ(got.restart_seconds(), c.want.restart);
    EXPECT_DOUBLE_EQ(got.recomputed_seconds(), c.want.recomputed);
    EXPECT_DOUBLE_EQ(got.goodput(), c.want.goodput);
    EXPECT_EQ(got.phase(), c.want.phase);
  }
}

TEST(GoodputTest, PhasesAddUpToTheWallTime) {
  Case c{"", Then(Started(7, 9), {{30, v1::JOB_EVENT_KIND_CHECKPOINT_COMMITTED, R, R, 3},
                                  {44, v1::JOB_EVENT_KIND_PROGRESS_TIMEOUT, R, X},
                                  {60, v1::JOB_EVENT_KIND_RESTARTING, X, S},
                                  {61, v1::JOB_EVENT_KIND_RUNNING, S, R}}),
         100, {}};
  const v1::GoodputBreakdown got = Replay(c);
  EXPECT_DOUBLE_EQ(got.queued_seconds() + got.starting_seconds() + got.training_seconds() +
                       got.checkpoint_stall_seconds() + got.restart_seconds() + got.recomputed_seconds(),
                   100);
  EXPECT_EQ(FromProtoTime(got.first_placement_time()), kT0 + absl::Seconds(7));
}

TEST(GoodputTest, NothingAccruesBeforeAsOfOrAfterTheEnd) {
  Case c{"", Then(Started(0, 0), {{10, v1::JOB_EVENT_KIND_SUCCEEDED, R, OK}}), 5, {}};
  EXPECT_DOUBLE_EQ(Replay(c).training_seconds(), 10);  // now before the end: as at the end
}

}  // namespace
}  // namespace ringmaster::coordinator

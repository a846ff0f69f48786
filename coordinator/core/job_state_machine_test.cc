#include "coordinator/core/job_state_machine.h"

#include <set>
#include <utility>

#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

using S = v1::JobState;

// The whole table: every (from, to) pair, legal exactly when listed here.
TEST(JobStateMachineTest, EveryPairAgainstTheTable) {
  const std::set<std::pair<S, S>> legal = {
      {v1::JOB_STATE_UNSPECIFIED, v1::JOB_STATE_QUEUED},
      {v1::JOB_STATE_QUEUED, v1::JOB_STATE_PLACED},
      {v1::JOB_STATE_QUEUED, v1::JOB_STATE_CANCELLED},
      {v1::JOB_STATE_QUEUED, v1::JOB_STATE_FAILED},
      {v1::JOB_STATE_PLACED, v1::JOB_STATE_STARTING},
      {v1::JOB_STATE_PLACED, v1::JOB_STATE_RUNNING},
      {v1::JOB_STATE_PLACED, v1::JOB_STATE_RESTARTING},
      {v1::JOB_STATE_PLACED, v1::JOB_STATE_CANCELLED},
      {v1::JOB_STATE_PLACED, v1::JOB_STATE_FAILED},
      {v1::JOB_STATE_STARTING, v1::JOB_STATE_RUNNING},
      {v1::JOB_STATE_STARTING, v1::JOB_STATE_RESTARTING},
      {v1::JOB_STATE_STARTING, v1::JOB_STATE_SUCCEEDED},
      {v1::JOB_STATE_STARTING, v1::JOB_STATE_CANCELLED},
      {v1::JOB_STATE_STARTING, v1::JOB_STATE_FAILED},
      {v1::JOB_STATE_RUNNING, v1::JOB_STATE_RESTARTING},
      {v1::JOB_STATE_RUNNING, v1::JOB_STATE_SUCCEEDED},
      {v1::JOB_STATE_RUNNING, v1::JOB_STATE_CANCELLED},
      {v1::JOB_STATE_RUNNING, v1::JOB_STATE_FAILED},
      {v1::JOB_STATE_RESTARTING, v1::JOB_STATE_STARTING},
      {v1::JOB_STATE_RESTARTING, v1::JOB_STATE_CANCELLED},
      {v1::JOB_STATE_RESTARTING, v1::JOB_STATE_FAILED},
  };
  for (int f = v1::JobState_MIN; f <= v1::JobState_MAX; ++f) {
    for (int t = v1::JobState_MIN; t <= v1::JobState_MAX; ++t) {
      const S from = static_cast<S>(f), to = static_cast<S>(t);
      const bool want = legal.count({from, to}) != 0;
      EXPECT_EQ(IsLegalTransition(from, to), want) << StateName(from) << " -> " << StateName(to);
      EXPECT_EQ(CheckTransition("j-1", from, to).ok(), want);
    }
  }
}

TEST(JobStateMachineTest, IllegalTransitionIsFailedPreconditionSayingWhy) {
  absl::Status s = CheckTransition("j-7", v1::JOB_STATE_SUCCEEDED, v1::JOB_STATE_RUNNING);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "job j-7 is SUCCEEDED; it cannot become RUNNING");
  EXPECT_EQ(CheckTransition("j-7", v1::JOB_STATE_QUEUED, v1::JOB_STATE_RUNNING).message(),
            "job j-7 is QUEUED; it cannot become RUNNING");
}

TEST(JobStateMachineTest, TerminalStates) {
  for (S s : {v1::JOB_STATE_SUCCEEDED, v1::JOB_STATE_FAILED, v1::JOB_STATE_CANCELLED}) EXPECT_TRUE(IsTerminal(s));
  for (S s : {v1::JOB_STATE_QUEUED, v1::JOB_STATE_PLACED, v1::JOB_STATE_STARTING, v1::JOB_STATE_RUNNING,
              v1::JOB_STATE_RESTARTING}) {
    EXPECT_FALSE(IsTerminal(s));
  }
}

}  // namespace
}  // namespace ringmaster::coordinator

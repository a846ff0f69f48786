#ifndef RINGMASTER_COMMON_CHECKPOINT_INTERVAL_H_
#define RINGMASTER_COMMON_CHECKPOINT_INTERVAL_H_

// `checkpoint.interval: auto`: the Young-Daly checkpoint interval,
//
//   T = sqrt(2 x C x M),
//
// where C is what one checkpoint costs the training (its measured stall: the
// ranks stop for the gathers and the host snapshot; the write itself runs in
// the background) and M the job's mean time between failures. It minimises
// the expected time lost per unit of training, C/T (checkpoints) + T/(2M)
// (work redone after a failure, on average half an interval). The
// coordinator estimates M (EstimateMtbf) and hands it to the ranks with the
// operator's bounds (v1::AutoIntervalInputs); the ranks, which measure C,
// choose T (ChooseAutoInterval) after every checkpoint and report it with
// the commit. Pure functions: thread-safe.

#include <string>

#include "proto/checkpoint.pb.h"
#include "proto/job_spec.pb.h"

namespace ringmaster {

// The defaults of the coordinator's flags and of a rank started by hand.
inline constexpr double kDefaultMtbfPriorSeconds = 4 * 3600;       // --checkpoint-mtbf-prior
inline constexpr double kDefaultIntervalMinSeconds = 2;             // --checkpoint-interval-min
inline constexpr double kDefaultIntervalMaxSeconds = 3600;          // --checkpoint-interval-max
inline constexpr double kDefaultNodeFailureWindowSeconds = 24 * 3600;  // --checkpoint-failure-window

// What the coordinator has seen of a job's failures.
struct FailureHistory {
  int job_failures = 0;             // generations of this job that failed (its restarts)
  double job_running_seconds = 0;   // the job's RUNNING time so far (all generations)
  int node_failures = 0;            // rank failures on the job's nodes within the window (any job)
  double window_seconds = kDefaultNodeFailureWindowSeconds;
  double prior_seconds = kDefaultMtbfPriorSeconds;
};

// M: the shortest of the prior, the job's own mean time between failures
// (its RUNNING time over its failures) and the nodes' (the window over the
// failures on them), those without a failure left out. The shortest, because
// the costs are lopsided: checkpointing too often costs a stall that is small
// next to a failure's lost work, and an estimate that recovers as failure-free
// time accrues (the job's RUNNING time grows, old node failures leave the
// window). Sets `basis` to where M came from.
double EstimateMtbf(const FailureHistory& history, std::string* basis);

// The inputs every rank of a generation gets (StartRanks.auto_interval).
v1::AutoIntervalInputs MakeAutoIntervalInputs(const FailureHistory& history, double min_seconds,
                                              double max_seconds, double last_stall_seconds);

// T for the inputs and a measured stall (seconds; <= 0: none measured yet,
// then T is the lower bound, so that the first checkpoint measures the
// stall), with why, for `ringmaster describe`.
v1::CheckpointInterval ChooseAutoInterval(const v1::AutoIntervalInputs& inputs, double stall_seconds);

// The interval a spec fixes (interval_steps or interval_seconds), with why;
// for auto, ChooseAutoInterval(inputs, inputs.stall_seconds()).
v1::CheckpointInterval IntervalInForce(const v1::CheckpointPolicy& policy, const v1::AutoIntervalInputs& inputs);

// A duration for people: "0.42ms", "850ms", "10.7s", "4h", "6m30s".
std::string HumanSeconds(double seconds);

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_CHECKPOINT_INTERVAL_H_

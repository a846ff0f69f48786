#ifndef RINGMASTER_BENCH_LOAD_REPORT_H_
#define RINGMASTER_BENCH_LOAD_REPORT_H_

// What coordinator_load_bench prints: the table of goal against measured,
// the spread of slow heartbeats, and the coordinator's timeline of the job.

#include <chrono>
#include <string>
#include <vector>

#include "bench/sim_recorder.h"
#include "proto/job.pb.h"

namespace ringmaster::bench {

inline double Seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

// A row of the result table; goal "-": informational.
struct Row {
  std::string metric;
  std::string goal;
  std::string measured;
  std::string result;  // "pass", "MISS" or "-"
};

// A row of a duration; goal_s <= 0: informational.
Row Timed(std::string metric, double seconds, double goal_s);

// The p-quantile (0..1) of `v`, nearest rank; 0 for none.
double Percentile(std::vector<double> v, double p);

void PrintTable(const std::vector<Row>& rows);

// How the round trips over `slow_ms` are spread: a few bursts (every node
// waiting on one stall) or all over the window (scheduling noise).
void PrintSlowHeartbeats(const std::vector<HeartbeatSample>& samples, double slow_ms);

// The job's timeline as the coordinator recorded it, relative to submission.
void PrintTimeline(const v1::Job& job, const std::vector<v1::JobEvent>& events);

}  // namespace ringmaster::bench

#endif  // RINGMASTER_BENCH_LOAD_REPORT_H_

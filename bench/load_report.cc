#include "bench/load_report.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/proto_time.h"

namespace ringmaster::bench {

Row Timed(std::string metric, double seconds, double goal_s) {
  Row row{std::move(metric), goal_s > 0 ? absl::StrFormat("< %g s", goal_s) : "-", absl::StrFormat("%.3f s", seconds),
          "-"};
  if (goal_s > 0) row.result = seconds < goal_s ? "pass" : "MISS";
  return row;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5));
  return v[i];
}

void PrintTable(const std::vector<Row>& rows) {
  std::printf("\n%-64s %-10s %-14s %s\n", "metric", "goal", "measured", "result");
  for (const Row& r : rows) {
    std::printf("%-64s %-10s %-14s %s\n", r.metric.c_str(), r.goal.c_str(), r.measured.c_str(), r.result.c_str());
  }
  std::fflush(stdout);
}

void PrintSlowHeartbeats(const std::vector<HeartbeatSample>& samples, double slow_ms) {
  std::set<int64_t> windows;  // 100 ms windows of the slow ones' send times
  int slow = 0;
  for (const HeartbeatSample& s : samples) {
    if (s.ms <= slow_ms) continue;
    ++slow;
    windows.insert(std::chrono::duration_cast<std::chrono::milliseconds>(s.sent.time_since_epoch()).count() / 100);
  }
  std::printf("heartbeats over %.0f ms: %d of %zu, sent within %zu distinct 100-ms windows\n", slow_ms, slow,
              samples.size(), windows.size());
}

void PrintTimeline(const v1::Job& job, const std::vector<v1::JobEvent>& events) {
  const absl::Time submit = FromProtoTime(job.submit_time());
  std::printf("coordinator's timeline of job %s:", job.id().c_str());
  for (const v1::JobEvent& e : events) {
    std::printf(" %s +%.3fs", v1::JobEventKind_Name(e.kind()).substr(15).c_str(),
                absl::ToDoubleSeconds(FromProtoTime(e.time()) - submit));
  }
  std::printf("\n");
}

}  // namespace ringmaster::bench

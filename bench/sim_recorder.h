#ifndef RINGMASTER_BENCH_SIM_RECORDER_H_
#define RINGMASTER_BENCH_SIM_RECORDER_H_

// SimRecorder: what the simulated nodes of the coordinator load benchmark
// observe (times of the last session, assignment, NCCL id and exit; heartbeat
// round trips), and the counts the benchmark's phases wait on.
//
// Thread-safe.

#include <chrono>
#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

namespace ringmaster::bench {

using SteadyTime = std::chrono::steady_clock::time_point;

// A heartbeat's send time and its round trip to the lease grant.
struct HeartbeatSample {
  SteadyTime sent;
  double ms = 0;
};

class SimRecorder {
 public:
  // Heartbeat round trips of heartbeats sent while recording.
  void SetRecording(bool on);
  bool recording() const;

  void OnSessionReady(SteadyTime t);          // first LeaseGrant of a node
  void OnAssignment(SteadyTime t);            // a node received its StartRanks
  // A rank's NCCL id call ended (ok: it holds the published bytes).
  void OnRankId(SteadyTime t, bool ok);
  void OnExitReported(SteadyTime t);
  void OnHeartbeat(SteadyTime sent, double ms);
  void OnError(const std::string& what);      // kept (first few) and counted
  void OnStop();
  // Node 0 parsed its StartRanks' placement (world_size -1: it did not parse).
  void OnPlacementParsed(double ms, size_t bytes, int world_size);
  struct PlacementParse {
    double ms = 0;
    size_t bytes = 0;
    int world_size = 0;
  };
  PlacementParse placement_parse() const;

  // Events counted: nodes with a session (first grant), nodes with their
  // assignment, ranks whose id call ended, exit reports answered.
  enum class Count { kSessions, kAssignments, kRankIds, kExits };
  // Waits until `count(what)` reaches `target`, or `deadline`; false on timeout.
  bool WaitFor(Count what, int target, SteadyTime deadline);
  int count(Count what) const;

  void SetPublishedId(const std::string& id);
  std::string published_id() const;

  SteadyTime last(Count what) const;  // time of the last event of that kind
  std::vector<HeartbeatSample> heartbeats() const;
  int errors() const;
  std::vector<std::string> first_errors() const;
  int stops() const;
  int rank_id_failures() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool recording_ = false;
  void RecordLocked(Count what, SteadyTime t);

  static constexpr int kCounts = 4;
  int counts_[kCounts] = {};
  SteadyTime lasts_[kCounts] = {};
  int rank_id_failures_ = 0, stops_ = 0, errors_ = 0;
  std::vector<HeartbeatSample> heartbeats_;
  std::vector<std::string> first_errors_;
  std::string published_id_;
  PlacementParse placement_parse_;
};

}  // namespace ringmaster::bench

#endif  // RINGMASTER_BENCH_SIM_RECORDER_H_

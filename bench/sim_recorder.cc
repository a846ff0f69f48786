#include "bench/sim_recorder.h"

#include <utility>

namespace ringmaster::bench {
namespace {

constexpr size_t kKeptErrors = 5;

}  // namespace

void SimRecorder::SetRecording(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  recording_ = on;
}

bool SimRecorder::recording() const {
  std::lock_guard<std::mutex> lock(mu_);
  return recording_;
}

void SimRecorder::RecordLocked(Count what, SteadyTime t) {
  ++counts_[static_cast<int>(what)];
  lasts_[static_cast<int>(what)] = std::max(lasts_[static_cast<int>(what)], t);
  cv_.notify_all();
}

void SimRecorder::OnSessionReady(SteadyTime t) {
  std::lock_guard<std::mutex> lock(mu_);
  RecordLocked(Count::kSessions, t);
}

void SimRecorder::OnAssignment(SteadyTime t) {
  std::lock_guard<std::mutex> lock(mu_);
  RecordLocked(Count::kAssignments, t);
}

void SimRecorder::OnRankId(SteadyTime t, bool ok) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!ok) ++rank_id_failures_;
  RecordLocked(Count::kRankIds, t);
}

void SimRecorder::OnExitReported(SteadyTime t) {
  std::lock_guard<std::mutex> lock(mu_);
  RecordLocked(Count::kExits, t);
}

void SimRecorder::OnHeartbeat(SteadyTime sent, double ms) {
  std::lock_guard<std::mutex> lock(mu_);
  heartbeats_.push_back({sent, ms});
}

void SimRecorder::OnError(const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  ++errors_;
  if (first_errors_.size() < kKeptErrors) first_errors_.push_back(what);
}

void SimRecorder::OnStop() {
  std::lock_guard<std::mutex> lock(mu_);
  ++stops_;
}

void SimRecorder::OnPlacementParsed(double ms, size_t bytes, int world_size) {
  std::lock_guard<std::mutex> lock(mu_);
  placement_parse_ = {ms, bytes, world_size};
}

SimRecorder::PlacementParse SimRecorder::placement_parse() const {
  std::lock_guard<std::mutex> lock(mu_);
  return placement_parse_;
}

int SimRecorder::count(Count what) const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_[static_cast<int>(what)];
}

bool SimRecorder::WaitFor(Count what, int target, SteadyTime deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_until(lock, deadline, [&] { return counts_[static_cast<int>(what)] >= target; });
}

SteadyTime SimRecorder::last(Count what) const {
  std::lock_guard<std::mutex> lock(mu_);
  return lasts_[static_cast<int>(what)];
}

void SimRecorder::SetPublishedId(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  published_id_ = id;
}

std::string SimRecorder::published_id() const {
  std::lock_guard<std::mutex> lock(mu_);
  return published_id_;
}

std::vector<HeartbeatSample> SimRecorder::heartbeats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return heartbeats_;
}

int SimRecorder::errors() const {
  std::lock_guard<std::mutex> lock(mu_);
  return errors_;
}

std::vector<std::string> SimRecorder::first_errors() const {
  std::lock_guard<std::mutex> lock(mu_);
  return first_errors_;
}

int SimRecorder::stops() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stops_;
}

int SimRecorder::rank_id_failures() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rank_id_failures_;
}

}  // namespace ringmaster::bench

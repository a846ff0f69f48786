#include "coordinator/core/coordinator_metrics.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "coordinator/core/goodput.h"
#include "coordinator/core/job_state_machine.h"
#include "common/proto_time.h"

namespace ringmaster::coordinator {
namespace {

constexpr const char* kNodeStates[4] = {"ready", "cordoned", "lost", "not_ready"};
constexpr const char* kSlotStates[3] = {"allocated", "free", "unavailable"};
constexpr absl::Duration kNodeCountsTtl = absl::Milliseconds(100);

bool Waiting(v1::JobState s) { return s == v1::JOB_STATE_QUEUED || s == v1::JOB_STATE_RESTARTING; }
bool Terminal(v1::JobState s) {
  return s == v1::JOB_STATE_SUCCEEDED || s == v1::JOB_STATE_FAILED || s == v1::JOB_STATE_CANCELLED;
}
std::string StateLabel(v1::JobState s) { return absl::AsciiStrToLower(StateName(s)); }

// The causes a generation restarts for (ReasonCode of the event that moves a
// job to RESTARTING), exposed at 0 before the first one happens.
constexpr v1::JobEventKind kRestartCauses[] = {
    v1::JOB_EVENT_KIND_RANK_EXITED,         v1::JOB_EVENT_KIND_NODE_LOST, v1::JOB_EVENT_KIND_PROGRESS_TIMEOUT,
    v1::JOB_EVENT_KIND_RENDEZVOUS_TIMEOUT,  v1::JOB_EVENT_KIND_RECOVERED, v1::JOB_EVENT_KIND_CHECKPOINT_DAMAGED,
    v1::JOB_EVENT_KIND_NODE_DRAINED,        v1::JOB_EVENT_KIND_PREEMPTED};

// ringmaster_job_time_seconds' phases, in GoodputValue's order (0-5; 6 is the ratio).
constexpr const char* kGoodputPhases[6] = {"queued",  "starting", "training", "checkpoint_stall",
                                           "restart", "recomputed"};

const prometheus::Histogram::BucketBoundaries kRpcLatencyBuckets = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};

}  // namespace

absl::StatusOr<std::unique_ptr<CoordinatorMetrics>> CoordinatorMetrics::Create(MetricsRegistry* registry,
                                                                               const NodeRegistry* nodes,
                                                                               const Clock* clock) {
  std::unique_ptr<CoordinatorMetrics> metrics(
      new CoordinatorMetrics(registry, nodes, clock != nullptr ? clock : Clock::Real()));
  RETURN_IF_ERROR(metrics->Register());
  return metrics;
}

absl::Status CoordinatorMetrics::Register() {
  ASSIGN_OR_RETURN(prometheus::Family<prometheus::Gauge> * jobs, registry_->AddGauge("ringmaster_jobs", "Jobs per state."));
  for (int s = v1::JOB_STATE_QUEUED; s <= v1::JOB_STATE_CANCELLED; ++s) {
    const auto state = static_cast<v1::JobState>(s);
    jobs_by_state_[state] = &jobs->Add({{"state", StateLabel(state)}});
  }
  ASSIGN_OR_RETURN(job_state_,
                   registry_->AddGauge("ringmaster_job_state", "1 for the state each job that has not ended is in."));
  ASSIGN_OR_RETURN(prometheus::Family<prometheus::Counter> * ended,
                   registry_->AddCounter("ringmaster_jobs_ended_total",
                                         "Jobs that ended, by final state (succeeded, failed, cancelled)."));
  for (v1::JobState state : {v1::JOB_STATE_SUCCEEDED, v1::JOB_STATE_FAILED, v1::JOB_STATE_CANCELLED}) {
    jobs_ended_[state] = &ended->Add({{"state", StateLabel(state)}});
  }
  ASSIGN_OR_RETURN(unschedulable_,
                   registry_->AddGauge("ringmaster_job_unschedulable",
                                       "1 while a job waits and no registered node could ever run it, else 0; "
                                       "for each job that has not ended."));
  ASSIGN_OR_RETURN(prometheus::Family<prometheus::Gauge> * queue,
                   registry_->AddGauge("ringmaster_queue_length",
                                       "Jobs waiting for placement: queued, or restarting and waiting for their "
                                       "next generation."));
  queue_length_ = &queue->Add({});
  ASSIGN_OR_RETURN(prometheus::Family<prometheus::Histogram> * wait,
                   registry_->AddHistogram("ringmaster_queue_wait_seconds",
                                           "Time from submission (or a failed generation) to placement."));
  queue_wait_ = &wait->Add({}, prometheus::Histogram::BucketBoundaries{0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 14400,
                                                                       86400});
  ASSIGN_OR_RETURN(CallbackGauges * oldest,
                   registry_->AddCallbackGauges("ringmaster_queue_oldest_wait_seconds",
                                                "How long the job waiting longest for placement has waited so far "
                                                "(0 when none waits)."));
  oldest->Set({}, [this] { return OldestWaitSeconds(); });
  ASSIGN_OR_RETURN(prometheus::Histogram::BucketBoundaries pass_buckets, ExponentialBuckets(0.0001, 2.5, 12));
  ASSIGN_OR_RETURN(prometheus::Family<prometheus::Histogram> * pass,
                   registry_->AddHistogram("ringmaster_scheduling_latency_seconds",
                                           "Duration of one scheduling pass over a non-empty queue."));
  scheduling_latency_ = &pass->Add({}, pass_buckets);
  ASSIGN_OR_RETURN(prometheus::Family<prometheus::Histogram> * rendezvous,
                   registry_->AddHistogram("ringmaster_rendezvous_duration_seconds",
                                           "Time from a generation's start orders to every rank having joined."));
  rendezvous_duration_ =
      &rendezvous->Add({}, prometheus::Histogram::BucketBoundaries{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600});
  ASSIGN_OR_RETURN(restarts_, registry_->AddCounter("ringmaster_job_restarts_total", "Job generations restarted, by cause."));
  for (v1::JobEventKind cause : kRestartCauses) restarts_->Add({{"reason", ReasonCode(cause)}});
  ASSIGN_OR_RETURN(rpc_latency_,
                   registry_->AddHistogram("ringmaster_rpc_latency_seconds",
                                           "Latency of unary RPCs, from the call's start to its status."));
  ASSIGN_OR_RETURN(rpcs_, registry_->AddCounter("ringmaster_rpcs_total", "RPCs finished, by method and status code."));
  ASSIGN_OR_RETURN(prometheus::Family<prometheus::Counter> * log_lines,
                   registry_->AddCounter("ringmaster_log_lines_total",
                                         "Log lines pushed by workers, by what became of them."));
  log_stored_ = &log_lines->Add({{"result", "stored"}});
  log_duplicate_ = &log_lines->Add({{"result", "duplicate"}});
  log_invalid_ = &log_lines->Add({{"result", "invalid"}});
  ASSIGN_OR_RETURN(log_bytes_, registry_->AddGauge("ringmaster_coordinator_log_bytes",
                                                   "Bytes of a job's logs stored by the coordinator (at most "
                                                   "--log-quota-per-job)."));
  ASSIGN_OR_RETURN(logs_dropped_,
                   registry_->AddCounter("ringmaster_coordinator_logs_dropped_total",
                                         "Log lines dropped: quota (a job's oldest, to make room within its quota), "
                                         "disk_low (new lines refused while the disk is under its reserve)."));
  ASSIGN_OR_RETURN(queue_gpu_seconds_,
                   registry_->AddCounter("ringmaster_queue_gpu_seconds_total",
                                         "GPU-seconds held by the jobs of each queue (the store's placements)."));
  ASSIGN_OR_RETURN(queue_cpu_slot_seconds_,
                   registry_->AddCounter("ringmaster_queue_cpu_slot_seconds_total",
                                         "CPU-slot-seconds held by the jobs of each queue (the store's placements)."));
  ASSIGN_OR_RETURN(disk_free_, registry_->AddCallbackGauges("ringmaster_coordinator_disk_free_bytes",
                                                            "Free bytes on the filesystem of the coordinator's "
                                                            "state directory (database and logs)."));
  ASSIGN_OR_RETURN(disk_reserve_,
                   registry_->AddCallbackGauges("ringmaster_coordinator_disk_reserve_bytes",
                                                "Bytes the coordinator keeps free there for its database "
                                                "(--disk-reserve); under it, log lines are refused."));
  ASSIGN_OR_RETURN(disk_low_, registry_->AddCallbackGauges("ringmaster_coordinator_disk_low",
                                                           "1 while the free bytes are under the reserve (new log "
                                                           "lines refused), else 0."));

  ASSIGN_OR_RETURN(CallbackGauges * nodes, registry_->AddCallbackGauges("ringmaster_nodes", "Registered nodes per state."));
  ASSIGN_OR_RETURN(CallbackGauges * gpus,
                   registry_->AddCallbackGauges("ringmaster_gpus",
                                                "GPUs: allocated to ranks, free on ready nodes, unavailable on "
                                                "cordoned, not ready or lost nodes."));
  ASSIGN_OR_RETURN(CallbackGauges * cpus,
                   registry_->AddCallbackGauges("ringmaster_cpu_slots",
                                                "CPU slots: allocated to ranks, free on ready nodes, unavailable on "
                                                "cordoned, not ready or lost nodes."));
  for (int i = 0; i < 4; ++i) {
    nodes->Set({{"state", kNodeStates[i]}}, [this, i] { return Counts().nodes[i]; });
  }
  for (int i = 0; i < 3; ++i) {
    gpus->Set({{"state", kSlotStates[i]}}, [this, i] { return Counts().gpus[i]; });
    cpus->Set({{"state", kSlotStates[i]}}, [this, i] { return Counts().cpu_slots[i]; });
  }
  ASSIGN_OR_RETURN(goodput_ratio_,
                   registry_->AddCallbackGauges("ringmaster_job_goodput_ratio",
                                                "Kept training time over the time since the job was first placed, "
                                                "for each job that has not ended."));
  ASSIGN_OR_RETURN(job_time_,
                   registry_->AddCallbackGauges("ringmaster_job_time_seconds",
                                                "A job's wall time so far, by phase (queued, starting, training, "
                                                "checkpoint_stall, restart, recomputed), for each job that has not "
                                                "ended."));
  ASSIGN_OR_RETURN(sessions_,
                   registry_->AddCallbackGauges("ringmaster_node_sessions", "Workers with an open Session stream."));
  sessions_->Set({}, [] { return 0.0; });
  return absl::OkStatus();
}

void CoordinatorMetrics::SetSessionCount(std::function<size_t()> count) {
  sessions_->Set({}, [count = std::move(count)] { return static_cast<double>(count()); });
}

CoordinatorMetrics::NodeCounts CoordinatorMetrics::Counts() {
  std::lock_guard<std::mutex> lock(counts_mu_);
  const absl::Time now = absl::Now();
  if (now - counts_at_ < kNodeCountsTtl) return counts_;
  NodeCounts c;
  for (const v1::NodeInfo& node : nodes_->ListNodes()) {
    const int state = node.state() == v1::NODE_STATE_READY       ? 0
                      : node.state() == v1::NODE_STATE_CORDONED  ? 1
                      : node.state() == v1::NODE_STATE_NOT_READY ? 3
                                                                 : 2;
    c.nodes[state] += 1;
    const int idle = state == 0 ? 1 : 2;  // free, or unavailable
    c.gpus[0] += node.gpus_size() - node.free_gpus();
    c.gpus[idle] += node.free_gpus();
    c.cpu_slots[0] += node.cpu_slots() - node.free_cpu_slots();
    c.cpu_slots[idle] += node.free_cpu_slots();
  }
  counts_ = c;
  counts_at_ = now;
  return counts_;
}

void CoordinatorMetrics::SetStateLocked(const std::string& job_id, JobTrack& track, v1::JobState state) {
  if (track.state == state) return;
  if (track.state != v1::JOB_STATE_UNSPECIFIED) {
    jobs_by_state_[track.state]->Decrement();
    // Series of this family are only ever touched here, under mu_.
    job_state_->Remove(&job_state_->Add({{"job", job_id}, {"state", StateLabel(track.state)}}));
  }
  if (Waiting(track.state)) queue_length_->Decrement();
  track.state = state;
  if (state != v1::JOB_STATE_UNSPECIFIED) jobs_by_state_[state]->Increment();
  if (Waiting(state)) queue_length_->Increment();
  if (state != v1::JOB_STATE_UNSPECIFIED && !Terminal(state)) {
    job_state_->Add({{"job", job_id}, {"state", StateLabel(state)}}).Set(1);
  }
}

void CoordinatorMetrics::SetUnschedulableLocked(const std::string& job_id, const v1::Job& job) {
  prometheus::Gauge& gauge = unschedulable_->Add({{"job", job_id}});
  if (Terminal(job.state())) {
    unschedulable_->Remove(&gauge);
    return;
  }
  gauge.Set(Waiting(job.state()) && !job.unschedulable().empty() ? 1 : 0);
}

double CoordinatorMetrics::OldestWaitSeconds() {
  std::lock_guard<std::mutex> lock(mu_);
  absl::Time oldest = absl::InfiniteFuture();
  for (const auto& [id, track] : jobs_) {
    if (Waiting(track.state) && track.waiting_since != absl::InfinitePast()) {
      oldest = std::min(oldest, track.waiting_since);
    }
  }
  if (oldest == absl::InfiniteFuture()) return 0;
  return std::max(absl::ToDoubleSeconds(clock_->Now() - oldest), 0.0);
}

int CoordinatorMetrics::TrackGoodputLocked(JobTrack& track, const v1::Job& job) {
  track.goodput = job.goodput();
  const bool want = !Terminal(job.state());
  if (want == track.goodput_series) return 0;
  track.goodput_series = want;
  return want ? 1 : -1;
}

void CoordinatorMetrics::InstallGoodputSeries(const std::string& job_id, int change) {
  if (change == 0) return;
  const bool install = change > 0;
  goodput_ratio_->Set({{"job", job_id}}, install ? std::function<double()>([this, job_id] {
                                                     return GoodputValue(job_id, 6);
                                                   })
                                                 : nullptr);
  for (int phase = 0; phase < 6; ++phase) {
    job_time_->Set({{"job", job_id}, {"phase", kGoodputPhases[phase]}},
                   install ? std::function<double()>([this, job_id, phase] { return GoodputValue(job_id, phase); })
                           : nullptr);
  }
}

double CoordinatorMetrics::GoodputValue(const std::string& job_id, int phase) {
  v1::GoodputBreakdown g;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(job_id);
    if (it == jobs_.end()) return 0;
    g = it->second.goodput;
  }
  g = GoodputAt(g, clock_->Now());
  const double values[7] = {g.queued_seconds(),  g.starting_seconds(),   g.training_seconds(),
                            g.checkpoint_stall_seconds(), g.restart_seconds(), g.recomputed_seconds(),
                            g.goodput()};
  return values[phase];
}

void CoordinatorMetrics::Seed(const std::vector<v1::Job>& jobs) {
  std::vector<std::pair<std::string, int>> series;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const v1::Job& job : jobs) {
      JobTrack& track = jobs_[job.id()];
      if (track.state == v1::JOB_STATE_UNSPECIFIED && job.state() == v1::JOB_STATE_QUEUED) {
        track.waiting_since = FromProtoTime(job.submit_time());
      }
      SetStateLocked(job.id(), track, job.state());
      SetUnschedulableLocked(job.id(), job);
      series.emplace_back(job.id(), TrackGoodputLocked(track, job));
    }
  }
  for (const auto& [id, change] : series) InstallGoodputSeries(id, change);
}

void CoordinatorMetrics::OnJobChanged(const v1::Job& job, const std::vector<v1::JobEvent>& events) {
  if (job.id().empty()) return;  // validate_only
  // A job's changes come one at a time, in order (JobListener), so its
  // series are installed and removed in order too.
  InstallGoodputSeries(job.id(), UpdateJob(job, events));
}

int CoordinatorMetrics::UpdateJob(const v1::Job& job, const std::vector<v1::JobEvent>& events) {
  std::lock_guard<std::mutex> lock(mu_);
  JobTrack& track = jobs_[job.id()];
  for (const v1::JobEvent& e : events) {
    const absl::Time at = FromProtoTime(e.time());
    switch (e.kind()) {
      case v1::JOB_EVENT_KIND_SUBMITTED:
        track.waiting_since = at;
        break;
      case v1::JOB_EVENT_KIND_PLACED:
      case v1::JOB_EVENT_KIND_RESTARTING:  // a new generation placed: RESTARTING -> STARTING
        if (track.waiting_since != absl::InfinitePast()) {
          queue_wait_->Observe(absl::ToDoubleSeconds(at - track.waiting_since));
        }
        track.waiting_since = absl::InfinitePast();
        track.starting_since = at;
        break;
      case v1::JOB_EVENT_KIND_RUNNING:
        if (track.starting_since != absl::InfinitePast()) {
          rendezvous_duration_->Observe(absl::ToDoubleSeconds(at - track.starting_since));
        }
        track.starting_since = absl::InfinitePast();
        break;
      default:
        break;
    }
    if (e.to_state() == v1::JOB_STATE_RESTARTING && e.from_state() != v1::JOB_STATE_RESTARTING) {
      std::string reason = ReasonCode(e.kind());
      restarts_->Add({{"reason", reason.empty() ? "Unknown" : reason}}).Increment();
      track.waiting_since = at;
      track.starting_since = absl::InfinitePast();
    }
    if (Terminal(e.to_state()) && !Terminal(e.from_state())) jobs_ended_[e.to_state()]->Increment();
  }
  SetStateLocked(job.id(), track, job.state());
  SetUnschedulableLocked(job.id(), job);
  return TrackGoodputLocked(track, job);
}

void CoordinatorMetrics::ObserveSchedulingPass(absl::Duration d) {
  scheduling_latency_->Observe(absl::ToDoubleSeconds(d));
}

void CoordinatorMetrics::ObserveRpc(const std::string& method, const std::string& code, absl::Duration latency,
                                    bool unary) {
  rpcs_->Add({{"method", method}, {"code", code}}).Increment();
  if (!unary) return;
  rpc_latency_->Add({{"method", method}}, kRpcLatencyBuckets).Observe(absl::ToDoubleSeconds(latency));
}

void CoordinatorMetrics::SetQueueUsage(const std::vector<UsageTotal>& totals) {
  std::lock_guard<std::mutex> lock(usage_mu_);  // two refreshes must not both add the same difference
  for (const UsageTotal& t : totals) {
    prometheus::Counter& gpu = queue_gpu_seconds_->Add({{"queue", t.key}});
    prometheus::Counter& cpu = queue_cpu_slot_seconds_->Add({{"queue", t.key}});
    gpu.Increment(std::max(0.0, t.gpu_seconds - gpu.Value()));
    cpu.Increment(std::max(0.0, t.cpu_slot_seconds - cpu.Value()));
  }
}

void CoordinatorMetrics::SetDiskReserve(const DiskReserve* reserve) {
  if (reserve == nullptr) {
    for (CallbackGauges* g : {disk_free_, disk_reserve_, disk_low_}) g->Set({}, nullptr);
    return;
  }
  disk_free_->Set({}, [reserve] { return static_cast<double>(reserve->Check().usage.free_bytes); });
  disk_reserve_->Set({}, [reserve] { return static_cast<double>(reserve->Check().reserve_bytes); });
  disk_low_->Set({}, [reserve] { return reserve->Check().low ? 1.0 : 0.0; });
}

void CoordinatorMetrics::OnJobLogBytes(const std::string& job_id, int64_t bytes) {
  log_bytes_->Add({{"job", job_id}}).Set(static_cast<double>(bytes));
}

void CoordinatorMetrics::OnLinesDropped(const std::string& job_id, const std::string& reason, int64_t lines) {
  logs_dropped_->Add({{"job", job_id}, {"reason", reason}}).Increment(static_cast<double>(lines));
}

void CoordinatorMetrics::OnJobDeleted(const std::string& job_id) {
  log_bytes_->Remove(&log_bytes_->Add({{"job", job_id}}));
  for (const char* reason : {"quota", "disk_low"}) {
    if (logs_dropped_->Has({{"job", job_id}, {"reason", reason}})) {
      logs_dropped_->Remove(&logs_dropped_->Add({{"job", job_id}, {"reason", reason}}));
    }
  }
}

void CoordinatorMetrics::CountLogLines(int64_t stored, int64_t duplicates, int64_t invalid) {
  log_stored_->Increment(static_cast<double>(stored));
  log_duplicate_->Increment(static_cast<double>(duplicates));
  log_invalid_->Increment(static_cast<double>(invalid));
}

}  // namespace ringmaster::coordinator

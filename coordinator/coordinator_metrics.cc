#include "coordinator/coordinator_metrics.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "coordinator/job_state_machine.h"
#include "common/proto_time.h"

namespace ringmaster::coordinator {
namespace {

constexpr const char* kNodeStates[3] = {"ready", "draining", "lost"};
constexpr const char* kSlotStates[3] = {"allocated", "free", "unavailable"};
constexpr absl::Duration kNodeCountsTtl = absl::Milliseconds(100);

bool Waiting(v1::JobState s) { return s == v1::JOB_STATE_QUEUED || s == v1::JOB_STATE_RESTARTING; }
bool Terminal(v1::JobState s) {
  return s == v1::JOB_STATE_SUCCEEDED || s == v1::JOB_STATE_FAILED || s == v1::JOB_STATE_CANCELLED;
}
std::string StateLabel(v1::JobState s) { return absl::AsciiStrToLower(StateName(s)); }

// The causes a generation restarts for (ReasonCode of the event that moves a
// job to RESTARTING), exposed at 0 before the first one happens.
constexpr v1::JobEventKind kRestartCauses[] = {v1::JOB_EVENT_KIND_RANK_EXITED, v1::JOB_EVENT_KIND_NODE_LOST,
                                               v1::JOB_EVENT_KIND_PROGRESS_TIMEOUT,
                                               v1::JOB_EVENT_KIND_RENDEZVOUS_TIMEOUT, v1::JOB_EVENT_KIND_RECOVERED};

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
  ASSIGN_OR_RETURN(Family<Gauge> * jobs, registry_->AddGauge("ringmaster_jobs", "Jobs per state.", {"state"}));
  for (int s = v1::JOB_STATE_QUEUED; s <= v1::JOB_STATE_CANCELLED; ++s) {
    const auto state = static_cast<v1::JobState>(s);
    ASSIGN_OR_RETURN(jobs_by_state_[state], jobs->WithLabels({StateLabel(state)}));
  }
  ASSIGN_OR_RETURN(job_state_, registry_->AddGauge("ringmaster_job_state",
                                                   "1 for the state each job that has not ended is in.",
                                                   {"job", "state"}));
  ASSIGN_OR_RETURN(Family<Gauge> * queue,
                   registry_->AddGauge("ringmaster_queue_length",
                                       "Jobs waiting for placement: queued, or restarting and waiting for their "
                                       "next generation."));
  ASSIGN_OR_RETURN(queue_length_, queue->WithLabels({}));
  ASSIGN_OR_RETURN(Family<Histogram> * wait,
                   registry_->AddHistogram("ringmaster_queue_wait_seconds",
                                           "Time from submission (or a failed generation) to placement.", {},
                                           {0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 14400, 86400}));
  ASSIGN_OR_RETURN(queue_wait_, wait->WithLabels({}));
  ASSIGN_OR_RETURN(Family<CallbackGauge> * oldest,
                   registry_->AddCallbackGauge("ringmaster_queue_oldest_wait_seconds",
                                               "How long the job waiting longest for placement has waited so far "
                                               "(0 when none waits)."));
  ASSIGN_OR_RETURN(CallbackGauge * oldest_wait, oldest->WithLabels({}));
  oldest_wait->SetCallback([this] { return OldestWaitSeconds(); });
  ASSIGN_OR_RETURN(std::vector<double> pass_buckets, ExponentialBuckets(0.0001, 2.5, 12));
  ASSIGN_OR_RETURN(
      Family<Histogram> * pass,
      registry_->AddHistogram("ringmaster_scheduling_latency_seconds",
                              "Duration of one scheduling pass over a non-empty queue.", {}, pass_buckets));
  ASSIGN_OR_RETURN(scheduling_latency_, pass->WithLabels({}));
  ASSIGN_OR_RETURN(Family<Histogram> * rendezvous,
                   registry_->AddHistogram("ringmaster_rendezvous_duration_seconds",
                                           "Time from a generation's start orders to every rank having joined.", {},
                                           {0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}));
  ASSIGN_OR_RETURN(rendezvous_duration_, rendezvous->WithLabels({}));
  ASSIGN_OR_RETURN(restarts_, registry_->AddCounter("ringmaster_job_restarts_total",
                                                    "Job generations restarted, by cause.", {"reason"}));
  for (v1::JobEventKind cause : kRestartCauses) RETURN_IF_ERROR(restarts_->WithLabels({ReasonCode(cause)}).status());
  ASSIGN_OR_RETURN(
      rpc_latency_,
      registry_->AddHistogram(
          "ringmaster_rpc_latency_seconds", "Latency of unary RPCs, from the call's start to its status.", {"method"},
          {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}));
  ASSIGN_OR_RETURN(rpcs_, registry_->AddCounter("ringmaster_rpcs_total", "RPCs finished, by method and status code.",
                                                {"method", "code"}));
  ASSIGN_OR_RETURN(log_lines_,
                   registry_->AddCounter("ringmaster_log_lines_total",
                                         "Log lines pushed by workers, by what became of them.", {"result"}));
  ASSIGN_OR_RETURN(log_stored_, log_lines_->WithLabels({"stored"}));
  ASSIGN_OR_RETURN(log_duplicate_, log_lines_->WithLabels({"duplicate"}));
  ASSIGN_OR_RETURN(log_invalid_, log_lines_->WithLabels({"invalid"}));

  ASSIGN_OR_RETURN(Family<CallbackGauge> * nodes,
                   registry_->AddCallbackGauge("ringmaster_nodes", "Registered nodes per state.", {"state"}));
  ASSIGN_OR_RETURN(Family<CallbackGauge> * gpus,
                   registry_->AddCallbackGauge("ringmaster_gpus",
                                               "GPUs: allocated to ranks, free on ready nodes, unavailable on "
                                               "draining or lost nodes.",
                                               {"state"}));
  ASSIGN_OR_RETURN(Family<CallbackGauge> * cpus,
                   registry_->AddCallbackGauge("ringmaster_cpu_slots",
                                               "CPU slots: allocated to ranks, free on ready nodes, unavailable on "
                                               "draining or lost nodes.",
                                               {"state"}));
  for (int i = 0; i < 3; ++i) {
    ASSIGN_OR_RETURN(CallbackGauge * n, nodes->WithLabels({kNodeStates[i]}));
    n->SetCallback([this, i] { return Counts().nodes[i]; });
    ASSIGN_OR_RETURN(CallbackGauge * g, gpus->WithLabels({kSlotStates[i]}));
    g->SetCallback([this, i] { return Counts().gpus[i]; });
    ASSIGN_OR_RETURN(CallbackGauge * c, cpus->WithLabels({kSlotStates[i]}));
    c->SetCallback([this, i] { return Counts().cpu_slots[i]; });
  }
  ASSIGN_OR_RETURN(Family<CallbackGauge> * sessions,
                   registry_->AddCallbackGauge("ringmaster_node_sessions", "Workers with an open Session stream."));
  ASSIGN_OR_RETURN(sessions_, sessions->WithLabels({}));
  sessions_->SetCallback([] { return 0.0; });
  return absl::OkStatus();
}

void CoordinatorMetrics::SetSessionCount(std::function<size_t()> count) {
  sessions_->SetCallback([count = std::move(count)] { return static_cast<double>(count()); });
}

CoordinatorMetrics::NodeCounts CoordinatorMetrics::Counts() {
  std::lock_guard<std::mutex> lock(counts_mu_);
  const absl::Time now = absl::Now();
  if (now - counts_at_ < kNodeCountsTtl) return counts_;
  NodeCounts c;
  for (const v1::NodeInfo& node : nodes_->ListNodes()) {
    const int state = node.state() == v1::NODE_STATE_READY ? 0 : node.state() == v1::NODE_STATE_DRAINING ? 1 : 2;
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
    jobs_by_state_[track.state]->Dec();
    job_state_->Remove({job_id, StateLabel(track.state)}).IgnoreError();
  }
  if (Waiting(track.state)) queue_length_->Dec();
  track.state = state;
  if (state != v1::JOB_STATE_UNSPECIFIED) jobs_by_state_[state]->Inc();
  if (Waiting(state)) queue_length_->Inc();
  if (state != v1::JOB_STATE_UNSPECIFIED && !Terminal(state)) {
    if (absl::StatusOr<Gauge*> g = job_state_->WithLabels({job_id, StateLabel(state)}); g.ok()) (*g)->Set(1);
  }
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

void CoordinatorMetrics::Seed(const std::vector<v1::Job>& jobs) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const v1::Job& job : jobs) {
    JobTrack& track = jobs_[job.id()];
    if (track.state == v1::JOB_STATE_UNSPECIFIED && job.state() == v1::JOB_STATE_QUEUED) {
      track.waiting_since = FromProtoTime(job.submit_time());
    }
    SetStateLocked(job.id(), track, job.state());
  }
}

void CoordinatorMetrics::OnJobChanged(const v1::Job& job, const std::vector<v1::JobEvent>& events) {
  if (job.id().empty()) return;  // validate_only
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
      absl::StatusOr<Counter*> counter = restarts_->WithLabels({reason.empty() ? "Unknown" : reason});
      if (counter.ok()) (*counter)->Inc();
      track.waiting_since = at;
      track.starting_since = absl::InfinitePast();
    }
  }
  SetStateLocked(job.id(), track, job.state());
}

void CoordinatorMetrics::ObserveSchedulingPass(absl::Duration d) {
  scheduling_latency_->Observe(absl::ToDoubleSeconds(d));
}

void CoordinatorMetrics::ObserveRpc(const std::string& method, const std::string& code, absl::Duration latency,
                                    bool unary) {
  if (absl::StatusOr<Counter*> c = rpcs_->WithLabels({method, code}); c.ok()) (*c)->Inc();
  if (!unary) return;
  if (absl::StatusOr<Histogram*> h = rpc_latency_->WithLabels({method}); h.ok()) {
    (*h)->Observe(absl::ToDoubleSeconds(latency));
  }
}

void CoordinatorMetrics::CountLogLines(int64_t stored, int64_t duplicates, int64_t invalid) {
  log_stored_->Inc(static_cast<double>(stored));
  log_duplicate_->Inc(static_cast<double>(duplicates));
  log_invalid_->Inc(static_cast<double>(invalid));
}

}  // namespace ringmaster::coordinator

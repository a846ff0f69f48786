#include "worker/worker_metrics.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"

namespace ringmaster::worker {

struct WorkerMetrics::Families {
  Family<Gauge>* samples_per_second;
  Family<Gauge>* tokens_per_second;
  Family<Gauge>* loss;
  Family<Gauge>* loss_scale;
  Family<Gauge>* skipped_steps;
  Family<Histogram>* step_seconds;
  Family<Gauge>* communication_seconds;
  Family<Gauge>* grad_norm;
  Family<Gauge>* learning_rate;
  Family<Gauge>* step;
  Family<Gauge>* device_memory_bytes;
  Family<Gauge>* generation;
  Family<Gauge>* compute_seconds;
  Family<Gauge>* skew_ratio;
  Family<Histogram>* checkpoint_seconds;
  Family<Gauge>* checkpoint_bytes;
  Family<Counter>* checkpoints;
  Family<CallbackGauge>* ranks_running;
  Family<Gauge>* gpus;
  Family<Gauge>* cpu_slots;
  Family<Counter>* rank_exits;
  Family<Gauge>* connected;
  Family<Counter>* reconnects;
  Family<CallbackGauge>* log_lines_dropped;
};

struct WorkerMetrics::RankSeries {
  Gauge* samples_per_second;
  Gauge* tokens_per_second;
  Gauge* loss;
  Gauge* loss_scale;
  Gauge* skipped_steps;
  Histogram* step_seconds;
  Gauge* communication_seconds;
  Gauge* grad_norm;
  Gauge* learning_rate;
  Gauge* step;
  Gauge* device_memory_bytes;
  Gauge* generation;
  Gauge* compute_seconds;
  Gauge* skew_ratio;
  Histogram* checkpoint_seconds;
  Gauge* checkpoint_bytes;
  Counter* checkpoints;
  double compute = 0;  // last reported step time less communication, seconds
};

absl::StatusOr<std::unique_ptr<WorkerMetrics>> WorkerMetrics::Create(MetricsRegistry* registry, std::string node) {
  auto f = std::make_unique<Families>();
  const std::vector<std::string> rank_labels = {"job", "rank", "node"};
  const std::vector<std::string> node_labels = {"node"};
  auto gauge = [&](const char* name, const char* help, Family<Gauge>** out) -> absl::Status {
    ASSIGN_OR_RETURN(*out, registry->AddGauge(name, help, rank_labels));
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(gauge("ringmaster_rank_samples_per_second",
                        "Training throughput the rank reports (global, samples/s).", &f->samples_per_second));
  RETURN_IF_ERROR(gauge("ringmaster_rank_tokens_per_second", "Tokens per second the rank reports (GPT; global).",
                        &f->tokens_per_second));
  RETURN_IF_ERROR(gauge("ringmaster_rank_loss", "Training loss of the rank's last reported step.", &f->loss));
  RETURN_IF_ERROR(gauge("ringmaster_rank_loss_scale", "Current fp16 loss scale (0 when not fp16).", &f->loss_scale));
  RETURN_IF_ERROR(gauge("ringmaster_rank_skipped_steps", "Steps skipped for inf/NaN gradients in this generation.",
                        &f->skipped_steps));
  ASSIGN_OR_RETURN(std::vector<double> buckets, ExponentialBuckets(0.001, 2.0, 17));
  ASSIGN_OR_RETURN(f->step_seconds, registry->AddHistogram("ringmaster_rank_step_seconds",
                                                           "Mean step time over each reporting interval, seconds.",
                                                           rank_labels, buckets));
  RETURN_IF_ERROR(gauge("ringmaster_rank_communication_seconds",
                        "Of the mean step time, seconds spent waiting on communication.", &f->communication_seconds));
  RETURN_IF_ERROR(
      gauge("ringmaster_rank_grad_norm", "Global L2 norm of the gradients of the last step.", &f->grad_norm));
  RETURN_IF_ERROR(gauge("ringmaster_rank_learning_rate", "Learning rate of the last step.", &f->learning_rate));
  RETURN_IF_ERROR(gauge("ringmaster_rank_step", "Optimizer steps completed.", &f->step));
  RETURN_IF_ERROR(gauge("ringmaster_rank_device_memory_bytes",
                        "Peak device memory of the rank (host memory for CPU ranks), bytes.", &f->device_memory_bytes));
  RETURN_IF_ERROR(gauge("ringmaster_rank_generation", "Job generation of the rank's last report.", &f->generation));
  RETURN_IF_ERROR(gauge("ringmaster_rank_compute_seconds",
                        "Of the mean step time, seconds not spent on communication (the straggler's is the largest).",
                        &f->compute_seconds));
  RETURN_IF_ERROR(gauge("ringmaster_rank_step_time_skew_ratio",
                        "The rank's compute seconds over the median of its job's ranks on this node.",
                        &f->skew_ratio));
  ASSIGN_OR_RETURN(std::vector<double> checkpoint_buckets, ExponentialBuckets(0.01, 2.0, 16));
  ASSIGN_OR_RETURN(f->checkpoint_seconds,
                   registry->AddHistogram("ringmaster_rank_checkpoint_seconds",
                                          "Time to write each checkpoint the rank committed, seconds.", rank_labels,
                                          checkpoint_buckets));
  RETURN_IF_ERROR(
      gauge("ringmaster_rank_checkpoint_bytes", "Size of the rank's last committed checkpoint.", &f->checkpoint_bytes));
  ASSIGN_OR_RETURN(f->checkpoints, registry->AddCounter("ringmaster_rank_checkpoints_total",
                                                        "Checkpoints the rank committed.", rank_labels));
  ASSIGN_OR_RETURN(f->ranks_running, registry->AddCallbackGauge("ringmaster_worker_ranks_running",
                                                                "Trainer processes alive on the node.", node_labels));
  ASSIGN_OR_RETURN(f->gpus, registry->AddGauge("ringmaster_worker_gpus", "GPUs the node offers.", node_labels));
  ASSIGN_OR_RETURN(f->cpu_slots,
                   registry->AddGauge("ringmaster_worker_cpu_slots", "CPU slots the node offers.", node_labels));
  ASSIGN_OR_RETURN(f->rank_exits, registry->AddCounter("ringmaster_worker_rank_exits_total",
                                                       "Trainer processes that exited, for any reason.", node_labels));
  ASSIGN_OR_RETURN(f->connected,
                   registry->AddGauge("ringmaster_worker_coordinator_connected",
                                      "1 while the session with the coordinator is open, else 0.", node_labels));
  ASSIGN_OR_RETURN(f->reconnects,
                   registry->AddCounter("ringmaster_worker_coordinator_reconnects_total",
                                        "Sessions with the coordinator opened after the first.", node_labels));
  ASSIGN_OR_RETURN(
      f->log_lines_dropped,
      registry->AddCallbackGauge("ringmaster_worker_log_lines_dropped",
                                 "Rank log lines dropped because the shipping buffer was full.", node_labels));
  // Node series exist from the start.
  RETURN_IF_ERROR(f->gpus->WithLabels({node}).status());
  RETURN_IF_ERROR(f->cpu_slots->WithLabels({node}).status());
  RETURN_IF_ERROR(f->rank_exits->WithLabels({node}).status());
  RETURN_IF_ERROR(f->connected->WithLabels({node}).status());
  RETURN_IF_ERROR(f->reconnects->WithLabels({node}).status());
  return std::unique_ptr<WorkerMetrics>(new WorkerMetrics(std::move(f), std::move(node)));
}

WorkerMetrics::WorkerMetrics(std::unique_ptr<Families> families, std::string node)
    : families_(std::move(families)), node_(std::move(node)) {}

WorkerMetrics::~WorkerMetrics() = default;

absl::StatusOr<WorkerMetrics::RankSeries*> WorkerMetrics::SeriesLocked(const std::string& job_id, int32_t rank) {
  auto key = std::make_pair(job_id, rank);
  auto it = series_.find(key);
  if (it != series_.end()) return it->second.get();
  const std::vector<std::string> labels = {job_id, absl::StrCat(rank), node_};
  auto s = std::make_unique<RankSeries>();
  Families& f = *families_;
  ASSIGN_OR_RETURN(s->samples_per_second, f.samples_per_second->WithLabels(labels));
  ASSIGN_OR_RETURN(s->tokens_per_second, f.tokens_per_second->WithLabels(labels));
  ASSIGN_OR_RETURN(s->loss, f.loss->WithLabels(labels));
  ASSIGN_OR_RETURN(s->loss_scale, f.loss_scale->WithLabels(labels));
  ASSIGN_OR_RETURN(s->skipped_steps, f.skipped_steps->WithLabels(labels));
  ASSIGN_OR_RETURN(s->step_seconds, f.step_seconds->WithLabels(labels));
  ASSIGN_OR_RETURN(s->communication_seconds, f.communication_seconds->WithLabels(labels));
  ASSIGN_OR_RETURN(s->grad_norm, f.grad_norm->WithLabels(labels));
  ASSIGN_OR_RETURN(s->learning_rate, f.learning_rate->WithLabels(labels));
  ASSIGN_OR_RETURN(s->step, f.step->WithLabels(labels));
  ASSIGN_OR_RETURN(s->device_memory_bytes, f.device_memory_bytes->WithLabels(labels));
  ASSIGN_OR_RETURN(s->generation, f.generation->WithLabels(labels));
  ASSIGN_OR_RETURN(s->compute_seconds, f.compute_seconds->WithLabels(labels));
  ASSIGN_OR_RETURN(s->skew_ratio, f.skew_ratio->WithLabels(labels));
  ASSIGN_OR_RETURN(s->checkpoint_seconds, f.checkpoint_seconds->WithLabels(labels));
  ASSIGN_OR_RETURN(s->checkpoint_bytes, f.checkpoint_bytes->WithLabels(labels));
  ASSIGN_OR_RETURN(s->checkpoints, f.checkpoints->WithLabels(labels));
  RankSeries* raw = s.get();
  series_[key] = std::move(s);
  return raw;
}

WorkerMetrics::RankSeries* WorkerMetrics::CurrentSeriesLocked(const std::string& job_id, int64_t generation,
                                                               int32_t rank) {
  int64_t& newest = generation_[{job_id, rank}];
  if (generation < newest) return nullptr;
  newest = generation;
  absl::StatusOr<RankSeries*> series = SeriesLocked(job_id, rank);
  if (!series.ok()) {  // a job id that is not UTF-8: the launcher never starts such a rank
    spdlog::warn("metrics of job {} rank {}: {}", job_id, rank, series.status().ToString());
    return nullptr;
  }
  return *series;
}

void WorkerMetrics::RecordStep(const std::string& job_id, int64_t generation, int32_t rank, const v1::StepMetrics& m) {
  std::lock_guard<std::mutex> lock(mu_);
  RankSeries* series = CurrentSeriesLocked(job_id, generation, rank);
  if (series == nullptr) return;
  RankSeries& s = *series;
  s.samples_per_second->Set(m.samples_per_second());
  s.tokens_per_second->Set(m.tokens_per_second());
  s.loss->Set(m.loss());
  s.loss_scale->Set(m.loss_scale());
  s.skipped_steps->Set(static_cast<double>(m.skipped_steps()));
  if (m.step_time_seconds() > 0) s.step_seconds->Observe(m.step_time_seconds());
  s.communication_seconds->Set(m.communication_seconds());
  s.grad_norm->Set(m.grad_norm());
  s.learning_rate->Set(m.learning_rate());
  s.step->Set(static_cast<double>(m.step()));
  s.device_memory_bytes->Set(static_cast<double>(m.memory_bytes()));
  s.generation->Set(static_cast<double>(generation));
  s.compute = std::max(m.step_time_seconds() - m.communication_seconds(), 0.0);
  s.compute_seconds->Set(s.compute);
  UpdateSkewLocked(job_id);
}

void WorkerMetrics::UpdateSkewLocked(const std::string& job_id) {
  const auto first = series_.lower_bound({job_id, std::numeric_limits<int32_t>::min()});
  auto in_job = [&](decltype(first) it) { return it != series_.end() && it->first.first == job_id; };
  std::vector<double> computes;
  for (auto it = first; in_job(it); ++it) computes.push_back(it->second->compute);
  if (computes.empty()) return;
  std::sort(computes.begin(), computes.end());
  const size_t n = computes.size();
  const double median = n % 2 == 1 ? computes[n / 2] : (computes[n / 2 - 1] + computes[n / 2]) / 2;
  for (auto it = first; in_job(it); ++it) it->second->skew_ratio->Set(median > 0 ? it->second->compute / median : 1.0);
}

void WorkerMetrics::RecordCheckpoint(const std::string& job_id, int64_t generation, int32_t rank,
                                     double write_seconds, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  RankSeries* s = CurrentSeriesLocked(job_id, generation, rank);
  if (s == nullptr) return;
  if (write_seconds >= 0) s->checkpoint_seconds->Observe(write_seconds);
  s->checkpoint_bytes->Set(static_cast<double>(bytes));
  s->checkpoints->Inc();
}

void WorkerMetrics::RankExited(const std::string& job_id, int64_t generation, int32_t rank) {
  if (auto c = families_->rank_exits->WithLabels({node_}); c.ok()) (*c)->Inc();
  std::lock_guard<std::mutex> lock(mu_);
  auto key = std::make_pair(job_id, rank);
  auto gen = generation_.find(key);
  if (gen != generation_.end() && gen->second > generation) return;
  if (gen != generation_.end()) generation_.erase(gen);
  if (series_.erase(key) == 0) return;
  const std::vector<std::string> labels = {job_id, absl::StrCat(rank), node_};
  Families& f = *families_;
  for (Family<Gauge>* family :
       {f.samples_per_second, f.tokens_per_second, f.loss, f.loss_scale, f.skipped_steps, f.communication_seconds,
        f.grad_norm, f.learning_rate, f.step, f.device_memory_bytes, f.generation, f.compute_seconds, f.skew_ratio,
        f.checkpoint_bytes}) {
    family->Remove(labels).IgnoreError();
  }
  f.step_seconds->Remove(labels).IgnoreError();
  f.checkpoint_seconds->Remove(labels).IgnoreError();
  f.checkpoints->Remove(labels).IgnoreError();
  UpdateSkewLocked(job_id);
}

void WorkerMetrics::SetCapacity(int gpus, int cpu_slots) {
  if (auto g = families_->gpus->WithLabels({node_}); g.ok()) (*g)->Set(gpus);
  if (auto g = families_->cpu_slots->WithLabels({node_}); g.ok()) (*g)->Set(cpu_slots);
}

void WorkerMetrics::SetConnected(bool connected) {
  if (auto g = families_->connected->WithLabels({node_}); g.ok()) (*g)->Set(connected ? 1 : 0);
}

void WorkerMetrics::CountReconnect() {
  if (auto c = families_->reconnects->WithLabels({node_}); c.ok()) (*c)->Inc();
}

void WorkerMetrics::SetRanksRunningSource(std::function<double()> source) {
  if (auto g = families_->ranks_running->WithLabels({node_}); g.ok()) (*g)->SetCallback(std::move(source));
}

void WorkerMetrics::SetLogLinesDroppedSource(std::function<double()> source) {
  if (auto g = families_->log_lines_dropped->WithLabels({node_}); g.ok()) (*g)->SetCallback(std::move(source));
}

}  // namespace ringmaster::worker

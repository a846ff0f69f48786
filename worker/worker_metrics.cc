#include "worker/worker_metrics.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "absl/time/time.h"
#include "spdlog/spdlog.h"

namespace ringmaster::worker {

using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;

namespace {

// Per-rank gauges that are one field of a report each.
struct ReportGauge {
  const char* name;
  const char* help;
  double (*value)(const v1::StepMetrics&);
  bool eval;  // from the last evaluation: NaN until the rank has evaluated
};
const ReportGauge kReportGauges[] = {
    {"ringmaster_rank_epoch", "Epoch of the rank's last step, from 0.",
     [](const v1::StepMetrics& m) { return static_cast<double>(m.epoch()); }, false},
    {"ringmaster_rank_total_steps", "Steps the job trains in all (epochs resolved to steps).",
     [](const v1::StepMetrics& m) { return static_cast<double>(m.total_steps()); }, false},
    {"ringmaster_rank_eval_loss", "Loss of the last evaluation on the held-out data (NaN before the first).",
     [](const v1::StepMetrics& m) { return m.eval_loss(); }, true},
    {"ringmaster_rank_eval_accuracy",
     "Accuracy of the last evaluation, in [0, 1] (classifiers; 0 for language models; NaN before the first).",
     [](const v1::StepMetrics& m) { return m.eval_accuracy(); }, true},
    {"ringmaster_rank_eval_step", "Step of the last evaluation (0: none yet).",
     [](const v1::StepMetrics& m) { return static_cast<double>(m.eval_step()); }, false},
    {"ringmaster_rank_model_flops_per_second",
     "The rank's model FLOPs per second in its last step (forward and backward of its blocks, as `ringmaster plan` "
     "counts them).",
     [](const v1::StepMetrics& m) { return m.model_flops_per_second(); }, false},
    {"ringmaster_rank_mfu_ratio",
     "Model FLOPs utilisation: model FLOP/s over the device's dense peak for the precision (NaN: peak unknown).",
     [](const v1::StepMetrics& m) {
       return m.peak_flops_per_second() > 0 ? m.model_flops_per_second() / m.peak_flops_per_second()
                                            : std::numeric_limits<double>::quiet_NaN();
     },
     false},
    {"ringmaster_rank_data_wait_seconds", "Of the last step, seconds spent waiting for its input batch.",
     [](const v1::StepMetrics& m) { return m.data_wait_seconds(); }, false},
    {"ringmaster_rank_checkpoint_interval_seconds",
     "The checkpoint interval in force in seconds (checkpoint.interval_seconds, or what interval auto chose); 0 when "
     "it is in steps.",
     [](const v1::StepMetrics& m) { return m.checkpoint_interval_seconds(); }, false},
};

// ringmaster_rank_last_checkpoint_timestamp_seconds's unit.
double NowUnixSeconds() { return absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()); }

// StepMetrics.gauges: names as Prometheus label values we export, bounded.
constexpr size_t kMaxNamedGauges = 64;
bool ValidGaugeName(const std::string& name) {
  if (name.empty() || name.size() > 64 || absl::ascii_isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

}  // namespace

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
  Family<Histogram>* checkpoint_stall_seconds;
  Family<Gauge>* checkpoint_bytes;
  Family<Counter>* checkpoints;
  Family<Gauge>* checkpoint_interval_steps;
  Family<Gauge>* last_checkpoint_step;
  Family<Gauge>* last_checkpoint_time;
  Family<Gauge>* gpu_info;
  std::vector<Family<Gauge>*> report_gauges;  // kReportGauges, in order
  Family<Gauge>* named_gauge;                 // a program's own gauges (StepMetrics.gauges)
  Histogram::BucketBoundaries step_buckets;
  Histogram::BucketBoundaries checkpoint_buckets;
  Histogram::BucketBoundaries stall_buckets;
  // The node's own series (label node), present from the start.
  CallbackGauges* ranks_running;
  Gauge* gpus;
  Gauge* cpu_slots;
  Counter* rank_exits;
  Gauge* connected;
  Counter* reconnects;
  CallbackGauges* log_lines_dropped;
};

// A rank's series. Created and removed under WorkerMetrics::mu_, which is
// also held whenever one is written.
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
  Histogram* checkpoint_stall_seconds;
  Gauge* checkpoint_bytes;
  Counter* checkpoints;
  Gauge* checkpoint_interval_steps;
  Gauge* last_checkpoint_step;
  Gauge* last_checkpoint_time;
  Gauge* gpu_info = nullptr;  // CUDA ranks only
  std::vector<Gauge*> report_gauges;  // kReportGauges, in order
  std::map<std::string, Gauge*> named;  // StepMetrics.gauges, by name (at most kMaxNamedGauges)
  double compute = 0;  // last reported step time less communication, seconds
};

absl::StatusOr<std::unique_ptr<WorkerMetrics>> WorkerMetrics::Create(MetricsRegistry* registry, std::string node) {
  auto f = std::make_unique<Families>();
  auto gauge = [&](const char* name, const char* help, Family<Gauge>** out) -> absl::Status {
    ASSIGN_OR_RETURN(*out, registry->AddGauge(name, help));
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
  ASSIGN_OR_RETURN(f->step_buckets, ExponentialBuckets(0.001, 2.0, 17));
  ASSIGN_OR_RETURN(f->step_seconds, registry->AddHistogram("ringmaster_rank_step_seconds",
                                                           "Mean step time over each reporting interval, seconds."));
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
  ASSIGN_OR_RETURN(f->checkpoint_buckets, ExponentialBuckets(0.01, 2.0, 16));
  ASSIGN_OR_RETURN(f->checkpoint_seconds,
                   registry->AddHistogram("ringmaster_rank_checkpoint_seconds",
                                          "Time to write each checkpoint the rank committed, seconds."));
  // A snapshot takes milliseconds: finer buckets than the writes'.
  ASSIGN_OR_RETURN(f->stall_buckets, ExponentialBuckets(0.001, 2.0, 16));
  ASSIGN_OR_RETURN(f->checkpoint_stall_seconds,
                   registry->AddHistogram("ringmaster_rank_checkpoint_stall_seconds",
                                          "Time training was blocked for each checkpoint the rank committed "
                                          "(gathers, snapshot, waiting for the previous write), seconds."));
  RETURN_IF_ERROR(
      gauge("ringmaster_rank_checkpoint_bytes", "Size of the rank's last committed checkpoint.", &f->checkpoint_bytes));
  ASSIGN_OR_RETURN(f->checkpoints,
                   registry->AddCounter("ringmaster_rank_checkpoints_total", "Checkpoints the rank committed."));
  RETURN_IF_ERROR(gauge("ringmaster_rank_checkpoint_interval_steps",
                        "The job's checkpoint interval in steps (0: a checkpoint at the end only).",
                        &f->checkpoint_interval_steps));
  RETURN_IF_ERROR(gauge("ringmaster_rank_last_checkpoint_step",
                        "Step of the last checkpoint the rank committed, or its generation resumed from (0: none).",
                        &f->last_checkpoint_step));
  RETURN_IF_ERROR(gauge("ringmaster_rank_last_checkpoint_timestamp_seconds",
                        "Unix time of the last checkpoint the rank committed, or of its generation's first report "
                        "(it resumed then).",
                        &f->last_checkpoint_time));
  RETURN_IF_ERROR(gauge("ringmaster_rank_gpu_info",
                        "1 for each CUDA rank, labelled with the UUID of its GPU (joins the DCGM exporter's series).",
                        &f->gpu_info));
  for (const ReportGauge& g : kReportGauges) {
    ASSIGN_OR_RETURN(Family<Gauge> * family, registry->AddGauge(g.name, g.help));
    f->report_gauges.push_back(family);
  }
  RETURN_IF_ERROR(gauge("ringmaster_rank_gauge",
                        "A program's own gauge (the Python SDK's report(step, name=value)), labelled with its name.",
                        &f->named_gauge));
  const prometheus::Labels at_node = {{"node", node}};
  ASSIGN_OR_RETURN(f->ranks_running,
                   registry->AddCallbackGauges("ringmaster_worker_ranks_running", "Trainer processes alive on the node."));
  ASSIGN_OR_RETURN(Family<Gauge> * gpus, registry->AddGauge("ringmaster_worker_gpus", "GPUs the node offers."));
  f->gpus = &gpus->Add(at_node);
  ASSIGN_OR_RETURN(Family<Gauge> * cpu_slots,
                   registry->AddGauge("ringmaster_worker_cpu_slots", "CPU slots the node offers."));
  f->cpu_slots = &cpu_slots->Add(at_node);
  ASSIGN_OR_RETURN(Family<Counter> * rank_exits, registry->AddCounter("ringmaster_worker_rank_exits_total",
                                                                      "Trainer processes that exited, for any reason."));
  f->rank_exits = &rank_exits->Add(at_node);
  ASSIGN_OR_RETURN(Family<Gauge> * connected,
                   registry->AddGauge("ringmaster_worker_coordinator_connected",
                                      "1 while the session with the coordinator is open, else 0."));
  f->connected = &connected->Add(at_node);
  ASSIGN_OR_RETURN(Family<Counter> * reconnects,
                   registry->AddCounter("ringmaster_worker_coordinator_reconnects_total",
                                        "Sessions with the coordinator opened after the first."));
  f->reconnects = &reconnects->Add(at_node);
  ASSIGN_OR_RETURN(f->log_lines_dropped,
                   registry->AddCallbackGauges("ringmaster_worker_log_lines_dropped",
                                               "Rank log lines dropped because the shipping buffer was full."));
  return std::unique_ptr<WorkerMetrics>(new WorkerMetrics(std::move(f), std::move(node)));
}

WorkerMetrics::WorkerMetrics(std::unique_ptr<Families> families, std::string node)
    : families_(std::move(families)), node_(std::move(node)) {}

WorkerMetrics::~WorkerMetrics() = default;

WorkerMetrics::RankSeries* WorkerMetrics::SeriesLocked(const std::string& job_id, int32_t rank) {
  auto key = std::make_pair(job_id, rank);
  auto it = series_.find(key);
  if (it != series_.end()) return it->second.get();
  const prometheus::Labels labels = {{"job", job_id}, {"rank", absl::StrCat(rank)}, {"node", node_}};
  auto s = std::make_unique<RankSeries>();
  Families& f = *families_;
  s->samples_per_second = &f.samples_per_second->Add(labels);
  s->tokens_per_second = &f.tokens_per_second->Add(labels);
  s->loss = &f.loss->Add(labels);
  s->loss_scale = &f.loss_scale->Add(labels);
  s->skipped_steps = &f.skipped_steps->Add(labels);
  s->step_seconds = &f.step_seconds->Add(labels, f.step_buckets);
  s->communication_seconds = &f.communication_seconds->Add(labels);
  s->grad_norm = &f.grad_norm->Add(labels);
  s->learning_rate = &f.learning_rate->Add(labels);
  s->step = &f.step->Add(labels);
  s->device_memory_bytes = &f.device_memory_bytes->Add(labels);
  s->generation = &f.generation->Add(labels);
  s->compute_seconds = &f.compute_seconds->Add(labels);
  s->skew_ratio = &f.skew_ratio->Add(labels);
  s->checkpoint_seconds = &f.checkpoint_seconds->Add(labels, f.checkpoint_buckets);
  s->checkpoint_stall_seconds = &f.checkpoint_stall_seconds->Add(labels, f.stall_buckets);
  s->checkpoint_bytes = &f.checkpoint_bytes->Add(labels);
  s->checkpoints = &f.checkpoints->Add(labels);
  s->checkpoint_interval_steps = &f.checkpoint_interval_steps->Add(labels);
  s->last_checkpoint_step = &f.last_checkpoint_step->Add(labels);
  s->last_checkpoint_time = &f.last_checkpoint_time->Add(labels);
  s->last_checkpoint_time->Set(NowUnixSeconds());
  if (auto gpu = gpus_.find(key); gpu != gpus_.end()) {
    prometheus::Labels with_uuid = labels;
    with_uuid["UUID"] = gpu->second;
    s->gpu_info = &f.gpu_info->Add(with_uuid);
    s->gpu_info->Set(1);
  }
  for (size_t i = 0; i < f.report_gauges.size(); ++i) {
    Gauge& gauge = f.report_gauges[i]->Add(labels);
    if (kReportGauges[i].eval) gauge.Set(std::numeric_limits<double>::quiet_NaN());
    s->report_gauges.push_back(&gauge);
  }
  RankSeries* raw = s.get();
  series_[key] = std::move(s);
  return raw;
}

WorkerMetrics::RankSeries* WorkerMetrics::CurrentSeriesLocked(const std::string& job_id, int64_t generation,
                                                               int32_t rank) {
  int64_t& newest = generation_[{job_id, rank}];
  if (generation < newest) return nullptr;
  const bool fresh = generation > newest || series_.count({job_id, rank}) == 0;
  newest = generation;
  RankSeries* s = SeriesLocked(job_id, rank);
  if (fresh) {  // a new generation of the rank: its checkpoints start from its plan
    auto plan = plans_.find(job_id);
    const bool planned = plan != plans_.end() && plan->second.generation == generation;
    s->checkpoint_interval_steps->Set(planned ? static_cast<double>(plan->second.interval_steps) : 0);
    s->last_checkpoint_step->Set(planned ? static_cast<double>(plan->second.resumed_step) : 0);
  }
  return s;
}

void WorkerMetrics::SetCheckpointPlan(const std::string& job_id, int64_t generation, int64_t interval_steps,
                                      int64_t resumed_step) {
  std::lock_guard<std::mutex> lock(mu_);
  CheckpointPlan& plan = plans_[job_id];
  if (generation < plan.generation) return;
  plan = {generation, interval_steps, resumed_step};
}

void WorkerMetrics::SetRankGpu(const std::string& job_id, int32_t rank, const std::string& uuid) {
  std::lock_guard<std::mutex> lock(mu_);
  if (uuid.empty()) {
    gpus_.erase({job_id, rank});
  } else {
    gpus_[{job_id, rank}] = uuid;
  }
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
  for (size_t i = 0; i < s.report_gauges.size(); ++i) {
    if (!kReportGauges[i].eval || m.eval_step() > 0) s.report_gauges[i]->Set(kReportGauges[i].value(m));
  }
  RecordNamedGaugesLocked(job_id, rank, m, &s);
  UpdateSkewLocked(job_id);
}

void WorkerMetrics::RecordNamedGaugesLocked(const std::string& job_id, int32_t rank, const v1::StepMetrics& m,
                                            RankSeries* s) {
  // By name, so that which names a full series keeps does not depend on
  // the map's order.
  const std::map<std::string, double> gauges(m.gauges().begin(), m.gauges().end());
  for (const auto& [name, value] : gauges) {
    auto it = s->named.find(name);
    if (it == s->named.end()) {
      if (s->named.size() >= kMaxNamedGauges || !ValidGaugeName(name)) continue;  // bounded, as documented
      const prometheus::Labels labels = {{"job", job_id}, {"rank", absl::StrCat(rank)}, {"node", node_}, {"name", name}};
      it = s->named.emplace(name, &families_->named_gauge->Add(labels)).first;
    }
    it->second->Set(value);
  }
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
                                     double write_seconds, double stall_seconds, int64_t bytes, int64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  RankSeries* s = CurrentSeriesLocked(job_id, generation, rank);
  if (s == nullptr) return;
  s->last_checkpoint_step->Set(static_cast<double>(step));
  s->last_checkpoint_time->Set(NowUnixSeconds());
  if (write_seconds >= 0) s->checkpoint_seconds->Observe(write_seconds);
  if (stall_seconds >= 0) s->checkpoint_stall_seconds->Observe(stall_seconds);
  s->checkpoint_bytes->Set(static_cast<double>(bytes));
  s->checkpoints->Increment();
}

void WorkerMetrics::RankExited(const std::string& job_id, int64_t generation, int32_t rank) {
  families_->rank_exits->Increment();
  std::lock_guard<std::mutex> lock(mu_);
  auto key = std::make_pair(job_id, rank);
  auto gen = generation_.find(key);
  if (gen != generation_.end() && gen->second > generation) return;
  if (gen != generation_.end()) generation_.erase(gen);
  auto it = series_.find(key);
  if (it == series_.end()) return;
  const RankSeries& s = *it->second;
  Families& f = *families_;
  f.samples_per_second->Remove(s.samples_per_second);
  f.tokens_per_second->Remove(s.tokens_per_second);
  f.loss->Remove(s.loss);
  f.loss_scale->Remove(s.loss_scale);
  f.skipped_steps->Remove(s.skipped_steps);
  f.step_seconds->Remove(s.step_seconds);
  f.communication_seconds->Remove(s.communication_seconds);
  f.grad_norm->Remove(s.grad_norm);
  f.learning_rate->Remove(s.learning_rate);
  f.step->Remove(s.step);
  f.device_memory_bytes->Remove(s.device_memory_bytes);
  f.generation->Remove(s.generation);
  f.compute_seconds->Remove(s.compute_seconds);
  f.skew_ratio->Remove(s.skew_ratio);
  f.checkpoint_seconds->Remove(s.checkpoint_seconds);
  f.checkpoint_stall_seconds->Remove(s.checkpoint_stall_seconds);
  f.checkpoint_bytes->Remove(s.checkpoint_bytes);
  f.checkpoints->Remove(s.checkpoints);
  f.checkpoint_interval_steps->Remove(s.checkpoint_interval_steps);
  f.last_checkpoint_step->Remove(s.last_checkpoint_step);
  f.last_checkpoint_time->Remove(s.last_checkpoint_time);
  if (s.gpu_info != nullptr) f.gpu_info->Remove(s.gpu_info);
  gpus_.erase(key);
  for (size_t i = 0; i < s.report_gauges.size(); ++i) f.report_gauges[i]->Remove(s.report_gauges[i]);
  for (const auto& [name, gauge] : s.named) f.named_gauge->Remove(gauge);
  series_.erase(it);
  UpdateSkewLocked(job_id);
}

void WorkerMetrics::SetCapacity(int gpus, int cpu_slots) {
  families_->gpus->Set(gpus);
  families_->cpu_slots->Set(cpu_slots);
}

void WorkerMetrics::SetConnected(bool connected) { families_->connected->Set(connected ? 1 : 0); }

void WorkerMetrics::CountReconnect() { families_->reconnects->Increment(); }

void WorkerMetrics::SetRanksRunningSource(std::function<double()> source) {
  families_->ranks_running->Set({{"node", node_}}, std::move(source));
}

void WorkerMetrics::SetLogLinesDroppedSource(std::function<double()> source) {
  families_->log_lines_dropped->Set({{"node", node_}}, std::move(source));
}

}  // namespace ringmaster::worker

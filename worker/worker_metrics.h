#ifndef RINGMASTER_WORKER_WORKER_METRICS_H_
#define RINGMASTER_WORKER_WORKER_METRICS_H_

// WorkerMetrics: what the worker exposes on its /metrics. Per rank (labels
// job, rank, node), from the step metrics its trainer reports:
//   ringmaster_rank_samples_per_second, ringmaster_rank_tokens_per_second,
//   ringmaster_rank_loss, ringmaster_rank_loss_scale,
//   ringmaster_rank_skipped_steps, ringmaster_rank_step_seconds (histogram of
//   the reported mean step time, one observation per report),
//   ringmaster_rank_communication_seconds, ringmaster_rank_grad_norm,
//   ringmaster_rank_learning_rate, ringmaster_rank_step,
//   ringmaster_rank_device_memory_bytes, ringmaster_rank_generation,
//   ringmaster_rank_compute_seconds (step time less communication: in a
//   synchronous job every rank's step takes as long as the slowest one's, and
//   the straggler is the rank that computes longest and waits least),
//   ringmaster_rank_step_time_skew_ratio (a rank's compute time over the
//   median of its job's ranks on this node; 1 for a node's only rank; the
//   cluster-wide ratio is a Prometheus recording rule, deploy/prometheus),
//   ringmaster_rank_checkpoint_seconds (histogram: write time of each
//   checkpoint the rank committed), ringmaster_rank_checkpoint_bytes (size of
//   its last one), ringmaster_rank_checkpoints_total,
//   ringmaster_rank_checkpoint_interval_steps (the spec's) and
//   ringmaster_rank_last_checkpoint_step (the rank's last commit, or the step
//   its generation resumed from: a checkpoint-overdue alert reads them),
//   ringmaster_rank_checkpoint_interval_seconds (a timed or auto interval,
//   from the reports) and ringmaster_rank_last_checkpoint_timestamp_seconds
//   (its last commit, or its generation's first report: the overdue alert of
//   timed intervals),
//   ringmaster_rank_epoch, ringmaster_rank_total_steps, ringmaster_rank_eval_loss, ringmaster_rank_eval_accuracy (NaN
//   until the rank has evaluated: rank 0 evaluates), ringmaster_rank_eval_step,
//   ringmaster_rank_model_flops_per_second, ringmaster_rank_mfu_ratio (NaN
//   when the device's peak is unknown), ringmaster_rank_data_wait_seconds,
//   ringmaster_rank_gpu_info (1, with label UUID: the rank's GPU, as the DCGM
//   exporter labels its series; CUDA ranks only).
// A rank's series disappear when its process exits.
// Per node (label node):
//   ringmaster_worker_ranks_running, ringmaster_worker_gpus,
//   ringmaster_worker_cpu_slots, ringmaster_worker_rank_exits_total,
//   ringmaster_worker_coordinator_connected,
//   ringmaster_worker_coordinator_reconnects_total,
//   ringmaster_worker_log_lines_dropped.
//
// Thread-safe.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "common/metrics.h"
#include "proto/job.pb.h"

namespace ringmaster::worker {

class WorkerMetrics {
 public:
  // Registers the families in `registry` (which must outlive this object);
  // `node` is the value of every series' node label (the hostname).
  // Errors are the registry's (ALREADY_EXISTS for a clashing family).
  static absl::StatusOr<std::unique_ptr<WorkerMetrics>> Create(MetricsRegistry* registry, std::string node);
  ~WorkerMetrics();
  WorkerMetrics(const WorkerMetrics&) = delete;
  WorkerMetrics& operator=(const WorkerMetrics&) = delete;

  // A trainer's report. Reports of a generation older than the last one
  // recorded for the same (job, rank) are ignored.
  void RecordStep(const std::string& job_id, int64_t generation, int32_t rank, const v1::StepMetrics& metrics);
  // The rank committed a checkpoint of step `step`, `bytes` large, that took
  // `write_seconds` to write and stalled training for `stall_seconds` (each
  // < 0: unknown, not observed). Same generation rule as RecordStep.
  void RecordCheckpoint(const std::string& job_id, int64_t generation, int32_t rank, double write_seconds,
                        double stall_seconds, int64_t bytes, int64_t step);
  // A generation of the job starts here (StartRanks): its checkpoint
  // interval, and the step it resumes from (0: from scratch). Its ranks'
  // ringmaster_rank_checkpoint_interval_steps and _last_checkpoint_step
  // start from these.
  void SetCheckpointPlan(const std::string& job_id, int64_t generation, int64_t interval_steps, int64_t resumed_step);
  // The GPU (its UUID) a rank of the job runs on, from its StartRanks order;
  // its series created afterwards carry ringmaster_rank_gpu_info. "": none.
  void SetRankGpu(const std::string& job_id, int32_t rank, const std::string& uuid);
  // The rank's process exited: counts it and removes its series (unless a
  // newer generation of the same rank already reports).
  void RankExited(const std::string& job_id, int64_t generation, int32_t rank);

  void SetCapacity(int gpus, int cpu_slots);
  void SetConnected(bool connected);
  void CountReconnect();
  // Sources read at scrape time (quick, thread-safe callables).
  void SetRanksRunningSource(std::function<double()> source);
  void SetLogLinesDroppedSource(std::function<double()> source);

 private:
  struct Families;
  struct RankSeries;
  WorkerMetrics(std::unique_ptr<Families> families, std::string node);
  // The rank's series, created on first use; nullptr for a report of an
  // older generation.
  RankSeries* CurrentSeriesLocked(const std::string& job_id, int64_t generation, int32_t rank);
  RankSeries* SeriesLocked(const std::string& job_id, int32_t rank);
  // A program's own gauges (StepMetrics.gauges) as ringmaster_rank_gauge.
  void RecordNamedGaugesLocked(const std::string& job_id, int32_t rank, const v1::StepMetrics& m, RankSeries* s);
  // Sets the skew ratio of every rank of `job_id` on this node.
  void UpdateSkewLocked(const std::string& job_id);

  const std::unique_ptr<Families> families_;
  const std::string node_;
  std::mutex mu_;
  std::map<std::pair<std::string, int32_t>, int64_t> generation_;  // newest generation per (job, rank)
  std::map<std::pair<std::string, int32_t>, std::unique_ptr<RankSeries>> series_;
  struct CheckpointPlan {
    int64_t generation = 0;
    int64_t interval_steps = 0;
    int64_t resumed_step = 0;
  };
  std::map<std::string, CheckpointPlan> plans_;  // by job: its newest generation's
  std::map<std::pair<std::string, int32_t>, std::string> gpus_;  // GPU UUID per (job, rank)
};

}  // namespace ringmaster::worker

#endif  // RINGMASTER_WORKER_WORKER_METRICS_H_

#ifndef RINGMASTER_WORKER_PROCESS_SUPERVISOR_H_
#define RINGMASTER_WORKER_PROCESS_SUPERVISOR_H_

// ProcessSupervisor: owns the trainer processes of this node. It starts one
// process per rank (through ProcessControl: own process group, parent-death
// signal, stdout+stderr appended to the rank's log, and the account the
// launch names: its groups, no capability, no_new_privs; with
// require_run_as, never the worker's own), stops them (optionally a
// state dump first: SIGUSR1; then SIGTERM to the process group, SIGKILL to it
// when the grace period is over), reaps every one
// on its reaper thread and reports each exit through a callback. Shutdown stops
// everything and waits until every child is reaped: it leaves no orphan.
//
// Fencing by generation, per job: the supervisor remembers the newest
// generation it was told about (by a start or a stop order).
//   - Start for an older generation: FAILED_PRECONDITION, nothing started.
//   - Start for the same generation: idempotent; ranks already started are
//     reported as started and not started again.
//   - Start for a newer generation: the older generation's ranks still
//     running are stopped (supersede_grace), then the new ones start.
//   - Stop for an older generation: ignored. Stop for a newer one stops every
//     older rank of the job and fences the generations before it.
// CheckCaller applies the same fencing to requests from trainers.
//
// Rejoining, for a restart that keeps the survivors' processes: a rank
// started rejoinable (RankLaunch::rejoin_context) whose generation ended while
// it lives calls AwaitRejoin (its world broke when a peer died, or it was told
// to stop). A stop order marked restarting gives such a rank park_wait to make
// that call instead of the state dump and SIGTERM; once both the order and
// the call are in, the rank is parked: its exit is reported (stopped by the
// worker: the coordinator frees its slot and places the next generation) while
// its process waits, idle, for up to adopt_wait. A start order of a newer
// generation that comes while such a rank is still on its way to the call
// waits for it (at most park_wait) before it starts anything. A start order
// of a newer generation of the job adopts a parked process for a rank it would start
// (same program, environment and account; the same rank when it can): the
// process becomes that rank, with the new generation's secret, and its
// AwaitRejoin is answered with the new rank context. Parked processes the
// start does not adopt are stopped. Everything else ends as before: a rank
// that does not call in time is dumped and stopped, a call that no restarting
// stop follows within park_wait is answered with an error (the rank exits and
// its exit is a failure as before), a stop that is not restarting answers it
// with an error and stops the rank. A later stop naming ranks of a generation
// already stopped as a whole (the coordinator fencing a report that was on
// its way) leaves a parking or parked rank to the restart's stop.
//
// Thread-safe. The exit callback runs on the reaper thread (or, for a rank
// that could not be started, on the thread that called Start), never with
// the supervisor's lock held, so it may call back into the supervisor.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "worker/process_control.h"

namespace ringmaster::worker {

// One rank to start.
struct RankLaunch {
  std::string job_id;
  int64_t generation = 0;  // >= 1
  int32_t global_rank = 0;
  SpawnRequest process;
  // The generation's rendezvous secret (StartRanks.rendezvous_secret): a call
  // on the agent socket acts for this rank only when it presents it.
  std::string secret;
  // Non-empty: the rank is rejoinable, and this is the path of its rank
  // context. A process started from this launch may wait for the job's next
  // generation (AwaitRejoin); this launch may adopt a parked process of an
  // older generation instead of starting one (its AwaitRejoin is answered with
  // this path).
  std::string rejoin_context;
};

// How a rank's process ended.
struct RankExit {
  std::string job_id;
  int64_t generation = 0;
  int32_t global_rank = 0;
  int64_t pid = 0;
  // Exit status; -1 when a signal killed it. 127 with signal 0 when it could
  // not be started at all (log_tail then says why).
  int exit_code = -1;
  int signal = 0;  // 0 when it exited
  // The worker asked it to stop (a stop order, a newer generation, shutdown).
  bool stopped_by_worker = false;
  absl::Time time;  // when the supervisor saw the exit
  // The last bytes (at most SupervisorOptions::exit_tail_bytes) of its log.
  std::string log_tail;
};

struct RunningRankInfo {
  std::string job_id;
  int64_t generation = 0;
  int32_t global_rank = 0;
  int64_t pid = 0;
  absl::Time start_time;
  bool stopping = false;  // SIGTERM sent, not yet reaped
};

struct StartOutcome {
  // Ranks started by this call or earlier in the same generation, ascending.
  std::vector<int32_t> started;
  // OK, or why the other ranks were not started (their exits are reported
  // through the callback: exit_code 127).
  absl::Status status;
  // Ranks of `started` that are parked processes this call adopted, with the
  // log file their output goes on to (the one they were started with).
  std::map<int32_t, std::string> adopted;
};

// What a request from a trainer is, fencing-wise.
enum class CallerState {
  kCurrent,  // a running rank of the job's current generation
  kOver,     // its generation is over, or it is being stopped: it should exit
  kUnknown,  // not a rank this node runs (wrong job, a generation not started here)
};

struct CallerCheck {
  CallerState state = CallerState::kUnknown;
  // The job and generation, filled in when the request left them empty/0.
  std::string job_id;
  int64_t generation = 0;
  std::string reason;  // for kOver and kUnknown
  // kCurrent: the coordinator asked the generation for a checkpoint now.
  bool checkpoint_requested = false;
};

struct SupervisorOptions {
  // Longest the reaper waits before looking at kill deadlines again (real time).
  absl::Duration reap_interval = absl::Milliseconds(50);
  // Grace period of ranks superseded by a newer generation.
  absl::Duration supersede_grace = absl::Seconds(10);
  // How much of the end of a rank's log goes into its RankExit.
  size_t exit_tail_bytes = 4096;
  // > 0: a rank stopped with a grace period first gets SIGUSR1 (the trainer
  // writes its step, phase and thread stacks to its log) and SIGCONT (in case
  // it is stopped), SIGTERM this long after, SIGKILL a grace period later.
  // Zero: SIGTERM at once.
  absl::Duration state_dump_wait = absl::ZeroDuration();
  // Ranks never run with the worker's privileges (--run-as ACCOUNT or
  // owner): a rank whose launch names no account, or root, is not started
  // (its exit reported as for any other start failure).
  bool require_run_as = false;
  // How long a rejoinable rank of a restarting generation has to call
  // AwaitRejoin before it is stopped as any other; and how long such a call
  // waits for the restarting stop order before it is answered with an error.
  // (A survivor notices its broken world at its next collective: after the
  // step, or the evaluation, it was in.)
  absl::Duration park_wait = absl::Seconds(5);
  // How long a parked rank waits for a start order to adopt it.
  absl::Duration adopt_wait = absl::Seconds(60);
};

// The answer to AwaitRejoin: the next generation's rank context, or why the
// process will not be adopted.
using RejoinReply = std::function<void(absl::StatusOr<std::string> context_path)>;

class ProcessSupervisor {
 public:
  using ExitCallback = std::function<void(const RankExit&)>;

  // `control` and `clock` must outlive the supervisor. Starts the reaper thread.
  ProcessSupervisor(ProcessControl* control, Clock* clock, ExitCallback on_exit, SupervisorOptions options = {});
  // Shutdown(zero grace) unless Shutdown was called.
  ~ProcessSupervisor();
  ProcessSupervisor(const ProcessSupervisor&) = delete;
  ProcessSupervisor& operator=(const ProcessSupervisor&) = delete;

  // Starts ranks of one job generation (see the fencing rules above). Blocks
  // for at most park_wait (of `clock`) while a survivor of the job is on its
  // way to AwaitRejoin (see Rejoining above).
  // status: INVALID_ARGUMENT when the launches name different jobs or
  // generations, or a generation < 1; FAILED_PRECONDITION for an older or a
  // stopped generation; UNAVAILABLE after Shutdown; or the first spawn error.
  StartOutcome Start(const std::vector<RankLaunch>& launches);

  // SIGTERM to the process groups of the generation's ranks (`ranks` empty:
  // all of them), SIGKILL after `grace` (zero: SIGKILL now). With dump_state
  // (a failed generation) and a state_dump_wait, the SIGUSR1 state dump comes
  // first. A rank already stopping keeps the earlier of its two kill
  // deadlines. Returns how many ranks were signalled; 0 for an older
  // generation (ignored). Never blocks for the grace period.
  // With `restarting`, a rejoinable rank of the generation named may park
  // instead (see Rejoining above).
  int Stop(const std::string& job_id, int64_t generation, const std::vector<int32_t>& ranks, absl::Duration grace,
           bool dump_state = false, bool restarting = false);

  // Rank `rank` of (job_id, generation) asks to carry on in the job's next
  // generation (see Rejoining above). `reply` is called once, never with the
  // supervisor's lock held: with the new rank context when a start adopts the
  // process, else with an error (FAILED_PRECONDITION; at once for a rank that
  // does not run here, is not rejoinable or is being stopped). Returns a
  // token for CancelRejoin.
  uint64_t AwaitRejoin(const std::string& job_id, int64_t generation, int32_t rank, RejoinReply reply);
  // The caller gave up (its call was cancelled): `reply` is dropped uncalled.
  void CancelRejoin(uint64_t token);

  // Refuses new starts, stops every rank (grace as in Stop) and returns once
  // every child is reaped and every exit reported. Idempotent.
  void Shutdown(absl::Duration grace);

  // Every rank process not yet reaped, by job, generation, rank.
  std::vector<RunningRankInfo> Running() const;
  int RunningCount() const;

  // Fencing for a trainer's request naming (job_id, generation, rank). An
  // empty job_id means the only job this node runs; generation 0 the job's
  // current one.
  CallerCheck CheckCaller(const std::string& job_id, int64_t generation, int32_t rank) const;
  // Whether a rank of `job_id` (any generation) runs on this node now: a
  // trainer may read only its own job's checkpoints.
  bool RunsJob(const std::string& job_id) const;
  // Whether `secret` is the one the ranks of `job_id`'s generation
  // `generation` (0: any generation running here) were started with.
  // Compared in constant time; an empty secret never matches.
  bool HoldsSecret(const std::string& job_id, int64_t generation, const std::string& secret) const;
  // The coordinator asks the job's generation `generation` for a checkpoint
  // now (a drain); CheckCaller says so to its ranks from then on. False when
  // that is not the job's current, running generation here.
  bool RequestCheckpoint(const std::string& job_id, int64_t generation);

 private:
  struct Process {
    std::string job_id;
    int64_t generation = 0;
    int32_t global_rank = 0;
    absl::Time start_time;
    std::string log_path;
    std::string secret;  // RankLaunch::secret
    bool stopping = false;
    bool termed = false;  // SIGTERM sent
    bool killed = false;
    absl::Time term_at = absl::InfiniteFuture();  // after the state dump
    absl::Time kill_at = absl::InfiniteFuture();
    // Rejoining (see above). rejoin_key: what an adopting launch must match.
    bool rejoinable = false;
    std::string rejoin_key;
    RejoinReply reply;  // an AwaitRejoin waiting
    uint64_t reply_token = 0;
    absl::Time rejoin_by = absl::InfiniteFuture();  // the call's wait for a restarting stop
    absl::Time park_by = absl::InfiniteFuture();    // a restarting stop's wait for the call
    absl::Duration park_grace;                      // that stop's grace and dump, if it ends so
    bool park_dump = false;
    bool parked = false;  // its exit was reported; waits for adoption
    absl::Time adopt_by = absl::InfiniteFuture();
  };
  // The newest generation of a job this node was told about.
  struct JobFence {
    int64_t generation = 0;
    std::set<int32_t> started;  // ranks of `generation` started here
    bool stopped = false;       // a stop order for the whole generation came
    bool checkpoint_requested = false;  // RequestCheckpoint
  };

  // FAILED_PRECONDITION when require_run_as and the launch names no
  // unprivileged account.
  absl::Status CheckRunAs(const RankLaunch& launch) const;
  void ReapLoop();
  void HandleExit(const ProcessExit& exit);
  void KillDue();
  // SIGTERM now, SIGKILL at now + grace.
  // Answers a waiting AwaitRejoin with an error.
  void StopLocked(int64_t pid, Process& process, absl::Duration grace, bool dump_state = false);
  // The restarting stop and the AwaitRejoin are both in: reports the exit.
  void ParkLocked(int64_t pid, Process& process);
  // Adopts a parked process for `launch` if one matches; true if it did.
  bool AdoptLocked(const RankLaunch& launch, StartOutcome* outcome);
  void ReplyLocked(Process& process, absl::StatusOr<std::string> answer);
  // Sends the replies and parked exits queued under the lock.
  void Flush();
  static std::string RejoinKey(const SpawnRequest& process);
  absl::Duration NextWakeLocked() const;
  std::string ReadTail(const std::string& path) const;

  ProcessControl* const control_;
  Clock* const clock_;
  const ExitCallback on_exit_;
  const SupervisorOptions options_;

  mutable std::mutex mu_;
  std::map<int64_t, Process> processes_;  // by pid (= pgid)
  std::map<std::string, JobFence> jobs_;  // by job id
  bool shutting_down_ = false;
  std::condition_variable changed_;  // a process parked, stopped or exited (Flush)
  uint64_t next_reply_token_ = 0;
  std::vector<std::pair<RejoinReply, absl::StatusOr<std::string>>> replies_due_;
  std::vector<RankExit> exits_due_;

  std::once_flag shutdown_once_;
  std::thread reaper_;
};

}  // namespace ringmaster::worker

#endif  // RINGMASTER_WORKER_PROCESS_SUPERVISOR_H_

#include "coordinator/core/goodput.h"

#include <algorithm>

#include "common/proto_time.h"

namespace ringmaster::coordinator {
namespace {

double Seconds(absl::Duration d) { return std::max(0.0, absl::ToDoubleSeconds(d)); }

// Adds the time from as_of to `at` to the open phase; as_of becomes `at`.
void Accrue(absl::Time at, v1::GoodputBreakdown* b) {
  if (!b->has_as_of()) return;  // nothing seen yet
  const absl::Time from = FromProtoTime(b->as_of());
  if (at <= from) return;
  const double s = Seconds(at - from);
  switch (b->phase()) {
    case v1::GOODPUT_PHASE_QUEUED:
      b->set_queued_seconds(b->queued_seconds() + s);
      break;
    case v1::GOODPUT_PHASE_STARTING:
      b->set_starting_seconds(b->starting_seconds() + s);
      break;
    case v1::GOODPUT_PHASE_TRAINING:
      b->set_training_seconds(b->training_seconds() + s);
      break;
    case v1::GOODPUT_PHASE_RESTART:
      b->set_restart_seconds(b->restart_seconds() + s);
      break;
    default:
      return;  // ended or unknown: as_of stays the end
  }
  *b->mutable_as_of() = ToProtoTime(at);
}

// Moves up to `seconds` of training to another phase (`to`).
void TakeFromTraining(double seconds, double* to, v1::GoodputBreakdown* b) {
  const double moved = std::min(std::max(0.0, seconds), b->training_seconds());
  b->set_training_seconds(b->training_seconds() - moved);
  *to += moved;
}

v1::GoodputPhase PhaseAfter(const v1::JobEvent& e, v1::GoodputPhase current) {
  switch (e.to_state()) {
    case v1::JOB_STATE_QUEUED:
      return v1::GOODPUT_PHASE_QUEUED;
    case v1::JOB_STATE_PLACED:
    case v1::JOB_STATE_STARTING:
      // A generation after a failure is still the restart.
      if (e.from_state() == v1::JOB_STATE_RESTARTING || current == v1::GOODPUT_PHASE_RESTART) {
        return v1::GOODPUT_PHASE_RESTART;
      }
      return v1::GOODPUT_PHASE_STARTING;
    case v1::JOB_STATE_RUNNING:
      return v1::GOODPUT_PHASE_TRAINING;
    case v1::JOB_STATE_RESTARTING:
      return v1::GOODPUT_PHASE_RESTART;
    case v1::JOB_STATE_SUCCEEDED:
    case v1::JOB_STATE_FAILED:
    case v1::JOB_STATE_CANCELLED:
      return v1::GOODPUT_PHASE_ENDED;
    default:
      return current;
  }
}

void SetGoodput(v1::GoodputBreakdown* b) {
  double since_placed = 0;
  if (b->has_first_placement_time() && b->has_as_of()) {
    since_placed = Seconds(FromProtoTime(b->as_of()) - FromProtoTime(b->first_placement_time()));
  }
  b->set_goodput(since_placed > 0 ? std::min(1.0, b->training_seconds() / since_placed) : 0.0);
}

}  // namespace

void ApplyGoodputEvent(const v1::JobEvent& e, v1::GoodputBreakdown* b) {
  if (b->phase() == v1::GOODPUT_PHASE_ENDED) return;
  const absl::Time at = FromProtoTime(e.time());
  if (!b->has_as_of()) *b->mutable_as_of() = e.time();
  Accrue(at, b);
  const bool running = b->phase() == v1::GOODPUT_PHASE_TRAINING;
  const absl::Time now = std::max(at, FromProtoTime(b->as_of()));
  const absl::Time kept = b->has_kept_until() ? FromProtoTime(b->kept_until()) : now;
  if (running && e.kind() == v1::JOB_EVENT_KIND_CHECKPOINT_COMMITTED) {
    // The write happened since the previous commit (or RUNNING): never more.
    double stall = b->checkpoint_stall_seconds();
    // The training stall; a writer that sends none stalled for its write.
    const double blocked =
        e.has_checkpoint_stall_seconds() ? e.checkpoint_stall_seconds() : e.checkpoint_write_seconds();
    TakeFromTraining(std::min(blocked, Seconds(now - kept)), &stall, b);
    b->set_checkpoint_stall_seconds(stall);
    *b->mutable_kept_until() = ToProtoTime(now);
  }
  if (running && e.kind() == v1::JOB_EVENT_KIND_STEPPING) {
    // RUNNING until every rank stepped was the start (or restart) going on.
    double starting = b->after_failure() ? b->restart_seconds() : b->starting_seconds();
    TakeFromTraining(Seconds(now - kept), &starting, b);
    b->after_failure() ? b->set_restart_seconds(starting) : b->set_starting_seconds(starting);
    *b->mutable_kept_until() = ToProtoTime(now);
  }
  const v1::GoodputPhase next = PhaseAfter(e, b->phase());
  if (running && next != v1::GOODPUT_PHASE_TRAINING) {
    // The generation stopped and another will do its work since the newest
    // checkpoint again, whatever stopped it. A job that ended redoes nothing.
    if (next != v1::GOODPUT_PHASE_ENDED) {
      double lost = b->recomputed_seconds();
      TakeFromTraining(Seconds(now - kept), &lost, b);
      b->set_recomputed_seconds(lost);
    }
    b->clear_kept_until();
  }
  if (next == v1::GOODPUT_PHASE_TRAINING && !running) {
    *b->mutable_kept_until() = ToProtoTime(now);
    b->set_after_failure(b->phase() == v1::GOODPUT_PHASE_RESTART);
  }
  if ((e.to_state() == v1::JOB_STATE_PLACED || e.to_state() == v1::JOB_STATE_STARTING) &&
      !b->has_first_placement_time()) {
    *b->mutable_first_placement_time() = ToProtoTime(now);
  }
  b->set_phase(next);
  SetGoodput(b);
}

v1::GoodputBreakdown GoodputAfter(v1::GoodputBreakdown b, const std::vector<v1::JobEvent>& events) {
  for (const v1::JobEvent& e : events) ApplyGoodputEvent(e, &b);
  return b;
}

v1::GoodputBreakdown GoodputAt(const v1::GoodputBreakdown& b, absl::Time now) {
  v1::GoodputBreakdown out = b;
  Accrue(now, &out);
  SetGoodput(&out);
  return out;
}

}  // namespace ringmaster::coordinator

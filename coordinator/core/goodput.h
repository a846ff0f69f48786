#ifndef RINGMASTER_COORDINATOR_CORE_GOODPUT_H_
#define RINGMASTER_COORDINATOR_CORE_GOODPUT_H_

// Goodput accounting: a job's wall time split into phases (queued, starting,
// training, checkpoint stall, restart, recomputed), as v1::GoodputBreakdown
// (proto/job.proto) defines them. Pure functions over the job's timeline:
// JobLifecycle applies each event as it is announced (and the stored
// timeline when the coordinator restarts); readers extend the result to the
// time they answer at. No clock, no locks: thread-compatible.
//
// Phases follow the events' to_state: QUEUED -> queued; PLACED/STARTING ->
// starting, or restart when the generation follows a RESTARTING; RUNNING ->
// training; RESTARTING -> restart; terminal -> nothing more. Out of the
// RUNNING time, a CHECKPOINT_COMMITTED event moves its
// checkpoint_stall_seconds (the time training was blocked; its
// checkpoint_write_seconds when unset: a synchronous writer) to checkpoint
// stall, and an event that stops a
// RUNNING generation moves the time since its newest checkpoint (or since
// RUNNING) to recomputed. Both are capped so that training never goes below
// zero. A STEPPING event (every rank stepped) moves the RUNNING time before
// it, when no checkpoint came in between, to starting (or restart after a
// failure): the ranks were loading, not training.

#include <vector>

#include "absl/time/time.h"
#include "proto/job.pb.h"

namespace ringmaster::coordinator {

// Advances `b` to the event's time, then applies the event. Events must come
// in timeline order; an event older than b->as_of() counts from as_of.
void ApplyGoodputEvent(const v1::JobEvent& event, v1::GoodputBreakdown* b);
// A copy of `b` with `events` applied, in order.
v1::GoodputBreakdown GoodputAfter(v1::GoodputBreakdown b, const std::vector<v1::JobEvent>& events);

// `b` extended to `now`: the open phase accrues until then (nothing once the
// job ended, or when now <= as_of), and goodput is recomputed.
v1::GoodputBreakdown GoodputAt(const v1::GoodputBreakdown& b, absl::Time now);

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_CORE_GOODPUT_H_

#ifndef RINGMASTER_WORKER_JOB_ROOTS_H_
#define RINGMASTER_WORKER_JOB_ROOTS_H_

// The operator's roots a job's paths must lie beneath, and what the worker
// checks there before it starts a rank (docs/security.md, "What a job may
// touch"):
//   - data: spec.data.path beneath one of the worker's --data-roots, named
//     through no symbolic link that leads out of that root;
//   - checkpoints: StartRanks.checkpoint_dir beneath one of the coordinator's
//     checkpoint roots (StartRanks.checkpoint_roots), with no symbolic link
//     anywhere below the root.
// A root itself is the operator's: links in its own path are followed.
// Everything below it is opened from the root's descriptor (common/beneath.h),
// so a link a job planted under a root is refused, PERMISSION_DENIED naming
// it, before any rank starts; the trainer opens the same way, so a link
// planted later is refused too. Stateless; thread-safe.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/beneath.h"

namespace ringmaster::worker {

// The data root `path` lies beneath: of `roots`, the deepest that holds it
// as named, or, for a root that is itself a link, as the link resolves
// (returned in that form, so that `path` is beneath what is returned). ""
// for an empty path (synthetic data). PERMISSION_DENIED naming data.path
// when no root holds it, or when it leads out of its root through a link
// (a missing path is left to the trainer to report).
absl::StatusOr<std::string> DataRootFor(const std::string& path, const std::vector<std::string>& roots);

// OK when the checkpoint directory `dir` lies beneath one of `roots` and no
// directory of it that exists below that root is a symbolic link (what is
// missing the trainer makes, without following one either). PERMISSION_DENIED
// naming checkpoint_dir or the link otherwise. An empty `dir`: no checkpoints.
absl::Status CheckCheckpointDir(const std::string& dir, const std::vector<std::string>& roots);

// The existing directory `dir`, opened beneath the one of `roots` that holds
// it without following a symbolic link (PERMISSION_DENIED naming it), e.g.
// the <root> of a job's <root>/<job>/gen-<g> that the worker makes for the
// job's account (worker/job_dirs.h).
absl::StatusOr<UniqueFd> OpenCheckpointDirectory(const std::string& dir, const std::vector<std::string>& roots);

}  // namespace ringmaster::worker

#endif  // RINGMASTER_WORKER_JOB_ROOTS_H_

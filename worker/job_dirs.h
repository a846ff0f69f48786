#ifndef RINGMASTER_WORKER_JOB_DIRS_H_
#define RINGMASTER_WORKER_JOB_DIRS_H_

// The directories a job's ranks own (worker/paths.h has the layout):
//   <state-dir>/ranks/<job>/                   the job's private directory:
//                                              its run account's, mode 0700
//   <state-dir>/ranks/<job>/tmp/               its ranks' TMPDIR
//   <state-dir>/ranks/<job>/gen-<g>/rank-<r>/  a rank's working directory,
//                                              with its rank.json (0600)
// and, when ranks run as another account, the job's checkpoint directory
// <root>/<job> (the account's, 0700) with gen-<g> in it.
//
// <state-dir>/ranks is the worker's. The job's directory is made by the
// worker and given to the account (chown: CAP_CHOWN); everything in it is
// made as the account (ScopedFsIdentity), opening each directory without
// following a symbolic link: a link a rank planted is refused, and nothing
// the worker writes there can reach further than the account itself could.
// So the OS, not this code, keeps one account's ranks out of another's
// directories, and out of the worker's. For the worker's own account
// (RunAccount::is_worker) the same files are made, as the worker.
//
// Stateless; thread-safe (the identity switch is per thread).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/run_as.h"

namespace ringmaster::worker {

struct RankFiles {
  std::string work_dir;      // <ranks>/<job>/gen-<g>/rank-<r>
  std::string context_path;  // <work_dir>/rank.json
  std::string tmp_dir;       // <ranks>/<job>/tmp
};

// Makes the job's private directory (if missing), its tmp/ and the rank's
// working directory, and writes `context` to the rank's rank.json (0600,
// whole or not at all), as above. PERMISSION_DENIED naming the path for a
// link where a directory should be (a job's own rank planted it);
// FAILED_PRECONDITION naming the path when something else cannot be made (a
// job directory of another account, a worker that cannot act as the account).
absl::StatusOr<RankFiles> PrepareRankFiles(const std::string& state_dir, const std::string& job_id,
                                           int64_t generation, int32_t rank, const RunAccount& account,
                                           const std::string& context);

// For ranks that run as another account (nothing to do for the worker's
// own): the checkpoint directory's parent <root>/<job> is made if missing
// and given to the account (0700), and `checkpoint_dir` itself is made in it
// as the account. <root> must exist (the operator's, or made beneath one of
// `checkpoint_roots`, the coordinator's, and opened beneath it without
// following a link: worker/job_roots.h). PERMISSION_DENIED naming the path
// when <root>, <root>/<job> or gen-<g> is or goes through a link;
// FAILED_PRECONDITION when it is not a directory or another account's, or
// when the worker cannot act as the account or give it the directory (a
// root-squashed NFS export).
absl::Status PrepareCheckpointDir(const std::string& checkpoint_dir, const std::vector<std::string>& checkpoint_roots,
                                  const RunAccount& account);

// Removes `dir`/`name` and everything in it, acting as the owner of
// `dir`/`name` (so that a directory a rank made unreadable is made readable
// by its owner first), never following a link. A missing entry is OK.
absl::Status RemoveOwnedTree(const std::string& dir, const std::string& name);

}  // namespace ringmaster::worker

#endif  // RINGMASTER_WORKER_JOB_DIRS_H_

#ifndef RINGMASTER_COORDINATOR_CORE_JOB_ADMISSION_H_
#define RINGMASTER_COORDINATOR_CORE_JOB_ADMISSION_H_

// What a submission must pass before anything of it is stored: pure
// functions of the request and the coordinator's options (no store, no
// clock, no lock). JobLifecycle::Submit calls them; each refusal is
// INVALID_ARGUMENT naming the field and the reason. The queue (membership:
// PERMISSION_DENIED) is resolved before, by the QueueBook.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "coordinator/core/job_types.h"
#include "proto/job_spec.pb.h"

namespace ringmaster::coordinator {

// The request id (at most 128 characters) and the recorded --set
// assignments (at most 256, each at most 4096 bytes).
absl::Status CheckSubmitOptions(const SubmitOptions& options);

// Where checkpoint.directory may lie: allowed_checkpoint_roots, then
// checkpoint_root. Start orders carry them too (the worker checks again).
std::vector<std::string> CheckpointRoots(const JobControllerOptions& options);

// OK when `directory` is empty (the coordinator's own root) or within one of
// `roots` (common/path_within.h: no ".." escapes).
absl::Status CheckCheckpointRoot(const std::string& directory, const std::vector<std::string>& roots);

// OK when every name of the spec's env is one `allowed_env`
// (JobControllerOptions::allowed_env, common/env_policy.h) allows; the first
// refused name in sorted order otherwise, so the error is the same every time.
absl::Status CheckEnvAllowed(const v1::JobSpec& spec, const std::vector<std::string>& allowed_env);

// Completes `spec` with its defaults (common/spec.h ApplyDefaults), then
// validates it (ValidateJobSpec), its checkpoint directory and its env
// against `options`. `spec` is completed even when a check refuses it.
absl::Status AdmitJobSpec(v1::JobSpec* spec, const JobControllerOptions& options);

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_CORE_JOB_ADMISSION_H_

#ifndef RINGMASTER_COMMON_ENV_POLICY_H_
#define RINGMASTER_COMMON_ENV_POLICY_H_

// Which environment variables a job's spec (JobSpec.env) may set for its
// trainers: the coordinator checks every name at Submit (INVALID_ARGUMENT
// naming env.<NAME> and why); the worker starts each rank from a minimal
// environment (worker/rank_launcher.h), never from its own, and sets the
// variables it owns (IsWorkerOwnedEnv) after the job's, so that they win.
//
// The worker checks the names again before it starts a rank (its own
// --allowed-env, "*" by default: whatever the coordinator admitted, except
// a variable that loads code or names a path, which the worker's operator
// must name exactly too), so that a job stored under an older, looser list
// never reaches a trainer with one.
//
// The operator's --allowed-env entries are:
//   "@default"  the built-in list (DefaultAllowedEnv): NCCL and CUDA tuning
//               knobs that change how the job's own processes compute and
//               communicate, and never load code, read a file of the
//               operator's choosing or write a path;
//   NAME        that variable, exactly;
//   PREFIX*     every variable whose name starts with PREFIX ("NCCL_*").
// A name matched only by a PREFIX* entry is still refused when it loads code
// or names a path (CodeOrPathReason: *_PLUGIN, *_INJECTION*, *_FILE, *_PATH,
// *_LIB, *_DIR, *_DIRECTORY, *_PIPE, LD_*, PYTHON*): only an exact NAME entry
// of the operator admits such a variable. The names the worker sets for each
// rank are refused whatever the entries say.
//
// Pure; thread-safe.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringmaster {

// One variable of the built-in list, and why a job may set it.
struct KnownEnvVariable {
  const char* name;
  const char* why;
};

// The built-in list, "@default" in --allowed-env (docs/security.md has it as
// a table). None of its names matches CodeOrPathReason (tested).
const std::vector<KnownEnvVariable>& DefaultAllowedEnv();

inline constexpr char kDefaultAllowedEnvEntry[] = "@default";

// Why `name` loads code or names a path, e.g. "loads code (matches
// *_PLUGIN)" or "names a file or directory (matches *_FILE)"; empty when it
// does neither by its name.
std::string CodeOrPathReason(absl::string_view name);

// torchrun's variables, which the worker sets for a program job's ranks
// (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK,
// GROUP_WORLD_SIZE, ROLE_RANK, ROLE_WORLD_SIZE, ROLE_NAME, MASTER_ADDR,
// MASTER_PORT, TORCHELASTIC_*).
bool IsTorchrunEnv(absl::string_view name);

// The variables the worker sets for each rank (CUDA_VISIBLE_DEVICES,
// CUDA_DEVICE_ORDER, TMPDIR, HOME, USER, LOGNAME, RINGMASTER_*, torchrun's):
// a job cannot set them, and the worker applies its own values last.
bool IsWorkerOwnedEnv(absl::string_view name);

class EnvPolicy {
 public:
  // INVALID_ARGUMENT naming the first entry that is neither "@default", a
  // name ([A-Za-z_][A-Za-z0-9_]*) nor a prefix of one followed by '*'.
  // Empty entries are ignored ("" on the command line: nothing is allowed).
  // `daemon` ("coordinator" or "worker") is whose --allowed-env the entries
  // are, for Check's messages.
  static absl::StatusOr<EnvPolicy> Create(const std::vector<std::string>& entries,
                                          std::string daemon = "coordinator");

  // OK when a job may set `name`; else INVALID_ARGUMENT "env.<name>: why",
  // saying what the operator would have to do.
  absl::Status Check(absl::string_view name) const;

  // The entries, for messages ("the built-in NCCL/CUDA tuning variables
  // (docs/security.md), NCCL_TOPO_FILE"); "none" when there are none.
  std::string Describe() const;

 private:
  bool use_default_ = false;
  std::vector<std::string> names_;     // exact
  std::vector<std::string> prefixes_;  // without the '*'
  std::vector<std::string> entries_;   // as given, for Describe
  std::string daemon_;                 // for messages
};

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_ENV_POLICY_H_

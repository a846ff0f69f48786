#ifndef RINGMASTER_CLIENT_PLAN_COMMAND_H_
#define RINGMASTER_CLIENT_PLAN_COMMAND_H_

// `ringmaster plan` and `validate`, and submit's fit check: what a spec needs
// on a device type (engine/plan/plan.h), computed here, before anything is
// sent. Only `validate` asks a coordinator (about the cluster).

#include <optional>
#include <string>
#include <vector>

#include "client/cli.h"
#include "proto/job_service.grpc.pb.h"
#include "proto/job_spec.pb.h"

namespace ringmaster::client {

// plan|validate FILE [--set k=v ...] [--gpu NAME] [--mfu F]
struct PlanCommandOptions {
  std::string file;
  std::vector<std::string> overrides;  // --set, in order
  std::string gpu;                     // h100, h200, a100, cpu; "": from resources.device (cuda: h100)
  double mfu = 0;                      // 0: not given (the CPU: 0.4; a GPU: the per-op-class profile)
};

// The plan as a table, or one JSON object (--output json) or YAML document (yaml). kExitUsage for a
// bad spec or flag (one line naming it).
int RunPlan(const GlobalOptions& global, const PlanCommandOptions& options, Console& console);

// Checks the spec ("FILE: valid" and the plan), then against the cluster at
// global.coordinator through `stub` (client/cluster_check.h) when one answers;
// stub null: `no_cluster` says why there is none to ask. kExitUsage for a bad
// spec; kExitError when the plan says it does not fit or the cluster could
// not run it.
int RunValidate(const GlobalOptions& global, const PlanCommandOptions& options, Console& console,
                v1::JobService::StubInterface* stub, const std::string& no_cluster = "");

// Before a submit: warns on console.err when `spec` does not fit `gpu` (as
// PlanCommandOptions::gpu); strict: refuses instead (false). A spec the
// planner cannot plan is only warned about.
bool CheckFitBeforeSubmit(const v1::JobSpec& spec, const std::string& gpu, bool strict, Console& console);

}  // namespace ringmaster::client

#endif  // RINGMASTER_CLIENT_PLAN_COMMAND_H_

#include "client/plan_command.h"

#include "absl/strings/str_format.h"
#include "client/cluster_check.h"
#include "client/output.h"
#include "common/spec.h"
#include "engine/plan/plan.h"

namespace ringmaster::client {
namespace {

std::string DefaultDevice(const v1::JobSpec& spec) {
  return spec.resources().device() == v1::ResourceSpec::CUDA ? "h100" : "cpu";
}

absl::StatusOr<engine::plan::Plan> PlanOf(const v1::JobSpec& spec, const std::string& gpu, double mfu) {
  if (spec.has_program()) {
    return absl::InvalidArgumentError(
        "program: the planner models the built-in trainer only; a program's memory and step time are its own");
  }
  auto device = engine::plan::FindDevice(gpu.empty() ? DefaultDevice(spec) : gpu);
  if (!device.ok()) return device.status();
  engine::plan::PlanOptions options;
  options.mfu = mfu;
  return engine::plan::PlanJobSpec(spec, *device, options);
}

void Print(const GlobalOptions& global, const engine::plan::Plan& plan, Console& console) {
  if (global.output == OutputFormat::kYaml) {
    PrintJsonAsYaml(engine::plan::PlanJson(plan), console.out);
  } else if (global.output == OutputFormat::kJson) {
    console.out << engine::plan::PlanJson(plan) << "\n";
  } else {
    console.out << engine::plan::PlanTable(plan);
  }
}

absl::StatusOr<engine::plan::Plan> Load(const PlanCommandOptions& options) {
  absl::StatusOr<v1::JobSpec> spec = LoadJobSpecFile(options.file, options.overrides);
  if (!spec.ok()) return spec.status();
  return PlanOf(*spec, options.gpu, options.mfu);
}

}  // namespace

int RunPlan(const GlobalOptions& global, const PlanCommandOptions& options, Console& console) {
  absl::StatusOr<engine::plan::Plan> plan = Load(options);
  if (!plan.ok()) {
    console.err << "ringmaster: " << plan.status().message() << "\n";
    return kExitUsage;
  }
  Print(global, *plan, console);
  return kExitOk;
}

int RunValidate(const GlobalOptions& global, const PlanCommandOptions& options, Console& console,
                v1::JobService::StubInterface* stub, const std::string& no_cluster) {
  absl::StatusOr<engine::plan::Plan> plan = Load(options);
  if (!plan.ok()) {
    console.err << "ringmaster: " << plan.status().message() << "\n";
    return kExitUsage;
  }
  if (!IsStructured(global.output)) console.out << options.file << ": valid\n\n";
  Print(global, *plan, console);
  ClusterVerdict verdict;
  verdict.not_checked = no_cluster;
  if (stub != nullptr) {
    absl::StatusOr<v1::JobSpec> sent = ReadJobSpecFile(options.file, options.overrides);
    absl::StatusOr<v1::JobSpec> effective = LoadJobSpecFile(options.file, options.overrides);
    if (sent.ok() && effective.ok()) verdict = CheckAgainstCluster(*stub, global, *sent, *effective);
  }
  const bool cluster_ok = ReportClusterVerdict(verdict, global, "error", console);
  if (verdict.checked && cluster_ok && !IsStructured(global.output)) {
    console.out << "\n" << options.file << ": the cluster at " << global.coordinator << " can run it\n";
  }
  return plan->fits && cluster_ok ? kExitOk : kExitError;
}

bool CheckFitBeforeSubmit(const v1::JobSpec& spec, const std::string& gpu, bool strict, Console& console) {
  if (spec.has_program()) return true;  // the planner models the built-in trainer only
  absl::StatusOr<engine::plan::Plan> plan = PlanOf(spec, gpu, engine::plan::PlanOptions().mfu);
  if (!plan.ok()) {
    console.err << "ringmaster: warning: no plan for this spec: " << plan.status().message() << "\n";
    return !strict;
  }
  if (plan->fits) return true;
  constexpr double kGiB = 1 << 30;
  console.err << absl::StrFormat(
      "ringmaster: %s: the plan says it does not fit on %s: %.2f GiB per rank needed, %.2f GiB usable "
      "(see `ringmaster plan`)\n",
      strict ? "error" : "warning", plan->device.description, plan->peak_bytes / kGiB, plan->usable_bytes / kGiB);
  return !strict;
}

}  // namespace ringmaster::client

#include "worker/rank_launcher.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/json_util.h"
#include "spdlog/spdlog.h"
#include "worker/job_dirs.h"
#include "worker/job_roots.h"
#include "worker/paths.h"
#include "worker/program_launch.h"
#include "common/env_policy.h"
#include "common/proto_time.h"
#include "common/status_macros.h"
#include "proto/rank_context.pb.h"

namespace ringmaster::worker {
namespace {

// "KEY=VALUE" list -> map, later entries winning; and back, sorted.
std::map<std::string, std::string> EnvMap(const std::vector<std::string>& env) {
  std::map<std::string, std::string> out;
  for (const std::string& kv : env) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    out[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return out;
}

std::vector<std::string> EnvList(const std::map<std::string, std::string>& env) {
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [key, value] : env) out.push_back(key + "=" + value);
  return out;
}

int64_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> NodeRankEnv(const std::vector<std::string>& rank_env_flags,
                                                     const std::vector<std::string>& worker_env) {
  const std::map<std::string, std::string> own = EnvMap(worker_env);
  std::map<std::string, std::string> out;
  for (const char* locale : {"LANG", "LC_ALL"}) {
    if (auto it = own.find(locale); it != own.end()) out[locale] = it->second;
  }
  for (const std::string& entry : rank_env_flags) {
    const size_t eq = entry.find('=');
    const std::string name = entry.substr(0, eq);
    const bool prefix = eq == std::string::npos && !name.empty() && name.back() == '*';
    const std::string bare = prefix ? name.substr(0, name.size() - 1) : name;
    const bool valid = !bare.empty() && !absl::ascii_isdigit(static_cast<unsigned char>(bare[0])) &&
                       std::all_of(bare.begin(), bare.end(), [](char c) {
                         return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_';
                       });
    if (!valid) {
      return absl::InvalidArgumentError(
          absl::StrCat("--rank-env ", entry, ": expected NAME=VALUE, NAME (the worker's own value) or PREFIX*"));
    }
    if (!prefix && IsWorkerOwnedEnv(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--rank-env ", entry, ": the worker sets ", name, " for each rank itself"));
    }
    if (eq != std::string::npos) {
      out[name] = entry.substr(eq + 1);
    } else if (prefix) {
      for (const auto& [key, value] : own) {
        if (absl::StartsWith(key, bare) && !IsWorkerOwnedEnv(key)) out[key] = value;
      }
    } else if (auto it = own.find(name); it != own.end()) {
      out[name] = it->second;
    }
  }
  return EnvList(out);
}

RankLauncher::RankLauncher(ProcessSupervisor* supervisor, LogShipper* shipper, RankLauncherOptions options)
    : supervisor_(supervisor), shipper_(shipper), options_(std::move(options)) {}

absl::StatusOr<std::vector<RankLaunch>> RankLauncher::Prepare(const v1::StartRanks& order) const {
  if (absl::Status s = ValidateJobId(order.job_id()); !s.ok()) return s;
  if (order.generation() < 1) {
    return absl::InvalidArgumentError(absl::StrCat("generation: must be >= 1, got ", order.generation()));
  }
  if (order.global_ranks().empty()) return absl::InvalidArgumentError("global_ranks: must not be empty");
  const v1::Placement& placement = order.placement();
  std::map<int32_t, const v1::RankAssignment*> assignments;
  for (const v1::RankAssignment& a : placement.ranks()) assignments[a.global_rank()] = &a;

  // The coordinator checked the env names at Submit; checked again here
  // (the variables the worker owns are overridden below, whatever they say).
  ASSIGN_OR_RETURN(const EnvPolicy env_policy, EnvPolicy::Create(options_.allowed_env, "worker"));
  const std::pair<const char*, const google::protobuf::Map<std::string, std::string>*> envs[] = {
      {"", &order.spec().env()}, {"program.", &order.spec().program().env()}, {"", &order.env()}};
  for (const auto& [field, env] : envs) {
    std::vector<std::string> names;
    for (const auto& [key, value] : *env) {
      if (!IsWorkerOwnedEnv(key)) names.push_back(key);
    }
    std::sort(names.begin(), names.end());  // the same error every time
    for (const std::string& name : names) {
      if (absl::Status s = env_policy.Check(name); !s.ok()) {
        return absl::Status(s.code(), absl::StrCat(field, s.message()));
      }
    }
  }

  // The data root data.path lies beneath, and the checkpoint directory
  // beneath the coordinator's roots, neither through a link a job planted
  // (worker/job_roots.h): PERMISSION_DENIED, unrecoverable.
  ASSIGN_OR_RETURN(const std::string data_root, DataRootFor(order.spec().data().path(), options_.data_roots));
  const std::vector<std::string> checkpoint_roots(order.checkpoint_roots().begin(), order.checkpoint_roots().end());
  RETURN_IF_ERROR(CheckCheckpointDir(order.checkpoint_dir(), checkpoint_roots));
  ASSIGN_OR_RETURN(const RunAccount account, options_.run_as.AccountFor(order.owner()));
  RETURN_IF_ERROR(PrepareCheckpointDir(order.checkpoint_dir(), checkpoint_roots, account));

  const std::string socket = options_.agent_socket;
  std::map<std::string, std::string> common = {{"PATH", kRankPath}};
  for (const auto& [key, value] : EnvMap(options_.node_env)) common[key] = value;
  // The spec's env (the coordinator checked the names against its
  // allowlist), then the order's own; what the worker owns wins over both.
  for (const auto& [key, value] : order.spec().env()) {
    if (!IsWorkerOwnedEnv(key)) common[key] = value;
  }
  for (const auto& [key, value] : order.spec().program().env()) {
    if (!IsWorkerOwnedEnv(key)) common[key] = value;
  }
  for (const auto& [key, value] : order.env()) {
    if (!IsWorkerOwnedEnv(key)) common[key] = value;
  }
  const bool program = order.spec().has_program();
  if (program) {  // no PYTHONPATH at all when there is neither an SDK nor the job's own
    auto job_value = common.find("PYTHONPATH");
    const std::string path =
        PythonPathWithSdk(options_.python_sdk_dir, job_value == common.end() ? "" : job_value->second);
    if (!path.empty()) common["PYTHONPATH"] = path;
  }
  if (program && order.placement().master_port() > 0 &&
      std::find(order.global_ranks().begin(), order.global_ranks().end(), 0) != order.global_ranks().end()) {
    RETURN_IF_ERROR(CheckMasterPortFree(order.placement().master_port()));
  }
  common["HOME"] = account.home.empty() ? JobPrivateDir(options_.state_dir, order.job_id()) : account.home;
  if (account.name.find(':') == std::string::npos) common["USER"] = common["LOGNAME"] = account.name;
  common["TMPDIR"] = JobTmpDir(options_.state_dir, order.job_id());
  // What the context holds for every rank of the order.
  v1::RankContext shared;
  shared.set_job_id(order.job_id());
  shared.set_generation(order.generation());
  *shared.mutable_spec() = order.spec();
  v1::WorldLayout* world = shared.mutable_world();
  world->set_world_size(placement.world_size());
  world->set_data(placement.data_parallel_size());
  world->set_pipeline(placement.pipeline_parallel_size());
  world->set_nodes(placement.nodes());
  world->set_ranks_per_node(placement.ranks_per_node());
  shared.mutable_rendezvous()->set_address("grpc:unix:" + socket);
  shared.mutable_rendezvous()->set_secret(order.rendezvous_secret());
  if (order.has_rendezvous_deadline()) *shared.mutable_rendezvous()->mutable_deadline() = order.rendezvous_deadline();
  shared.set_agent("unix:" + socket);
  if (order.has_resume_from() && !order.resume_from().path().empty()) *shared.mutable_resume_from() = order.resume_from();
  shared.set_checkpoint_dir(order.checkpoint_dir());
  for (const std::string& root : checkpoint_roots) shared.add_checkpoint_roots(root);
  if (order.has_auto_interval()) *shared.mutable_auto_interval() = order.auto_interval();
  shared.set_data_root(data_root);
  shared.set_advertise_host(options_.advertise_host);
  google::protobuf::util::JsonPrintOptions json_options;
  json_options.preserve_proto_field_names = true;
  json_options.add_whitespace = true;

  std::vector<RankLaunch> launches;
  for (int32_t rank : order.global_ranks()) {
    auto it = assignments.find(rank);
    if (it == assignments.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "global_ranks: rank ", rank, " is not in the placement (world size ", placement.world_size(), ")"));
    }
    const v1::RankAssignment& a = *it->second;
    RankLaunch launch;
    launch.job_id = order.job_id();
    launch.generation = order.generation();
    launch.global_rank = rank;
    launch.secret = order.rendezvous_secret();

    v1::RankContext context = shared;
    v1::RankCoordinates* coordinates = context.mutable_rank();
    coordinates->set_global_rank(rank);
    coordinates->set_local_rank(a.local_rank());
    coordinates->set_node_rank(a.node_rank());
    coordinates->set_data_rank(a.data_rank());
    coordinates->set_pipeline_rank(a.pipeline_rank());
    context.mutable_device()->set_kind(order.spec().resources().device() == v1::ResourceSpec::CPU
                                           ? v1::RankDevice::CPU
                                           : v1::RankDevice::CUDA);
    context.mutable_device()->set_gpu_uuid(a.gpu_uuid());
    std::string context_json;
    if (auto s = google::protobuf::util::MessageToJsonString(context, &context_json, json_options); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("rank context: cannot write it as JSON: ", s.ToString()));
    }
    ASSIGN_OR_RETURN(const RankFiles files, PrepareRankFiles(options_.state_dir, order.job_id(), order.generation(),
                                                             rank, account, context_json));

    std::map<std::string, std::string> env = common;
    if (!a.gpu_uuid().empty()) {
      env["CUDA_VISIBLE_DEVICES"] = a.gpu_uuid();
      env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
    }
    RETURN_IF_ERROR(DecideCommand(order, a, files, &env, &launch.process));
    launch.process.env = EnvList(env);
    if (!account.is_worker) launch.process.credentials = SpawnOptions::Credentials{account.uid, account.gid, account.groups};
    launch.process.log_path = RankLogPath(options_.state_dir, order.job_id(), order.generation(), rank);
    // The built-in trainer on the CPU can carry on in a restart's next
    // generation in its process (its Gloo world fails fast and is torn down
    // whole). Not on a GPU: a rank blocked in an NCCL collective needs
    // ncclCommAbort first, which it does not do yet.
    if (!order.spec().has_program() && order.spec().resources().device() == v1::ResourceSpec::CPU) {
      launch.rejoin_context = files.context_path;
    }
    launches.push_back(std::move(launch));
  }
  return launches;
}

absl::Status RankLauncher::DecideCommand(const v1::StartRanks& order, const v1::RankAssignment& rank,
                                         const RankFiles& files, std::map<std::string, std::string>* env,
                                         SpawnRequest* process) const {
  if (!order.spec().has_program()) {  // the built-in trainer
    process->path = options_.trainer_path;
    process->argv = {options_.trainer_path, "--rank-context", files.context_path};
    process->cwd = files.work_dir;
    return absl::OkStatus();
  }
  const v1::ProgramSpec& program = order.spec().program();
  ASSIGN_OR_RETURN(process->path, ResolveProgram(program.command(0), (*env)["PATH"]));
  process->argv.assign(program.command().begin(), program.command().end());
  process->cwd = program.working_dir().empty() ? files.work_dir : program.working_dir();
  for (auto& [key, value] : TorchrunEnv(order, rank, files.context_path)) (*env)[key] = std::move(value);
  return absl::OkStatus();
}

v1::StartRanksResult RankLauncher::Start(const v1::StartRanks& order) {
  v1::StartRanksResult result;
  result.set_job_id(order.job_id());
  result.set_generation(order.generation());
  absl::StatusOr<std::vector<RankLaunch>> launches = Prepare(order);
  if (!launches.ok()) {
    spdlog::error("job {} generation {}: cannot start ranks: {}", order.job_id(), order.generation(),
                  launches.status().ToString());
    result.set_error(std::string(launches.status().message()));
    // The order itself is refused: starting it again elsewhere cannot help.
    result.set_unrecoverable(launches.status().code() == absl::StatusCode::kInvalidArgument ||
                             launches.status().code() == absl::StatusCode::kPermissionDenied);
    return result;
  }
  // Watched before the start, so that a rank that exits at once is Finish()ed
  // after it is watched; offset: what earlier runs left in the file.
  std::vector<const RankLaunch*> newly_watched;
  if (shipper_ != nullptr) {
    for (const RankLaunch& launch : *launches) {
      if (shipper_->Watch(LogSource{launch.job_id, launch.generation, launch.global_rank, launch.process.log_path,
                                    FileSize(launch.process.log_path)})) {
        newly_watched.push_back(&launch);
      }
    }
  }
  StartOutcome outcome = supervisor_->Start(*launches);
  for (int32_t rank : outcome.started) result.add_started_ranks(rank);
  if (shipper_ != nullptr) {
    for (const auto& [rank, log_path] : outcome.adopted) {  // its output goes on in its first log
      shipper_->Retarget(LogSource{order.job_id(), order.generation(), rank, log_path, FileSize(log_path)});
    }
  }
  for (const RankLaunch* launch : newly_watched) {
    bool started =
        std::find(outcome.started.begin(), outcome.started.end(), launch->global_rank) != outcome.started.end();
    if (!started) shipper_->Finish(launch->job_id, launch->generation, launch->global_rank);
  }
  if (!outcome.status.ok()) result.set_error(std::string(outcome.status.message()));
  return result;
}

int RankLauncher::Stop(const v1::StopRanks& order) {
  absl::Duration grace = options_.default_grace;
  if (order.has_grace_period()) {
    grace = FromProtoDuration(order.grace_period());
  }
  std::vector<int32_t> ranks(order.global_ranks().begin(), order.global_ranks().end());
  int signalled =
      supervisor_->Stop(order.job_id(), order.generation(), ranks, grace, order.dump_state(), order.restarting());
  spdlog::info("job {} generation {}: stop order ({}), {} rank(s) signalled, grace {}", order.job_id(),
               order.generation(), order.reason().empty() ? "no reason given" : order.reason(), signalled,
               absl::FormatDuration(grace));
  return signalled;
}

}  // namespace ringmaster::worker

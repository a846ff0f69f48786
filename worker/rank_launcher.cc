#include "worker/rank_launcher.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/time_util.h"
#include "spdlog/spdlog.h"
#include "worker/paths.h"
#include "common/proto_time.h"

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

absl::Status WriteFile(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << content;
    if (!out.good()) return absl::FailedPreconditionError(absl::StrCat("cannot write ", tmp));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat("cannot rename ", tmp, ": ", ec.message()));
  return absl::OkStatus();
}

int64_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
}

}  // namespace

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

  std::string spec_json;
  google::protobuf::util::JsonPrintOptions json_options;
  json_options.preserve_proto_field_names = true;
  json_options.add_whitespace = true;
  if (auto s = google::protobuf::util::MessageToJsonString(order.spec(), &spec_json, json_options); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("spec: cannot write it as JSON: ", s.ToString()));
  }

  const std::string socket = options_.agent_socket;
  std::map<std::string, std::string> common = EnvMap(options_.base_env);
  for (const auto& [key, value] : order.env()) common[key] = value;
  common["RINGMASTER_WORLD_SIZE"] = absl::StrCat(placement.world_size());
  common["RINGMASTER_JOB_ID"] = order.job_id();
  common["RINGMASTER_GENERATION"] = absl::StrCat(order.generation());
  common["RINGMASTER_RENDEZVOUS"] = "grpc:unix:" + socket;
  common["RINGMASTER_RENDEZVOUS_PREFIX"] = absl::StrCat(order.job_id(), "/", order.generation());
  common["RINGMASTER_AGENT"] = "unix:" + socket;
  // After the spec's env: a job cannot replace it. Never logged.
  if (!order.rendezvous_secret().empty()) common["RINGMASTER_RENDEZVOUS_SECRET"] = order.rendezvous_secret();
  if (!options_.advertise_host.empty()) common["RINGMASTER_HOST"] = options_.advertise_host;
  if (order.has_rendezvous_deadline()) {
    common["RINGMASTER_RENDEZVOUS_DEADLINE"] = google::protobuf::util::TimeUtil::ToString(order.rendezvous_deadline());
  }
  if (order.has_resume_from() && !order.resume_from().path().empty()) {
    common["RINGMASTER_RESUME_FROM"] = order.resume_from().path();
    common["RINGMASTER_RESUME_STEP"] = absl::StrCat(order.resume_from().step());
  }

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
    const std::string work_dir = RankWorkDir(options_.state_dir, order.job_id(), order.generation(), rank);
    std::error_code ec;
    std::filesystem::create_directories(work_dir, ec);
    if (ec) return absl::FailedPreconditionError(absl::StrCat("cannot create ", work_dir, ": ", ec.message()));
    const std::string spec_path = work_dir + "/spec.json";
    if (absl::Status s = WriteFile(spec_path, spec_json); !s.ok()) return s;

    std::map<std::string, std::string> env = common;
    env["RINGMASTER_RANK"] = absl::StrCat(rank);
    env["RINGMASTER_LOCAL_RANK"] = absl::StrCat(a.local_rank());
    env["RINGMASTER_NODE_RANK"] = absl::StrCat(a.node_rank());
    env["RINGMASTER_DATA_RANK"] = absl::StrCat(a.data_rank());
    env["RINGMASTER_PIPELINE_RANK"] = absl::StrCat(a.pipeline_rank());
    if (!a.gpu_uuid().empty()) {
      env["CUDA_VISIBLE_DEVICES"] = a.gpu_uuid();
      env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
    }
    launch.process.path = options_.trainer_path;
    launch.process.argv = {options_.trainer_path, "--spec", spec_path};
    if (!order.checkpoint_dir().empty()) {
      launch.process.argv.push_back("--checkpoint-dir");
      launch.process.argv.push_back(order.checkpoint_dir());
    }
    launch.process.env = EnvList(env);
    launch.process.cwd = work_dir;
    launch.process.log_path = RankLogPath(options_.state_dir, order.job_id(), order.generation(), rank);
    launches.push_back(std::move(launch));
  }
  return launches;
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
  int signalled = supervisor_->Stop(order.job_id(), order.generation(), ranks, grace, order.dump_state());
  spdlog::info("job {} generation {}: stop order ({}), {} rank(s) signalled, grace {}", order.job_id(),
               order.generation(), order.reason().empty() ? "no reason given" : order.reason(), signalled,
               absl::FormatDuration(grace));
  return signalled;
}

}  // namespace ringmaster::worker

#include "worker/gpu_health.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace ringmaster::worker {
namespace {

// NVML's answers that mean the GPU itself is gone or unusable.
bool GpuGone(nvmlReturn_t result) { return result == kNvmlErrorGpuIsLost || result == kNvmlErrorResetRequired; }

}  // namespace

std::string GpuName(const RegisteredGpu& gpu) { return absl::StrCat("GPU ", gpu.index, " (", gpu.uuid, ")"); }

std::string XidMeaning(unsigned long long xid) {  // NOLINT
  // NVIDIA's XID catalogue (docs.nvidia.com/deploy/xid-errors).
  switch (xid) {
    case 48: return "double-bit ECC error";
    case 63: return "ECC page retirement or row remapping";
    case 64: return "ECC page retirement or row remapping failed";
    case 74: return "NVLink error";
    case 79: return "fallen off the bus";
    case 92: return "high single-bit ECC error rate";
    case 94: return "contained ECC error";
    case 95: return "uncontained ECC error";
    case 119: return "GSP RPC timeout";
    case 120: return "GSP error";
    case 999: return "unknown XID";
    default: return "";
  }
}

bool XidIsApplications(unsigned long long xid) {  // NOLINT
  // 13 graphics engine exception, 31 GPU memory page fault, 43 GPU stopped
  // processing, 45 preemptive cleanup, 68 video processor exception, 109
  // context switch timeout: a job's bad kernel or its being killed, which
  // the job's own failure already reports (the NVIDIA device plugin for
  // Kubernetes skips the same ones).
  switch (xid) {
    case 13: case 31: case 43: case 45: case 68: case 109: return true;
    default: return false;
  }
}

absl::StatusOr<std::unique_ptr<GpuHealth>> GpuHealth::Open(std::vector<RegisteredGpu> gpus,
                                                           const std::string& library) {
  absl::StatusOr<std::unique_ptr<NvmlLibrary>> nvml = NvmlLibrary::Open(library);
  if (!nvml.ok()) return nvml.status();
  std::unique_ptr<GpuHealth> health(new GpuHealth(std::move(*nvml), std::move(gpus)));
  std::map<std::string, nvmlDevice_t> seen;
  const std::string missing = health->Enumerate(&seen);
  if (!missing.empty()) spdlog::warn("GPU health: {}", missing);
  {
    std::lock_guard<std::mutex> lock(health->mu_);
    health->RegisterEvents(seen);
    // The baseline of the NVLink check (see the header).
    for (const RegisteredGpu& gpu : health->gpus_) {
      auto it = seen.find(gpu.uuid);
      if (it != seen.end()) health->links_up_[gpu.uuid] = health->LinksUp(it->second);
    }
  }
  return health;
}

GpuHealth::GpuHealth(std::unique_ptr<NvmlLibrary> nvml, std::vector<RegisteredGpu> gpus)
    : nvml_(std::move(nvml)), gpus_(std::move(gpus)) {}

GpuHealth::~GpuHealth() {
  if (events_ != nullptr) nvml_->EventSetFree(events_);
}

std::string GpuHealth::Enumerate(std::map<std::string, nvmlDevice_t>* seen) const {
  unsigned int count = 0;
  const nvmlReturn_t r = nvml_->DeviceGetCount(&count);
  if (r != kNvmlSuccess) return absl::StrCat("NVML cannot count the GPUs: ", nvml_->Error(r));
  std::string index_error;  // why an index had no handle, for the reason
  for (unsigned int i = 0; i < count; ++i) {
    nvmlDevice_t device = nullptr;
    char uuid[kNvmlUuidBufferSize] = {};
    nvmlReturn_t got = nvml_->DeviceGetHandleByIndex(i, &device);
    if (got == kNvmlSuccess) got = nvml_->DeviceGetUUID(device, uuid, sizeof(uuid));
    if (got != kNvmlSuccess) {
      index_error = absl::StrCat("; NVML device ", i, ": ", nvml_->Error(got));
      continue;
    }
    (*seen)[uuid] = device;
  }
  size_t found = 0;
  const RegisteredGpu* missing = nullptr;
  for (const RegisteredGpu& gpu : gpus_) {
    if (seen->count(gpu.uuid) > 0) {
      ++found;
    } else if (missing == nullptr) {
      missing = &gpu;
    }
  }
  if (missing == nullptr) return "";
  return absl::StrCat(GpuName(*missing), ": not seen by NVML (expected ", gpus_.size(), " GPUs, NVML sees ", found,
                      index_error, ")");
}

void GpuHealth::RegisterEvents(const std::map<std::string, nvmlDevice_t>& seen) {
  if (nvml_->EventSetCreate(&events_) != kNvmlSuccess) {
    events_ = nullptr;
    spdlog::warn("GPU health: NVML has no event set: XID errors are not checked");
    return;
  }
  for (size_t i = 0; i < gpus_.size(); ++i) {
    auto it = seen.find(gpus_[i].uuid);
    if (it == seen.end()) continue;
    const nvmlReturn_t r = nvml_->DeviceRegisterEvents(it->second, kNvmlEventXidCritical, events_);
    if (r != kNvmlSuccess) {
      spdlog::warn("GPU health: {}: XID errors are not checked ({})", GpuName(gpus_[i]), nvml_->Error(r));
      continue;
    }
    registered_[it->second] = i;
  }
}

void GpuHealth::DrainXids() {
  if (events_ == nullptr) return;
  for (;;) {
    nvmlEventData_t event{};
    // Timeout 0: only what is pending; NVML_ERROR_TIMEOUT when nothing is.
    if (nvml_->EventSetWait(events_, &event, 0) != kNvmlSuccess) return;
    if ((event.eventType & kNvmlEventXidCritical) == 0) continue;
    auto it = registered_.find(event.device);
    const std::string gpu = it != registered_.end() ? GpuName(gpus_[it->second]) : "a GPU";
    const std::string meaning = XidMeaning(event.eventData);
    const std::string reason =
        absl::StrCat(gpu, ": XID ", event.eventData, meaning.empty() ? "" : absl::StrCat(" (", meaning, ")"));
    if (XidIsApplications(event.eventData)) {
      spdlog::info("GPU health: {} (an application's error: the node stays ready)", reason);
      continue;
    }
    spdlog::warn("GPU health: {}", reason);
    if (xid_failure_.empty()) xid_failure_ = reason;
  }
}

std::string GpuHealth::CheckEcc(const RegisteredGpu& gpu, nvmlDevice_t device) const {
  unsigned long long errors = 0;  // NOLINT: NVML's type
  const nvmlReturn_t r =
      nvml_->DeviceGetTotalEccErrors(device, kNvmlMemoryErrorUncorrected, kNvmlVolatileEcc, &errors);
  if (GpuGone(r)) return absl::StrCat(GpuName(gpu), ": ", nvml_->Error(r));
  if (r != kNvmlSuccess || errors == 0) return "";  // no ECC on this GPU, or none
  return absl::StrCat(GpuName(gpu), ": ", errors, " uncorrected ECC error", errors == 1 ? "" : "s",
                      " since the driver loaded");
}

std::set<unsigned int> GpuHealth::LinksUp(nvmlDevice_t device) const {
  std::set<unsigned int> up;
  for (unsigned int link = 0; link < kNvmlMaxLinks; ++link) {
    unsigned int state = 0;
    if (nvml_->DeviceGetNvLinkState(device, link, &state) == kNvmlSuccess && state == kNvmlFeatureEnabled) {
      up.insert(link);
    }
  }
  return up;
}

std::string GpuHealth::CheckLinks(const RegisteredGpu& gpu, nvmlDevice_t device) const {
  auto it = links_up_.find(gpu.uuid);
  if (it == links_up_.end()) return "";
  for (unsigned int link : it->second) {
    unsigned int state = 0;
    const nvmlReturn_t r = nvml_->DeviceGetNvLinkState(device, link, &state);
    if (GpuGone(r)) return absl::StrCat(GpuName(gpu), ": ", nvml_->Error(r));
    if (r == kNvmlSuccess && state != kNvmlFeatureEnabled) {
      return absl::StrCat(GpuName(gpu), ": NVLink ", link, " is down");
    }
  }
  return "";
}

std::string GpuHealth::Check() {
  std::lock_guard<std::mutex> lock(mu_);
  DrainXids();  // every round, so that no event waits for the others to pass
  std::map<std::string, nvmlDevice_t> seen;
  std::string failure = Enumerate(&seen);
  if (!failure.empty()) return failure;
  if (!xid_failure_.empty()) return xid_failure_;
  for (const RegisteredGpu& gpu : gpus_) {
    failure = CheckEcc(gpu, seen.at(gpu.uuid));
    if (failure.empty()) failure = CheckLinks(gpu, seen.at(gpu.uuid));
    if (!failure.empty()) return failure;
  }
  return "";
}

std::string GpuHealth::CheckCount() {
  std::map<std::string, nvmlDevice_t> seen;
  return Enumerate(&seen);
}

}  // namespace ringmaster::worker

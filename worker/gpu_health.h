#ifndef RINGMASTER_WORKER_GPU_HEALTH_H_
#define RINGMASTER_WORKER_GPU_HEALTH_H_

// GpuHealth: whether the GPUs the worker registered are still fit, through
// NVML (worker/README.md, "Health checks"). Each check returns "" (healthy)
// or one line naming the GPU and the fault:
//   - count: every registered GPU (by UUID) is still seen by NVML
//     ("GPU 3 (GPU-8f1c...): not seen by NVML (expected 8 GPUs, NVML sees 7)");
//   - XID: an XID critical error event since the last check, except those an
//     application causes (13, 31, 43, 45, 68, 109: its own bad kernel or
//     memory access); one seen keeps failing until the worker restarts, as
//     the GPU needs a reset ("GPU 2 (GPU-...): XID 79 (fallen off the bus)");
//   - ECC: uncorrected ECC errors in the volatile count (since the driver
//     loaded) ("GPU 3 (GPU-...): 2 uncorrected ECC errors since the driver
//     loaded"); GPUs without ECC are skipped;
//   - NVLink: every link that was up when GpuHealth was opened is still up
//     ("GPU 0 (GPU-...): NVLink 4 is down"). Links down from the start are
//     not reported: PCIe cards with a partial bridge have such links.
// An NVML call that answers "GPU is lost" or "reset required" fails the GPU.
// Thread-safe.

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/health_checks.h"
#include "worker/nvml_library.h"

namespace ringmaster::worker {

struct RegisteredGpu {
  int index = 0;     // CUDA index, as registered (NodeInfo.gpus)
  std::string uuid;  // "GPU-8f1c..."
};

class GpuHealth : public GpuCheck {
 public:
  // Loads NVML from `library` and registers for XID events on `gpus`.
  // FAILED_PRECONDITION when NVML cannot be loaded or initialised.
  static absl::StatusOr<std::unique_ptr<GpuHealth>> Open(std::vector<RegisteredGpu> gpus,
                                                         const std::string& library = kNvmlLibrary);
  ~GpuHealth() override;

  // Count, XID, ECC, NVLink, in that order; the first failure.
  std::string Check() override;
  // The count only (cheap: before a placement).
  std::string CheckCount() override;

 private:
  GpuHealth(std::unique_ptr<NvmlLibrary> nvml, std::vector<RegisteredGpu> gpus);
  // The handles of the registered GPUs NVML sees now (by UUID); the count
  // failure ("" when every one is seen).
  std::string Enumerate(std::map<std::string, nvmlDevice_t>* seen) const;
  void RegisterEvents(const std::map<std::string, nvmlDevice_t>& seen);
  void DrainXids();  // events since the last check -> xid_failure_
  std::string CheckEcc(const RegisteredGpu& gpu, nvmlDevice_t device) const;
  std::string CheckLinks(const RegisteredGpu& gpu, nvmlDevice_t device) const;
  // The links of `device` that are up.
  std::set<unsigned int> LinksUp(nvmlDevice_t device) const;

  const std::unique_ptr<NvmlLibrary> nvml_;
  const std::vector<RegisteredGpu> gpus_;

  std::mutex mu_;
  nvmlEventSet_t events_ = nullptr;             // null: no XID events
  std::map<nvmlDevice_t, size_t> registered_;   // handle -> index into gpus_
  std::map<std::string, std::set<unsigned int>> links_up_;  // by UUID, when opened
  std::string xid_failure_;                     // the first XID seen; sticky
};

// "GPU 3 (GPU-8f1c...)".
std::string GpuName(const RegisteredGpu& gpu);
// What XID `xid` means, for the few a node fails on most often ("" else).
std::string XidMeaning(unsigned long long xid);  // NOLINT: NVML's type
// Whether XID `xid` is one an application causes (not the node's fault).
bool XidIsApplications(unsigned long long xid);  // NOLINT

}  // namespace ringmaster::worker

#endif  // RINGMASTER_WORKER_GPU_HEALTH_H_

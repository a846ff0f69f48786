#ifndef RINGMASTER_WORKER_NVML_LIBRARY_H_
#define RINGMASTER_WORKER_NVML_LIBRARY_H_

// NvmlLibrary: NVIDIA's management library (libnvidia-ml, installed with the
// driver) loaded at run time with dlopen, so that the worker builds and runs
// where there is no driver; tests load a fake library of the same ABI
// (worker/testing/fake_nvml.cc).
//
// The few types, constants and functions used are declared here, copied from
// NVML's public header nvml.h (the ABI of libnvidia-ml.so.1; values checked
// against NVIDIA's nvml.h):
//   nvmlReturn_t: NVML_SUCCESS 0, NVML_ERROR_NOT_SUPPORTED 3,
//     NVML_ERROR_TIMEOUT 10, NVML_ERROR_GPU_IS_LOST 15,
//     NVML_ERROR_RESET_REQUIRED 16;
//   nvmlEnableState_t: NVML_FEATURE_DISABLED 0, NVML_FEATURE_ENABLED 1;
//   nvmlMemoryErrorType_t: NVML_MEMORY_ERROR_TYPE_UNCORRECTED 1;
//   nvmlEccCounterType_t: NVML_VOLATILE_ECC 0;
//   nvmlEventTypeXidCriticalError 0x8; NVML_NVLINK_MAX_LINKS 18;
//   NVML_DEVICE_UUID_V2_BUFFER_SIZE 96;
//   nvmlEventData_t {device, eventType, eventData, gpuInstanceId,
//     computeInstanceId} (older drivers, from before MIG, write only the
//     first three members, a prefix of this layout).
// Thread-compatible; NVML's own calls are thread-safe.

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace ringmaster::worker {

using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
using nvmlEventSet_t = struct nvmlEventSet_st*;

struct nvmlEventData_t {
  nvmlDevice_t device;
  unsigned long long eventType;  // NOLINT: NVML's type
  unsigned long long eventData;  // NOLINT: the XID, for an XID event
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

inline constexpr nvmlReturn_t kNvmlSuccess = 0;
inline constexpr nvmlReturn_t kNvmlErrorNotSupported = 3;
inline constexpr nvmlReturn_t kNvmlErrorTimeout = 10;
inline constexpr nvmlReturn_t kNvmlErrorGpuIsLost = 15;
inline constexpr nvmlReturn_t kNvmlErrorResetRequired = 16;
inline constexpr unsigned int kNvmlFeatureEnabled = 1;
inline constexpr unsigned int kNvmlMemoryErrorUncorrected = 1;
inline constexpr unsigned int kNvmlVolatileEcc = 0;
inline constexpr unsigned long long kNvmlEventXidCritical = 0x8;  // NOLINT
inline constexpr unsigned int kNvmlMaxLinks = 18;
inline constexpr unsigned int kNvmlUuidBufferSize = 96;

inline constexpr char kNvmlLibrary[] = "libnvidia-ml.so.1";

class NvmlLibrary {
 public:
  // dlopen(path), every function below, then nvmlInit_v2. FAILED_PRECONDITION
  // naming the library and what is missing, or NVML's reason init failed.
  static absl::StatusOr<std::unique_ptr<NvmlLibrary>> Open(const std::string& path = kNvmlLibrary);
  ~NvmlLibrary();  // nvmlShutdown, dlclose
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  // NVML's words for `result` ("GPU is lost").
  std::string Error(nvmlReturn_t result) const;

  nvmlReturn_t (*Init)() = nullptr;  // nvmlInit_v2
  nvmlReturn_t (*Shutdown)() = nullptr;
  const char* (*ErrorString)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*DeviceGetCount)(unsigned int*) = nullptr;                       // _v2
  nvmlReturn_t (*DeviceGetHandleByIndex)(unsigned int, nvmlDevice_t*) = nullptr;  // _v2
  nvmlReturn_t (*DeviceGetUUID)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*DeviceGetTotalEccErrors)(nvmlDevice_t, unsigned int, unsigned int,
                                          unsigned long long*) = nullptr;  // NOLINT
  nvmlReturn_t (*DeviceGetNvLinkState)(nvmlDevice_t, unsigned int, unsigned int*) = nullptr;
  nvmlReturn_t (*EventSetCreate)(nvmlEventSet_t*) = nullptr;
  nvmlReturn_t (*DeviceRegisterEvents)(nvmlDevice_t, unsigned long long, nvmlEventSet_t) = nullptr;  // NOLINT
  nvmlReturn_t (*EventSetWait)(nvmlEventSet_t, nvmlEventData_t*, unsigned int) = nullptr;  // _v2
  nvmlReturn_t (*EventSetFree)(nvmlEventSet_t) = nullptr;

 private:
  NvmlLibrary() = default;
  void* handle_ = nullptr;
  bool initialized_ = false;
};

}  // namespace ringmaster::worker

#endif  // RINGMASTER_WORKER_NVML_LIBRARY_H_

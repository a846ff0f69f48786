// A fake libnvidia-ml for tests of worker/gpu_health: the NVML functions
// NvmlLibrary binds, with NVML's ABI (worker/nvml_library.h), over GPUs the
// test describes through the FakeNvml* functions below. A test dlopens this
// library itself to reach them; GpuHealth's dlopen of the same path then
// shares the state. Not thread-safe (one test thread drives it).

#include <cstring>
#include <deque>
#include <set>
#include <string>
#include <utility>

#include "worker/nvml_library.h"

using ringmaster::worker::nvmlDevice_t;
using ringmaster::worker::nvmlEventData_t;
using ringmaster::worker::nvmlEventSet_t;
using ringmaster::worker::nvmlReturn_t;

namespace {

constexpr nvmlReturn_t kInvalidArgument = 2;
constexpr unsigned int kMaxGpus = 16;

struct FakeGpu {
  std::string uuid;
  unsigned long long uncorrected_ecc = 0;  // NOLINT: NVML's type
  std::set<unsigned int> links_down;
};

struct State {
  nvmlReturn_t init_result = 0;
  int initialized = 0;  // nvmlInit_v2 calls less nvmlShutdown calls
  unsigned int count = 0;
  FakeGpu gpus[kMaxGpus];  // fixed: handles are their addresses
  unsigned int links = 4;  // NVLinks per GPU; links past these are NOT_SUPPORTED
  std::set<unsigned int> registered;  // GPUs registered for XID events
  std::deque<std::pair<unsigned int, unsigned long long>> xids;  // NOLINT
  int event_sets = 0;  // created less freed
  char event_set_token = 0;
};

State& S() {
  static State state;
  return state;
}

nvmlDevice_t Handle(unsigned int index) { return reinterpret_cast<nvmlDevice_t>(&S().gpus[index]); }

// The index of `device`, or -1 when it is none of the present GPUs.
int IndexOf(nvmlDevice_t device) {
  for (unsigned int i = 0; i < S().count; ++i) {
    if (Handle(i) == device) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

extern "C" {

// ---- The test's controls. ----

void FakeNvmlReset() { S() = State(); }
void FakeNvmlSetInitResult(int result) { S().init_result = result; }
// The GPUs NVML sees, in index order (at most 16).
void FakeNvmlSetGpus(const char* const* uuids, unsigned int count) {
  S().count = count < kMaxGpus ? count : kMaxGpus;
  for (unsigned int i = 0; i < S().count; ++i) S().gpus[i] = FakeGpu{uuids[i], 0, {}};
}
void FakeNvmlSetEcc(unsigned int index, unsigned long long uncorrected) {  // NOLINT
  S().gpus[index].uncorrected_ecc = uncorrected;
}
void FakeNvmlSetLinkDown(unsigned int index, unsigned int link) { S().gpus[index].links_down.insert(link); }
// An XID critical error event for GPU `index`, pending until read.
void FakeNvmlQueueXid(unsigned int index, unsigned long long xid) { S().xids.emplace_back(index, xid); }  // NOLINT
int FakeNvmlInitialized() { return S().initialized; }
int FakeNvmlEventSets() { return S().event_sets; }

// ---- NVML. ----

nvmlReturn_t nvmlInit_v2() {
  if (S().init_result != 0) return S().init_result;
  ++S().initialized;
  return 0;
}

nvmlReturn_t nvmlShutdown() {
  --S().initialized;
  return 0;
}

const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case 9: return "Driver Not Loaded";
    case 10: return "Timeout";
    case 15: return "GPU is lost";
    default: return "Unknown Error";
  }
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  *count = S().count;
  return 0;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (index >= S().count) return kInvalidArgument;
  *device = Handle(index);
  return 0;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  const int i = IndexOf(device);
  if (i < 0) return ringmaster::worker::kNvmlErrorGpuIsLost;
  std::strncpy(uuid, S().gpus[i].uuid.c_str(), length - 1);
  return 0;
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, unsigned int error_type, unsigned int counter_type,
                                         unsigned long long* count) {  // NOLINT
  const int i = IndexOf(device);
  if (i < 0) return ringmaster::worker::kNvmlErrorGpuIsLost;
  if (error_type != ringmaster::worker::kNvmlMemoryErrorUncorrected ||
      counter_type != ringmaster::worker::kNvmlVolatileEcc) {
    return kInvalidArgument;  // the checks ask for nothing else
  }
  *count = S().gpus[i].uncorrected_ecc;
  return 0;
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, unsigned int* active) {
  const int i = IndexOf(device);
  if (i < 0) return ringmaster::worker::kNvmlErrorGpuIsLost;
  if (link >= S().links) return ringmaster::worker::kNvmlErrorNotSupported;
  *active = S().gpus[i].links_down.count(link) > 0 ? 0 : ringmaster::worker::kNvmlFeatureEnabled;
  return 0;
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  ++S().event_sets;
  *set = reinterpret_cast<nvmlEventSet_t>(&S().event_set_token);
  return 0;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long types,  // NOLINT
                                      nvmlEventSet_t set) {
  const int i = IndexOf(device);
  if (i < 0 || set == nullptr || types != ringmaster::worker::kNvmlEventXidCritical) return kInvalidArgument;
  S().registered.insert(static_cast<unsigned int>(i));
  return 0;
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data, unsigned int /*timeout_ms*/) {
  if (set == nullptr) return kInvalidArgument;
  while (!S().xids.empty()) {
    const auto [index, xid] = S().xids.front();
    S().xids.pop_front();
    if (S().registered.count(index) == 0) continue;  // NVML reports registered devices only
    data->device = Handle(index);
    data->eventType = ringmaster::worker::kNvmlEventXidCritical;
    data->eventData = xid;
    return 0;
  }
  return ringmaster::worker::kNvmlErrorTimeout;
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t /*set*/) {
  --S().event_sets;
  return 0;
}

}  // extern "C"

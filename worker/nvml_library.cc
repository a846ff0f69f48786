#include "worker/nvml_library.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"

namespace ringmaster::worker {
namespace {

// Sets *fn to `name` in `handle`; false when the library lacks it.
template <typename Fn>
bool Bind(void* handle, const char* name, Fn* fn) {
  *fn = reinterpret_cast<Fn>(dlsym(handle, name));
  return *fn != nullptr;
}

}  // namespace

absl::StatusOr<std::unique_ptr<NvmlLibrary>> NvmlLibrary::Open(const std::string& path) {
  std::unique_ptr<NvmlLibrary> lib(new NvmlLibrary());
  lib->handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib->handle_ == nullptr) {
    const char* why = dlerror();
    return absl::FailedPreconditionError(
        absl::StrCat("cannot load ", path, ": ", why != nullptr ? why : "dlopen failed"));
  }
  void* h = lib->handle_;
  // The _v2 names are those nvml.h maps the plain names to (the v1 entry
  // points count and index GPUs the worker's cgroup may not see).
  const struct {
    const char* name;
    bool bound;
  } symbols[] = {
      {"nvmlInit_v2", Bind(h, "nvmlInit_v2", &lib->Init)},
      {"nvmlShutdown", Bind(h, "nvmlShutdown", &lib->Shutdown)},
      {"nvmlErrorString", Bind(h, "nvmlErrorString", &lib->ErrorString)},
      {"nvmlDeviceGetCount_v2", Bind(h, "nvmlDeviceGetCount_v2", &lib->DeviceGetCount)},
      {"nvmlDeviceGetHandleByIndex_v2", Bind(h, "nvmlDeviceGetHandleByIndex_v2", &lib->DeviceGetHandleByIndex)},
      {"nvmlDeviceGetUUID", Bind(h, "nvmlDeviceGetUUID", &lib->DeviceGetUUID)},
      {"nvmlDeviceGetTotalEccErrors", Bind(h, "nvmlDeviceGetTotalEccErrors", &lib->DeviceGetTotalEccErrors)},
      {"nvmlDeviceGetNvLinkState", Bind(h, "nvmlDeviceGetNvLinkState", &lib->DeviceGetNvLinkState)},
      {"nvmlEventSetCreate", Bind(h, "nvmlEventSetCreate", &lib->EventSetCreate)},
      {"nvmlDeviceRegisterEvents", Bind(h, "nvmlDeviceRegisterEvents", &lib->DeviceRegisterEvents)},
      {"nvmlEventSetWait_v2", Bind(h, "nvmlEventSetWait_v2", &lib->EventSetWait)},
      {"nvmlEventSetFree", Bind(h, "nvmlEventSetFree", &lib->EventSetFree)},
  };
  for (const auto& symbol : symbols) {
    if (!symbol.bound) return absl::FailedPreconditionError(absl::StrCat(path, " has no ", symbol.name));
  }
  const nvmlReturn_t init = lib->Init();
  if (init != kNvmlSuccess) {
    return absl::FailedPreconditionError(absl::StrCat("nvmlInit_v2 (", path, "): ", lib->Error(init)));
  }
  lib->initialized_ = true;
  return lib;
}

NvmlLibrary::~NvmlLibrary() {
  if (initialized_) Shutdown();
  if (handle_ != nullptr) dlclose(handle_);
}

std::string NvmlLibrary::Error(nvmlReturn_t result) const {
  const char* text = ErrorString != nullptr ? ErrorString(result) : nullptr;
  return text != nullptr ? std::string(text) : absl::StrCat("NVML error ", result);
}

}  // namespace ringmaster::worker

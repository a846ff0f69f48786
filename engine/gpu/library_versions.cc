#include "engine/gpu/library_versions.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <dlfcn.h>
#include <nccl.h>

#include <climits>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/gpu/library_floors.h"

namespace ringmaster::engine::gpu {
namespace {

// 1000 * major + 10 * minor (the driver and the runtime).
std::string CudaText(int64_t v) { return absl::StrCat(v / 1000, ".", (v % 1000) / 10); }
// 10000 * major + 100 * minor + patch (cuBLASLt, cuDNN 9, NCCL >= 2.9).
std::string TripleText(int64_t v) { return absl::StrCat(v / 10000, ".", (v % 10000) / 100, ".", v % 100); }
// NCCL before 2.9 counted 1000 * major + 100 * minor + patch.
std::string NcclText(int64_t v) {
  return v < 20900 ? absl::StrCat(v / 1000, ".", (v % 1000) / 100, ".", v % 100) : TripleText(v);
}

// The file that holds `symbol`, symlinks resolved.
std::string FileOf(const void* symbol) {
  Dl_info info;
  if (dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return "";
  char resolved[PATH_MAX];
  return realpath(info.dli_fname, resolved) != nullptr ? std::string(resolved) : std::string(info.dli_fname);
}

LoadedLibrary Expected(const char* name, std::string soname, int64_t floor, std::string floor_text) {
  LoadedLibrary lib;
  lib.name = name;
  lib.soname = std::move(soname);
  lib.floor = floor;
  lib.floor_text = std::move(floor_text);
  return lib;
}

// dlopen(lib->soname) and its symbol `name` (the handle stays open); sets
// lib->error when either is missing.
void* OpenSymbol(LoadedLibrary* lib, const char* name) {
  void* handle = dlopen(lib->soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    lib->error = why != nullptr ? why : "dlopen failed";
    return nullptr;
  }
  void* symbol = dlsym(handle, name);
  if (symbol == nullptr) {
    lib->error = absl::StrCat(lib->soname, " has no ", name);
    return nullptr;
  }
  lib->path = FileOf(symbol);
  return symbol;
}

// The CUDA runtime version a library was built for (cublasLtGetCudartVersion,
// cudnnGetCudartVersion), as "13.0"; empty when unknown.
std::string BuiltFor(const LoadedLibrary& lib, const char* name) {
  void* handle = dlopen(lib.soname.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (handle == nullptr) return "";
  auto* fn = reinterpret_cast<size_t (*)()>(dlsym(handle, name));
  return fn == nullptr ? "" : CudaText(static_cast<int64_t>(fn()));
}

LoadedLibrary ReadRuntime() {
  LoadedLibrary lib = Expected("CUDA runtime", absl::StrCat("libcudart.so.", kToolkitMajor), kMinRuntimeVersion,
                               CudaText(kMinRuntimeVersion));
  int version = 0;
  const cudaError_t error = cudaRuntimeGetVersion(&version);
  if (error != cudaSuccess) {
    lib.error = absl::StrCat("cudaRuntimeGetVersion: ", cudaGetErrorName(error));
    (void)cudaGetLastError();
    return lib;
  }
  lib.version = version;
  lib.version_text = CudaText(version);
  lib.path = FileOf(reinterpret_cast<const void*>(&cudaRuntimeGetVersion));
  return lib;
}

LoadedLibrary ReadCublasLt() {
  LoadedLibrary lib = Expected("cuBLASLt", absl::StrCat("libcublasLt.so.", CUBLAS_VER_MAJOR),
                               static_cast<int64_t>(kMinCublasLtVersion), TripleText(kMinCublasLtVersion));
  auto* get = reinterpret_cast<decltype(&cublasLtGetVersion)>(OpenSymbol(&lib, "cublasLtGetVersion"));
  if (get == nullptr) return lib;
  lib.version = static_cast<int64_t>(get());
  lib.version_text = TripleText(lib.version);
  lib.built_for = BuiltFor(lib, "cublasLtGetCudartVersion");
  return lib;
}

LoadedLibrary ReadCudnn() {
  LoadedLibrary lib = Expected("cuDNN", absl::StrCat("libcudnn.so.", CUDNN_MAJOR),
                               static_cast<int64_t>(kMinCudnnVersion), TripleText(kMinCudnnVersion));
  auto* get = reinterpret_cast<decltype(&cudnnGetVersion)>(OpenSymbol(&lib, "cudnnGetVersion"));
  if (get == nullptr) return lib;
  lib.version = static_cast<int64_t>(get());
  lib.version_text = TripleText(lib.version);
  lib.built_for = BuiltFor(lib, "cudnnGetCudartVersion");
  return lib;
}

LoadedLibrary ReadNccl() {
  LoadedLibrary lib =
      Expected("NCCL", absl::StrCat("libnccl.so.", NCCL_MAJOR), kMinNcclVersion, NcclText(kMinNcclVersion));
  auto* get = reinterpret_cast<decltype(&ncclGetVersion)>(OpenSymbol(&lib, "ncclGetVersion"));
  if (get == nullptr) return lib;
  int version = 0;
  if (get(&version) != ncclSuccess) {
    lib.error = "ncclGetVersion failed";
    return lib;
  }
  lib.version = version;
  lib.version_text = NcclText(version);
  return lib;
}

void ReadDevices(LibraryVersions* v) {
  const cudaError_t error = cudaGetDeviceCount(&v->device_count);
  if (error != cudaSuccess || v->device_count == 0) {
    v->device_count = 0;
    v->device_error = error != cudaSuccess
                          ? absl::StrCat(cudaGetErrorName(error), ": ", cudaGetErrorString(error))
                          : "cudaGetDeviceCount found 0";
    (void)cudaGetLastError();  // no device is an answer here
    return;
  }
  for (int i = 0; i < v->device_count; ++i) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) {
      v->devices.push_back(absl::StrCat(i, ": properties unavailable"));
      (void)cudaGetLastError();
      continue;
    }
    v->devices.push_back(absl::StrFormat("%d: %s, sm_%d%d, %.1f GiB", i, prop.name, prop.major, prop.minor,
                                         static_cast<double>(prop.totalGlobalMem) / (1 << 30)));
  }
}

std::string Line(const LoadedLibrary& lib) {
  const std::string needs = absl::StrCat(", needs >= ", lib.floor_text);
  if (!lib.error.empty()) return absl::StrCat(lib.name, ": not loaded (", lib.error, ")", needs, ": MISSING");
  const std::string built = lib.built_for.empty() ? "" : absl::StrCat(", built for CUDA ", lib.built_for);
  return absl::StrCat(lib.name, ": ", lib.version_text, " (", lib.version, built, ")", needs, ": ",
                      lib.ok() ? "ok" : "TOO OLD", ", ", lib.path.empty() ? lib.soname : lib.path);
}

}  // namespace

bool LibraryVersions::ok() const {
  const bool driver_ok = driver_version == 0 || driver_version >= driver_floor;
  return driver_ok && runtime.ok() && cublaslt.ok() && cudnn.ok() && nccl.ok();
}

LibraryVersions ReadLibraryVersions() {
  LibraryVersions v;
  v.driver_floor = kMinDriverVersion;
  if (cudaDriverGetVersion(&v.driver_version) != cudaSuccess) {
    v.driver_version = 0;
    (void)cudaGetLastError();
  }
  v.runtime = ReadRuntime();
  v.cublaslt = ReadCublasLt();
  v.cudnn = ReadCudnn();
  v.nccl = ReadNccl();
  ReadDevices(&v);
  return v;
}

std::vector<std::string> FormatLibraryVersions(const LibraryVersions& v) {
  std::vector<std::string> lines;
  const std::string needs = absl::StrCat(", needs >= ", CudaText(v.driver_floor));
  if (v.driver_version == 0) {
    lines.push_back(absl::StrCat("CUDA driver: none (no NVIDIA driver loaded)", needs));
  } else {
    lines.push_back(absl::StrCat("CUDA driver: supports CUDA ", CudaText(v.driver_version), " (", v.driver_version,
                                 ")", needs, ": ", v.driver_version >= v.driver_floor ? "ok" : "TOO OLD"));
  }
  for (const LoadedLibrary* lib : {&v.runtime, &v.cublaslt, &v.cudnn, &v.nccl}) lines.push_back(Line(*lib));
  if (v.device_count == 0) {
    lines.push_back(absl::StrCat("devices: none (", v.device_error, ")"));
  } else {
    for (const std::string& d : v.devices) lines.push_back(absl::StrCat("device ", d));
  }
  return lines;
}

}  // namespace ringmaster::engine::gpu

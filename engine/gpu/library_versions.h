#ifndef RINGMASTER_ENGINE_GPU_LIBRARY_VERSIONS_H_
#define RINGMASTER_ENGINE_GPU_LIBRARY_VERSIONS_H_

// The CUDA driver and the CUDA libraries this process actually loads, with
// their versions and where the loader found them, beside the floors of
// library_floors.h: what gpu-versions prints first on a GPU machine, so that
// a wrong library is seen before any device time is spent.
//
// The CUDA runtime is linked (it answers for the driver and the devices);
// cuBLASLt, cuDNN and NCCL are opened by their SONAME with dlopen, the way
// the engine's binaries load them, so that one missing library is reported
// without hiding the others. Works without a GPU or a driver: it says so.
//
// Thread-compatible: ReadLibraryVersions keeps no state.

#include <cstdint>
#include <string>
#include <vector>

namespace ringmaster::engine::gpu {

struct LoadedLibrary {
  std::string name;        // "cuBLASLt"
  std::string soname;      // "libcublasLt.so.13": what the engine's binaries link
  std::string path;        // the file the loader opened (symlinks resolved); empty when not loaded
  int64_t version = 0;     // in the library's own encoding; 0 when not loaded
  std::string version_text;  // "13.1.0"
  int64_t floor = 0;       // library_floors.h, same encoding
  std::string floor_text;  // "13.0.0"
  std::string error;       // why it was not loaded; empty when it was
  std::string built_for;   // the CUDA version the library was built for ("13.0"); empty when unknown
  bool ok() const { return error.empty() && version >= floor; }
};

struct LibraryVersions {
  int driver_version = 0;  // cudaDriverGetVersion; 0: no NVIDIA driver
  int driver_floor = 0;
  int device_count = 0;
  std::string device_error;  // why no device was found ("" when device_count > 0)
  std::vector<std::string> devices;  // "0: sm_90", one per device
  LoadedLibrary runtime, cublaslt, cudnn, nccl;
  // Every library loaded and at its floor, and (when a driver is present) the
  // driver at its floor. A machine without a driver is not failed here: the
  // GPU tests say that they skip.
  bool ok() const;
};

LibraryVersions ReadLibraryVersions();

// One line per item, e.g.
//   "cuBLASLt: 13.1.0 (130100, built for CUDA 13.0), needs >= 13.0.0: ok, /usr/lib/libcublasLt.so.13"
//   "NCCL: not loaded (libnccl.so.2: cannot open shared object file...), needs >= 2.18.0: MISSING"
std::vector<std::string> FormatLibraryVersions(const LibraryVersions& versions);

}  // namespace ringmaster::engine::gpu

#endif  // RINGMASTER_ENGINE_GPU_LIBRARY_VERSIONS_H_

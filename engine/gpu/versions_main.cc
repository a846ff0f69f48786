// gpu-versions: prints the CUDA driver's version and the CUDA runtime,
// cuBLASLt, cuDNN and NCCL this process loads (version, file, the floor the
// engine needs), then the devices; scripts/gpu-run.sh runs it first. Works
// without a GPU or a driver (it says so). Exit status: 0 when every library
// loads and is at its floor and the driver, if any, is too; 1 otherwise.
#include <cstdio>
#include <string>

#include "engine/gpu/library_versions.h"

int main() {
  const ringmaster::engine::gpu::LibraryVersions versions = ringmaster::engine::gpu::ReadLibraryVersions();
  for (const std::string& line : ringmaster::engine::gpu::FormatLibraryVersions(versions)) {
    std::printf("%s\n", line.c_str());
  }
  return versions.ok() ? 0 : 1;
}

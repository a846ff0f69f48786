#ifndef RINGMASTER_ENGINE_GPU_LIBRARY_FLOORS_H_
#define RINGMASTER_ENGINE_GPU_LIBRARY_FLOORS_H_

// The oldest CUDA driver and libraries the engine's binaries run with, each
// in its library's own version encoding and with the reason for it: what the
// code calls, and which library major version (SONAME) the binaries link.
// Nothing newer is asked for: a machine that has these runs everything.
// engine/kernels/smoke_test.cc holds the loaded libraries to them, and
// gpu-versions (versions_main.cc) prints them beside what it finds.
//
// Built with the CUDA toolkit only (it reads the toolkit's version macros).

#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <cudnn_version.h>
#include <nccl.h>

#include <cstddef>

namespace ringmaster::engine::gpu {

// The CUDA major version of the toolkit the binaries are built with (13).
inline constexpr int kToolkitMajor = CUDART_VERSION / 1000;

// cudaDriverGetVersion (1000 * major + 10 * minor): the kernels are compiled
// by this toolkit (SASS for sm_80 and sm_90, compute_90 PTX) and the binaries
// link its runtime, so the driver must support CUDA 13.0. With CUDA's
// minor-version compatibility, any 13.x toolkit's binaries run on a 13.0
// driver (no PTX is JIT-compiled on A100/H100/H200: their SASS is packed).
inline constexpr int kMinDriverVersion = kToolkitMajor * 1000;

// cudaRuntimeGetVersion (same encoding): the binaries link libcudart.so.13,
// which any 13.x runtime provides; no runtime API newer than 13.0 is called
// (the newest are graph capture and instantiation, CUDA 10-11).
inline constexpr int kMinRuntimeVersion = kToolkitMajor * 1000;

// cublasLtGetVersion (10000 * major + 100 * minor + patch): the binaries link
// libcublasLt.so.13, so any 13.x. What the GEMMs use (cublasLtMatmul with the
// BIAS and GELU_AUX_BIAS epilogues, the bias data type, strided batches, the
// algorithm heuristic) is all in cuBLASLt 11.x already.
inline constexpr size_t kMinCublasLtVersion = static_cast<size_t>(CUBLAS_VER_MAJOR) * 10000;

// cudnnGetVersion (10000 * major + 100 * minor + patch): libcudnn.so.9; the
// convolutions and batch norm use cuDNN 9's legacy API (which cuDNN 9 runs on
// its graph API), cudnnGetLastErrorString and cuDNN 9's status codes, all in
// 9.0.
inline constexpr size_t kMinCudnnVersion = static_cast<size_t>(CUDNN_MAJOR) * 10000;

// ncclGetVersion (NCCL_VERSION encoding): ncclCommSplit needs 2.18; the
// non-blocking communicators (ncclCommInitRankConfig, ncclInProgress),
// ncclCommFinalize (2.14), ncclGetLastError and ncclRemoteError (2.13), bf16
// and ncclAvg (2.10) are older. ncclConfig_t.commName (2.27) is only a label:
// an older NCCL copies the config fields it knows and ignores the rest.
inline constexpr int kMinNcclVersion = NCCL_VERSION(2, 18, 0);

}  // namespace ringmaster::engine::gpu

#endif  // RINGMASTER_ENGINE_GPU_LIBRARY_FLOORS_H_

#ifndef RINGMASTER_ENGINE_CUDA_CUDNN_DESCRIPTORS_H_
#define RINGMASTER_ENGINE_CUDA_CUDNN_DESCRIPTORS_H_

// RAII owners of cuDNN descriptors, and the per-shape convolution plans
// (descriptors plus the algorithms chosen for forward, backward-data and
// backward-filter, with their workspace sizes). Not thread-safe.

#include <cudnn.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "absl/status/statusor.h"

namespace ringmaster::engine {

struct CudnnTensorDeleter {
  void operator()(cudnnTensorStruct* d) const { cudnnDestroyTensorDescriptor(d); }
};
struct CudnnFilterDeleter {
  void operator()(cudnnFilterStruct* d) const { cudnnDestroyFilterDescriptor(d); }
};
struct CudnnConvDeleter {
  void operator()(cudnnConvolutionStruct* d) const { cudnnDestroyConvolutionDescriptor(d); }
};
using CudnnTensorDesc = std::unique_ptr<cudnnTensorStruct, CudnnTensorDeleter>;
using CudnnFilterDesc = std::unique_ptr<cudnnFilterStruct, CudnnFilterDeleter>;
using CudnnConvDesc = std::unique_ptr<cudnnConvolutionStruct, CudnnConvDeleter>;

// An NCHW tensor descriptor (f32 unless said otherwise).
absl::StatusOr<CudnnTensorDesc> MakeTensorDesc(int64_t n, int64_t c, int64_t h, int64_t w,
                                               cudnnDataType_t type = CUDNN_DATA_FLOAT);

struct ConvKey {
  int64_t n, c, h, w, o, kh, kw, sh, sw, ph, pw;
  bool tensor_ops;  // tensor cores allowed (TF32 for f32 data)
  // The data type of x, w, y and the bias: f32, or the 16-bit compute dtype
  // (activations stored in 16 bits); the convolution computes in fp32.
  cudnnDataType_t data = CUDNN_DATA_FLOAT;
  auto Tie() const { return std::tie(n, c, h, w, o, kh, kw, sh, sw, ph, pw, tensor_ops, data); }
  bool operator<(const ConvKey& other) const { return Tie() < other.Tie(); }
};

struct ConvPlan {
  CudnnTensorDesc x, y, bias;
  CudnnFilterDesc w;
  CudnnConvDesc conv;
  cudnnConvolutionFwdAlgo_t fwd_algo;
  cudnnConvolutionBwdDataAlgo_t bwd_data_algo;
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo;
  size_t fwd_workspace = 0, bwd_data_workspace = 0, bwd_filter_workspace = 0;
};

class ConvAlgoCache {
 public:
  // The plan for `key`, built on first use: cuDNN's heuristics pick the first
  // deterministic algorithm, not an FFT/Winograd transform (fp32 accuracy),
  // that needs at most kMaxWorkspace bytes.
  absl::StatusOr<const ConvPlan*> Get(cudnnHandle_t handle, const ConvKey& key);

  static constexpr size_t kMaxWorkspace = size_t{256} << 20;

 private:
  std::map<ConvKey, std::unique_ptr<ConvPlan>> plans_;
};

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_CUDA_CUDNN_DESCRIPTORS_H_

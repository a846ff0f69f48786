#include "engine/cuda/cudnn_descriptors.h"

#include <string>

#include "engine/core/cuda_status.h"

namespace ringmaster::engine {
namespace {

constexpr int kMaxAlgos = 16;

// FFT and Winograd transforms lose fp32 accuracy (errors well above 1e-5
// relative); the direct and implicit-GEMM algorithms do not.
bool Transformed(cudnnConvolutionFwdAlgo_t a) {
  return a == CUDNN_CONVOLUTION_FWD_ALGO_FFT || a == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD || a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}
bool Transformed(cudnnConvolutionBwdDataAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
}
bool Transformed(cudnnConvolutionBwdFilterAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
}

// The first result that succeeded, is deterministic, is not a transform and
// fits the workspace limit.
template <typename Perf>
const Perf* PickAlgo(const Perf* results, int count) {
  for (int i = 0; i < count; ++i) {
    if (results[i].status == CUDNN_STATUS_SUCCESS && results[i].determinism == CUDNN_DETERMINISTIC &&
        !Transformed(results[i].algo) && results[i].memory <= ConvAlgoCache::kMaxWorkspace) {
      return &results[i];
    }
  }
  return nullptr;
}

absl::Status NoAlgorithm(const char* what) {
  return absl::InternalError(std::string("cuDNN offers no deterministic ") + what +
                             " convolution algorithm within the workspace limit");
}

}  // namespace

absl::StatusOr<CudnnTensorDesc> MakeTensorDesc(int64_t n, int64_t c, int64_t h, int64_t w, cudnnDataType_t type) {
  cudnnTensorDescriptor_t raw = nullptr;
  CUDNN_RETURN_IF_ERROR(cudnnCreateTensorDescriptor(&raw));
  CudnnTensorDesc desc(raw);
  CUDNN_RETURN_IF_ERROR(cudnnSetTensor4dDescriptor(raw, CUDNN_TENSOR_NCHW, type, static_cast<int>(n),
                                                   static_cast<int>(c), static_cast<int>(h), static_cast<int>(w)));
  return desc;
}

absl::StatusOr<const ConvPlan*> ConvAlgoCache::Get(cudnnHandle_t handle, const ConvKey& key) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second.get();
  auto plan = std::make_unique<ConvPlan>();
  const int64_t oh = (key.h + 2 * key.ph - key.kh) / key.sh + 1;
  const int64_t ow = (key.w + 2 * key.pw - key.kw) / key.sw + 1;
  auto x = MakeTensorDesc(key.n, key.c, key.h, key.w, key.data);
  if (!x.ok()) return x.status();
  auto y = MakeTensorDesc(key.n, key.o, oh, ow, key.data);
  if (!y.ok()) return y.status();
  auto bias = MakeTensorDesc(1, key.o, 1, 1, key.data);
  if (!bias.ok()) return bias.status();
  plan->x = std::move(*x);
  plan->y = std::move(*y);
  plan->bias = std::move(*bias);

  cudnnFilterDescriptor_t w = nullptr;
  CUDNN_RETURN_IF_ERROR(cudnnCreateFilterDescriptor(&w));
  plan->w.reset(w);
  CUDNN_RETURN_IF_ERROR(cudnnSetFilter4dDescriptor(w, key.data, CUDNN_TENSOR_NCHW, static_cast<int>(key.o),
                                                   static_cast<int>(key.c), static_cast<int>(key.kh),
                                                   static_cast<int>(key.kw)));
  cudnnConvolutionDescriptor_t conv = nullptr;
  CUDNN_RETURN_IF_ERROR(cudnnCreateConvolutionDescriptor(&conv));
  plan->conv.reset(conv);
  CUDNN_RETURN_IF_ERROR(cudnnSetConvolution2dDescriptor(conv, static_cast<int>(key.ph), static_cast<int>(key.pw),
                                                        static_cast<int>(key.sh), static_cast<int>(key.sw), 1, 1,
                                                        CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  // fp32 compute for every data type (16-bit data: cuDNN's "pseudo half"
  // configurations); FMA math keeps fp32 exact (CUDNN_DEFAULT_MATH would
  // allow TF32 on Ampere+).
  CUDNN_RETURN_IF_ERROR(cudnnSetConvolutionMathType(conv, key.tensor_ops ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));

  int count = 0;
  cudnnConvolutionFwdAlgoPerf_t fwd[kMaxAlgos];
  CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionForwardAlgorithm_v7(handle, plan->x.get(), w, conv, plan->y.get(),
                                                               kMaxAlgos, &count, fwd));
  const auto* f = PickAlgo(fwd, count);
  if (f == nullptr) return NoAlgorithm("forward");
  plan->fwd_algo = f->algo;
  CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionForwardWorkspaceSize(handle, plan->x.get(), w, conv, plan->y.get(),
                                                                f->algo, &plan->fwd_workspace));

  cudnnConvolutionBwdDataAlgoPerf_t bwd_data[kMaxAlgos];
  CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, w, plan->y.get(), conv, plan->x.get(),
                                                                    kMaxAlgos, &count, bwd_data));
  const auto* d = PickAlgo(bwd_data, count);
  if (d == nullptr) return NoAlgorithm("backward-data");
  plan->bwd_data_algo = d->algo;
  CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionBackwardDataWorkspaceSize(handle, w, plan->y.get(), conv, plan->x.get(),
                                                                     d->algo, &plan->bwd_data_workspace));

  cudnnConvolutionBwdFilterAlgoPerf_t bwd_filter[kMaxAlgos];
  CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, plan->x.get(), plan->y.get(), conv, w,
                                                                      kMaxAlgos, &count, bwd_filter));
  const auto* b = PickAlgo(bwd_filter, count);
  if (b == nullptr) return NoAlgorithm("backward-filter");
  plan->bwd_filter_algo = b->algo;
  CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, plan->x.get(), plan->y.get(), conv,
                                                                       w, b->algo, &plan->bwd_filter_workspace));

  const ConvPlan* out = plan.get();
  plans_.emplace(key, std::move(plan));
  return out;
}

}  // namespace ringmaster::engine

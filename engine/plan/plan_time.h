#ifndef RINGMASTER_ENGINE_PLAN_PLAN_TIME_H_
#define RINGMASTER_ENGINE_PLAN_PLAN_TIME_H_

// Internal to //engine/plan: the GPU step-time profile by op class. Every op
// the engine runs for a micro-batch (and for the optimizer step) is listed
// with its FLOPs or the bytes it reads and writes, in the planned design
// (Storage), and timed:
//  * GEMMs (Linear layers, the classifier, convolutions): FLOPs at the
//    device's math rate plus the GEMM's own operand and output traffic at
//    the HBM bandwidth, not overlapped. The math rate is the one that, with
//    that traffic term, reproduces the measured large-GEMM rate for an
//    8192^3 product (h100 bf16: 798 TFLOP/s measured -> 884 TFLOP/s of
//    math); so a GEMM's efficiency follows from its shape: I / (I + R/W) for
//    an arithmetic intensity of I FLOP/byte (GPT-2's: 60-75% of the
//    measured rate).
//  * attention: FLOPs actually executed (causal: half the products; the
//    backward recomputes the scores) at the kernel's rate: cuDNN's flash
//    attention at a fraction of the large-GEMM rate, our fp32 flash kernels
//    at an efficiency of the fp32 peak; the unfused path's batched GEMMs at
//    the math rate plus its [B, H, T, T] traffic.
//  * memory-bound ops (norms, elementwise, the loss, the embedding, the
//    optimizer, the weight copies, the old design's conversions and
//    rounding passes): bytes read plus written at the measured bandwidth.
// Pure functions; thread-safe.

#include <cstdint>
#include <string>
#include <vector>

#include "engine/nn/model_factory.h"
#include "engine/plan/plan.h"
#include "engine/plan/plan_memory.h"
#include "engine/train/trainer_config.h"

namespace ringmaster::engine::plan::internal {

// The rates one rank's ops run at.
struct Rates {
  double large_gemm = 0;     // FLOP/s of a large GEMM at the compute precision
  double gemm_math = 0;      // FLOP/s of GEMM math (see above)
  double conv_math = 0;      // the same for convolutions (the old 16-bit design: TF32 on rounded fp32)
  double operand_bytes = 4;  // bytes a GEMM reads per operand element
  double attention = 0;      // FLOP/s of the attention kernels (unfused: gemm_math)
  double bandwidth = 0;      // HBM bytes/s, read + written
};
// Zero rates (no profile) for a device without large_gemm_bf16 (the CPU).
Rates RatesFor(const DeviceProfile& device, const TrainerConfig& config, const Storage& storage);

// The ops of one micro-batch of `b` samples through blocks [begin, end),
// forward and backward (the loss with the last block).
std::vector<OpCost> MicroBatchOps(const nn::ModelConfig& model, const Storage& storage, const Rates& rates,
                                  int begin, int end, int64_t b);

// The stage's optimizer step: `optimized` elements updated (a ZeRO-1 shard or
// the stage's), `trained` elements whose gradients it zeroes and checks,
// `operands` stage operand elements whose 16-bit copies it refreshes.
std::vector<OpCost> OptimizerOps(const TrainerConfig& config, const Storage& storage, const Rates& rates,
                                 int64_t optimized, int64_t trained, int64_t operands);

// `ops` with every entry's FLOPs, bytes and seconds times `times`, appended
// to `into` (entries of the same name and class merged).
void AddOps(const std::vector<OpCost>& ops, double times, std::vector<OpCost>* into);

}  // namespace ringmaster::engine::plan::internal

#endif  // RINGMASTER_ENGINE_PLAN_PLAN_TIME_H_

#ifndef RINGMASTER_ENGINE_CORE_FLASH_ATTENTION_REFERENCE_H_
#define RINGMASTER_ENGINE_CORE_FLASH_ATTENTION_REFERENCE_H_

// The CPU twin of the CUDA backend's flash attention (engine/kernels/
// flash_attention_kernels.cuh): the same tiles, causal tile skipping, online softmax
// and backward recomputation from the logsumexp, in plain serial loops, so
// the algorithm is tested against the naive reference without a GPU.
// Layouts as Backend's attention: qkv [b, t, 3c] (q, k, v each
// [b, t, nh, c / nh]), out and dout [b, t, c], lse [b, nh, t]. fp32 only (the
// kernels' 16-bit storage is their fp32 math on rounded inputs, rounded once).

#include <cstdint>
#include <vector>

namespace ringmaster::engine::ref {

// Tile sizes, in rows. Forward: blocks of q_rows queries stream key tiles of
// k_cols. The dK/dV pass: blocks of kv_rows keys stream query tiles of
// kv_stream rows. The dQ pass: blocks of q_rows queries stream key tiles of
// dq_cols. The defaults are the CUDA kernels' (flash_attention_tiles.cuh:
// kBlockRows, kKeyTile, kBlockRows, kBwdTile, kBwdTile).
struct FlashTiles {
  int64_t q_rows = 64, k_cols = 32, kv_rows = 64, kv_stream = 16, dq_cols = 16;
};

struct FlashForwardResult {
  std::vector<float> out;  // [b, t, c]
  std::vector<float> lse;  // [b, nh, t]: log sum_j exp(scale * q_i . k_j), j <= i
};

FlashForwardResult FlashAttentionForward(int64_t b, int64_t t, int64_t c, int64_t nh, const std::vector<float>& qkv,
                                         const FlashTiles& tiles = {});
// dqkv [b, t, 3c] from forward's out and lse, without the probability matrix.
std::vector<float> FlashAttentionBackward(int64_t b, int64_t t, int64_t c, int64_t nh, const std::vector<float>& qkv,
                                          const std::vector<float>& out, const std::vector<float>& lse,
                                          const std::vector<float>& dout, const FlashTiles& tiles = {});

}  // namespace ringmaster::engine::ref

#endif  // RINGMASTER_ENGINE_CORE_FLASH_ATTENTION_REFERENCE_H_

#ifndef RINGMASTER_ENGINE_KERNELS_FLASH_LIMITS_H_
#define RINGMASTER_ENGINE_KERNELS_FLASH_LIMITS_H_

// Which head sizes the flash attention kernels (flash_attention.h) handle, in
// a header without CUDA: `ringmaster plan` needs it to size the saved
// attention, and the kernels' CPU emulation test to build them.

#include <cstdint>

namespace ringmaster::kernels {

// Head sizes up to this are handled (smaller ones are zero-padded to it in
// registers and shared memory); larger ones need the unfused path.
constexpr int64_t kFlashMaxHeadSize = 64;
inline bool FlashAttentionSupports(int64_t hd) { return hd > 0 && hd <= kFlashMaxHeadSize; }

}  // namespace ringmaster::kernels

#endif  // RINGMASTER_ENGINE_KERNELS_FLASH_LIMITS_H_

#ifndef RINGMASTER_ENGINE_CHECKPOINT_SAFETENSORS_H_
#define RINGMASTER_ENGINE_CHECKPOINT_SAFETENSORS_H_

// The safetensors format (https://github.com/huggingface/safetensors), as
// Python's `safetensors.torch.load_file` reads it:
//
//   8 bytes   N, unsigned little-endian
//   N bytes   JSON header {"__metadata__": {str: str},
//                          "<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
//             padded with spaces so that N is a multiple of 8
//   the rest  tensor data, little-endian, row-major; offsets relative to the
//             start of this section, contiguous, covering it exactly
//
// The header lists the tensors in the caller's order, after __metadata__; the
// data lays them out by decreasing element size (so that every tensor is
// aligned to its element size), in the caller's order otherwise. The reader
// validates every field before it hands out a byte, and returns tensors in
// header order. Host little-endian only.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/core/tensor.h"

namespace ringmaster::engine {

enum class SafetensorsDType { kF32, kF16, kBF16, kI32, kI64 };

const char* SafetensorsDTypeName(SafetensorsDType dtype);  // "F32", ...
size_t SafetensorsDTypeSize(SafetensorsDType dtype);

using SafetensorsMetadata = std::map<std::string, std::string>;

// One tensor's description and bytes (not owned).
struct SafetensorsView {
  std::string name;
  SafetensorsDType dtype = SafetensorsDType::kF32;
  Shape shape;
  absl::string_view data;  // NumElements(shape) * SafetensorsDTypeSize(dtype) bytes
};

// A host tensor as a view. INVALID_ARGUMENT naming it for a tensor that is
// not on the CPU or is undefined.
absl::StatusOr<SafetensorsView> ViewOf(const std::string& name, const Tensor& tensor);

// A new host Tensor holding a copy of `view`'s data. INVALID_ARGUMENT for I64,
// which Tensor cannot hold.
absl::StatusOr<Tensor> ToTensor(const SafetensorsView& view);

// A file being written: the header bytes (length prefix included) and the
// tensors in the order their data must follow it.
struct SafetensorsLayout {
  std::string header;
  std::vector<const SafetensorsView*> data_order;
};

// INVALID_ARGUMENT for an empty, repeated, non-UTF-8 or reserved
// ("__metadata__") name, a metadata key or value that is not UTF-8, a negative
// dimension, or a data size that does not match dtype and shape.
absl::StatusOr<SafetensorsLayout> LayOutSafetensors(const std::vector<SafetensorsView>& tensors,
                                                    const SafetensorsMetadata& metadata);

// The whole file in memory.
absl::StatusOr<std::string> SerializeSafetensors(const std::vector<SafetensorsView>& tensors,
                                                 const SafetensorsMetadata& metadata);

struct ParsedSafetensors {
  std::vector<SafetensorsView> tensors;  // in header order; views into the parsed bytes
  SafetensorsMetadata metadata;
};

// Validates and indexes a whole file. DATA_LOSS "<name>: <problem>" for a
// header length beyond the file (or above 100 MB), a header that is not a JSON
// object, a tensor entry without exactly dtype/shape/data_offsets, an unknown
// dtype, a shape that is not non-negative integers, offsets that are not
// [begin <= end], a byte count that is not dtype size x elements, data that
// is not contiguous from 0 or does not end where the file does, repeated names,
// or metadata that is not string to string. The views point into `bytes`.
absl::StatusOr<ParsedSafetensors> ParseSafetensors(absl::string_view bytes, absl::string_view name);

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_CHECKPOINT_SAFETENSORS_H_

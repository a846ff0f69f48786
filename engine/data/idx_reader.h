#ifndef RINGMASTER_ENGINE_DATA_IDX_READER_H_
#define RINGMASTER_ENGINE_DATA_IDX_READER_H_

// Reader for the IDX format of (Fashion-)MNIST: a big-endian magic
// 0x0000TTNN (TT = element type, NN = number of dimensions), NN big-endian
// uint32 dimension sizes, then the elements in row-major order. Only unsigned
// bytes (TT = 0x08) are supported, which is what the image and label files hold.
// Files may be gzip-compressed (".gz") or plain; zlib detects which.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringmaster::engine {

struct IdxArray {
  std::vector<int64_t> dims;  // e.g. [60000, 28, 28]
  std::vector<uint8_t> data;  // product(dims) bytes, row-major
};

// Reads and validates an IDX file, opened beneath the data root `root`
// when one is given (engine/data/data_file.h). Errors name the file and the
// problem: NOT_FOUND (cannot open), PERMISSION_DENIED (outside the root, or
// through a link that leads out of it), DATA_LOSS (gzip error, bad magic,
// truncated header or data, bytes after the data), INVALID_ARGUMENT (element
// type other than unsigned byte).
absl::StatusOr<IdxArray> ReadIdxFile(const std::string& path, const std::string& root = "");

// Parses the decompressed contents of an IDX file; `name` prefixes errors.
absl::StatusOr<IdxArray> ParseIdx(const std::string& name, absl::string_view bytes);

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_DATA_IDX_READER_H_

#include "engine/data/idx_reader.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/data/data_file.h"

namespace ringmaster::engine {
namespace {

constexpr uint8_t kUnsignedByteType = 0x08;
constexpr int kMaxDims = 8;
// Larger than any IDX file we read (Fashion-MNIST train images: 47 MB).
constexpr int64_t kMaxElements = int64_t{1} << 34;

uint32_t BigEndian32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

absl::StatusOr<std::string> ReadGzipOrPlain(const std::string& path, const std::string& root) {
  errno = 0;
  gzFile file = nullptr;
  if (root.empty()) {
    file = gzopen(path.c_str(), "rb");
  } else {
    absl::StatusOr<UniqueFd> fd = OpenDataFile(path, root);
    if (!fd.ok()) return fd.status();
    file = gzdopen(fd->get(), "rb");
    if (file != nullptr) fd->release();  // gzclose closes it
  }
  if (file == nullptr) {
    int error = errno;
    return absl::NotFoundError(absl::StrFormat("%s: cannot open: %s (errno %d)", path, std::strerror(error), error));
  }
  std::string out;
  constexpr int kChunk = 1 << 20;
  std::string chunk(kChunk, '\0');
  for (;;) {
    int n = gzread(file, chunk.data(), kChunk);
    if (n > 0) {
      out.append(chunk.data(), n);
      continue;
    }
    int errnum = Z_OK;
    const char* message = gzerror(file, &errnum);
    if (n < 0 || (errnum != Z_OK && errnum != Z_STREAM_END)) {
      std::string text = message ? message : "unknown error";
      // zlib prefixes the path itself.
      if (absl::StartsWith(text, path + ": ")) text.erase(0, path.size() + 2);
      gzclose(file);
      return absl::DataLossError(absl::StrFormat("%s: gzip error: %s", path, text));
    }
    break;
  }
  gzclose(file);
  return out;
}

}  // namespace

absl::StatusOr<IdxArray> ParseIdx(const std::string& name, absl::string_view bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() < 4) {
    return absl::DataLossError(
        absl::StrFormat("%s: truncated: %d bytes, shorter than the 4-byte IDX magic", name, bytes.size()));
  }
  const uint32_t magic = BigEndian32(p);
  const int num_dims = p[3];
  if (p[0] != 0 || p[1] != 0 || num_dims == 0 || num_dims > kMaxDims) {
    return absl::DataLossError(
        absl::StrFormat("%s: bad IDX magic 0x%08x (expected 0x000008NN: two zero bytes, type, 1 to %d dimensions)",
                        name, magic, kMaxDims));
  }
  if (p[2] != kUnsignedByteType) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: IDX element type 0x%02x is not supported (only 0x08, unsigned byte)", name, p[2]));
  }
  const size_t header_bytes = 4 + 4 * static_cast<size_t>(num_dims);
  if (bytes.size() < header_bytes) {
    return absl::DataLossError(absl::StrFormat("%s: truncated header: %d dimensions need %d bytes, file has %d", name,
                                               num_dims, header_bytes, bytes.size()));
  }
  IdxArray array;
  int64_t count = 1;
  for (int i = 0; i < num_dims; ++i) {
    const int64_t dim = BigEndian32(p + 4 + 4 * i);
    array.dims.push_back(dim);
    count *= dim;
    if (count > kMaxElements) {
      return absl::DataLossError(absl::StrFormat("%s: dimensions [%s] exceed %d elements", name,
                                                 absl::StrJoin(array.dims, ", "), kMaxElements));
    }
  }
  const size_t data_bytes = bytes.size() - header_bytes;
  if (data_bytes < static_cast<size_t>(count)) {
    return absl::DataLossError(absl::StrFormat("%s: truncated: dimensions [%s] need %d bytes of data, file has %d",
                                               name, absl::StrJoin(array.dims, ", "), count, data_bytes));
  }
  if (data_bytes > static_cast<size_t>(count)) {
    return absl::DataLossError(absl::StrFormat("%s: %d unexpected bytes after the data of dimensions [%s]", name,
                                               data_bytes - count, absl::StrJoin(array.dims, ", ")));
  }
  array.data.assign(p + header_bytes, p + bytes.size());
  return array;
}

absl::StatusOr<IdxArray> ReadIdxFile(const std::string& path, const std::string& root) {
  absl::StatusOr<std::string> bytes = ReadGzipOrPlain(path, root);
  if (!bytes.ok()) return bytes.status();
  return ParseIdx(path, *bytes);
}

}  // namespace ringmaster::engine

#include "engine/optim/pinned_upload.h"

#include <cstring>

#include "common/status_macros.h"
#include "spdlog/spdlog.h"

namespace ringmaster::engine::optim {
namespace {

// Each copy's place in the staging is aligned like any table element.
constexpr size_t kAlign = 16;
size_t AlignUp(size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

}  // namespace

PinnedUpload::~PinnedUpload() {
  absl::Status waited = Wait();
  if (!waited.ok()) spdlog::warn("PinnedUpload: {}", waited.ToString());
}

absl::Status PinnedUpload::Enqueue(const std::vector<Copy>& copies, cudaStream_t stream) {
  ASSIGN_OR_RETURN(bool capturing, StreamIsCapturing(stream));
  if (capturing) {
    return absl::FailedPreconditionError(
        "a host-to-device table upload was asked for inside a CUDA graph capture (it may allocate page-locked "
        "memory and waits on the host); build the tables before capturing");
  }
  size_t total = 0;
  for (const Copy& c : copies) total += AlignUp(c.bytes);
  if (total == 0) return absl::OkStatus();
  // The copies of the last Enqueue must have read the staging before it changes.
  RETURN_IF_ERROR(Wait());
  if (copied_.get() == nullptr) {
    ASSIGN_OR_RETURN(copied_, CudaEvent::Create());
  }
  if (staging_.bytes() < total) {
    staging_ = PinnedBuffer();  // free the old one first: the new one may need its room
    ASSIGN_OR_RETURN(staging_, PinnedBuffer::Allocate(total));
  }
  char* base = static_cast<char*>(staging_.data());
  size_t offset = 0;
  absl::Status enqueued;
  for (const Copy& c : copies) {
    if (c.bytes == 0) continue;
    std::memcpy(base + offset, c.src, c.bytes);
    enqueued = CUDA_STATUS(cudaMemcpyAsync(c.dst, base + offset, c.bytes, cudaMemcpyHostToDevice, stream));
    if (!enqueued.ok()) break;
    offset += AlignUp(c.bytes);
  }
  // Recorded even after a failure: the copies enqueued before it read the staging.
  absl::Status recorded = copied_.Record(stream);
  return enqueued.ok() ? recorded : enqueued;
}

absl::Status PinnedUpload::Wait() const {
  if (copied_.get() == nullptr) return absl::OkStatus();
  return copied_.Synchronize();
}

}  // namespace ringmaster::engine::optim

#ifndef RINGMASTER_ENGINE_DATA_DATASET_H_
#define RINGMASTER_ENGINE_DATA_DATASET_H_

// A finite collection of samples addressed by index, which a DistributedSampler
// orders and a DataLoader assembles into batches.
//
// Implementations are immutable after construction: all methods are const and
// safe to call from several threads at once (the loader calls Get on its
// prefetch thread). Get is deterministic: the same index gives the same sample.

#include <cstdint>

#include "engine/data/batch.h"

namespace ringmaster::engine {

class Dataset {
 public:
  virtual ~Dataset() = default;

  // Number of samples; indices are [0, size()).
  virtual int64_t size() const = 0;

  // A batch of `batch_size` slots laid out for this dataset's samples
  // (contents unspecified until filled by Get).
  virtual Batch NewBatch(int64_t batch_size) const = 0;

  // Writes sample `index` into slot `slot` of `batch` (made by NewBatch).
  // An index or slot out of range is a bug (CHECK).
  virtual void Get(int64_t index, int64_t slot, Batch* batch) const = 0;
};

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_DATA_DATASET_H_

#include "engine/data/batch.h"

#include "engine/core/check.h"

namespace ringmaster::engine {

Batch MicroBatch(const Batch& batch, int num_micro, int micro) {
  const int64_t size = batch.size();
  ENGINE_CHECK(num_micro > 0 && size % num_micro == 0, "{} micro-batches do not divide a batch of {}", num_micro, size);
  ENGINE_CHECK(micro >= 0 && micro < num_micro, "micro-batch {} of {}", micro, num_micro);
  const int64_t rows = size / num_micro;
  const int64_t begin = micro * rows;
  Batch out;
  out.epoch = batch.epoch;
  out.index = batch.index;
  for (auto [from, to] : {std::pair{&batch.images, &out.images}, std::pair{&batch.tokens, &out.tokens},
                          std::pair{&batch.targets, &out.targets}}) {
    if (from->defined()) *to = from->Rows(begin, begin + rows);
  }
  return out;
}

}  // namespace ringmaster::engine

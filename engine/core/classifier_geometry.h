#ifndef RINGMASTER_ENGINE_CORE_CLASSIFIER_GEOMETRY_H_
#define RINGMASTER_ENGINE_CORE_CLASSIFIER_GEOMETRY_H_

// The shapes of the GPT's fused, chunked classifier (engine/nn/gpt.h's LmHead),
// shared by the model and by the plan (engine/plan), so that what the plan
// predicts is what the engine allocates. Header-only, no dependencies.
//
//  * The vocabulary is padded to a multiple of kVocabPadding (GPT-2's 50,257 ->
//    50,304, as llm.c does): the token-embedding table, which the classifier
//    shares, gets rows that no token uses. Their logits never reach the loss,
//    the gradient or a prediction; checkpoints keep the real rows only.
//  * Training never holds the logits of the whole batch: the head computes
//    them ClassifierChunkRows rows at a time into one buffer, turns that buffer
//    into its own gradient in place (softmax cross-entropy), and uses it for
//    the input gradient and the weight gradient before the next chunk.

#include <algorithm>
#include <cstdint>

namespace ringmaster::engine {

inline constexpr int64_t kVocabPadding = 128;
// Bytes one chunk of logits may take (its gradient reuses the same buffer).
inline constexpr int64_t kClassifierChunkBytes = int64_t{128} << 20;

// `vocab` rounded up to a multiple of kVocabPadding.
inline constexpr int64_t PaddedVocab(int64_t vocab) {
  return (vocab + kVocabPadding - 1) / kVocabPadding * kVocabPadding;
}

// Rows of logits per chunk for `rows` rows of `padded_vocab` columns stored in
// `element_bytes` bytes: as many as fit in `budget` bytes, a multiple of 64
// (at least 64), never more than `rows` (at least 1).
inline constexpr int64_t ClassifierChunkRows(int64_t rows, int64_t padded_vocab, int64_t element_bytes,
                                             int64_t budget = kClassifierChunkBytes) {
  const int64_t fit = budget / std::max<int64_t>(1, padded_vocab * element_bytes);
  const int64_t aligned = std::max<int64_t>(64, fit / 64 * 64);
  return std::max<int64_t>(1, std::min(rows, aligned));
}

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_CORE_CLASSIFIER_GEOMETRY_H_

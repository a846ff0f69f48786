#ifndef RINGMASTER_FUZZ_INFLATE_H_
#define RINGMASTER_FUZZ_INFLATE_H_

// Inflate: turns a short fuzzed request into a large one, in code, from a
// few fuzzer-chosen parameters (fuzz_input.h, Inflation): one field of the
// message, found by reflection, grows
//   - a string or bytes field: to `amount` bytes, whole copies of its value
//     (or "x"), then 'x' padding (valid UTF-8 if the value was);
//   - a repeated field: by `amount` entries, copies of its last entry (or a
//     default one); strings get the entry's index appended, and so do the
//     keys of a map, so that entries stay distinct.
// Inflatable fields are listed depth first in field-number order, to
// kMaxInflateDepth levels of nested messages (into the last entry of a
// repeated message); `target % their number` picks one. Bounds: at most
// kMaxInflatedEntries entries, kMaxInflatedStringBytes bytes per string,
// and in all what the caller's budget (bytes) allows. Test-only.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "google/protobuf/message.h"

namespace ringmaster::fuzz {

inline constexpr int kMaxInflateDepth = 4;
inline constexpr size_t kMaxInflatedEntries = 70000;
inline constexpr size_t kMaxInflatedStringBytes = size_t{8} << 20;

// Inflates one field of `message` as `inflation` says (nothing unless
// enabled), spending at most *budget bytes (decreased by what was added).
// Returns the field's path ("spec.labels", "lines[].text"), or "" when
// nothing was inflated.
std::string Inflate(google::protobuf::Message* message, const Inflation& inflation, size_t* budget);

// The inflatable fields of `type`, in target order (target % size() picks
// one), as the paths Inflate returns: what a seed's target means
// (//fuzz:inflate_sites prints them; fuzz/make_corpus.py looks them up).
std::vector<std::string> InflatablePaths(const google::protobuf::Descriptor* type);

}  // namespace ringmaster::fuzz

#endif  // RINGMASTER_FUZZ_INFLATE_H_

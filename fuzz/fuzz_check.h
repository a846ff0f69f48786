#ifndef RINGMASTER_FUZZ_FUZZ_CHECK_H_
#define RINGMASTER_FUZZ_FUZZ_CHECK_H_

// FUZZ_CHECK(cond, message parts (at least one)...): a property of a fuzz target. When it
// does not hold, prints the message and aborts, which libFuzzer (and our
// replay driver) reports as a crash with the input that caused it.

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"

#define FUZZ_CHECK(cond, ...)                                                                        \
  do {                                                                                               \
    if (!(cond)) {                                                                                   \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed: %s\n", __FILE__, __LINE__, #cond,           \
                   ::absl::StrCat(__VA_ARGS__).c_str());                                          \
      std::abort();                                                                                  \
    }                                                                                                \
  } while (0)

#endif  // RINGMASTER_FUZZ_FUZZ_CHECK_H_

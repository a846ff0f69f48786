#ifndef RINGMASTER_ENGINE_CORE_CHECK_H_
#define RINGMASTER_ENGINE_CORE_CHECK_H_

// ENGINE_CHECK(cond, fmt, args...): a broken invariant (a bug, never bad input)
// logs file:line, the condition and the formatted message, then aborts.

#include <cstdlib>

#include "spdlog/spdlog.h"

#define ENGINE_CHECK(cond, ...)                                                      \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      spdlog::critical("{}:{}: check failed: {}: {}", __FILE__, __LINE__, #cond,      \
                       fmt::format(__VA_ARGS__));                                    \
      std::abort();                                                                  \
    }                                                                                \
  } while (0)

#endif  // RINGMASTER_ENGINE_CORE_CHECK_H_

#ifndef RINGMASTER_COMMON_DEV_CA_FOR_TEST_H_
#define RINGMASTER_COMMON_DEV_CA_FOR_TEST_H_

// Tests that need certificates run scripts/dev-ca.sh (data dependency
// //scripts:dev_ca) into a fresh directory. Test-only.

#include <string>

namespace ringmaster::testing {

// Runs `scripts/dev-ca.sh --expired DIR` (DIR: a new directory under the
// test's temporary directory) and returns DIR, holding ca.crt,
// coordinator.{crt,key}, worker.{crt,key} and worker-expired.{crt,key}.
// Fails the test (and returns "") if the script fails.
std::string MakeDevCa(const std::string& name);

// The whole file; fails the test if it cannot be read.
std::string ReadFileOrDie(const std::string& path);

}  // namespace ringmaster::testing

#endif  // RINGMASTER_COMMON_DEV_CA_FOR_TEST_H_

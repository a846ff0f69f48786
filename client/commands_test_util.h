#ifndef RINGMASTER_CLIENT_COMMANDS_TEST_UTIL_H_
#define RINGMASTER_CLIENT_COMMANDS_TEST_UTIL_H_

// The fixture of the command tests (commands_test.cc, describe_test.cc): the
// commands against an in-process fake JobService, a fixed clock, captured
// output.

#include <cstdint>
#include <memory>
#include <sstream>
#include <string>

#include "absl/time/time.h"
#include "client/commands.h"
#include "client/fake_job_service.h"
#include "common/clock.h"
#include "gtest/gtest.h"

namespace ringmaster::client::testing {

constexpr int64_t kT0 = 1795000000;  // 2026-11-18T11:06:40Z

inline google::protobuf::Timestamp At(int64_t seconds) {
  google::protobuf::Timestamp t;
  t.set_seconds(seconds);
  return t;
}

inline v1::Job MakeJob(const std::string& id, const std::string& name, v1::JobState state) {
  v1::Job job;
  job.set_id(id);
  job.mutable_spec()->set_name(name);
  job.set_state(state);
  *job.mutable_submit_time() = At(kT0 - 300);
  return job;
}

// What ListJobs lists of such a job.
inline v1::JobSummary MakeSummary(const std::string& id, const std::string& name, v1::JobState state) {
  v1::JobSummary job;
  job.set_id(id);
  job.mutable_spec()->set_name(name);
  job.set_state(state);
  *job.mutable_submit_time() = At(kT0 - 300);
  return job;
}

class CommandsTest : public ::testing::Test {
 protected:
  CommandsTest() {
    global_.coordinator = coordinator_.address();
    global_.rpc_timeout = absl::Seconds(10);
  }
  FakeJobService::Script& script() { return coordinator_.service().script(); }
  FakeJobService::Calls calls() { return coordinator_.service().calls(); }

  FakeCoordinator coordinator_;
  std::unique_ptr<v1::JobService::Stub> stub_ = coordinator_.NewStub();
  GlobalOptions global_;
  FakeClock clock_{absl::FromUnixSeconds(kT0)};
  std::ostringstream out_;
  std::ostringstream err_;
  Console console_{out_, err_, false, &clock_};
};

}  // namespace ringmaster::client::testing

#endif  // RINGMASTER_CLIENT_COMMANDS_TEST_UTIL_H_

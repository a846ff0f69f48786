#ifndef RINGMASTER_WORKER_TESTING_SUPERVISOR_FIXTURE_H_
#define RINGMASTER_WORKER_TESTING_SUPERVISOR_FIXTURE_H_

// FakeSupervisorTest: a ProcessSupervisor over FakeProcessControl and a
// FakeClock (its reaper wakes every 5 ms of real time), recording every exit
// it reports; for the supervisor's tests.

#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "worker/process_supervisor.h"
#include "worker/testing/fake_process_control.h"

namespace ringmaster::worker::testing {

class FakeSupervisorTest : public ::testing::Test {
 protected:
  FakeSupervisorTest()
      : supervisor_(
            &control_, &clock_, [this](const RankExit& e) { Record(e); }, Options()) {}

  static SupervisorOptions Options() {
    SupervisorOptions options;
    options.reap_interval = absl::Milliseconds(5);
    options.supersede_grace = absl::Seconds(30);
    return options;
  }

  static std::vector<RankLaunch> Launches(const std::string& job, int64_t generation, std::vector<int32_t> ranks) {
    std::vector<RankLaunch> out;
    for (int32_t rank : ranks) {
      RankLaunch launch;
      launch.job_id = job;
      launch.generation = generation;
      launch.global_rank = rank;
      launch.process.path = "/fake/trainer";
      launch.process.argv = {"/fake/trainer"};
      launch.process.env = {absl::StrCat("RINGMASTER_RANK=", rank), absl::StrCat("RINGMASTER_GENERATION=", generation)};
      out.push_back(launch);
    }
    return out;
  }

  void Record(const RankExit& e) {
    std::lock_guard<std::mutex> lock(mu_);
    exits_.push_back(e);
  }
  std::vector<RankExit> exits() {
    std::lock_guard<std::mutex> lock(mu_);
    return exits_;
  }
  bool WaitExits(size_t n) {
    return control_.WaitFor([&] { return exits().size() >= n; }, absl::Seconds(10));
  }
  int CountSignals(int64_t pid, int sig) {
    int n = 0;
    for (const auto& s : control_.signals()) n += (s.pgid == pid && s.sig == sig) ? 1 : 0;
    return n;
  }

  FakeClock clock_;
  FakeProcessControl control_;
  std::mutex mu_;
  std::vector<RankExit> exits_;
  ProcessSupervisor supervisor_;
};

}  // namespace ringmaster::worker::testing

#endif  // RINGMASTER_WORKER_TESTING_SUPERVISOR_FIXTURE_H_

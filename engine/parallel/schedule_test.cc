// Schedules as data: exact sequences, the invariants every schedule keeps,
// peak in-flight activations, and a simulation of all stages together under
// buffered and rendezvous (synchronous) send semantics: every schedule
// completes, and with equal stage costs its bubble is the theoretical one.

#include "engine/parallel/schedule.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "gtest/gtest.h"

namespace ringmaster::engine::parallel {
namespace {

using Schedules = std::vector<std::vector<Action>>;

Schedules AllStages(ScheduleKind kind, int p, int m) {
  Schedules out;
  for (int s = 0; s < p; ++s) out.push_back(BuildSchedule(kind, s, p, m).value());
  return out;
}

// Runs the stages' schedules against each other. A message is identified by
// (kind, from, to, micro-batch). With `rendezvous`, a send completes only
// together with the matching receive (both stages must be at it); otherwise a
// send is buffered. Each F costs f and each B costs b time units; returns the
// bubble fraction 1 - busy / (P * makespan), or -1 if the stages deadlock.
double Simulate(const Schedules& stages, bool rendezvous, double f = 1.0, double b = 2.0) {
  const int p = static_cast<int>(stages.size());
  std::vector<size_t> pc(p, 0);
  std::vector<double> clock(p, 0.0);
  double busy = 0.0;
  using Key = std::tuple<bool, int, int, int>;  // (is_grad, from, to, micro-batch)
  std::map<Key, double> sent;                   // buffered: message -> time sent
  auto message = [](int s, const Action& a) -> std::pair<bool, Key> {
    switch (a.type) {
      case ActionType::kSendActivation: return {true, Key{false, s, s + 1, a.micro_batch}};
      case ActionType::kSendGrad: return {true, Key{true, s, s - 1, a.micro_batch}};
      case ActionType::kRecvActivation: return {false, Key{false, s - 1, s, a.micro_batch}};
      case ActionType::kRecvGrad: return {false, Key{true, s + 1, s, a.micro_batch}};
      default: return {false, Key{}};
    }
  };
  for (;;) {
    bool progressed = false, done = true;
    for (int s = 0; s < p; ++s) {
      while (pc[s] < stages[s].size()) {
        done = false;
        const Action& a = stages[s][pc[s]];
        if (a.type == ActionType::kForward || a.type == ActionType::kBackward) {
          double cost = a.type == ActionType::kForward ? f : b;
          clock[s] += cost;
          busy += cost;
        } else {
          auto [is_send, key] = message(s, a);
          int peer = is_send ? std::get<2>(key) : std::get<1>(key);
          if (peer < 0 || peer >= p) return -1;  // talks to a stage that does not exist
          if (!rendezvous) {
            if (is_send) {
              sent[key] = clock[s];
            } else {
              auto it = sent.find(key);
              if (it == sent.end()) break;
              clock[s] = std::max(clock[s], it->second);
              sent.erase(it);
            }
          } else {
            if (!is_send) break;  // a receive completes from its sender's side
            if (pc[peer] >= stages[peer].size()) return -1;
            auto [peer_sends, peer_key] = message(peer, stages[peer][pc[peer]]);
            if (peer_sends || peer_key != key) break;
            double t = std::max(clock[s], clock[peer]);
            clock[s] = clock[peer] = t;
            ++pc[peer];
          }
        }
        ++pc[s];
        progressed = true;
      }
      if (pc[s] < stages[s].size()) done = false;
    }
    if (done) break;
    if (!progressed) return -1;
  }
  if (!sent.empty()) return -1;  // a message nobody received
  double makespan = *std::max_element(clock.begin(), clock.end());
  return 1.0 - busy / (p * makespan);
}

std::vector<Action> Parse(const std::string& text) {
  std::vector<Action> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(' ', pos);
    if (end == std::string::npos) end = text.size();
    std::string tok = text.substr(pos, end - pos);
    size_t digits = tok.find_first_of("0123456789");
    std::string name = tok.substr(0, digits);
    static const std::map<std::string, ActionType> kTypes = {
        {"RA", ActionType::kRecvActivation}, {"F", ActionType::kForward},   {"SA", ActionType::kSendActivation},
        {"RG", ActionType::kRecvGrad},       {"B", ActionType::kBackward}, {"SG", ActionType::kSendGrad}};
    out.push_back(Action{kTypes.at(name), std::stoi(tok.substr(digits))});
    pos = end + 1;
  }
  return out;
}

TEST(ScheduleTest, GpipeExactSequences) {
  EXPECT_EQ(ScheduleString(BuildSchedule(ScheduleKind::kGpipe, 0, 2, 3).value()),
            "F0 SA0 F1 SA1 F2 SA2 RG0 B0 RG1 B1 RG2 B2");
  EXPECT_EQ(ScheduleString(BuildSchedule(ScheduleKind::kGpipe, 1, 2, 3).value()),
            "RA0 F0 RA1 F1 RA2 F2 B0 SG0 B1 SG1 B2 SG2");
  EXPECT_EQ(ScheduleString(BuildSchedule(ScheduleKind::kGpipe, 1, 3, 2).value()),
            "RA0 F0 SA0 RA1 F1 SA1 RG0 B0 SG0 RG1 B1 SG1");
  EXPECT_EQ(ScheduleString(BuildSchedule(ScheduleKind::kGpipe, 0, 1, 2).value()), "F0 F1 B0 B1");
}

TEST(ScheduleTest, OneFOneBExactSequences) {
  // P = 3, m = 4: stage 0 warms up with 2 forwards, stage 1 with 1, stage 2 with none.
  EXPECT_EQ(ScheduleString(BuildSchedule(ScheduleKind::kOneFOneB, 0, 3, 4).value()),
            "F0 SA0 F1 SA1 F2 RG0 SA2 B0 F3 RG1 SA3 B1 RG2 B2 RG3 B3");
  EXPECT_EQ(ScheduleString(BuildSchedule(ScheduleKind::kOneFOneB, 1, 3, 4).value()),
            "RA0 F0 SA0 RA1 F1 RG0 SA1 B0 SG0 RA2 F2 RG1 SA2 B1 SG1 RA3 F3 RG2 SA3 B2 SG2 RG3 B3 SG3");
  EXPECT_EQ(ScheduleString(BuildSchedule(ScheduleKind::kOneFOneB, 2, 3, 4).value()),
            "RA0 F0 B0 SG0 RA1 F1 B1 SG1 RA2 F2 B2 SG2 RA3 F3 B3 SG3");
  // Fewer micro-batches than the warm-up: all forwards, then all backwards.
  EXPECT_EQ(ScheduleString(BuildSchedule(ScheduleKind::kOneFOneB, 0, 4, 2).value()),
            "F0 SA0 F1 SA1 RG0 B0 RG1 B1");
}

TEST(ScheduleTest, InvariantsAndPeakInFlight) {
  for (ScheduleKind kind : {ScheduleKind::kGpipe, ScheduleKind::kOneFOneB}) {
    for (int p = 1; p <= 6; ++p) {
      for (int m = 1; m <= 12; ++m) {
        for (int s = 0; s < p; ++s) {
          std::vector<Action> acts = BuildSchedule(kind, s, p, m).value();
          SCOPED_TRACE(::testing::Message() << ScheduleKindName(kind) << " P=" << p << " m=" << m << " s=" << s
                                            << ": " << ScheduleString(acts));
          // position of each action; every expected action exactly once, nothing else
          std::map<std::pair<ActionType, int>, int> at;
          for (int i = 0; i < static_cast<int>(acts.size()); ++i) {
            ASSERT_TRUE(at.emplace(std::make_pair(acts[i].type, acts[i].micro_batch), i).second);
            ASSERT_GE(acts[i].micro_batch, 0);
            ASSERT_LT(acts[i].micro_batch, m);
          }
          const bool first = s == 0, last = s == p - 1;
          int per_mb = 2 + (first ? 0 : 2) + (last ? 0 : 2);
          ASSERT_EQ(static_cast<int>(acts.size()), per_mb * m);
          for (int i = 0; i < m; ++i) {
            auto pos = [&](ActionType t) { return at.at({t, i}); };
            EXPECT_LT(pos(ActionType::kForward), pos(ActionType::kBackward));
            if (!first) EXPECT_LT(pos(ActionType::kRecvActivation), pos(ActionType::kForward));
            if (!first) EXPECT_GT(pos(ActionType::kSendGrad), pos(ActionType::kBackward));
            if (!last) EXPECT_GT(pos(ActionType::kSendActivation), pos(ActionType::kForward));
            if (!last) EXPECT_LT(pos(ActionType::kRecvGrad), pos(ActionType::kBackward));
            if (i > 0) {  // micro-batches in order within each kind of action
              EXPECT_LT(at.at({ActionType::kForward, i - 1}), pos(ActionType::kForward));
              EXPECT_LT(at.at({ActionType::kBackward, i - 1}), pos(ActionType::kBackward));
            }
          }
          EXPECT_EQ(PeakInFlight(acts), kind == ScheduleKind::kGpipe ? m : std::min(p - s, m));
        }
      }
    }
  }
}

TEST(ScheduleTest, AllStagesCompleteBufferedAndRendezvousWithTheoreticalBubble) {
  for (ScheduleKind kind : {ScheduleKind::kGpipe, ScheduleKind::kOneFOneB}) {
    for (int p = 1; p <= 8; ++p) {
      for (int m = 1; m <= 16; ++m) {
        SCOPED_TRACE(::testing::Message() << ScheduleKindName(kind) << " P=" << p << " m=" << m);
        Schedules stages = AllStages(kind, p, m);
        double buffered = Simulate(stages, /*rendezvous=*/false);
        double rendezvous = Simulate(stages, /*rendezvous=*/true);
        ASSERT_GE(buffered, 0.0) << "deadlock with buffered sends";
        ASSERT_GE(rendezvous, 0.0) << "deadlock with rendezvous sends";
        double theory = static_cast<double>(p - 1) / (m + p - 1);
        EXPECT_NEAR(buffered, theory, 1e-12);
      }
    }
  }
}

TEST(ScheduleTest, SimulatorDetectsTheTextbookDeadlock) {
  // 1F1B with SendActivation before RecvGrad in the steady state: under
  // rendezvous sends both stages of P = 2 send first and wait on each other.
  Schedules textbook = {Parse("F0 SA0 F1 SA1 RG0 B0 RG1 B1"), Parse("RA0 F0 B0 SG0 RA1 F1 B1 SG1")};
  EXPECT_GE(Simulate(textbook, false), 0.0);
  EXPECT_LT(Simulate(textbook, true), 0.0);
  Schedules steady = {Parse("F0 SA0 F1 SA1 RG0 B0 F2 SA2 RG1 B1 RG2 B2"),
                      Parse("RA0 F0 B0 SG0 RA1 F1 B1 SG1 RA2 F2 B2 SG2")};
  EXPECT_GE(Simulate(steady, false), 0.0);
  EXPECT_LT(Simulate(steady, true), 0.0);
  Schedules unmatched = {Parse("F0 SA0 B0"), Parse("F0 B0")};
  EXPECT_LT(Simulate(unmatched, false), 0.0);
}

TEST(ScheduleTest, Errors) {
  EXPECT_EQ(BuildSchedule(ScheduleKind::kGpipe, 2, 2, 4).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BuildSchedule(ScheduleKind::kGpipe, -1, 2, 4).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BuildSchedule(ScheduleKind::kOneFOneB, 0, 0, 4).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BuildSchedule(ScheduleKind::kOneFOneB, 0, 2, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseScheduleKind("1f1b").value(), ScheduleKind::kOneFOneB);
  EXPECT_EQ(ParseScheduleKind("gpipe").value(), ScheduleKind::kGpipe);
  EXPECT_EQ(ParseScheduleKind("zb-h1").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringmaster::engine::parallel

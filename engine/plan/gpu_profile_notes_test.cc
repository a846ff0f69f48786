// bench/GPU_NOTES.md's predicted-profile section is what the plan prints now,
// and rewriting it leaves the rest of the file alone.
#include <fstream>
#include <sstream>

#include "engine/plan/plan_notes.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::plan {
namespace {

TEST(GpuProfileNotesTest, TheCommittedSectionIsWhatThePlanPrints) {
  std::ifstream in("bench/GPU_NOTES.md");
  ASSERT_TRUE(in) << "bench/GPU_NOTES.md is missing";
  std::stringstream document;
  document << in.rdbuf();
  absl::StatusOr<std::string> section = PredictedProfileSection({});
  ASSERT_TRUE(section.ok()) << section.status();
  EXPECT_EQ(ProfileSectionOf(document.str()), *section)
      << "bench/GPU_NOTES.md is stale: run `bazel run //engine/plan:gpu_profile_notes -- --update`";
}

TEST(GpuProfileNotesTest, TheSectionNamesBothDesignsAndEveryClassThatHasWork) {
  absl::StatusOr<std::string> section = PredictedProfileSection({});
  ASSERT_TRUE(section.ok()) << section.status();
  for (const char* want :
       {"Micro-batch 16 (16384 tokens", "Micro-batch 64 (65536 tokens", "| GEMMs |", "| attention |",
        "| conversions, rounding |", "| weight copies |", "**peak, micro-batch 16**", "classifier forward GEMM"}) {
    EXPECT_NE(section->find(want), std::string::npos) << want;
  }
}

TEST(GpuProfileNotesTest, ReplacingKeepsTheRestOfTheFile) {
  const std::string other = "# GPU notes\n\n<!-- kernel-resources:begin -->\nx\n<!-- kernel-resources:end -->\n";
  const std::string section = std::string(kProfileBegin) + "\nA\n" + std::string(kProfileEnd) + "\n";
  const std::string appended = ReplaceProfileSection(other, section);
  EXPECT_EQ(appended, other + "\n" + section);
  EXPECT_EQ(ProfileSectionOf(appended), section);
  const std::string changed = std::string(kProfileBegin) + "\nB\n" + std::string(kProfileEnd) + "\n";
  const std::string replaced = ReplaceProfileSection(appended + "tail\n", changed);
  EXPECT_EQ(replaced, other + "\n" + changed + "tail\n");
  EXPECT_EQ(ReplaceProfileSection(replaced, changed), replaced);
  EXPECT_EQ(ProfileSectionOf(other), "");
}

}  // namespace
}  // namespace ringmaster::engine::plan

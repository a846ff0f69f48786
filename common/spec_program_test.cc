// Program jobs (JobSpec.program) in the spec: parsing, defaults, the
// working directory taken against the spec file's, and every refusal naming
// its field.
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster {
namespace {

using ::testing::HasSubstr;

constexpr char kProgram[] = R"(
program:
  command: [python3, train.py, --epochs, "2"]
  working_dir: code
  env: {OMP_NUM_THREADS: "1"}
resources: {ranks_per_node: 2, device: cpu}
restart: {max_restarts: 2}
)";

v1::JobSpec Parsed(const std::string& yaml) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(yaml, SpecFormat::kYaml);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : v1::JobSpec();
}

void ExpectInvalid(const v1::JobSpec& spec, const std::string& message) {
  const absl::Status s = ValidateJobSpec(spec);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr(message));
}

TEST(ProgramSpecTest, ParsesAndTakesOnlyTheDefaultsThatApply) {
  v1::JobSpec spec = Parsed(kProgram);
  spec.mutable_program()->set_working_dir("/srv/code");
  ApplyDefaults(&spec);
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  EXPECT_EQ(spec.program().command_size(), 4);
  EXPECT_EQ(spec.program().env().at("OMP_NUM_THREADS"), "1");
  EXPECT_FALSE(spec.has_model());  // nothing of the built-in trainer
  EXPECT_FALSE(spec.has_data());
  EXPECT_FALSE(spec.has_optimizer());
  EXPECT_EQ(spec.parallelism().data(), 2);  // informational: the world size
  EXPECT_EQ(spec.checkpoint().keep(), 3);
  EXPECT_EQ(spec.restart().progress_timeout_seconds(), 600);
}

TEST(ProgramSpecTest, ARelativeWorkingDirIsTheSpecFilesDirectorys) {
  const std::string dir = ::testing::TempDir();
  const std::string path = absl::StrCat(dir, "/job.yaml");
  std::ofstream(path) << kProgram;
  absl::StatusOr<v1::JobSpec> spec = LoadJobSpecFile(path);
  ASSERT_TRUE(spec.ok()) << spec.status();
  std::string expected = absl::StrCat(dir, "/code");
  while (expected.find("//") != std::string::npos) expected.replace(expected.find("//"), 2, "/");
  EXPECT_EQ(spec->program().working_dir(), expected);
}

TEST(ProgramSpecTest, RefusalsNameTheField) {
  v1::JobSpec spec = Parsed(kProgram);
  spec.mutable_program()->set_working_dir("/srv/code");

  v1::JobSpec with_model = spec;
  with_model.mutable_model()->mutable_mlp();
  ExpectInvalid(with_model, "model: a program job runs its own code");

  v1::JobSpec no_command = spec;
  no_command.mutable_program()->clear_command();
  ExpectInvalid(no_command, "program.command: required");

  v1::JobSpec empty_program = spec;
  empty_program.mutable_program()->set_command(0, "");
  ExpectInvalid(empty_program, "program.command[0]: the program must not be empty");

  v1::JobSpec nul = spec;
  nul.mutable_program()->set_command(1, std::string("a\0b", 3));
  ExpectInvalid(nul, "program.command[1]: holds a NUL byte");

  v1::JobSpec relative = spec;
  relative.mutable_program()->set_working_dir("code");
  ExpectInvalid(relative, "program.working_dir: must be an absolute path");

  v1::JobSpec owned = spec;
  (*owned.mutable_program()->mutable_env())["MASTER_PORT"] = "1";
  ExpectInvalid(owned, "program.env.MASTER_PORT: set by the worker");

  v1::JobSpec owned_in_spec_env = spec;
  (*owned_in_spec_env.mutable_env())["RANK"] = "0";
  ExpectInvalid(owned_in_spec_env, "env.RANK: set by the worker");
}

}  // namespace
}  // namespace ringmaster

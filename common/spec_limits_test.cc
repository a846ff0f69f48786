// The bounds of common/spec_limits.h: each is refused one past the limit with
// INVALID_ARGUMENT naming the field, and accepted at the limit; errors never
// repeat a huge input; a spec mapping of 200,000 labels parses in linear time.

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "common/spec.h"
#include "common/spec_limits.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/job_spec.pb.h"

namespace ringmaster {
namespace {

v1::JobSpec Valid() {
  v1::JobSpec spec;
  spec.mutable_model()->mutable_mlp();
  spec.mutable_data()->set_dataset(v1::DataSpec::SYNTHETIC);
  ApplyDefaults(&spec);
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  return spec;
}

void ExpectRefused(const v1::JobSpec& spec, const std::string& message) {
  const absl::Status status = ValidateJobSpec(spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_EQ(std::string(status.message()), message);
}

void AddLabels(google::protobuf::Map<std::string, std::string>* map, int n, size_t value_bytes = 1) {
  for (int i = 0; i < n; ++i) (*map)[absl::StrFormat("k%06d", i)] = std::string(value_bytes, 'v');
}

TEST(SpecLimitsTest, Labels) {
  v1::JobSpec spec = Valid();
  AddLabels(spec.mutable_labels(), kMaxLabels, kMaxLabelValueBytes);
  EXPECT_TRUE(ValidateJobSpec(spec).ok());
  AddLabels(spec.mutable_labels(), kMaxLabels + 1);
  ExpectRefused(spec, "labels: at most 64 labels, got 65");
  spec = Valid();
  AddLabels(spec.mutable_labels(), 66000);
  ExpectRefused(spec, "labels: at most 64 labels, got 66000");
  spec = Valid();
  (*spec.mutable_labels())[std::string(64, 'k')] = "v";
  ExpectRefused(spec, absl::StrCat("labels: key \"", std::string(64, 'k'),
                                   "\" must be 1 to 63 characters of [A-Za-z0-9._/-]"));
  spec = Valid();
  (*spec.mutable_labels())["team"] = std::string(256, 'v');
  ExpectRefused(spec, "labels.team: value longer than 255 characters");
}

TEST(SpecLimitsTest, NodeSelector) {
  v1::JobSpec spec = Valid();
  AddLabels(spec.mutable_resources()->mutable_node_selector(), kMaxNodeSelectorEntries);
  EXPECT_TRUE(ValidateJobSpec(spec).ok());
  AddLabels(spec.mutable_resources()->mutable_node_selector(), kMaxNodeSelectorEntries + 1);
  ExpectRefused(spec, "resources.node_selector: at most 32 entries, got 33");
}

TEST(SpecLimitsTest, Env) {
  v1::JobSpec spec = Valid();
  for (int i = 0; i < kMaxEnvVariables; ++i) (*spec.mutable_env())[absl::StrCat("NCCL_X", i)] = "1";
  EXPECT_TRUE(ValidateJobSpec(spec).ok());
  (*spec.mutable_env())["NCCL_ONE_MORE"] = "1";
  ExpectRefused(spec, "env: at most 64 variables, got 65");
  spec = Valid();
  (*spec.mutable_env())[std::string(kMaxEnvNameBytes, 'N')] = "1";
  EXPECT_TRUE(ValidateJobSpec(spec).ok());
  spec = Valid();
  (*spec.mutable_env())[std::string(kMaxEnvNameBytes + 1, 'N')] = "1";
  ExpectRefused(spec, absl::StrCat("env: name \"", std::string(64, 'N'), "... (256 bytes)\" longer than 255 bytes"));
  spec = Valid();
  (*spec.mutable_env())["NCCL_DEBUG"] = std::string(kMaxEnvValueBytes + 1, 'x');
  ExpectRefused(spec, "env.NCCL_DEBUG: value longer than 4096 bytes");
}

TEST(SpecLimitsTest, Paths) {
  v1::JobSpec spec = Valid();
  spec.mutable_data()->set_dataset(v1::DataSpec::FASHION_MNIST);
  spec.mutable_data()->clear_synthetic_samples();
  spec.mutable_data()->set_path("/" + std::string(kMaxPathBytes - 1, 'd'));
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  spec.mutable_data()->set_path("/" + std::string(kMaxPathBytes, 'd'));
  ExpectRefused(spec, "data.path: at most 4096 bytes, got 4097");
  spec.mutable_data()->set_path(std::string("/data\0x", 7));
  ExpectRefused(spec, "data.path: holds a NUL byte");
  spec.mutable_data()->set_path(std::string(100000, 'd'));  // relative and long: the error stays short
  ExpectRefused(spec, "data.path: at most 4096 bytes, got 100000");

  spec = Valid();
  spec.mutable_checkpoint()->set_directory("/" + std::string(kMaxPathBytes - 1, 'c'));
  EXPECT_TRUE(ValidateJobSpec(spec).ok());
  spec.mutable_checkpoint()->set_directory("/" + std::string(kMaxPathBytes, 'c'));
  ExpectRefused(spec, "checkpoint.directory: at most 4096 bytes, got 4097");
}

TEST(SpecLimitsTest, ErrorsDoNotRepeatHugeInput) {
  v1::JobSpec spec = Valid();
  spec.set_name(std::string(1 << 20, '-'));
  const absl::Status status = ValidateJobSpec(spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LT(status.message().size(), 300u) << status.message().substr(0, 300);
  spec = Valid();
  (*spec.mutable_labels())[std::string(1 << 20, '!')] = "v";
  EXPECT_LT(ValidateJobSpec(spec).message().size(), 300u);
}

TEST(SpecLimitsTest, WholeSpecNamesItsLargestPart) {
  v1::JobSpec spec = Valid();
  // Every part within its own bounds, the whole over 256 KiB: 200,000 hidden sizes.
  for (int i = 0; i < 200000; ++i) spec.mutable_model()->mutable_mlp()->add_hidden_sizes(1000);
  const absl::Status status = ValidateJobSpec(spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(status.message(), absl::StrCat("spec: ", spec.ByteSizeLong(),
                                                              " bytes serialized, more than the 262144 (256 KiB) "
                                                              "a job spec may hold; its largest part is model (")))
      << status;
  // Labels, node selector and paths at their limits fit together with
  // sixteen of the longest environment values; the whole bound holds on top
  // of the parts' bounds (64 values of 4096 bytes do not fit).
  spec = Valid();
  AddLabels(spec.mutable_labels(), kMaxLabels, kMaxLabelValueBytes);
  AddLabels(spec.mutable_resources()->mutable_node_selector(), kMaxNodeSelectorEntries, kMaxLabelValueBytes);
  spec.mutable_checkpoint()->set_directory("/" + std::string(kMaxPathBytes - 1, 'c'));
  for (int i = 0; i < 16; ++i) (*spec.mutable_env())[absl::StrCat("NCCL_X", i)] = std::string(kMaxEnvValueBytes, 'x');
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  for (int i = 16; i < kMaxEnvVariables; ++i) {
    (*spec.mutable_env())[absl::StrCat("NCCL_X", i)] = std::string(kMaxEnvValueBytes, 'x');
  }
  EXPECT_THAT(std::string(ValidateJobSpec(spec).message()), testing::HasSubstr("; its largest part is env ("));
}

// Each entry of a mapping used to be compared with every earlier one: 66,000
// labels took minutes in `ringmaster submit`, 200,000 would run past this
// test's timeout; linear, they take well under a second.
TEST(SpecLimitsTest, AMappingOf200000LabelsParses) {
  std::string json = R"({"model": {"mlp": {}}, "data": {"dataset": "synthetic"}, "labels": {)";
  for (int i = 0; i < 200000; ++i) absl::StrAppend(&json, i == 0 ? "" : ",", "\"k", i, "\": \"vvvvvvvvvvvvvvvv\"");
  json += "}}";
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(json, SpecFormat::kJson);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->labels_size(), 200000);
  ExpectRefused(*spec, "labels: at most 64 labels, got 200000");
}

}  // namespace
}  // namespace ringmaster

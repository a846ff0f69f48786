// Bad job specs: every kind of mistake gets INVALID_ARGUMENT and one exact
// message naming the field path and the reason.

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/spec.h"
#include "gtest/gtest.h"
#include "proto/job_spec.pb.h"

namespace ringmaster {
namespace {

// A valid spec (checked below); most cases add one line to it.
constexpr char kBase[] = "model: {mlp: {}}\ndata: {dataset: fashion_mnist}\n";

// Parse, default and validate, as the CLI and the coordinator do.
absl::Status Check(const std::string& text, SpecFormat format = SpecFormat::kYaml) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(text, format);
  if (!spec.ok()) return spec.status();
  ApplyDefaults(&*spec);
  return ValidateJobSpec(*spec);
}

struct BadSpec {
  const char* name;  // test name
  std::string text;  // YAML unless json
  const char* message;
  bool json = false;
};

class BadSpecTest : public testing::TestWithParam<BadSpec> {};

TEST_P(BadSpecTest, IsRejectedWithItsMessage) {
  const BadSpec& bad = GetParam();
  const absl::Status status = Check(bad.text, bad.json ? SpecFormat::kJson : SpecFormat::kYaml);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_EQ(std::string(status.message()), bad.message);
}

std::string Base(absl::string_view extra) { return absl::StrCat(kBase, extra, "\n"); }
// An MLP spec with its own data line.
std::string Mlp(absl::string_view data) { return absl::StrCat("model: {mlp: {}}\n", data, "\n"); }

const std::vector<BadSpec>& BadSpecs() {
  static const auto* specs = new std::vector<BadSpec>{
      // --- syntax ---
      {"MalformedYaml", "model: {mlp: {}\ndata: x\n",
       "malformed YAML at line 2, column 1: end of map flow not found"},
      {"MalformedJson", "{\"model\": {\"mlp\": {}},\n \"data\": {\"dataset\": \"text\",}}",
       "malformed JSON at line 2, column 29: syntax error while parsing object key - unexpected '}'; expected string "
       "literal",
       true},
      {"JsonTrailingGarbage", "{\"model\": {}} x",
       "malformed JSON at line 1, column 15: syntax error while parsing value - invalid literal; last read: "
       "'\"model\": {}} x'; expected end of input",
       true},
      {"EmptyDocument", "# nothing here\n", "job spec: the document is empty"},
      {"AliasBomb",
       "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
       "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, "
       "*c, *c]\ne: [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n",
       "malformed YAML: the document expands to more than 100000 values"},
      {"TopLevelList", "- model\n- data\n",
       "job spec: expected a mapping, got a list (line 1, column 1)"},
      // --- structure and types ---
      {"UnknownField", "modle: {mlp: {}}\n", "modle: unknown field (line 1, column 1)"},
      {"UnknownNestedField", Base("optimizer: {lr: 0.1, learning_rate: 0.2}"),
       "optimizer.learning_rate: unknown field (line 3, column 22)"},
      {"NumberExpected", Base("optimizer: {lr: fast}"),
       "optimizer.lr: expected a number, got \"fast\" (line 3, column 17)"},
      {"IntegerExpected", Base("resources: {nodes: 1.5}"),
       "resources.nodes: expected an integer, got 1.5 (line 3, column 20)"},
      {"IntegerOutOfRange", Base("resources: {nodes: 3000000000}"),
       "resources.nodes: expected an integer in [-2147483648, 2147483647], got 3000000000 "
       "(line 3, column 20)"},
      {"NegativeUnsigned", Base("seed: -1"),
       "seed: expected an integer in [0, 18446744073709551615], got -1 (line 3, column 7)"},
      {"BoolExpected", Base("parallelism: {zero1: maybe}"),
       "parallelism.zero1: expected true or false, got \"maybe\" (line 3, column 22)"},
      {"MappingExpected", "model: mlp\n",
       "model: expected a mapping, got \"mlp\" (line 1, column 8)"},
      {"ListExpected", "model: {mlp: {hidden_sizes: 128}}\n",
       "model.mlp.hidden_sizes: expected a list, got 128 (line 1, column 29)"},
      {"ListItemType", "model: {mlp: {hidden_sizes: [64, wide]}}\n",
       "model.mlp.hidden_sizes[1]: expected an integer, got \"wide\" (line 1, column 34)"},
      {"MapValueType", Base("labels: {team: [a, b]}"),
       "labels.team: expected a string, got a list (line 3, column 16)"},
      {"UnknownEnumValue", Base("optimizer: {type: adam}"),
       "optimizer.type: unknown value \"adam\"; expected one of sgd, adamw, lars, lamb "
       "(line 3, column 19)"},
      {"UnknownEnumValueWithAlias", Base("parallelism: {schedule: pipedream}"),
       "parallelism.schedule: unknown value \"pipedream\"; expected one of gpipe, 1f1b "
       "(line 3, column 25)"},
      {"DuplicateField", Base("optimizer: {lr: 0.1}\noptimizer: {lr: 0.2}"),
       "optimizer: duplicate field (line 4, column 1)"},
      {"DuplicateFieldCamelCase", "model: {mlp: {}}\ndata: {batch_size: 8, batchSize: 16}\n",
       "data.batch_size: duplicate field (line 2, column 23)"},
      {"DuplicateMapKey", Base("labels: {team: a, team: b}"),
       "labels.team: duplicate key (line 3, column 19)"},
      {"TwoModels", "model: {mlp: {}, cnn: {}}\ndata: {dataset: fashion_mnist}\n",
       "model: set only one of mlp, cnn, gpt (got mlp and cnn) (line 1, column 18)"},
      {"StepsAndEpochs", Base("training: {steps: 10, epochs: 1}"),
       "training: set only one of steps, epochs (got steps and epochs) (line 3, column 23)"},
      {"JsonWrongType",
       "{\"model\": {\"mlp\": {}}, \"data\": {\"dataset\": \"fashion_mnist\",\n"
       "  \"batchSize\": \"sixty-four\"}}",
       "data.batch_size: expected an integer, got \"sixty-four\" (line 2, column 16)", true},
      // --- required ---
      {"MissingModel", "data: {dataset: fashion_mnist}\n",
       "model: required; set one of mlp, cnn, gpt"},
      {"MissingDataset", "model: {mlp: {}}\n",
       "data.dataset: required; one of fashion_mnist, text, synthetic"},
      {"StepScheduleWithoutStepSize", Base("lr_schedule: {type: step}"),
       "lr_schedule.step_size: required for the step schedule"},
      {"ScalingRuleWithoutReference", Base("lr_schedule: {scaling_rule: sqrt}"),
       "lr_schedule.reference_batch_size: required with the sqrt scaling rule"},
      // --- ranges ---
      {"ZeroNodes", Base("resources: {nodes: 0}"), "resources.nodes: must be >= 1, got 0"},
      {"CudaGraphsValue", Base("resources: {cuda_graphs: sometimes}"),
       "resources.cuda_graphs: one of auto, on, off; got \"sometimes\""},
      {"TooManyNodes", Base("resources: {nodes: 5000}"),
       "resources.nodes: must be <= 4096, got 5000"},
      {"NegativeLr", Base("optimizer: {lr: -0.1}"), "optimizer.lr: must be > 0, got -0.1"},
      {"ZeroBatch", Mlp("data: {dataset: fashion_mnist, batch_size: 0}"),
       "data.batch_size: must be >= 1, got 0"},
      {"ZeroKeep", Base("checkpoint: {keep: 0}"), "checkpoint.keep: must be >= 1, got 0"},
      {"CheckpointIntervalWord", Base("checkpoint: {interval: often}"),
       "checkpoint.interval: must be \"auto\" (or left out), got \"often\""},
      {"CheckpointIntervalSecondsZero", Base("checkpoint: {interval_seconds: 0}"),
       "checkpoint.interval_seconds: must be in (0, 1073741824] seconds, got 0"},
      {"CheckpointTwoIntervals", Base("checkpoint: {interval_steps: 100, interval: auto}"),
       "checkpoint.interval: set at most one of checkpoint.interval_steps, interval_seconds and interval; "
       "checkpoint.interval_steps is set too"},
      {"CheckpointStepsAndSeconds", Base("checkpoint: {interval_steps: 100, interval_seconds: 30}"),
       "checkpoint.interval_seconds: set at most one of checkpoint.interval_steps, interval_seconds and interval; "
       "checkpoint.interval_steps is set too"},
      {"GrowthFactorOne", Base("precision: {compute: fp16, loss_scale: {growth_factor: 1}}"),
       "precision.loss_scale.growth_factor: must be > 1, got 1"},
      {"BackoffOutOfRange", Base("precision: {compute: fp16, loss_scale: {backoff_factor: 1.5}}"),
       "precision.loss_scale.backoff_factor: must be in (0, 1), got 1.5"},
      {"BetaOne", Base("optimizer: {betas: [0.9, 1.0]}"),
       "optimizer.betas[1]: must be in [0, 1), got 1"},
      {"ThreeBetas", Base("optimizer: {betas: [0.9, 0.99, 0.999]}"),
       "optimizer.betas: expected 2 values (beta1, beta2), got 3"},
      {"HoldoutTooLarge", Mlp("data: {dataset: fashion_mnist, holdout_fraction: 0.7}"),
       "data.holdout_fraction: must be in [0, 0.5], got 0.7"},
      {"ZeroHiddenSize", "model: {mlp: {hidden_sizes: [64, 0]}}\ndata: {dataset: fashion_mnist}\n",
       "model.mlp.hidden_sizes[1]: must be >= 1, got 0"},
      {"EvenKernel", "model: {cnn: {kernel_size: 4}}\ndata: {dataset: fashion_mnist}\n",
       "model.cnn.kernel_size: must be odd, got 4"},
      {"TooManyConvStages",
       "model: {cnn: {channels: [8, 8, 8, 8, 8]}}\ndata: {dataset: fashion_mnist}\n",
       "model.cnn.channels: at most 4 conv stages fit a 28x28 image, got 5"},
      {"PriorityOutOfRange", Base("priority: 5000"), "priority: must be <= 1000, got 5000"},
      {"BadName", Base("name: my job!"),
       "name: must be 1 to 63 characters of [A-Za-z0-9._-] starting with a letter or digit, "
       "got \"my job!\""},
      {"BadLabelKey", Base("labels: {\"team name\": x}"),
       "labels: key \"team name\" must be 1 to 63 characters of [A-Za-z0-9._/-]"},
      {"BadEnvName", Base("env: {\"NCCL DEBUG\": INFO}"),
       "env: name \"NCCL DEBUG\" must be [A-Za-z_][A-Za-z0-9_]*"},
      {"EnvTheWorkerOwns", Base("env: {CUDA_VISIBLE_DEVICES: \"0\"}"),
       "env.CUDA_VISIBLE_DEVICES: set by the worker for each rank; a job cannot override it"},
      {"RelativeDataPath", Mlp("data: {dataset: fashion_mnist, path: data/fmnist}"),
       "data.path: must be an absolute path, got \"data/fmnist\""},
      {"MinLrAboveLr", Base("optimizer: {lr: 0.1}\nlr_schedule: {type: cosine, min_lr: 0.5}"),
       "lr_schedule.min_lr: must be in [0, optimizer.lr (0.1)], got 0.5"},
      // --- options that do not apply ---
      {"LossScaleWithBf16", Base("precision: {compute: bf16, loss_scale: {initial_scale: 1024}}"),
       "precision.loss_scale: applies only to fp16 compute, not bf16"},
      {"MomentumWithAdamw", Base("optimizer: {type: adamw, momentum: 0.9}"),
       "optimizer.momentum: does not apply to adamw"},
      {"TrustCoefficientWithSgd", Base("optimizer: {type: sgd, trust_coefficient: 0.01}"),
       "optimizer.trust_coefficient: does not apply to sgd"},
      {"NesterovWithoutMomentum", Base("optimizer: {type: sgd, momentum: 0, nesterov: true}"),
       "optimizer.nesterov: needs momentum > 0"},
      {"GammaWithCosine", Base("lr_schedule: {type: cosine, gamma: 0.5}"),
       "lr_schedule.gamma: applies only to the step schedule, not cosine"},
      {"PathWithSynthetic", "model: {mlp: {}}\ndata: {dataset: synthetic, path: /tmp/x}\n",
       "data.path: does not apply to synthetic data"},
      // --- inconsistent ---
      {"LayoutMismatch",
       Base("parallelism: {data: 2, pipeline: 2}\nresources: {nodes: 1, ranks_per_node: 2}"),
       "parallelism: data (2) x pipeline (2) = 4 ranks, but resources give nodes (1) x "
       "ranks_per_node (2) = 2"},
      {"BatchNotDivisible",
       Mlp("data: {dataset: fashion_mnist, batch_size: 100}\nresources: {ranks_per_node: 3}"),
       "data.batch_size: global batch 100 is not divisible by data-parallel size (3) x "
       "micro-batches (1)"},
      {"BatchNotDivisibleByMicroBatches",
       Mlp("data: {dataset: fashion_mnist, batch_size: 10}\nparallelism: {micro_batches: 4}"),
       "data.batch_size: global batch 10 is not divisible by data-parallel size (1) x "
       "micro-batches (4)"},
      {"PipelineLongerThanModel", Base("parallelism: {pipeline: 4}"),
       "parallelism.pipeline: 4 stages, but the model has 3 blocks"},
      {"BadStageBoundaries", Base("parallelism: {pipeline: 3, stage_boundaries: [2, 2]}"),
       "parallelism.stage_boundaries: must be strictly increasing block indices in (0, 3), got "
       "[2, 2]"},
      {"StageBoundaryCount", Base("parallelism: {pipeline: 2, stage_boundaries: [1, 2]}"),
       "parallelism.stage_boundaries: expected pipeline - 1 = 1 block indices, got 2"},
      {"HeadsDoNotDivideWidth",
       "model: {gpt: {width: 100, heads: 3}}\ndata: {dataset: synthetic}\n",
       "model.gpt.heads: width (100) is not divisible by heads (3)"},
      {"TextOnMlp", "model: {mlp: {}}\ndata: {dataset: text}\n",
       "data.dataset: text needs a gpt model, got mlp"},
      {"FashionMnistOnGpt", "model: {gpt: {}}\ndata: {dataset: fashion_mnist}\n",
       "data.dataset: fashion_mnist needs an mlp or cnn model, got gpt"},
      {"SmallVocabularyOnText", "model: {gpt: {vocab_size: 100}}\ndata: {dataset: text}\n",
       "model.gpt.vocab_size: byte-level text needs at least 256, got 100"},
      {"WarmupLongerThanTraining", Base("training: {steps: 100}\nlr_schedule: {warmup_steps: 100}"),
       "lr_schedule.warmup_steps: must be less than training.steps (100), got 100; set a shorter warm-up, e.g. "
       "--set lr_schedule.warmup_steps=10"},
      {"MoveStragglersOneRank", Base("restart: {move_stragglers: true}"),
       "restart.move_stragglers: needs at least 2 ranks: a straggler is found by comparing ranks"},
      {"ElasticMinAboveMax", Base("restart: {elastic: {min_nodes: 4, max_nodes: 2}}"),
       "restart.elastic: min_nodes (4) > max_nodes (2)"},
      {"ElasticExcludesNodes",
       Base("resources: {nodes: 8}\nrestart: {elastic: {min_nodes: 2, max_nodes: 4}}"),
       "restart.elastic: resources.nodes (8) is outside [min_nodes (2), max_nodes (4)]"},
      {"ElasticBatchNotDivisible",
       Base("resources: {nodes: 4}\nrestart: {elastic: {min_nodes: 3}}"),
       "restart.elastic: with 3 nodes, global batch 64 is not divisible by data-parallel size "
       "(3) x micro-batches (1)"},
  };
  return *specs;
}

INSTANTIATE_TEST_SUITE_P(Specs, BadSpecTest, testing::ValuesIn(BadSpecs()),
                         [](const testing::TestParamInfo<BadSpec>& info) {
                           return std::string(info.param.name);
                         });

TEST(BadSpecs, BaseIsValidAndMessagesAreDistinct) {
  EXPECT_TRUE(Check(kBase).ok()) << Check(kBase);
  std::vector<std::string> messages;
  for (const BadSpec& bad : BadSpecs()) messages.push_back(bad.message);
  std::sort(messages.begin(), messages.end());
  EXPECT_EQ(std::adjacent_find(messages.begin(), messages.end()), messages.end());
  EXPECT_GE(messages.size(), 20u);
}

// --- --set overrides ---

struct BadOverride {
  const char* name;
  const char* assignment;
  const char* message;
};

class BadOverrideTest : public testing::TestWithParam<BadOverride> {};

TEST_P(BadOverrideTest, IsRejectedWithItsMessage) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(kBase, SpecFormat::kYaml);
  ASSERT_TRUE(spec.ok());
  const absl::Status status = ApplyOverride(&*spec, GetParam().assignment);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_EQ(std::string(status.message()), GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    Overrides, BadOverrideTest,
    testing::Values(
        BadOverride{"MissingEquals", "optimizer.lr",
                    "missing '=' in --set \"optimizer.lr\"; expected key.path=value"},
        BadOverride{"EmptyKey", "=3", "empty key in --set \"=3\"; expected key.path=value"},
        BadOverride{"UnknownPath", "optimizr.lr=0.1",
                    "optimizr: unknown field (in --set \"optimizr.lr=0.1\")"},
        BadOverride{"UnknownLeaf", "optimizer.learning_rate=0.1",
                    "optimizer.learning_rate: unknown field (in --set "
                    "\"optimizer.learning_rate=0.1\")"},
        BadOverride{"BadNumber", "optimizer.lr=fast",
                    "optimizer.lr: expected a number, got \"fast\" (in --set "
                    "\"optimizer.lr=fast\")"},
        BadOverride{"BadEnum", "precision.compute=fp8",
                    "precision.compute: unknown value \"fp8\"; expected one of fp32, tf32, fp16, "
                    "bf16 (in --set \"precision.compute=fp8\")"},
        BadOverride{"BadListItem", "model.mlp.hidden_sizes=64,x",
                    "model.mlp.hidden_sizes[1]: expected an integer, got \"x\" (in --set "
                    "\"model.mlp.hidden_sizes=64,x\")"},
        BadOverride{"MessageWithoutField", "optimizer=sgd",
                    "optimizer: is a message; set one of its fields (optimizer.<field>=value) "
                    "(in --set \"optimizer=sgd\")"},
        BadOverride{"InsideAScalar", "optimizer.lr.max=1",
                    "optimizer.lr.max: unknown field (optimizer.lr has no fields) (in --set "
                    "\"optimizer.lr.max=1\")"},
        BadOverride{"MapWithoutKey", "labels=x",
                    "labels: is a map; set one entry (labels.<key>=value) (in --set "
                    "\"labels=x\")"}),
    [](const testing::TestParamInfo<BadOverride>& info) { return std::string(info.param.name); });

// --- documents (found by fuzz/spec_fuzzer) ---

// yaml-cpp's LoadAll never returned on a lone "," (its parser reports empty
// documents forever); ParseJobSpec hung. It must answer.
TEST(BadDocuments, LoneCommaIsRejected) {
  for (const char* text : {",", ", model: {mlp: {}}\n"}) {
    const auto spec = ParseJobSpec(text, SpecFormat::kYaml);
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
}

TEST(BadDocuments, SecondDocumentIsRejected) {
  // kBase is two lines; the second document starts at its "---".
  const auto spec = ParseJobSpec(std::string(kBase) + "---\nname: two\n", SpecFormat::kYaml);
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(spec.status().message()),
            "malformed YAML at line 3, column 1: expected one document, found more than one");
}

// --- files ---

TEST(BadFiles, UnknownExtension) {
  const auto spec = LoadJobSpecFile("tests/data/specs/wrong_extension.txt");
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(spec.status().message()),
            "tests/data/specs/wrong_extension.txt: unknown job spec format; the file name must "
            "end in .yaml, .yml or .json");
}

TEST(BadFiles, MissingFileIsNotFound) {
  const auto spec = LoadJobSpecFile("tests/data/specs/no_such_spec.yaml");
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(std::string(spec.status().message()),
            "cannot open tests/data/specs/no_such_spec.yaml: No such file or directory");
}

TEST(BadFiles, ContentErrorsNameTheFile) {
  auto spec = LoadJobSpecFile("tests/data/specs/unknown_field.yaml");
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(spec.status().message()),
            "tests/data/specs/unknown_field.yaml: modle: unknown field (line 3, column 1)");
  spec = LoadJobSpecFile("tests/data/specs/invalid_nodes.json");
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(spec.status().message()),
            "tests/data/specs/invalid_nodes.json: resources.nodes: must be >= 1, got 0");
}

TEST(BadFiles, OverrideErrorsNameTheAssignment) {
  const auto spec = LoadJobSpecFile("examples/fashion_mnist_cnn.yaml", {"resources.nodes=two"});
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(spec.status().message()),
            "resources.nodes: expected an integer, got \"two\" (in --set "
            "\"resources.nodes=two\")");
}

}  // namespace
}  // namespace ringmaster

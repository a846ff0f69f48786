// Job specs that should load: the examples, YAML vs JSON, defaults, --set
// overrides. Bad input is in spec_errors_test.cc.

#include "common/spec.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "proto/job_spec.pb.h"

namespace ringmaster {
namespace {

using google::protobuf::util::MessageDifferencer;
using v1::DataSpec;
using v1::JobSpec;
using v1::OptimizerSpec;
using v1::ParallelismSpec;
using v1::PrecisionSpec;
using v1::ResourceSpec;

// Asserts equality and prints the differences when they differ.
void ExpectSameSpec(const JobSpec& a, const JobSpec& b) {
  std::string diff;
  MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differencer.Compare(a, b)) << diff;
}

JobSpec MustParse(const std::string& text, SpecFormat format = SpecFormat::kYaml) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(text, format);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : JobSpec();
}

constexpr char kMinimal[] = "model: {mlp: {}}\ndata: {dataset: fashion_mnist}\n";

TEST(Examples, EachLoadsAndValidates) {
  for (const char* path : {"examples/fashion_mnist_mlp.yaml", "examples/fashion_mnist_cnn.yaml",
                           "examples/gpt_text.yaml"}) {
    absl::StatusOr<JobSpec> spec = LoadJobSpecFile(path);
    ASSERT_TRUE(spec.ok()) << path << ": " << spec.status();
    EXPECT_TRUE(ValidateJobSpec(*spec).ok()) << path;
    // Every example runs on CPU, 2 data-parallel ranks on one node.
    EXPECT_EQ(spec->resources().device(), ResourceSpec::CPU) << path;
    EXPECT_EQ(spec->resources().nodes(), 1) << path;
    EXPECT_EQ(spec->resources().ranks_per_node(), 2) << path;
    EXPECT_EQ(spec->parallelism().data(), 2) << path;
  }
}

TEST(Examples, CarryTheirModelsAndData) {
  absl::StatusOr<JobSpec> cnn = LoadJobSpecFile("examples/fashion_mnist_cnn.yaml");
  ASSERT_TRUE(cnn.ok()) << cnn.status();
  EXPECT_EQ(cnn->name(), "fashion-mnist-cnn");
  EXPECT_EQ(cnn->model().cnn().channels_size(), 2);
  EXPECT_EQ(cnn->data().dataset(), DataSpec::FASHION_MNIST);
  EXPECT_EQ(cnn->optimizer().type(), OptimizerSpec::SGD);
  EXPECT_EQ(cnn->training().epochs(), 3);

  absl::StatusOr<JobSpec> gpt = LoadJobSpecFile("examples/gpt_text.yaml");
  ASSERT_TRUE(gpt.ok()) << gpt.status();
  EXPECT_EQ(gpt->model().gpt().vocab_size(), 256);
  EXPECT_EQ(gpt->data().dataset(), DataSpec::TEXT);
  EXPECT_EQ(gpt->data().path(), "/usr/local/share/ringmaster/kjv.txt");
  EXPECT_EQ(gpt->parallelism().schedule(), ParallelismSpec::ONE_F_ONE_B);  // "1f1b"
  EXPECT_EQ(ModelBlockCount(gpt->model()), 6);
}

TEST(Formats, YamlAndJsonFilesGiveTheSameSpec) {
  absl::StatusOr<JobSpec> yaml = LoadJobSpecFile("examples/fashion_mnist_cnn.yaml");
  absl::StatusOr<JobSpec> json = LoadJobSpecFile("tests/data/specs/fashion_mnist_cnn.json");
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  ASSERT_TRUE(json.ok()) << json.status();
  ExpectSameSpec(*yaml, *json);
}

TEST(Formats, YamlAndJsonTextGiveTheSameSpec) {
  const JobSpec from_yaml = MustParse(R"(
name: same
model:
  gpt: {layers: 2, heads: 2, width: 64}
data:
  dataset: synthetic
  batch_size: 16
training: {steps: 50}
optimizer: {type: lamb, betas: [0.9, 0.98]}
parallelism: {pipeline: 2, schedule: gpipe, stage_boundaries: [2]}
labels: {team: nlp, tier: "1"}
)");
  const JobSpec from_json = MustParse(R"({
  "name": "same",
  "model": {"gpt": {"layers": 2, "heads": 2, "width": 64}},
  "data": {"dataset": "SYNTHETIC", "batchSize": 16},
  "training": {"steps": "50"},
  "optimizer": {"type": "LAMB", "betas": [0.9, 0.98]},
  "parallelism": {"pipeline": 2, "schedule": "GPIPE", "stageBoundaries": [2]},
  "labels": {"team": "nlp", "tier": "1"}
})",
                                      SpecFormat::kJson);
  ExpectSameSpec(from_yaml, from_json);
  EXPECT_EQ(from_yaml.training().steps(), 50);
  EXPECT_EQ(from_yaml.labels().at("tier"), "1");
  EXPECT_EQ(from_yaml.parallelism().stage_boundaries(0), 2);
}

TEST(Formats, MatchesProtobufsOwnJsonParser) {
  const std::string json = R"({"name": "x", "model": {"cnn": {"channels": [8]}},
    "data": {"dataset": "fashion_mnist", "batchSize": 32, "holdoutFraction": 0.25},
    "optimizer": {"type": "adamw", "betas": [0.8, 0.9]},
    "precision": {"compute": "fp16", "lossScale": {"growthInterval": 100}},
    "resources": {"nodes": 2, "device": "cuda", "nodeSelector": {"gpu": "h100"}},
    "restart": {"elastic": {"minNodes": 1}}, "seed": 42, "priority": -5})";
  google::protobuf::util::JsonParseOptions options;
  options.case_insensitive_enum_parsing = true;
  JobSpec expected;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &expected, options).ok());
  ExpectSameSpec(MustParse(json, SpecFormat::kJson), expected);
}

TEST(Formats, EnumValuesByNameAnyCaseAliasOrNumber) {
  for (const char* value : {"1f1b", "1F1B", "one_f_one_b", "ONE_F_ONE_B", "2"}) {
    const JobSpec spec = MustParse(absl::StrCat(kMinimal, "parallelism: {schedule: ", value, "}"));
    EXPECT_EQ(spec.parallelism().schedule(), ParallelismSpec::ONE_F_ONE_B) << value;
  }
}

TEST(Formats, NullLeavesAFieldUnset) {
  const JobSpec spec = MustParse(absl::StrCat(kMinimal, "optimizer: {lr: null, momentum: ~}"));
  EXPECT_FALSE(spec.optimizer().has_lr());
  EXPECT_FALSE(spec.optimizer().has_momentum());
}

TEST(Formats, SpecFormatFollowsTheExtension) {
  EXPECT_EQ(*SpecFormatFromPath("a/job.yaml"), SpecFormat::kYaml);
  EXPECT_EQ(*SpecFormatFromPath("job.YML"), SpecFormat::kYaml);
  EXPECT_EQ(*SpecFormatFromPath("job.json"), SpecFormat::kJson);
}

TEST(Defaults, FillTheDocumentedValues) {
  JobSpec spec = MustParse(kMinimal);
  ApplyDefaults(&spec);
  EXPECT_EQ(spec.model().mlp().hidden_sizes_size(), 2);
  EXPECT_EQ(spec.model().mlp().hidden_sizes(0), 256);
  EXPECT_EQ(spec.model().mlp().hidden_sizes(1), 128);
  EXPECT_EQ(spec.data().path(), "/usr/share/datasets/fashion-mnist");
  EXPECT_EQ(spec.data().batch_size(), 64);
  EXPECT_EQ(spec.data().holdout_fraction(), 0.0);
  EXPECT_FALSE(spec.data().has_synthetic_samples());
  EXPECT_EQ(spec.training().epochs(), 1);
  EXPECT_EQ(spec.training().log_interval_steps(), 10);
  EXPECT_EQ(spec.optimizer().type(), OptimizerSpec::ADAMW);
  EXPECT_DOUBLE_EQ(spec.optimizer().lr(), 0.001);
  ASSERT_EQ(spec.optimizer().betas_size(), 2);
  EXPECT_DOUBLE_EQ(spec.optimizer().betas(1), 0.999);
  EXPECT_DOUBLE_EQ(spec.optimizer().eps(), 1e-8);
  EXPECT_DOUBLE_EQ(spec.optimizer().weight_decay(), 0.01);
  EXPECT_FALSE(spec.optimizer().has_momentum());  // does not apply to AdamW
  EXPECT_EQ(spec.lr_schedule().type(), v1::LrScheduleSpec::CONSTANT);
  EXPECT_EQ(spec.precision().compute(), PrecisionSpec::FP32);
  EXPECT_FALSE(spec.precision().has_loss_scale());
  EXPECT_EQ(spec.resources().nodes(), 1);
  EXPECT_EQ(spec.resources().ranks_per_node(), 1);
  EXPECT_EQ(spec.resources().device(), ResourceSpec::CUDA);
  EXPECT_EQ(spec.parallelism().data(), 1);
  EXPECT_EQ(spec.parallelism().pipeline(), 1);
  EXPECT_EQ(spec.parallelism().micro_batches(), 1);
  EXPECT_EQ(spec.parallelism().schedule(), ParallelismSpec::ONE_F_ONE_B);
  EXPECT_DOUBLE_EQ(spec.parallelism().bucket_size_mb(), 25.0);
  EXPECT_FALSE(spec.parallelism().zero1());
  EXPECT_FALSE(spec.checkpoint().has_interval_steps());
  EXPECT_FALSE(spec.checkpoint().has_interval_seconds());
  EXPECT_EQ(spec.checkpoint().interval(), "auto");  // the Young-Daly interval
  EXPECT_EQ(spec.checkpoint().keep(), 3);
  EXPECT_EQ(spec.restart().max_restarts(), 3);
  EXPECT_EQ(spec.restart().progress_timeout_seconds(), 600);
  EXPECT_FALSE(spec.restart().has_elastic());
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
}

TEST(Defaults, DependOnTheChosenKinds) {
  JobSpec spec = MustParse(R"(
model: {gpt: {}}
data: {dataset: text}
optimizer: {type: sgd}
lr_schedule: {type: step, step_size: 100}
precision: {compute: fp16}
parallelism: {data: 2, pipeline: 2}
seed: 9
)");
  ApplyDefaults(&spec);
  EXPECT_EQ(spec.model().gpt().width(), 384);
  EXPECT_EQ(spec.model().gpt().vocab_size(), 256);
  EXPECT_EQ(spec.data().path(), "/usr/local/share/ringmaster/kjv.txt");
  EXPECT_DOUBLE_EQ(spec.data().holdout_fraction(), 0.1);
  EXPECT_EQ(spec.data().seed(), 9u);  // the job's seed
  EXPECT_DOUBLE_EQ(spec.optimizer().lr(), 0.01);
  EXPECT_DOUBLE_EQ(spec.optimizer().momentum(), 0.9);
  EXPECT_FALSE(spec.optimizer().nesterov());
  EXPECT_EQ(spec.optimizer().betas_size(), 0);
  EXPECT_FALSE(spec.optimizer().has_eps());
  EXPECT_DOUBLE_EQ(spec.lr_schedule().gamma(), 0.1);
  EXPECT_FALSE(spec.lr_schedule().has_min_lr());
  EXPECT_DOUBLE_EQ(spec.precision().loss_scale().initial_scale(), 65536.0);
  EXPECT_EQ(spec.precision().loss_scale().growth_interval(), 2000);
  EXPECT_DOUBLE_EQ(spec.precision().loss_scale().growth_factor(), 2.0);
  EXPECT_DOUBLE_EQ(spec.precision().loss_scale().backoff_factor(), 0.5);
  EXPECT_TRUE(spec.precision().loss_scale().dynamic());
  EXPECT_EQ(spec.resources().ranks_per_node(), 4);   // data x pipeline on 1 node
  EXPECT_EQ(spec.parallelism().micro_batches(), 2);  // = pipeline
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
}

TEST(Defaults, DataParallelSizeFollowsResources) {
  JobSpec spec = MustParse(absl::StrCat(kMinimal,
                                        "resources: {nodes: 2, ranks_per_node: 8}\n"
                                        "restart: {elastic: {min_nodes: 1}}"));
  ApplyDefaults(&spec);
  EXPECT_EQ(spec.parallelism().data(), 16);
  EXPECT_EQ(spec.restart().elastic().min_nodes(), 1);
  EXPECT_EQ(spec.restart().elastic().max_nodes(), 2);
}

TEST(Defaults, RanksPerNodeFollowThePipeline) {
  JobSpec spec = MustParse(absl::StrCat(kMinimal, "parallelism: {pipeline: 3}"));
  ApplyDefaults(&spec);
  EXPECT_EQ(spec.resources().ranks_per_node(), 3);
  EXPECT_EQ(spec.parallelism().data(), 1);
  EXPECT_EQ(spec.parallelism().micro_batches(), 3);
}

TEST(Defaults, KeepExplicitValuesAndAreIdempotent) {
  JobSpec spec = MustParse(absl::StrCat(
      kMinimal, "training: {steps: 10}\noptimizer: {lr: 0.5, weight_decay: 0}\nseed: 0"));
  ApplyDefaults(&spec);
  EXPECT_EQ(spec.training().steps(), 10);
  EXPECT_FALSE(spec.training().has_epochs());
  EXPECT_DOUBLE_EQ(spec.optimizer().lr(), 0.5);
  EXPECT_DOUBLE_EQ(spec.optimizer().weight_decay(), 0.0);  // explicit 0, not 0.01
  JobSpec again = spec;
  ApplyDefaults(&again);
  ExpectSameSpec(spec, again);
}

TEST(Defaults, AnExplicitCheckpointIntervalIsNotJoinedByAuto) {
  for (const char* interval : {"interval_steps: 0", "interval_steps: 50", "interval_seconds: 30"}) {
    JobSpec spec = MustParse(absl::StrCat(kMinimal, "checkpoint: {", interval, "}"));
    ApplyDefaults(&spec);
    EXPECT_EQ(spec.checkpoint().interval(), "") << interval;
    EXPECT_TRUE(ValidateJobSpec(spec).ok()) << interval << ": " << ValidateJobSpec(spec);
  }
}

TEST(Defaults, ModelBlockCounts) {
  EXPECT_EQ(ModelBlockCount(MustParse("model: {mlp: {}}").model()), 3);
  EXPECT_EQ(ModelBlockCount(MustParse("model: {mlp: {hidden_sizes: [8]}}").model()), 2);
  EXPECT_EQ(ModelBlockCount(MustParse("model: {cnn: {channels: [8, 8, 8]}}").model()), 5);
  EXPECT_EQ(ModelBlockCount(MustParse("model: {gpt: {layers: 12}}").model()), 14);
  EXPECT_EQ(ModelBlockCount(v1::ModelSpec()), 0);
}

TEST(Overrides, ScalarNestedCamelCaseEnumAndBool) {
  JobSpec spec = MustParse(kMinimal);
  ASSERT_TRUE(ApplyOverride(&spec, "optimizer.lr=0.1").ok());
  ASSERT_TRUE(ApplyOverride(&spec, "lrSchedule.warmupSteps=20").ok());
  ASSERT_TRUE(ApplyOverride(&spec, "optimizer.type=SGD").ok());
  ASSERT_TRUE(ApplyOverride(&spec, "precision.compute=bf16").ok());
  ASSERT_TRUE(ApplyOverride(&spec, "parallelism.schedule=1f1b").ok());
  ASSERT_TRUE(ApplyOverride(&spec, "parallelism.zero1=true").ok());
  ASSERT_TRUE(ApplyOverride(&spec, "name=\"my-run\"").ok());
  ASSERT_TRUE(ApplyOverride(&spec, "seed=123").ok());
  EXPECT_DOUBLE_EQ(spec.optimizer().lr(), 0.1);
  EXPECT_EQ(spec.lr_schedule().warmup_steps(), 20);
  EXPECT_EQ(spec.optimizer().type(), OptimizerSpec::SGD);
  EXPECT_EQ(spec.precision().compute(), PrecisionSpec::BF16);
  EXPECT_EQ(spec.parallelism().schedule(), ParallelismSpec::ONE_F_ONE_B);
  EXPECT_TRUE(spec.parallelism().zero1());
  EXPECT_EQ(spec.name(), "my-run");
  EXPECT_EQ(spec.seed(), 123u);
}

TEST(Overrides, RepeatedFieldsTakeCommaListsOrBrackets) {
  JobSpec spec = MustParse(kMinimal);
  ASSERT_TRUE(ApplyOverride(&spec, "model.mlp.hidden_sizes=512,256,64").ok());
  ASSERT_EQ(spec.model().mlp().hidden_sizes_size(), 3);
  EXPECT_EQ(spec.model().mlp().hidden_sizes(2), 64);
  ASSERT_TRUE(ApplyOverride(&spec, "model.mlp.hidden_sizes=[32, 16]").ok());
  ASSERT_EQ(spec.model().mlp().hidden_sizes_size(), 2);  // replaced, not appended
  EXPECT_EQ(spec.model().mlp().hidden_sizes(1), 16);
  ASSERT_TRUE(ApplyOverride(&spec, "optimizer.betas=0.8, 0.9").ok());
  EXPECT_DOUBLE_EQ(spec.optimizer().betas(0), 0.8);
  ASSERT_TRUE(ApplyOverride(&spec, "model.mlp.hidden_sizes=[]").ok());
  EXPECT_EQ(spec.model().mlp().hidden_sizes_size(), 0);
}

TEST(Overrides, MapEntriesAddAndReplace) {
  JobSpec spec = MustParse(absl::StrCat(kMinimal, "labels: {team: vision}"));
  ASSERT_TRUE(ApplyOverride(&spec, "labels.team=nlp").ok());
  ASSERT_TRUE(ApplyOverride(&spec, "labels.owner=alice").ok());
  ASSERT_TRUE(ApplyOverride(&spec, "resources.node_selector.gpu.vendor=nvidia").ok());
  EXPECT_EQ(spec.labels().size(), 2u);
  EXPECT_EQ(spec.labels().at("team"), "nlp");
  EXPECT_EQ(spec.labels().at("owner"), "alice");
  EXPECT_EQ(spec.resources().node_selector().at("gpu.vendor"), "nvidia");
}

TEST(Overrides, OneofMemberSwitchesTheModel) {
  JobSpec spec = MustParse(kMinimal);
  ASSERT_TRUE(ApplyOverride(&spec, "model.cnn.channels=8,16").ok());
  EXPECT_FALSE(spec.model().has_mlp());
  EXPECT_EQ(spec.model().cnn().channels(1), 16);
  ASSERT_TRUE(ApplyOverride(&spec, "training.steps=100").ok());
  ASSERT_TRUE(ApplyOverride(&spec, "training.epochs=2").ok());
  EXPECT_FALSE(spec.training().has_steps());
  EXPECT_EQ(spec.training().epochs(), 2);
}

TEST(Overrides, FailedOverrideLeavesTheSpecUnchanged) {
  const JobSpec original = MustParse(kMinimal);
  JobSpec spec = original;
  EXPECT_FALSE(ApplyOverride(&spec, "model.cnn.channels=8,x").ok());
  ExpectSameSpec(spec, original);
}

TEST(Overrides, NullResetsAFieldOrRemovesAnEntry) {
  JobSpec spec = MustParse(absl::StrCat(kMinimal,
                                        "optimizer: {lr: 0.5, betas: [0.8, 0.9]}\n"
                                        "labels: {team: nlp, owner: bob}"));
  ASSERT_TRUE(ApplyOverride(&spec, "optimizer.lr=null").ok());
  ASSERT_TRUE(ApplyOverride(&spec, "optimizer.betas=null").ok());
  ASSERT_TRUE(ApplyOverride(&spec, "labels.team=null").ok());
  EXPECT_FALSE(spec.optimizer().has_lr());
  EXPECT_EQ(spec.optimizer().betas_size(), 0);
  EXPECT_EQ(spec.labels().size(), 1u);
  EXPECT_EQ(spec.labels().count("team"), 0u);
  ASSERT_TRUE(ApplyOverride(&spec, "labels.owner='null'").ok());  // quoted: the text
  EXPECT_EQ(spec.labels().at("owner"), "null");
}

TEST(Overrides, LoadJobSpecFileAppliesThemBeforeDefaultsAndValidation) {
  // The MLP example uses AdamW; its betas and eps do not apply to SGD.
  absl::StatusOr<JobSpec> spec = LoadJobSpecFile(
      "examples/fashion_mnist_mlp.yaml", {"optimizer.type=sgd", "optimizer.betas=null",
                                          "parallelism.data=4", "resources.ranks_per_node=4"});
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(spec.status().message()),
            "optimizer.eps: does not apply to sgd (after --set \"optimizer.type=sgd\"; "
            "examples/fashion_mnist_mlp.yaml alone is valid)");

  spec = LoadJobSpecFile("examples/fashion_mnist_mlp.yaml",
                         {"optimizer.type=sgd", "optimizer.betas=null", "optimizer.eps=null",
                          "optimizer.lr=null", "parallelism.data=4", "resources.ranks_per_node=4"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_DOUBLE_EQ(spec->optimizer().lr(), 0.01);       // SGD's default
  EXPECT_DOUBLE_EQ(spec->optimizer().momentum(), 0.9);  // filled for SGD
  EXPECT_EQ(spec->parallelism().data(), 4);
}

TEST(Overrides, AnInvalidSetIsBlamedNotTheFile) {
  absl::StatusOr<JobSpec> spec = LoadJobSpecFile("examples/fashion_mnist_mlp.yaml", {"resources.nodes=0"});
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(std::string(spec.status().message()),
            "resources.nodes: must be >= 1, got 0 (after --set \"resources.nodes=0\"; "
            "examples/fashion_mnist_mlp.yaml alone is valid)");
  // Only together are these two wrong: both are named.
  spec = LoadJobSpecFile("examples/fashion_mnist_mlp.yaml", {"parallelism.data=1", "resources.ranks_per_node=4"});
  ASSERT_FALSE(spec.ok());
  EXPECT_TRUE(absl::StrContains(spec.status().message(),
                                "(after --set \"parallelism.data=1\" --set \"resources.ranks_per_node=4\"; "))
      << spec.status();
  // A file wrong by itself is blamed, --set or not.
  JobSpec written = MustParse("model: {mlp: {}}\ndata: {dataset: fashion_mnist, batch_size: 0}\n");
  written.set_name("x");
  EXPECT_EQ(std::string(ValidateOverridden(written, "x.yaml", {"optimizer.lr=0.1"}).message()),
            "x.yaml: data.batch_size: must be >= 1, got 0");
}

TEST(Overrides, ShorterStepsShortenAWarmupWrittenForALongerRun) {
  // Every example, shortened as the README shortens it (a warm-up of 100).
  for (const char* path : {"examples/fashion_mnist_mlp.yaml", "examples/fashion_mnist_cnn.yaml",
                           "examples/gpt_text.yaml"}) {
    absl::StatusOr<JobSpec> spec = LoadJobSpecFile(path, {"training.steps=100"});
    ASSERT_TRUE(spec.ok()) << path << ": " << spec.status();
    EXPECT_EQ(spec->lr_schedule().warmup_steps(), 10) << path;
  }
  // A warm-up the user set with the steps is theirs: refused, saying how to fix it.
  absl::StatusOr<JobSpec> spec =
      LoadJobSpecFile("examples/gpt_text.yaml", {"training.steps=50", "lrSchedule.warmupSteps=60"});
  ASSERT_FALSE(spec.ok());
  EXPECT_TRUE(absl::StrContains(spec.status().message(), "--set lr_schedule.warmup_steps=5")) << spec.status();
  // A warm-up already shorter than the new run is kept.
  spec = LoadJobSpecFile("examples/gpt_text.yaml", {"training.steps=300"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->lr_schedule().warmup_steps(), 100);
}

TEST(Overrides, LoadJobSpecFileNamesTheJobAfterTheFile) {
  absl::StatusOr<JobSpec> spec =
      LoadJobSpecFile("examples/fashion_mnist_mlp.yaml", {"name=", "optimizer.lr=0.002"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "fashion_mnist_mlp");
  EXPECT_DOUBLE_EQ(spec->optimizer().lr(), 0.002);
}

TEST(Overrides, ReadJobSpecFileAppliesNoDefaults) {
  absl::StatusOr<JobSpec> spec =
      ReadJobSpecFile("examples/fashion_mnist_mlp.yaml", {"name=", "optimizer.lr=0.002", "resources.nodes=null"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "fashion_mnist_mlp");
  EXPECT_DOUBLE_EQ(spec->optimizer().lr(), 0.002);
  EXPECT_FALSE(spec->resources().has_nodes());  // LoadJobSpecFile fills it
  EXPECT_FALSE(spec->parallelism().has_micro_batches());
}

// The settings of a spec, by path: value and source.
std::map<std::string, std::pair<std::string, std::string>> SettingsByPath(const JobSpec& effective,
                                                                          const JobSpec* submitted,
                                                                          const std::vector<std::string>& overrides) {
  std::map<std::string, std::pair<std::string, std::string>> out;
  for (const SpecSetting& s : SpecSettings(effective, submitted, overrides)) {
    EXPECT_TRUE(out.emplace(s.path, std::pair(s.value, std::string(SettingSourceName(s.source)))).second) << s.path;
  }
  return out;
}

TEST(Settings, SayWhetherTheSpecASetOrADefaultChoseEachValue) {
  JobSpec submitted = MustParse(R"(
name: cnn
model: {cnn: {channels: [16, 32]}}
data: {dataset: fashion_mnist, batch_size: 128}
optimizer: {type: sgd, lr: 0.05}
precision: {compute: fp16}
labels: {team: vision}
)");
  const std::vector<std::string> overrides = {"optimizer.lr=0.05", "resources.device=cpu", "labels.run=7",
                                              "not a field=1"};
  for (const std::string& o : {overrides[0], overrides[1], overrides[2]}) ASSERT_TRUE(ApplyOverride(&submitted, o).ok());
  JobSpec effective = submitted;
  ApplyDefaults(&effective);
  auto settings = SettingsByPath(effective, &submitted, overrides);
  using P = std::pair<std::string, std::string>;
  EXPECT_EQ(settings["name"], P("cnn", "spec"));
  EXPECT_EQ(settings["model.cnn.channels"], P("[16, 32]", "spec"));
  EXPECT_EQ(settings["model.cnn.kernel_size"], P("3", "default"));
  EXPECT_EQ(settings["model.cnn.hidden_sizes"], P("[128]", "default"));
  EXPECT_EQ(settings["data.dataset"], P("FASHION_MNIST", "spec"));
  EXPECT_EQ(settings["data.batch_size"], P("128", "spec"));
  EXPECT_EQ(settings["data.path"], P("/usr/share/datasets/fashion-mnist", "default"));
  EXPECT_EQ(settings["training.epochs"], P("1", "default"));
  EXPECT_EQ(settings["optimizer.type"], P("SGD", "spec"));
  EXPECT_EQ(settings["optimizer.lr"], P("0.05", "--set"));
  EXPECT_EQ(settings["optimizer.momentum"], P("0.9", "default"));
  EXPECT_EQ(settings["precision.compute"], P("FP16", "spec"));
  EXPECT_EQ(settings["precision.loss_scale.initial_scale"], P("65536", "default"));
  EXPECT_EQ(settings["precision.loss_scale.dynamic"], P("true", "default"));
  EXPECT_EQ(settings["resources.device"], P("CPU", "--set"));
  EXPECT_EQ(settings["resources.nodes"], P("1", "default"));
  EXPECT_EQ(settings["priority"], P("0", "default"));
  EXPECT_EQ(settings["checkpoint.directory"], P("\"\"", "default"));
  EXPECT_EQ(settings["labels.team"], P("vision", "spec"));
  EXPECT_EQ(settings["labels.run"], P("7", "--set"));
  // What does not apply is not a setting: another model kind or length, AdamW's
  // options for SGD, an elastic policy nobody asked for.
  EXPECT_EQ(settings.count("model.mlp.hidden_sizes"), 0u);
  EXPECT_EQ(settings.count("training.steps"), 0u);
  EXPECT_EQ(settings.count("optimizer.betas"), 0u);
  EXPECT_EQ(settings.count("optimizer.eps"), 0u);
  EXPECT_EQ(settings.count("restart.elastic.min_nodes"), 0u);
  // In proto field order, the spec's own order.
  const std::vector<SpecSetting> ordered = SpecSettings(effective, &submitted, overrides);
  ASSERT_FALSE(ordered.empty());
  EXPECT_EQ(ordered.front().path, "name");
  EXPECT_EQ(ordered[1].path, "model.cnn.channels");
}

TEST(Settings, ASetByItsJsonNameCountsAndANullLeavesTheDefault) {
  JobSpec submitted = MustParse(kMinimal);
  const std::vector<std::string> overrides = {"training.logIntervalSteps=5", "optimizer.lr=0.5", "optimizer.lr=null"};
  for (const std::string& o : overrides) ASSERT_TRUE(ApplyOverride(&submitted, o).ok()) << o;
  JobSpec effective = submitted;
  ApplyDefaults(&effective);
  auto settings = SettingsByPath(effective, &submitted, overrides);
  EXPECT_EQ(settings["training.log_interval_steps"], std::make_pair(std::string("5"), std::string("--set")));
  EXPECT_EQ(settings["optimizer.lr"], std::make_pair(std::string("0.001"), std::string("default")));
}

TEST(Settings, AreOfUnknownSourceWithoutTheSubmittedSpec) {
  JobSpec effective = MustParse(kMinimal);
  ApplyDefaults(&effective);
  const std::vector<SpecSetting> settings = SpecSettings(effective, nullptr, {"optimizer.lr=1"});
  ASSERT_FALSE(settings.empty());
  for (const SpecSetting& s : settings) EXPECT_EQ(s.source, SpecSetting::Source::kUnknown) << s.path;
  EXPECT_EQ(SettingSourceName(SpecSetting::Source::kUnknown), "-");
}

TEST(Settings, AValueChangedAfterSubmissionIsNotTheUsers) {
  // A default that replaced what was sent (the map entry differs) is no
  // longer the user's value.
  JobSpec submitted = MustParse(absl::StrCat(kMinimal, "labels: {team: a}"));
  JobSpec effective = submitted;
  ApplyDefaults(&effective);
  (*effective.mutable_labels())["team"] = "b";
  auto settings = SettingsByPath(effective, &submitted, {});
  EXPECT_EQ(settings["labels.team"], std::make_pair(std::string("b"), std::string("default")));
}

}  // namespace
}  // namespace ringmaster

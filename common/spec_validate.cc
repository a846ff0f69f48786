// ValidateJobSpec (see spec.h): model, data, training, optimizer, schedule,
// precision, name, priority and labels; the parallel layout and the policies
// are in spec_validate_layout.cc. Limits are the ones documented on each field
// in proto/job_spec.proto and proto/model_spec.proto.

#include <algorithm>
#include <cmath>
#include <utility>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/env_policy.h"
#include "common/spec.h"
#include "common/spec_checks.h"
#include "common/spec_limits.h"
#include "common/status_macros.h"
#include "proto/options.pb.h"

namespace ringmaster {
namespace spec_internal {

absl::Status Invalid(absl::string_view path, absl::string_view reason) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", reason));
}

absl::Status CheckRange(absl::string_view path, int64_t value, int64_t min, int64_t max) {
  if (value < min) return Invalid(path, absl::StrCat("must be >= ", min, ", got ", value));
  if (value > max) return Invalid(path, absl::StrCat("must be <= ", max, ", got ", value));
  return absl::OkStatus();
}

absl::Status CheckReal(absl::string_view path, double value, Bound low, Bound high) {
  const bool above_low = low.inclusive ? value >= low.value : value > low.value;
  const bool below_high = high.inclusive ? value <= high.value : value < high.value;
  if (above_low && below_high && std::isfinite(value)) return absl::OkStatus();
  if (std::isinf(high.value)) {
    return Invalid(
        path, absl::StrCat("must be ", low.inclusive ? ">= " : "> ", low.value, ", got ", value));
  }
  return Invalid(path, absl::StrCat("must be in ", low.inclusive ? "[" : "(", low.value, ", ",
                                    high.value, high.inclusive ? "]" : ")", ", got ", value));
}

std::string SpecEnumName(const google::protobuf::EnumDescriptor& type, int number) {
  const google::protobuf::EnumValueDescriptor* value = type.FindValueByNumber(number);
  if (value == nullptr) return absl::StrCat(number);
  const std::string& alias = value->options().GetExtension(v1::alias);
  return alias.empty() ? absl::AsciiStrToLower(value->name()) : alias;
}

std::string ModelKindName(const v1::ModelSpec& model) {
  switch (model.kind_case()) {
    case v1::ModelSpec::kMlp:
      return "mlp";
    case v1::ModelSpec::kCnn:
      return "cnn";
    case v1::ModelSpec::kGpt:
      return "gpt";
    case v1::ModelSpec::KIND_NOT_SET:
      break;
  }
  return "none";
}

std::string Shown(absl::string_view text) {
  constexpr size_t kShown = 64;
  if (text.size() <= kShown) return absl::CEscape(text);
  return absl::StrCat(absl::CEscape(text.substr(0, kShown)), "... (", text.size(), " bytes)");
}

absl::Status CheckLabels(absl::string_view path, const google::protobuf::Map<std::string, std::string>& labels,
                         int max_entries, absl::string_view entries) {
  if (labels.size() > static_cast<size_t>(max_entries)) {
    return Invalid(path, absl::StrCat("at most ", max_entries, " ", entries, ", got ", labels.size()));
  }
  std::vector<std::string> keys;
  for (const auto& [key, value] : labels) keys.push_back(key);
  std::sort(keys.begin(), keys.end());  // report the same error every time
  for (const std::string& key : keys) {
    const bool valid_chars = std::all_of(key.begin(), key.end(), [](char c) {
      return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' ||
             c == '/' || c == '-';
    });
    if (key.empty() || key.size() > kMaxLabelKeyBytes || !valid_chars) {
      return Invalid(path, absl::StrCat("key \"", Shown(key), "\" must be 1 to ", kMaxLabelKeyBytes,
                                        " characters of [A-Za-z0-9._/-]"));
    }
    if (labels.at(key).size() > kMaxLabelValueBytes) {
      return Invalid(absl::StrCat(path, ".", key),
                     absl::StrCat("value longer than ", kMaxLabelValueBytes, " characters"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckEnv(absl::string_view path, const google::protobuf::Map<std::string, std::string>& env) {
  if (env.size() > static_cast<size_t>(kMaxEnvVariables)) {
    return Invalid(path, absl::StrCat("at most ", kMaxEnvVariables, " variables, got ", env.size()));
  }
  std::vector<std::string> names;
  for (const auto& [name, value] : env) names.push_back(name);
  std::sort(names.begin(), names.end());  // report the same error every time
  for (const std::string& name : names) {
    const bool valid = !name.empty() && !absl::ascii_isdigit(static_cast<unsigned char>(name[0])) &&
                       std::all_of(name.begin(), name.end(), [](char c) {
                         return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_';
                       });
    if (name.size() > kMaxEnvNameBytes) {
      return Invalid(path, absl::StrCat("name \"", Shown(name), "\" longer than ", kMaxEnvNameBytes, " bytes"));
    }
    if (!valid) {
      return Invalid(path, absl::StrCat("name \"", Shown(name), "\" must be [A-Za-z_][A-Za-z0-9_]*"));
    }
    const std::string field = absl::StrCat(path, ".", name);
    if (IsWorkerOwnedEnv(name)) return Invalid(field, "set by the worker for each rank; a job cannot override it");
    const std::string& value = env.at(name);
    if (value.size() > kMaxEnvValueBytes) {
      return Invalid(field, absl::StrCat("value longer than ", kMaxEnvValueBytes, " bytes"));
    }
    if (value.find('\0') != std::string::npos) return Invalid(field, "value holds a NUL byte");
  }
  return absl::OkStatus();
}

}  // namespace spec_internal

namespace {

using spec_internal::Bound;
using spec_internal::CheckRange;
using spec_internal::CheckReal;
using spec_internal::Invalid;
using spec_internal::kUnbounded;
using v1::DataSpec;
using v1::LrScheduleSpec;
using v1::OptimizerSpec;

constexpr int64_t k2Pow40 = int64_t{1} << 40;
constexpr Bound kZeroIn{0, true};
constexpr Bound kZeroOut{0, false};
constexpr Bound kOneIn{1, true};
constexpr Bound kOneOut{1, false};

absl::Status CheckSizes(absl::string_view path,
                        const google::protobuf::RepeatedField<int32_t>& sizes, int64_t max) {
  for (int i = 0; i < sizes.size(); ++i) {
    RETURN_IF_ERROR(CheckRange(absl::StrCat(path, "[", i, "]"), sizes[i], 1, max));
  }
  return absl::OkStatus();
}

absl::Status ValidateName(const std::string& name) {
  if (name.empty()) return absl::OkStatus();
  const bool valid_chars = std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
  if (name.size() > 63 || !valid_chars ||
      !absl::ascii_isalnum(static_cast<unsigned char>(name[0]))) {
    return Invalid("name", absl::StrCat("must be 1 to 63 characters of [A-Za-z0-9._-] starting "
                                        "with a letter or digit, got \"",
                                        spec_internal::Shown(name), "\""));
  }
  return absl::OkStatus();
}

absl::Status ValidateModel(const v1::ModelSpec& model) {
  switch (model.kind_case()) {
    case v1::ModelSpec::KIND_NOT_SET:
      return Invalid("model", "required; set one of mlp, cnn, gpt");
    case v1::ModelSpec::kMlp:
      return CheckSizes("model.mlp.hidden_sizes", model.mlp().hidden_sizes(), 65536);
    case v1::ModelSpec::kCnn: {
      const v1::CnnSpec& cnn = model.cnn();
      if (cnn.channels_size() > 4) {
        return Invalid(
            "model.cnn.channels",
            absl::StrCat("at most 4 conv stages fit a 28x28 image, got ", cnn.channels_size()));
      }
      RETURN_IF_ERROR(CheckSizes("model.cnn.channels", cnn.channels(), 4096));
      RETURN_IF_ERROR(CheckRange("model.cnn.kernel_size", cnn.kernel_size(), 1, 7));
      if (cnn.kernel_size() % 2 == 0) {
        return Invalid("model.cnn.kernel_size",
                       absl::StrCat("must be odd, got ", cnn.kernel_size()));
      }
      return CheckSizes("model.cnn.hidden_sizes", cnn.hidden_sizes(), 65536);
    }
    case v1::ModelSpec::kGpt: {
      const v1::GptSpec& gpt = model.gpt();
      RETURN_IF_ERROR(CheckRange("model.gpt.layers", gpt.layers(), 1, 256));
      RETURN_IF_ERROR(CheckRange("model.gpt.width", gpt.width(), 1, 65536));
      RETURN_IF_ERROR(CheckRange("model.gpt.heads", gpt.heads(), 1, 65536));
      if (gpt.width() % gpt.heads() != 0) {
        return Invalid("model.gpt.heads",
                       absl::StrCat("width (", gpt.width(), ") is not divisible by heads (",
                                    gpt.heads(), ")"));
      }
      RETURN_IF_ERROR(CheckRange("model.gpt.context", gpt.context(), 1, 65536));
      return CheckRange("model.gpt.vocab_size", gpt.vocab_size(), 2, 1 << 20);
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateData(const v1::JobSpec& spec) {
  const DataSpec& data = spec.data();
  const std::string model = spec_internal::ModelKindName(spec.model());
  const std::string dataset =
      spec_internal::SpecEnumName(*DataSpec::Dataset_descriptor(), data.dataset());
  switch (data.dataset()) {
    case DataSpec::DATASET_UNSPECIFIED:
      return Invalid("data.dataset", "required; one of fashion_mnist, text, synthetic");
    case DataSpec::FASHION_MNIST:
      if (model == "gpt") {
        return Invalid("data.dataset",
                       absl::StrCat(dataset, " needs an mlp or cnn model, got gpt"));
      }
      break;
    case DataSpec::TEXT:
      if (model != "gpt") {
        return Invalid("data.dataset", absl::StrCat(dataset, " needs a gpt model, got ", model));
      }
      if (spec.model().gpt().vocab_size() < 256) {
        return Invalid("model.gpt.vocab_size",
                       absl::StrCat("byte-level text needs at least 256, got ",
                                    spec.model().gpt().vocab_size()));
      }
      break;
    default:
      break;
  }
  if (data.dataset() == DataSpec::SYNTHETIC) {
    if (!data.path().empty()) return Invalid("data.path", "does not apply to synthetic data");
  } else if (data.path().empty() || data.path()[0] != '/') {
    return Invalid("data.path", absl::StrCat("must be an absolute path, got \"",
                                             spec_internal::Shown(data.path()), "\""));
  }
  RETURN_IF_ERROR(CheckRange("data.batch_size", data.batch_size(), 1, 1 << 24));
  RETURN_IF_ERROR(
      CheckReal("data.holdout_fraction", data.holdout_fraction(), kZeroIn, {0.5, true}));
  if (data.has_synthetic_samples()) {
    if (data.dataset() != DataSpec::SYNTHETIC) {
      return Invalid("data.synthetic_samples", absl::StrCat("does not apply to ", dataset));
    }
    RETURN_IF_ERROR(CheckRange("data.synthetic_samples", data.synthetic_samples(), 1, k2Pow40));
  }
  return absl::OkStatus();
}

absl::Status ValidateTraining(const v1::TrainingSpec& training) {
  if (training.has_steps()) {
    RETURN_IF_ERROR(CheckRange("training.steps", training.steps(), 1, k2Pow40));
  } else {
    RETURN_IF_ERROR(CheckRange("training.epochs", training.epochs(), 1, 100000));
  }
  RETURN_IF_ERROR(
      CheckRange("training.eval_interval_steps", training.eval_interval_steps(), 0, k2Pow40));
  return CheckRange("training.log_interval_steps", training.log_interval_steps(), 1, 1 << 30);
}

absl::Status ValidateOptimizer(const OptimizerSpec& optimizer) {
  const OptimizerSpec::Type type = optimizer.type();
  const std::string name = spec_internal::SpecEnumName(*OptimizerSpec::Type_descriptor(), type);
  const std::string not_for = absl::StrCat("does not apply to ", name);
  const bool sgd = type == OptimizerSpec::SGD;
  const bool lars = type == OptimizerSpec::LARS;
  const bool adam_like = type == OptimizerSpec::ADAMW || type == OptimizerSpec::LAMB;
  RETURN_IF_ERROR(CheckReal("optimizer.lr", optimizer.lr(), kZeroOut, kUnbounded));
  if (optimizer.has_momentum()) {
    if (!sgd && !lars) return Invalid("optimizer.momentum", not_for);
    RETURN_IF_ERROR(CheckReal("optimizer.momentum", optimizer.momentum(), kZeroIn, kOneOut));
  }
  if (optimizer.has_nesterov()) {
    if (!sgd) return Invalid("optimizer.nesterov", not_for);
    if (optimizer.nesterov() && optimizer.momentum() == 0) {
      return Invalid("optimizer.nesterov", "needs momentum > 0");
    }
  }
  RETURN_IF_ERROR(CheckReal("optimizer.weight_decay", optimizer.weight_decay(), kZeroIn, kOneIn));
  if (optimizer.betas_size() > 0) {
    if (!adam_like) return Invalid("optimizer.betas", not_for);
    if (optimizer.betas_size() != 2) {
      return Invalid("optimizer.betas", absl::StrCat("expected 2 values (beta1, beta2), got ",
                                                     optimizer.betas_size()));
    }
    for (int i = 0; i < 2; ++i) {
      RETURN_IF_ERROR(CheckReal(absl::StrCat("optimizer.betas[", i, "]"), optimizer.betas(i),
                                kZeroIn, kOneOut));
    }
  }
  if (optimizer.has_eps()) {
    if (sgd) return Invalid("optimizer.eps", not_for);
    RETURN_IF_ERROR(CheckReal("optimizer.eps", optimizer.eps(), kZeroOut, kOneIn));
  }
  if (optimizer.has_trust_coefficient()) {
    if (!lars) return Invalid("optimizer.trust_coefficient", not_for);
    RETURN_IF_ERROR(
        CheckReal("optimizer.trust_coefficient", optimizer.trust_coefficient(), kZeroOut, kOneIn));
  }
  return CheckReal("optimizer.grad_clip_norm", optimizer.grad_clip_norm(), kZeroIn, kUnbounded);
}

absl::Status ValidateLrSchedule(const v1::JobSpec& spec) {
  const LrScheduleSpec& schedule = spec.lr_schedule();
  const std::string type =
      spec_internal::SpecEnumName(*LrScheduleSpec::Type_descriptor(), schedule.type());
  const auto only_for = [&](absl::string_view field, absl::string_view kind) {
    return Invalid(absl::StrCat("lr_schedule.", field),
                   absl::StrCat("applies only to the ", kind, " schedule, not ", type));
  };
  RETURN_IF_ERROR(CheckRange("lr_schedule.warmup_steps", schedule.warmup_steps(), 0, k2Pow40));
  if (spec.training().has_steps() && schedule.warmup_steps() >= spec.training().steps()) {
    return Invalid("lr_schedule.warmup_steps",
                   absl::StrCat("must be less than training.steps (", spec.training().steps(), "), got ",
                                schedule.warmup_steps(), "; set a shorter warm-up, e.g. --set lr_schedule.warmup_steps=",
                                spec.training().steps() / 10));
  }
  const bool cosine = schedule.type() == LrScheduleSpec::COSINE;
  const bool step = schedule.type() == LrScheduleSpec::STEP;
  if (schedule.has_decay_steps()) {
    if (!cosine) return only_for("decay_steps", "cosine");
    RETURN_IF_ERROR(CheckRange("lr_schedule.decay_steps", schedule.decay_steps(), 0, k2Pow40));
  }
  if (schedule.has_min_lr()) {
    if (!cosine) return only_for("min_lr", "cosine");
    const double lr = spec.optimizer().lr();
    if (!(schedule.min_lr() >= 0 && schedule.min_lr() <= lr)) {
      return Invalid("lr_schedule.min_lr", absl::StrCat("must be in [0, optimizer.lr (", lr,
                                                        ")], got ", schedule.min_lr()));
    }
  }
  if (step && !schedule.has_step_size()) {
    return Invalid("lr_schedule.step_size", "required for the step schedule");
  }
  if (schedule.has_step_size()) {
    if (!step) return only_for("step_size", "step");
    RETURN_IF_ERROR(CheckRange("lr_schedule.step_size", schedule.step_size(), 1, k2Pow40));
  }
  if (schedule.has_gamma()) {
    if (!step) return only_for("gamma", "step");
    RETURN_IF_ERROR(CheckReal("lr_schedule.gamma", schedule.gamma(), kZeroOut, kOneIn));
  }
  const std::string rule = spec_internal::SpecEnumName(*LrScheduleSpec::ScalingRule_descriptor(),
                                                       schedule.scaling_rule());
  const bool scaling = schedule.scaling_rule() != LrScheduleSpec::NONE;
  if (scaling && !schedule.has_reference_batch_size()) {
    return Invalid("lr_schedule.reference_batch_size",
                   absl::StrCat("required with the ", rule, " scaling rule"));
  }
  if (schedule.has_reference_batch_size()) {
    if (!scaling) {
      return Invalid("lr_schedule.reference_batch_size",
                     "applies only with the linear or sqrt scaling rule, not none");
    }
    RETURN_IF_ERROR(CheckRange("lr_schedule.reference_batch_size", schedule.reference_batch_size(),
                               1, 1 << 24));
  }
  return absl::OkStatus();
}

absl::Status ValidatePrecision(const v1::PrecisionSpec& precision) {
  if (!precision.has_loss_scale()) return absl::OkStatus();
  if (precision.compute() != v1::PrecisionSpec::FP16) {
    return Invalid(
        "precision.loss_scale",
        absl::StrCat("applies only to fp16 compute, not ",
                     spec_internal::SpecEnumName(*v1::PrecisionSpec::Compute_descriptor(),
                                                 precision.compute())));
  }
  const v1::LossScaleSpec& scale = precision.loss_scale();
  RETURN_IF_ERROR(CheckReal("precision.loss_scale.initial_scale", scale.initial_scale(), kOneIn,
                            {18446744073709551616.0, true}));
  RETURN_IF_ERROR(
      CheckRange("precision.loss_scale.growth_interval", scale.growth_interval(), 1, 1 << 30));
  RETURN_IF_ERROR(
      CheckReal("precision.loss_scale.growth_factor", scale.growth_factor(), kOneOut, kUnbounded));
  return CheckReal("precision.loss_scale.backoff_factor", scale.backoff_factor(), kZeroOut,
                   kOneOut);
}

// Every path the spec names is at most kMaxPathBytes and holds no NUL byte.
absl::Status CheckPaths(const v1::JobSpec& spec) {
  const std::pair<const char*, const std::string*> paths[] = {{"data.path", &spec.data().path()},
                                                              {"checkpoint.directory", &spec.checkpoint().directory()}};
  for (const auto& [field, path] : paths) {
    if (path->size() > kMaxPathBytes) {
      return Invalid(field, absl::StrCat("at most ", kMaxPathBytes, " bytes, got ", path->size()));
    }
    if (path->find('\0') != std::string::npos) return Invalid(field, "holds a NUL byte");
  }
  return absl::OkStatus();
}

// The whole spec, serialized, is at most kMaxSpecBytes; the error names the
// largest of its top-level fields.
absl::Status CheckSpecSize(const v1::JobSpec& spec) {
  const size_t size = spec.ByteSizeLong();
  if (size <= kMaxSpecBytes) return absl::OkStatus();
  const google::protobuf::Reflection& reflection = *spec.GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  reflection.ListFields(spec, &fields);
  std::string largest = "-";
  size_t largest_bytes = 0;
  for (const google::protobuf::FieldDescriptor* field : fields) {
    v1::JobSpec without = spec;
    reflection.ClearField(&without, field);
    const size_t bytes = size - without.ByteSizeLong();
    if (bytes > largest_bytes) {
      largest = field->name();
      largest_bytes = bytes;
    }
  }
  return Invalid("spec", absl::StrCat(size, " bytes serialized, more than the ", kMaxSpecBytes,
                                      " (256 KiB) a job spec may hold; its largest part is ", largest, " (",
                                      largest_bytes, " bytes)"));
}

}  // namespace

absl::Status ValidateJobSpec(const v1::JobSpec& input) {
  v1::JobSpec spec = input;
  ApplyDefaults(&spec);
  RETURN_IF_ERROR(ValidateName(spec.name()));
  RETURN_IF_ERROR(CheckPaths(spec));
  if (spec.has_program()) {
    RETURN_IF_ERROR(spec_internal::ValidateProgram(spec));
  } else {
    RETURN_IF_ERROR(ValidateModel(spec.model()));
    RETURN_IF_ERROR(ValidateData(spec));
    RETURN_IF_ERROR(ValidateTraining(spec.training()));
    RETURN_IF_ERROR(ValidateOptimizer(spec.optimizer()));
    RETURN_IF_ERROR(ValidateLrSchedule(spec));
    RETURN_IF_ERROR(ValidatePrecision(spec.precision()));
  }
  RETURN_IF_ERROR(spec_internal::ValidateLayoutAndPolicies(spec));
  RETURN_IF_ERROR(CheckRange("priority", spec.priority(), -1000, 1000));
  RETURN_IF_ERROR(spec_internal::CheckEnv("env", spec.env()));
  RETURN_IF_ERROR(spec_internal::CheckLabels("labels", spec.labels(), kMaxLabels, "labels"));
  return CheckSpecSize(spec);
}

}  // namespace ringmaster

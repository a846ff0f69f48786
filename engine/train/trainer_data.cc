// Trainer: the datasets, and evaluation on the held-out data.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/data/image_dataset.h"
#include "engine/data/text_dataset.h"
#include "engine/train/trainer.h"

namespace ringmaster::engine {
namespace {

// Evaluation batches hold at most this many samples.
constexpr int64_t kEvalBatch = 500;

// Input that is missing or malformed is the job's mistake, not the node's:
// INVALID_ARGUMENT naming data.path, so that the trainer exits
// kExitUnrecoverable and the job fails at once instead of burning restarts.
// Errors that may pass (EIO, out of memory) keep their code.
absl::Status RejectedInput(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kNotFound && status.code() != absl::StatusCode::kDataLoss) return status;
  return absl::InvalidArgumentError(absl::StrCat("data.path: ", status.message()));
}

absl::StatusOr<TrainingData> LoadTrainingDataUnchecked(const TrainerConfig& config) {
  const DataConfig& data = config.data;
  TrainingData out;
  switch (data.kind) {
    case DatasetKind::kFashionMnist: {
      ASSIGN_OR_RETURN(std::unique_ptr<ImageDataset> train,
                       LoadFashionMnist(data.path, FashionMnistSplit::kTrain, data.root));
      ASSIGN_OR_RETURN(std::unique_ptr<ImageDataset> test,
                       LoadFashionMnist(data.path, FashionMnistSplit::kTest, data.root));
      out.train = std::move(train);
      out.eval = std::move(test);
      return out;
    }
    case DatasetKind::kText: {
      ByteTextOptions options;
      options.context = config.model.block_size;
      options.held_out_fraction = data.holdout_fraction;
      ASSIGN_OR_RETURN(ByteTextSplits splits, LoadByteText(data.path, options, data.root));
      out.train = std::move(splits.train);
      out.eval = std::move(splits.held_out);
      return out;
    }
    case DatasetKind::kSynthetic: {
      int64_t n = data.synthetic_samples;
      int64_t eval_n = std::max<int64_t>(n / 10, 1);
      if (config.model.kind == nn::ModelKind::kGpt) {
        int vocab = static_cast<int>(config.model.vocab_size);
        out.train = std::make_shared<SyntheticTokenDataset>(n, data.seed, config.model.block_size, vocab);
        out.eval = std::make_shared<SyntheticTokenDataset>(eval_n, data.seed + 1, config.model.block_size, vocab);
      } else {
        out.train = std::make_shared<SyntheticImageDataset>(n, data.seed);
        out.eval = std::make_shared<SyntheticImageDataset>(eval_n, data.seed + 1);
      }
      return out;
    }
  }
  return absl::InvalidArgumentError("data.dataset: unknown");
}

}  // namespace

absl::StatusOr<TrainingData> LoadTrainingData(const TrainerConfig& config) {
  absl::StatusOr<TrainingData> data = LoadTrainingDataUnchecked(config);
  if (!data.ok()) return RejectedInput(data.status());
  return data;
}

absl::Status Trainer::LoadData() {
  TrainingData data;
  if (options_.preloaded_data.valid()) {
    ASSIGN_OR_RETURN(data, options_.preloaded_data.get());
  } else {
    ASSIGN_OR_RETURN(data, LoadTrainingData(config_));
  }
  train_data_ = std::move(data.train);
  eval_data_ = std::move(data.eval);
  return absl::OkStatus();
}

absl::StatusOr<EvalReport> Trainer::Evaluate() {
  RETURN_IF_ERROR(GatherModel());
  RefreshWeightOperands(model_->Parameters());
  if (rank() != 0) {
    EvalReport none;
    none.step = step_;
    return none;
  }
  // Classifiers: every test image. Language models: up to max_eval_sequences
  // non-overlapping windows of the held-out text (window i starts at i * T).
  int64_t stride = 1;
  int64_t count = eval_data_->size();
  if (IsLanguageModel()) {
    const auto* text = dynamic_cast<const ByteTextDataset*>(eval_data_.get());
    if (text != nullptr) stride = text->context();
    count = std::min((eval_data_->size() + stride - 1) / stride, options_.max_eval_sequences);
  }
  if (count == 0) return absl::FailedPreconditionError("evaluation: the held-out data holds no sample");
  EvalReport report;
  report.step = step_;
  double loss_sum = 0.0;
  int64_t correct = 0;
  for (int64_t begin = 0; begin < count; begin += kEvalBatch) {
    int64_t n = std::min(kEvalBatch, count - begin);
    Batch batch = eval_data_->NewBatch(n);
    for (int64_t i = 0; i < n; ++i) eval_data_->Get((begin + i) * stride, i, &batch);
    ASSIGN_OR_RETURN(batch, ToBackend(batch));
    Tensor loss;
    if (IsLanguageModel()) {  // the loss alone, through the fused classifier
      ASSIGN_OR_RETURN(loss, loss_->ForwardModel(*model_, batch.tokens, batch.targets, /*training=*/false));
    } else {
      ASSIGN_OR_RETURN(Tensor logits, model_->Forward(batch.images, /*training=*/false));
      ASSIGN_OR_RETURN(loss, loss_->Forward(logits, batch.targets, /*training=*/false));
      ASSIGN_OR_RETURN(int64_t c, nn::CountCorrect(*backend_, logits, batch.targets));
      correct += c;
    }
    loss_sum += static_cast<double>(HostCopy(loss).ToVector()[0]) * n;
  }
  report.samples = count;
  report.loss = loss_sum / count;
  if (!IsLanguageModel()) report.accuracy = static_cast<double>(correct) / count;
  return report;
}

}  // namespace ringmaster::engine

// Shows that the API's generated code links and behaves: a JobSpec survives a
// round trip through protobuf's JSON mapping, spec enum values parse by their
// lowercase names, and the `alias` option is readable through reflection.

#include <string>

#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "proto/agent_service.grpc.pb.h"
#include "proto/checkpoint_service.grpc.pb.h"
#include "proto/job_service.grpc.pb.h"
#include "proto/job_spec.pb.h"
#include "proto/node_service.grpc.pb.h"
#include "proto/options.pb.h"
#include "proto/rendezvous_service.grpc.pb.h"

namespace ringmaster::v1 {
namespace {

using google::protobuf::util::JsonParseOptions;
using google::protobuf::util::JsonPrintOptions;
using google::protobuf::util::JsonStringToMessage;
using google::protobuf::util::MessageDifferencer;
using google::protobuf::util::MessageToJsonString;

JobSpec SampleSpec() {
  JobSpec spec;
  spec.set_name("gpt-kjv");
  GptSpec* gpt = spec.mutable_model()->mutable_gpt();
  gpt->set_layers(4);
  gpt->set_heads(4);
  gpt->set_width(256);
  gpt->set_context(128);
  spec.mutable_data()->set_dataset(DataSpec::TEXT);
  spec.mutable_data()->set_batch_size(32);
  spec.mutable_data()->set_holdout_fraction(0.0);  // explicit zero: has presence
  spec.mutable_training()->set_steps(5000);
  spec.mutable_optimizer()->set_type(OptimizerSpec::ADAMW);
  spec.mutable_optimizer()->set_lr(3e-4);
  spec.mutable_optimizer()->add_betas(0.9);
  spec.mutable_optimizer()->add_betas(0.95);
  spec.mutable_lr_schedule()->set_type(LrScheduleSpec::COSINE);
  spec.mutable_precision()->set_compute(PrecisionSpec::FP16);
  spec.mutable_precision()->mutable_loss_scale()->set_initial_scale(65536);
  spec.mutable_parallelism()->set_pipeline(2);
  spec.mutable_parallelism()->set_schedule(ParallelismSpec::ONE_F_ONE_B);
  spec.mutable_parallelism()->add_stage_boundaries(3);
  spec.mutable_resources()->set_device(ResourceSpec::CUDA);
  spec.mutable_restart()->mutable_elastic()->set_min_nodes(1);
  (*spec.mutable_labels())["team"] = "nlp";
  spec.set_seed(7);
  return spec;
}

TEST(JobSpecJson, RoundTripsThroughJsonMapping) {
  const JobSpec spec = SampleSpec();
  std::string json;
  ASSERT_TRUE(MessageToJsonString(spec, &json, JsonPrintOptions()).ok());
  // lowerCamelCase names and enum names on output.
  EXPECT_NE(json.find("\"batchSize\":32"), std::string::npos) << json;
  EXPECT_NE(json.find("\"schedule\":\"ONE_F_ONE_B\""), std::string::npos) << json;

  JobSpec parsed;
  ASSERT_TRUE(JsonStringToMessage(json, &parsed, JsonParseOptions()).ok());
  std::string diff;
  MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differencer.Compare(spec, parsed)) << diff;
  // Presence of an explicit zero survives the round trip.
  EXPECT_TRUE(parsed.data().has_holdout_fraction());
  EXPECT_FALSE(parsed.data().has_seed());
}

TEST(JobSpecJson, AcceptsProtoNamesAndLowercaseEnums) {
  JsonParseOptions options;
  options.case_insensitive_enum_parsing = true;
  JobSpec spec;
  const std::string json =
      R"({"model": {"cnn": {"channels": [16, 32]}},
          "data": {"dataset": "fashion_mnist", "batch_size": 64},
          "optimizer": {"type": "sgd", "momentum": 0.9},
          "resources": {"nodes": 1, "ranksPerNode": 2, "device": "cpu"}})";
  ASSERT_TRUE(JsonStringToMessage(json, &spec, options).ok());
  EXPECT_EQ(spec.model().cnn().channels_size(), 2);
  EXPECT_EQ(spec.data().dataset(), DataSpec::FASHION_MNIST);
  EXPECT_EQ(spec.optimizer().type(), OptimizerSpec::SGD);
  EXPECT_EQ(spec.resources().ranks_per_node(), 2);
  EXPECT_EQ(spec.resources().device(), ResourceSpec::CPU);
}

TEST(JobSpecJson, RejectsUnknownFields) {
  JobSpec spec;
  EXPECT_FALSE(JsonStringToMessage(R"({"modle": {}})", &spec, JsonParseOptions()).ok());
}

TEST(Options, AliasIsReadableThroughReflection) {
  const auto* value =
      ParallelismSpec::Schedule_descriptor()->FindValueByNumber(ParallelismSpec::ONE_F_ONE_B);
  ASSERT_NE(value, nullptr);
  EXPECT_EQ(value->options().GetExtension(alias), "1f1b");
  EXPECT_EQ(ParallelismSpec::Schedule_descriptor()
                ->FindValueByNumber(ParallelismSpec::GPIPE)
                ->options()
                .GetExtension(alias),
            "");
}

const google::protobuf::ServiceDescriptor* FindService(const char* full_name) {
  return google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(full_name);
}

TEST(Services, DescriptorsListTheRpcs) {
  const auto* jobs = FindService(JobService::service_full_name());
  ASSERT_NE(jobs, nullptr);
  for (const char* rpc : {"Submit", "GetJob", "ListJobs", "CancelJob", "StreamLogs", "WatchJob",
                          "ListNodes", "ListCheckpoints"}) {
    EXPECT_NE(jobs->FindMethodByName(rpc), nullptr) << rpc;
  }
  EXPECT_TRUE(jobs->FindMethodByName("StreamLogs")->server_streaming());
  EXPECT_TRUE(jobs->FindMethodByName("WatchJob")->server_streaming());
  const auto* session = FindService(NodeService::service_full_name())->FindMethodByName("Session");
  ASSERT_NE(session, nullptr);
  EXPECT_TRUE(session->client_streaming());
  EXPECT_TRUE(session->server_streaming());
  EXPECT_NE(FindService(RendezvousService::service_full_name())->FindMethodByName("KvWait"),
            nullptr);
  EXPECT_NE(FindService(CheckpointService::service_full_name())->FindMethodByName("Commit"),
            nullptr);
  EXPECT_NE(FindService(AgentService::service_full_name())->FindMethodByName("ReportMetrics"),
            nullptr);
}

}  // namespace
}  // namespace ringmaster::v1

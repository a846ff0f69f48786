// `validate` and `submit --strict` against a cluster (an in-process fake
// JobService): a spec no registered node could ever run and a data.path
// outside the nodes' data roots are refused; without a coordinator they say
// that nothing was checked against a cluster.

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "client/cluster_check.h"
#include "client/commands.h"
#include "client/fake_job_service.h"
#include "client/plan_command.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::client {
namespace {

using ::testing::HasSubstr;

std::string WriteSpec(const std::string& name, const std::string& data_path) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir ? dir : "/tmp") + "/" + name;
  std::ofstream(path) << "name: small\nmodel:\n  gpt: {layers: 1, heads: 2, width: 32, context: 16}\n"
                      << "data:\n  dataset: text\n  path: " << data_path << "\n  batch_size: 8\n"
                      << "training:\n  steps: 10\nresources:\n  device: cpu\n";
  return path;
}

class ClusterCheckTest : public ::testing::Test {
 protected:
  ClusterCheckTest() {
    global_.coordinator = coordinator_.address();
    v1::NodeInfo* node = script().list_nodes.add_nodes();
    node->set_node_id("n-1");
    node->set_state(v1::NODE_STATE_READY);
    node->set_cpu_slots(2);
    node->add_data_roots("/usr/share/datasets");
    node->add_data_roots("/srv/data");
  }
  FakeJobService::Script& script() { return coordinator_.service().script(); }

  FakeCoordinator coordinator_;
  std::unique_ptr<v1::JobService::Stub> stub_ = coordinator_.NewStub();
  GlobalOptions global_;
  std::ostringstream out_;
  std::ostringstream err_;
  Console console_{out_, err_};
};

TEST_F(ClusterCheckTest, ValidateRefusesADataPathOutsideTheDataRoots) {
  PlanCommandOptions options;
  options.file = WriteSpec("outside.yaml", "/tmp/corpus.txt");
  EXPECT_EQ(RunValidate(global_, options, console_, stub_.get()), kExitError);
  EXPECT_EQ(err_.str(), "ringmaster: error: cluster at " + global_.coordinator +
                            ": data.path: /tmp/corpus.txt is outside the nodes' data roots (/srv/data, "
                            "/usr/share/datasets): move the data beneath one of them, or start the workers with "
                            "--data-roots (ringmaster local up --data-roots DIR)\n");
  ASSERT_EQ(coordinator_.service().calls().submit.size(), 1u);
  EXPECT_TRUE(coordinator_.service().calls().submit[0].validate_only());

  err_.str("");
  out_.str("");
  options.file = WriteSpec("inside.yaml", "/srv/data/corpus.txt");
  EXPECT_EQ(RunValidate(global_, options, console_, stub_.get()), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("the cluster at " + global_.coordinator + " can run it\n"));
}

TEST_F(ClusterCheckTest, ValidateAndStrictSubmitRefuseWhatNoNodeCouldEverRun) {
  script().submit.mutable_job()->set_unschedulable("needs 1 node with 4 free CPU slots each; only 0 schedulable "
                                                   "nodes could ever hold that");
  PlanCommandOptions plan;
  plan.file = WriteSpec("big.yaml", "/srv/data/corpus.txt");
  EXPECT_EQ(RunValidate(global_, plan, console_, stub_.get()), kExitError);
  const std::string line = "ringmaster: error: cluster at " + global_.coordinator +
                           ": no registered node could ever run it: needs 1 node with 4 free CPU slots each; only 0 "
                           "schedulable nodes could ever hold that\n";
  EXPECT_EQ(err_.str(), line);

  err_.str("");
  SubmitOptions submit;
  submit.file = plan.file;
  submit.strict = true;
  EXPECT_EQ(RunSubmit(*stub_, global_, submit, console_), kExitUsage);
  EXPECT_EQ(err_.str(), line);
  for (const v1::SubmitJobRequest& sent : coordinator_.service().calls().submit) EXPECT_TRUE(sent.validate_only());
}

TEST_F(ClusterCheckTest, WithoutACoordinatorValidateSaysNothingWasCheckedAgainstACluster) {
  PlanCommandOptions options;
  options.file = WriteSpec("alone.yaml", "/tmp/corpus.txt");
  EXPECT_EQ(RunValidate(global_, options, console_, nullptr, "--coordinator 127.0.0.1: expected host:port"),
            kExitOk);
  EXPECT_EQ(err_.str(), "ringmaster: not checked against a cluster: --coordinator 127.0.0.1: expected host:port\n");
  err_.str("");
  auto closed = v1::JobService::NewStub(grpc::CreateChannel("127.0.0.1:1", grpc::InsecureChannelCredentials()));
  global_.coordinator = "127.0.0.1:1";
  EXPECT_EQ(RunValidate(global_, options, console_, closed.get()), kExitOk);
  EXPECT_THAT(err_.str(), HasSubstr("ringmaster: not checked against a cluster: cannot reach the coordinator at "
                                    "127.0.0.1:1"));
}

}  // namespace
}  // namespace ringmaster::client

// `ringmaster usage`: the request it sends (--by, --since), the table, CSV
// and JSON it prints, and errors that name the flag.
#include <string>

#include "client/commands.h"
#include "client/commands_test_util.h"
#include "gtest/gtest.h"

namespace ringmaster::client::testing {
namespace {

using UsageCommandTest = CommandsTest;

void AddRow(v1::GetUsageResponse* response, const std::string& key, double gpu_seconds, double cpu_seconds,
            int placements) {
  v1::UsageRow* row = response->add_rows();
  row->set_key(key);
  row->set_gpu_seconds(gpu_seconds);
  row->set_cpu_slot_seconds(cpu_seconds);
  row->set_placements(placements);
}

TEST_F(UsageCommandTest, TableCsvAndJson) {
  AddRow(&script().usage, "team-a", 8 * 3600 * 1.5, 0, 3);
  AddRow(&script().usage, "research, \"ml\"", 0, 900, 1);
  UsageOptions options;
  options.by = "queue";
  EXPECT_EQ(RunUsage(*stub_, global_, options, console_), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(),
            "KEY             GPU-HOURS  CPU-SLOT-HOURS  PLACEMENTS\n"
            "team-a          12.00      0.00            3\n"
            "research, \"ml\"  0.00       0.25            1\n");
  ASSERT_EQ(calls().usage.size(), 1u);
  EXPECT_EQ(calls().usage[0].by(), v1::GetUsageRequest::GROUP_BY_QUEUE);
  EXPECT_FALSE(calls().usage[0].has_since()) << "no --since: all of it";

  out_.str("");
  global_.output = OutputFormat::kCsv;
  EXPECT_EQ(RunUsage(*stub_, global_, options, console_), kExitOk);
  EXPECT_EQ(out_.str(),
            "KEY,GPU-HOURS,CPU-SLOT-HOURS,PLACEMENTS\n"
            "team-a,12.00,0.00,3\n"
            "\"research, \"\"ml\"\"\",0.00,0.25,1\n");

  out_.str("");
  global_.output = OutputFormat::kJson;
  EXPECT_EQ(RunUsage(*stub_, global_, options, console_), kExitOk);
  EXPECT_EQ(out_.str(),
            "{\"rows\":[{\"key\":\"team-a\",\"gpuSeconds\":43200,\"placements\":3},"
            "{\"key\":\"research, \\\"ml\\\"\",\"cpuSlotSeconds\":900,\"placements\":1}]}\n");
}

TEST_F(UsageCommandTest, SinceIsATimeOrHowLongAgo) {
  UsageOptions options;
  options.by = "job";
  options.since = "7d";
  EXPECT_EQ(RunUsage(*stub_, global_, options, console_), kExitOk) << err_.str();
  options.since = "90m";
  EXPECT_EQ(RunUsage(*stub_, global_, options, console_), kExitOk) << err_.str();
  options.since = "2026-11-01T00:00:00Z";
  EXPECT_EQ(RunUsage(*stub_, global_, options, console_), kExitOk) << err_.str();
  ASSERT_EQ(calls().usage.size(), 3u);
  EXPECT_EQ(calls().usage[0].by(), v1::GetUsageRequest::GROUP_BY_JOB);
  EXPECT_EQ(calls().usage[0].since().seconds(), kT0 - 7 * 86400);
  EXPECT_EQ(calls().usage[1].since().seconds(), kT0 - 90 * 60);
  EXPECT_EQ(calls().usage[2].since().seconds(), 1793491200);
}

TEST_F(UsageCommandTest, BadFlagsAreNamedAndNothingIsSent) {
  UsageOptions options;
  options.since = "yesterday";
  EXPECT_EQ(RunUsage(*stub_, global_, options, console_), kExitUsage);
  EXPECT_EQ(err_.str(),
            "ringmaster: --since: expected an RFC 3339 time (2026-11-01T00:00:00Z) or how long ago (90m, 24h, 7d), "
            "got \"yesterday\"\n");
  err_.str("");
  options.since = "-1h";
  EXPECT_EQ(RunUsage(*stub_, global_, options, console_), kExitUsage);
  err_.str("");
  options = UsageOptions();
  options.by = "team";
  EXPECT_EQ(RunUsage(*stub_, global_, options, console_), kExitUsage);
  EXPECT_EQ(err_.str(), "ringmaster: --by: expected user, queue or job, got \"team\"\n");
  EXPECT_TRUE(calls().usage.empty());
}

TEST_F(UsageCommandTest, RpcErrorIsReported) {
  script().usage_status = grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "no token");
  EXPECT_EQ(RunUsage(*stub_, global_, UsageOptions(), console_), kExitError);
  EXPECT_NE(err_.str().find("no token"), std::string::npos) << err_.str();
  EXPECT_EQ(calls().usage[0].by(), v1::GetUsageRequest::GROUP_BY_USER);
}

}  // namespace
}  // namespace ringmaster::client::testing

#include "common/logging.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"

namespace ringmaster {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(LoggingTest, JsonLinesEscapeTheMessage) {
  std::string path = ::testing::TempDir() + "/log.json";
  std::remove(path.c_str());
  LogOptions options;
  options.format = LogFormat::kJson;
  options.component = "coordinator";
  options.file = path;
  ASSERT_TRUE(SetupLogging(options).ok());
  spdlog::info("job \"a\"\nplaced");
  spdlog::default_logger()->flush();
  std::string out = ReadFile(path);
  EXPECT_NE(out.find("\"level\":\"info\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"component\":\"coordinator\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"msg\":\"job \\\"a\\\"\\nplaced\"}"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << "one line per record";
}

TEST(LoggingTest, LevelFiltersRecords) {
  std::string path = ::testing::TempDir() + "/log.txt";
  std::remove(path.c_str());
  LogOptions options;
  options.level = "warn";
  options.file = path;
  ASSERT_TRUE(SetupLogging(options).ok());
  spdlog::info("hidden");
  spdlog::warn("shown");
  spdlog::default_logger()->flush();
  std::string out = ReadFile(path);
  EXPECT_EQ(out.find("hidden"), std::string::npos);
  EXPECT_NE(out.find("shown"), std::string::npos);
}

TEST(LoggingTest, UnknownLevelIsRejectedByName) {
  LogOptions options;
  options.level = "verbose";
  absl::Status s = SetupLogging(options);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "log level: unknown value \"verbose\" (expected trace, debug, info, warn, error, critical or off)");
}

TEST(LoggingTest, UnknownFormatIsRejectedByName) {
  LogFormat format;
  absl::Status s = ParseLogFormat("xml", &format);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "log format: unknown value \"xml\" (expected text or json)");
  ASSERT_TRUE(ParseLogFormat("json", &format).ok());
  EXPECT_EQ(format, LogFormat::kJson);
}

}  // namespace
}  // namespace ringmaster

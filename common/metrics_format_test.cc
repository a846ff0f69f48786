#include "common/metrics_format.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "gtest/gtest.h"

namespace ringmaster {
namespace {

TEST(MetricNameTest, AcceptsPrometheusNames) {
  EXPECT_TRUE(ValidateMetricName("ringmaster_trainer_steps_total").ok());
  EXPECT_TRUE(ValidateMetricName("job:step_seconds:rate5m").ok());
  EXPECT_TRUE(ValidateMetricName("_x9").ok());
}

TEST(MetricNameTest, RejectsBadCharactersWithTheRule) {
  for (const char* name : {"", "9lives", "ringmaster-steps", "steps total", "größe"}) {
    absl::Status s = ValidateMetricName(name);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_EQ(s.message(), std::string("invalid metric name \"") + name +
                               "\": must match [a-zA-Z_:][a-zA-Z0-9_:]*");
  }
}

TEST(MetricNameTest, RejectsReservedPrefix) {
  absl::Status s = ValidateMetricName("__name__");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "invalid metric name \"__name__\": the \"__\" prefix is reserved");
}

TEST(LabelNameTest, RejectsColonsDigitsAndReservedPrefix) {
  EXPECT_TRUE(ValidateLabelName("m", "rank").ok());
  EXPECT_EQ(ValidateLabelName("m", "a:b").message(),
            "invalid label name \"a:b\" of metric \"m\": must match [a-zA-Z_][a-zA-Z0-9_]*");
  EXPECT_EQ(ValidateLabelName("m", "0rank").message(),
            "invalid label name \"0rank\" of metric \"m\": must match [a-zA-Z_][a-zA-Z0-9_]*");
  EXPECT_EQ(ValidateLabelName("m", "__meta").message(),
            "invalid label name \"__meta\" of metric \"m\": the \"__\" prefix is reserved");
  EXPECT_EQ(ValidateLabelName("m", "__meta").code(), absl::StatusCode::kInvalidArgument);
}

TEST(Utf8Test, AcceptsWellFormedAndRejectsMalformed) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain"));
  EXPECT_TRUE(IsValidUtf8("größe \xe2\x82\xac \xf0\x9f\x9a\x80"));  // ö, €, rocket.
  EXPECT_FALSE(IsValidUtf8("\xff"));
  EXPECT_FALSE(IsValidUtf8("\x80"));                  // Lone continuation byte.
  EXPECT_FALSE(IsValidUtf8("ab\xe2\x82"));            // Truncated.
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));              // Overlong "/".
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));          // Surrogate U+D800.
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));      // U+110000.
}

TEST(EscapeTest, HelpEscapesBackslashAndNewlineOnly) {
  EXPECT_EQ(EscapeHelp("a\\b\nc\"d"), "a\\\\b\\nc\"d");
}

TEST(EscapeTest, LabelValueEscapesBackslashQuoteAndNewline) {
  EXPECT_EQ(EscapeLabelValue("C:\\data \"x\"\nend"), "C:\\\\data \\\"x\\\"\\nend");
}

TEST(FormatValueTest, SpecialValuesAreSpelledAsPrometheusExpects) {
  EXPECT_EQ(FormatMetricValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatMetricValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatMetricValue(std::nan("")), "NaN");
}

TEST(FormatValueTest, ShortestFormThatRoundTrips) {
  EXPECT_EQ(FormatMetricValue(0), "0");
  EXPECT_EQ(FormatMetricValue(5), "5");
  EXPECT_EQ(FormatMetricValue(-2.5), "-2.5");
  EXPECT_EQ(FormatMetricValue(0.1), "0.1");
  EXPECT_EQ(FormatMetricValue(65536), "65536");
  EXPECT_EQ(FormatMetricValue(1e21), "1e+21");
  EXPECT_EQ(FormatMetricValue(1.5e-7), "1.5e-07");
  for (double v : {0.1 + 0.2, 1.0 / 3.0, 6.02214076e23, 4.9e-324, 1.7976931348623157e308,
                   123456789.123456789}) {
    const std::string text = FormatMetricValue(v);
    EXPECT_EQ(std::strtod(text.c_str(), nullptr), v) << text;
  }
}

TEST(AppendLabelsTest, WritesPairsInOrderWithExtraLast) {
  std::string out;
  AppendLabels({"job", "rank"}, {"j\"1", "0"}, "le", "+Inf", &out);
  EXPECT_EQ(out, "{job=\"j\\\"1\",rank=\"0\",le=\"+Inf\"}");
  out.clear();
  AppendLabels({}, {}, "", "", &out);
  EXPECT_EQ(out, "");
  AppendLabels({}, {}, "le", "1", &out);
  EXPECT_EQ(out, "{le=\"1\"}");
}

}  // namespace
}  // namespace ringmaster

#include "engine/checkpoint/json.h"

#include <string>

#include "gtest/gtest.h"

namespace ringmaster::engine {
namespace {

JsonValue Parse(const std::string& text) {
  absl::StatusOr<JsonValue> value = ParseJson(text);
  EXPECT_TRUE(value.ok()) << text << ": " << value.status();
  return value.ok() ? *value : JsonValue();
}

TEST(JsonTest, ParsesNestedDocumentsInOrder) {
  JsonValue v = Parse(R"( {"z": [1, -2, 3.5, 1e3, true, false, null], "a": {"k": "v"}, "e": {}, "f": []} )");
  ASSERT_EQ(v.type, JsonValue::Type::kObject);
  ASSERT_EQ(v.object.size(), 4u);
  EXPECT_EQ(v.object[0].first, "z");
  EXPECT_EQ(v.object[1].first, "a");
  const JsonValue& z = *v.Find("z");
  ASSERT_EQ(z.array.size(), 7u);
  EXPECT_TRUE(z.array[0].is_integer);
  EXPECT_EQ(z.array[1].integer, -2);
  EXPECT_FALSE(z.array[2].is_integer);
  EXPECT_DOUBLE_EQ(z.array[2].number, 3.5);
  EXPECT_FALSE(z.array[3].is_integer);
  EXPECT_DOUBLE_EQ(z.array[3].number, 1000);
  EXPECT_TRUE(z.array[4].boolean);
  EXPECT_EQ(z.array[5].type, JsonValue::Type::kBool);
  EXPECT_FALSE(z.array[5].boolean);
  EXPECT_EQ(z.array[6].type, JsonValue::Type::kNull);
  EXPECT_EQ(v.Find("a")->Find("k")->string, "v");
  EXPECT_EQ(v.Find("missing"), nullptr);
}

TEST(JsonTest, IntegersBeyondInt64AreNotIntegers) {
  EXPECT_EQ(Parse("9223372036854775807").integer, INT64_MAX);
  EXPECT_FALSE(Parse("9223372036854775808").is_integer);
}

TEST(JsonTest, DecodesEscapesAndUtf8) {
  EXPECT_EQ(Parse(R"("a\"b\\c\/d\n\t\u00e9\ud83d\ude00")").string, "a\"b\\c/d\n\t\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(Parse("\"caf\xc3\xa9\"").string, "caf\xc3\xa9");
}

TEST(JsonTest, QuoteRoundTrips) {
  const std::string s = std::string("tab\tquote\"back\\slash\x01nul") + '\0' + "\xe2\x82\xac";
  EXPECT_EQ(Parse(JsonQuote(s)).string, s);
  EXPECT_EQ(JsonQuote("a\"b"), "\"a\\\"b\"");
}

TEST(JsonTest, RejectsWhatIsNotStrictJson) {
  const std::pair<std::string, std::string> cases[] = {
      {"{\"a\": 1} x", "JSON error at byte 9: unexpected data after the value"},
      {"{\"a\": 1, \"a\": 2}", "JSON error at byte 12: duplicate key \"a\""},
      {"\"\xff\"", "JSON error at byte 1: invalid UTF-8 in string"},
      {"\"\xc0\xaf\"", "JSON error at byte 1: invalid UTF-8 in string"},  // overlong '/'
      {"\"a\nb\"", "JSON error at byte 2: control character in string"},
      {"012", "JSON error at byte 3: leading zero in number"},
      {"[1,]", "JSON error at byte 3: unexpected character ']'"},
      {"{\"a\" 1}", "JSON error at byte 5: expected ':'"},
      {"\"abc", "JSON error at byte 4: unterminated string"},
      {"\"\\ud800\"", "JSON error at byte 7: unpaired high surrogate"},
      {"\"\\x\"", "JSON error at byte 3: bad escape '\\x'"},
      {"", "JSON error at byte 0: unexpected end of input"},
      {"1.", "JSON error at byte 2: expected digits after '.'"},
      {std::string(65, '[') + std::string(65, ']'), "JSON error at byte 64: nested deeper than 64 levels"},
  };
  for (const auto& [text, error] : cases) {
    EXPECT_EQ(ParseJson(text).status(), absl::InvalidArgumentError(error)) << text;
  }
  EXPECT_TRUE(ParseJson(std::string(64, '[') + std::string(64, ']')).ok());
}

TEST(JsonTest, ValidatesUtf8) {
  EXPECT_TRUE(IsValidUtf8("plain \xc3\xa9 \xf0\x9f\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // a surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xe2\x82"));          // truncated
}

}  // namespace
}  // namespace ringmaster::engine

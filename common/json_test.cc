#include "common/json.h"

#include <string>

#include "gtest/gtest.h"

namespace ringmaster {
namespace {

TEST(JsonTest, ParsesWithNlohmann) {
  absl::StatusOr<nlohmann::ordered_json> v = ParseJson(R"( {"z": [1, -2, 3.5, 1e3, true, null], "a": {"k": "v"}} )");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->begin().key(), "z") << "members keep their document order";
  EXPECT_TRUE((*v)["z"][0].is_number_integer());
  EXPECT_EQ((*v)["z"][1].get<int64_t>(), -2);
  EXPECT_TRUE((*v)["z"][3].is_number_float());
  EXPECT_EQ((*v)["a"]["k"].get<std::string>(), "v");
}

TEST(JsonTest, ErrorsAreInvalidArgumentWithLineAndColumn) {
  const std::pair<std::string, std::string> cases[] = {
      {"{\"model\": {}} x",
       "malformed JSON at line 1, column 15: syntax error while parsing value - invalid literal; last read: "
       "'\"model\": {}} x'; expected end of input"},
      {"{\"a\": 1,\n \"b\": }",
       "malformed JSON at line 2, column 7: syntax error while parsing value - unexpected '}'; expected '[', "
       "'{', or a literal"},
      {"\"\xff\"",
       "malformed JSON at line 1, column 2: syntax error while parsing value - invalid string: ill-formed UTF-8 "
       "byte; last read: '\"\xff'"},
      {"", "malformed JSON at line 1, column 1: syntax error while parsing value - unexpected end of input; "
           "expected '[', '{', or a literal"},
  };
  for (const auto& [text, error] : cases) {
    EXPECT_EQ(ParseJson(text).status(), absl::InvalidArgumentError(error)) << text;
  }
}

TEST(JsonTest, ARepeatedKeyIsAnError) {
  EXPECT_EQ(ParseJson("{\"a\": 1, \"b\": {\"a\": 2, \"a\": 3}}").status(),
            absl::InvalidArgumentError("malformed JSON: an object repeats the key \"a\""));
  EXPECT_TRUE(ParseJson("{\"a\": 1, \"b\": {\"a\": 2}}").ok()) << "the same key in two objects is fine";
}

TEST(JsonTest, QuoteRoundTripsAndRefusesInvalidUtf8) {
  const std::string s = std::string("tab\tquote\"back\\slash\x01nul") + '\0' + "\xe2\x82\xac";
  absl::StatusOr<std::string> quoted = JsonQuote(s);
  ASSERT_TRUE(quoted.ok()) << quoted.status();
  EXPECT_EQ(ParseJson(*quoted)->get<std::string>(), s);
  EXPECT_EQ(*JsonQuote("a\"b"), "\"a\\\"b\"");
  EXPECT_EQ(JsonQuote("\xff").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringmaster

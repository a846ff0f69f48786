#include "common/utf8.h"

#include "gtest/gtest.h"

namespace ringmaster {
namespace {

TEST(Utf8Test, ValidIsRfc3629) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain \xC3\xA9t\xC3\xA9 \xF0\x9F\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("a\xC3"));          // truncated
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));   // a surrogate
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));       // overlong
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // above U+10FFFF
}

TEST(Utf8Test, SanitizeKeepsValidTextAndReplacesTheRest) {
  EXPECT_EQ(SanitizeUtf8("plain"), "plain");
  EXPECT_EQ(SanitizeUtf8("\xC3\xA9t\xC3\xA9"), "\xC3\xA9t\xC3\xA9");
  EXPECT_EQ(SanitizeUtf8("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");
  EXPECT_EQ(SanitizeUtf8("a\xC3"), "a\xEF\xBF\xBD");                                // truncated sequence
  EXPECT_EQ(SanitizeUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
  EXPECT_EQ(SanitizeUtf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");                  // overlong
}

TEST(Utf8Test, SafePrefixDoesNotCutACharacter) {
  EXPECT_EQ(Utf8SafePrefix("abc", 8), 3u);
  EXPECT_EQ(Utf8SafePrefix("ab\xC3\xA9", 3), 2u);
  EXPECT_EQ(Utf8SafePrefix("\xF0\x9F\x98\x80x", 4), 4u);
}

TEST(Utf8Test, SafeSuffixStartsAtACharacter) {
  EXPECT_EQ(Utf8SafeSuffix("abc", 8), "abc");
  EXPECT_EQ(Utf8SafeSuffix("ab\xC3\xA9", 1), "");
  EXPECT_EQ(Utf8SafeSuffix("ab\xC3\xA9", 2), "\xC3\xA9");
  EXPECT_EQ(Utf8SafeSuffix("x\xF0\x9F\x98\x80", 3), "");
}

}  // namespace
}  // namespace ringmaster

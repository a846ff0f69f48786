#include "engine/checkpoint/safetensors.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ringmaster::engine {
namespace {

// `json` as a safetensors header (length prefix, no padding), then `data`.
std::string File(const std::string& json, const std::string& data) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((json.size() >> (8 * i)) & 0xff);
  return out + json + data;
}

std::string Bytes(const void* data, size_t size) { return std::string(static_cast<const char*>(data), size); }

TEST(SafetensorsTest, MatchesAFileWrittenByHandFromTheSpec) {
  const float a[] = {1.0f, -2.0f};
  const uint16_t b[] = {0x3c00, 0xc000, 0x3800};  // f16 1, -2, 0.5
  std::vector<SafetensorsView> tensors = {
      {"b", SafetensorsDType::kF16, {3}, absl::string_view(reinterpret_cast<const char*>(b), 6)},
      {"a", SafetensorsDType::kF32, {2}, absl::string_view(reinterpret_cast<const char*>(a), 8)},
  };
  absl::StatusOr<std::string> file = SerializeSafetensors(tensors, {{"format", "pt"}});
  ASSERT_TRUE(file.ok()) << file.status();
  // 139 bytes of JSON padded with 5 spaces to 144 = 0x90; the f32 tensor is
  // laid out first to keep it 4-byte aligned.
  const std::string expected =
      std::string("\x90\0\0\0\0\0\0\0", 8) +
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"F16","shape":[3],"data_offsets":[8,14]},)"
      R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})" +
      "     " + std::string("\x00\x00\x80\x3f\x00\x00\x00\xc0", 8) + std::string("\x00\x3c\x00\xc0\x00\x38", 6);
  EXPECT_EQ(*file, expected);

  absl::StatusOr<ParsedSafetensors> parsed = ParseSafetensors(expected, "golden");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->tensors.size(), 2u);
  EXPECT_EQ(parsed->tensors[0].name, "b");
  EXPECT_EQ(parsed->tensors[0].dtype, SafetensorsDType::kF16);
  EXPECT_EQ(parsed->tensors[0].shape, (Shape{3}));
  EXPECT_EQ(parsed->tensors[0].data, Bytes(b, 6));
  EXPECT_EQ(parsed->tensors[1].data, Bytes(a, 8));
  EXPECT_EQ(parsed->metadata, (SafetensorsMetadata{{"format", "pt"}}));
}

TEST(SafetensorsTest, RoundTripsEveryDTypeBitwise) {
  Tensor f32 = Tensor::FromVector({2, 3}, {1, -0.0f, std::numeric_limits<float>::infinity(), 1e-40f, 3, 4});
  const uint32_t nan_bits = 0x7fc12345;  // a NaN with a payload
  std::memcpy(f32.f32() + 5, &nan_bits, 4);
  Tensor f16 = Tensor::Empty({5}, DType::kF16);
  Tensor bf16 = Tensor::Empty({1, 1, 3}, DType::kBF16);
  for (int i = 0; i < 5; ++i) f16.u16()[i] = FloatToHalf(i * 0.3f - 1);
  for (int i = 0; i < 3; ++i) bf16.u16()[i] = FloatToBFloat16(i * 1e30f + 1);
  const int32_t i32[] = {-7, 0, 2147483647};
  const int64_t i64[] = {-1, 1LL << 40};
  Tensor scalar = Tensor::FromVector({}, {42});
  Tensor empty = Tensor::Empty({0, 4}, DType::kF32);

  std::vector<SafetensorsView> views;
  for (const auto& [name, tensor] : std::vector<std::pair<std::string, Tensor>>{
           {"f16", f16}, {"f32", f32}, {"bf16", bf16}, {"scalar", scalar}, {"empty", empty}}) {
    absl::StatusOr<SafetensorsView> view = ViewOf(name, tensor);
    ASSERT_TRUE(view.ok()) << view.status();
    views.push_back(*view);
  }
  const std::string i32_bytes = Bytes(i32, sizeof i32), i64_bytes = Bytes(i64, sizeof i64);
  views.push_back({"layer.0.steps", SafetensorsDType::kI32, {3}, i32_bytes});
  views.push_back({"layer.0.count", SafetensorsDType::kI64, {2}, i64_bytes});
  absl::StatusOr<std::string> file = SerializeSafetensors(views, {});
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->substr(8, 2), "{\"");  // no __metadata__ when there is none
  absl::StatusOr<ParsedSafetensors> parsed = ParseSafetensors(*file, "round-trip");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->tensors.size(), views.size());
  for (size_t i = 0; i < views.size(); ++i) {
    const SafetensorsView& got = parsed->tensors[i];
    EXPECT_EQ(got.name, views[i].name);
    EXPECT_EQ(got.dtype, views[i].dtype);
    EXPECT_EQ(got.shape, views[i].shape);
    EXPECT_EQ(got.data, views[i].data) << got.name;
    // Every tensor is aligned to its element size within the file.
    EXPECT_EQ((got.data.data() - file->data()) % SafetensorsDTypeSize(got.dtype), 0u) << got.name;
  }
  absl::StatusOr<Tensor> back = ToTensor(parsed->tensors[1]);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->dtype(), DType::kF32);
  EXPECT_EQ(back->shape(), (Shape{2, 3}));
  EXPECT_EQ(std::memcmp(back->raw(), f32.raw(), f32.bytes()), 0);
  absl::StatusOr<Tensor> ints = ToTensor(parsed->tensors[5]);
  ASSERT_TRUE(ints.ok()) << ints.status();
  EXPECT_EQ(ints->dtype(), DType::kI32);
  EXPECT_EQ(std::vector<int32_t>(ints->i32(), ints->i32() + 3), std::vector<int32_t>(i32, i32 + 3));
  EXPECT_EQ(ToTensor(parsed->tensors[6]).status(),
            absl::InvalidArgumentError("tensor \"layer.0.count\" has dtype I64, which Tensor cannot hold"));
}

TEST(SafetensorsTest, WriterRejectsBadTensors) {
  const float x[] = {1, 2};
  const absl::string_view data(reinterpret_cast<const char*>(x), 8);
  EXPECT_EQ(
      SerializeSafetensors({{"w", SafetensorsDType::kF32, {2}, data}, {"w", SafetensorsDType::kF32, {2}, data}}, {})
          .status(),
      absl::InvalidArgumentError("tensor name \"w\" is reserved or repeated"));
  EXPECT_EQ(SerializeSafetensors({{"__metadata__", SafetensorsDType::kF32, {2}, data}}, {}).status(),
            absl::InvalidArgumentError("tensor name \"__metadata__\" is reserved or repeated"));
  EXPECT_EQ(SerializeSafetensors({{"w", SafetensorsDType::kF32, {3}, data}}, {}).status(),
            absl::InvalidArgumentError("tensor \"w\": 8 bytes do not make F32 [3]"));
  EXPECT_EQ(SerializeSafetensors({{"\xff", SafetensorsDType::kF32, {2}, data}}, {}).status(),
            absl::InvalidArgumentError("a tensor name is empty or not UTF-8"));
  Tensor on_device = Tensor::Wrap(const_cast<float*>(x), {2}, DType::kF32, Device::kCuda);
  EXPECT_EQ(ViewOf("w", on_device).status(),
            absl::InvalidArgumentError("tensor \"w\" is on cuda; copy it to the host first"));
}

TEST(SafetensorsTest, ReaderValidatesEveryField) {
  const std::string f32x2(8, '\x01');
  const auto entry = [](const std::string& name, const std::string& body) {
    return absl::StrCat("\"", name, "\":", body);
  };
  const std::string a = entry("a", R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})");
  const std::pair<std::string, std::string> cases[] = {
      {std::string("\x05\0\0\0", 4), "4 bytes are fewer than the 8-byte header length"},
      {File("{}", "").substr(0, 9), "header length 2 exceeds the file of 9 bytes or the 100000000-byte limit"},
      {std::string("\xff\xff\xff\xff\0\0\0\0", 8) + "{}",
       "header length 4294967295 exceeds the file of 10 bytes or the 100000000-byte limit"},
      {File(" {}", ""), "header does not start with '{'"},
      {File("{\"a\":", ""),
       "header is not valid JSON: malformed JSON at line 1, column 6: syntax error while parsing value - unexpected "
       "end of input; expected '[', '{', or a literal"},
      {File("{" + a + "," + a + "}", f32x2), "header is not valid JSON: malformed JSON: an object repeats the key \"a\""},
      {File("{" + entry("a", R"({"dtype":"F64","shape":[1],"data_offsets":[0,8]})") + "}", f32x2),
       "tensor \"a\": dtype is not one of F32, F16, BF16, I32, I64"},
      {File("{" + entry("a", R"({"dtype":"F32","shape":[2]})") + "}", f32x2),
       "tensor \"a\" must be an object with exactly \"dtype\", \"shape\" and \"data_offsets\""},
      {File("{" + entry("a", R"({"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1})") + "}", f32x2),
       "tensor \"a\" must be an object with exactly \"dtype\", \"shape\" and \"data_offsets\""},
      {File("{" + entry("a", R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})") + "}", f32x2),
       "tensor \"a\": shape is not an array of non-negative integers"},
      {File("{" + entry("a", R"({"dtype":"F32","shape":[2],"data_offsets":[8,0]})") + "}", f32x2),
       "tensor \"a\": data_offsets is not [begin, end] with 0 <= begin <= end"},
      {File("{" + entry("a", R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})") + "}", f32x2),
       "tensor \"a\": F32 [3] needs 12 bytes, data_offsets [0, 8] hold 8"},
      {File("{" + entry("a", R"({"dtype":"F32","shape":[2],"data_offsets":[4,12]})") + "}", f32x2 + "1234"),
       "tensor \"a\" starts at byte 4, expected 0: data must be contiguous from 0, without gaps or overlaps"},
      {File("{" + a + "," + entry("b", R"({"dtype":"F16","shape":[2],"data_offsets":[6,10]})") + "}", f32x2 + "12"),
       "tensor \"b\" starts at byte 6, expected 8: data must be contiguous from 0, without gaps or overlaps"},
      {File("{" + a + "}", f32x2.substr(0, 6)), "tensor \"a\" ends at byte 8, beyond the 6 bytes of data"},
      {File("{" + a + "}", f32x2 + "xx"), "tensors end at byte 8, but the data section has 10 bytes"},
      {File("{\"__metadata__\":{\"format\":1}}", ""), "__metadata__ value of \"format\" is not a string"},
      {File("[]", ""), "header does not start with '{'"},
  };
  for (const auto& [file, error] : cases) {
    EXPECT_EQ(ParseSafetensors(file, "m.safetensors").status(), absl::DataLossError("m.safetensors: " + error))
        << error;
  }
  // Padding after the JSON is allowed.
  EXPECT_TRUE(ParseSafetensors(File("{" + a + "}   ", f32x2), "padded").ok());
  // An empty tensor may share its offset with the next one, in either header order.
  const std::string empty = entry("e", R"({"dtype":"F16","shape":[0,3],"data_offsets":[0,0]})");
  EXPECT_TRUE(ParseSafetensors(File("{" + a + "," + empty + "}", f32x2), "empty-last").ok());
  EXPECT_TRUE(ParseSafetensors(File("{" + empty + "," + a + "}", f32x2), "empty-first").ok());
}

}  // namespace
}  // namespace ringmaster::engine

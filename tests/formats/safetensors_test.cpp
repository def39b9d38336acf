#include "formats/safetensors.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "support/safetensors_writer.h"

namespace qwenrt {
namespace {

using test::safetensors_image;

std::span<const std::byte> view(const std::vector<uint8_t>& v) { return {reinterpret_cast<const std::byte*>(v.data()), v.size()}; }

std::string error_of(const std::vector<uint8_t>& image) {
  try {
    parse_safetensors(view(image), "x.safetensors");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Safetensors, ParsesTensorsAndMetadata) {
  auto img = safetensors_image({{"a", "BF16", {2, 3}, std::vector<uint8_t>(12, 1)}, {"b", "F32", {4}, std::vector<uint8_t>(16, 2)}},
                               {{"__metadata__", {{"format", "pt"}}}});
  auto t = parse_safetensors(view(img), "x.safetensors");
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].name, "a");
  EXPECT_EQ(t[0].dtype, DType::BF16);
  EXPECT_EQ(t[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t[0].nbytes, 12u);
  EXPECT_EQ(static_cast<uint8_t>(t[1].data[0]), 2);
}

TEST(Safetensors, RejectsTruncatedFile) {
  auto img = safetensors_image({{"a", "F32", {4}, std::vector<uint8_t>(16, 0)}});
  img.resize(img.size() - 1);
  EXPECT_NE(error_of(img).find("runs past the end"), std::string::npos) << error_of(img);
  EXPECT_NE(error_of({1, 2, 3}).find("truncated"), std::string::npos);
}

TEST(Safetensors, RejectsHeaderPastEnd) {
  auto img = safetensors_image({});
  img[0] = 0xff;
  img[1] = 0xff;
  EXPECT_NE(error_of(img).find("runs past the end of the file"), std::string::npos) << error_of(img);
  img[7] = 0x7f;
  EXPECT_NE(error_of(img).find("100 MB limit"), std::string::npos) << error_of(img);
}

TEST(Safetensors, RejectsBadJsonAndEntries) {
  std::vector<uint8_t> img(8);
  std::string h = "{not json";
  img[0] = static_cast<uint8_t>(h.size());
  img.insert(img.end(), h.begin(), h.end());
  EXPECT_NE(error_of(img).find("not valid JSON"), std::string::npos);

  nlohmann::json bad = {{"t", {{"dtype", "Q7"}, {"shape", {1}}, {"data_offsets", {0, 1}}}}};
  std::string hs = bad.dump();
  std::vector<uint8_t> img2(8);
  img2[0] = static_cast<uint8_t>(hs.size());
  img2.insert(img2.end(), hs.begin(), hs.end());
  img2.push_back(0);
  EXPECT_NE(error_of(img2).find("unknown dtype 'Q7'"), std::string::npos) << error_of(img2);
}

TEST(Safetensors, RejectsSizeMismatchAndOverlap) {
  // Shape says 4 floats, offsets give 12 bytes.
  nlohmann::json h = {{"t", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, 12}}}}};
  std::string hs = h.dump();
  std::vector<uint8_t> img(8);
  img[0] = static_cast<uint8_t>(hs.size());
  img.insert(img.end(), hs.begin(), hs.end());
  img.resize(img.size() + 16);
  EXPECT_NE(error_of(img).find("needs 16"), std::string::npos) << error_of(img);

  nlohmann::json o = {{"a", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}}},
                      {"b", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {4, 12}}}}};
  hs = o.dump();
  std::vector<uint8_t> img2(8);
  img2[0] = static_cast<uint8_t>(hs.size());
  img2.insert(img2.end(), hs.begin(), hs.end());
  img2.resize(img2.size() + 12);
  EXPECT_NE(error_of(img2).find("overlapping"), std::string::npos) << error_of(img2);
}

TEST(Safetensors, RejectsNegativeAndAbsurdShapes) {
  nlohmann::json h = {{"t", {{"dtype", "F32"}, {"shape", {-1}}, {"data_offsets", {0, 0}}}}};
  std::string hs = h.dump();
  std::vector<uint8_t> img(8);
  img[0] = static_cast<uint8_t>(hs.size());
  img.insert(img.end(), hs.begin(), hs.end());
  EXPECT_NE(error_of(img).find("negative dimension"), std::string::npos) << error_of(img);

  h = {{"t", {{"dtype", "F32"}, {"shape", {1ll << 30, 1ll << 30, 1ll << 30}}, {"data_offsets", {0, 0}}}}};
  hs = h.dump();
  img.assign(8, 0);
  img[0] = static_cast<uint8_t>(hs.size());
  img.insert(img.end(), hs.begin(), hs.end());
  EXPECT_NE(error_of(img).find("overflows"), std::string::npos) << error_of(img);
}

}  // namespace
}  // namespace qwenrt

// ModelConfig fields read from config.json: max_position_embeddings.
#include "model/config.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "formats/json_file.h"
#include "support/fixtures.h"

namespace qwenrt {
namespace {

using nlohmann::json;

json fixture_config(const std::string& name) { return read_json_file(test::fixtures_dir() / name / "config.json"); }

std::string error_of(const json& j) {
  try {
    parse_model_config(j, "m/config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ModelConfigMaxPositions, ReadFlatAndNested) {
  EXPECT_EQ(parse_model_config(fixture_config("dense_tied"), "c").max_position_embeddings, 32768);
  EXPECT_EQ(parse_model_config(fixture_config("vlm"), "c").max_position_embeddings, 32768);  // in text_config

  json flat = fixture_config("dense_tied");
  flat["max_position_embeddings"] = 262144;  // the released Qwen 3.5 value
  EXPECT_EQ(parse_model_config(flat, "c").max_position_embeddings, 262144);
  flat.erase("max_position_embeddings");
  EXPECT_EQ(parse_model_config(flat, "c").max_position_embeddings, 0);  // absent: no limit of its own
  flat["max_position_embeddings"] = nullptr;
  EXPECT_EQ(parse_model_config(flat, "c").max_position_embeddings, 0);

  // Nested: text_config decides, the top level is the fallback.
  json vlm = fixture_config("vlm");
  vlm["max_position_embeddings"] = 4096;
  EXPECT_EQ(parse_model_config(vlm, "c").max_position_embeddings, 32768);
  vlm["text_config"].erase("max_position_embeddings");
  EXPECT_EQ(parse_model_config(vlm, "c").max_position_embeddings, 4096);
  vlm.erase("max_position_embeddings");
  EXPECT_EQ(parse_model_config(vlm, "c").max_position_embeddings, 0);
}

TEST(ModelConfigMaxPositions, MustBePositiveAndBounded) {
  json flat = fixture_config("dense_tied");
  for (const json& bad : {json(0), json(-1), json(int64_t{1} << 31), json(uint64_t{1} << 63), json("32768"), json(1.5)}) {
    flat["max_position_embeddings"] = bad;
    const std::string e = error_of(flat);
    EXPECT_NE(e.find("m/config.json"), std::string::npos) << bad.dump() << " -> " << e;
    EXPECT_NE(e.find("'max_position_embeddings'"), std::string::npos) << bad.dump() << " -> " << e;
  }
  flat["max_position_embeddings"] = 0;
  EXPECT_NE(error_of(flat).find("outside [1, 2147483647]"), std::string::npos) << error_of(flat);
  json vlm = fixture_config("vlm");
  vlm["text_config"].erase("max_position_embeddings");
  vlm["max_position_embeddings"] = -4;
  EXPECT_NE(error_of(vlm).find("'max_position_embeddings' = -4"), std::string::npos) << error_of(vlm);
}

}  // namespace
}  // namespace qwenrt

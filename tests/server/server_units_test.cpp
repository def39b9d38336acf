// Pieces of src/server that need no model: API keys, typed JSON fields, the JSON depth limit, the
// embedded chat page.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "server/auth.h"
#include "server/json_fields.h"
#include "server/web_assets.h"

namespace qwenrt::server {
namespace {

TEST(ServerAuth, BearerOrXApiKey) {
  EXPECT_TRUE(authorized("", "", ""));
  EXPECT_TRUE(authorized("sekrit", "Bearer sekrit", ""));
  EXPECT_TRUE(authorized("sekrit", "", "sekrit"));
  EXPECT_FALSE(authorized("sekrit", "Bearer sekri", ""));
  EXPECT_FALSE(authorized("sekrit", "Bearer sekritt", ""));
  EXPECT_FALSE(authorized("sekrit", "sekrit", ""));
  EXPECT_FALSE(authorized("sekrit", "", ""));
  EXPECT_FALSE(constant_time_equal("abc", ""));
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
}

TEST(ServerJson, FieldsNameTheirPath) {
  const json j = json::parse(R"({"a": 1, "b": "x", "c": 1.5, "d": null, "s": ["u", "v"]})");
  EXPECT_EQ(get_int(j, "a", 0, 10), 1);
  EXPECT_FALSE(get_int(j, "d", 0, 10).has_value());
  EXPECT_FALSE(get_int(j, "missing", 0, 10).has_value());
  try {
    get_int(j, "b", 0, 10, "outer");
    FAIL();
  } catch (const RequestError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, "outer.b");
  }
  EXPECT_THROW(get_int(j, "c", 0, 10), RequestError);
  EXPECT_THROW(get_int(j, "a", 2, 10), RequestError);
  EXPECT_THROW(get_number(j, "b", 0, 1), RequestError);
  EXPECT_EQ(get_string_list(j, "s", 4), (std::vector<std::string>{"u", "v"}));
  EXPECT_THROW(get_string_list(j, "s", 1), RequestError);
}

TEST(ServerJson, BodyLimits) {
  EXPECT_NO_THROW(parse_body(R"({"x": [[[1]]]})"));
  EXPECT_THROW(parse_body("[1]"), RequestError);
  EXPECT_THROW(parse_body("{"), RequestError);
  EXPECT_THROW(parse_body(std::string(200, '[') + std::string(200, ']')), RequestError);
  EXPECT_THROW(parse_body("{\"x\": " + std::string(100000, '[') + "}"), RequestError);
}

TEST(ServerWeb, PageIsEmbeddedByteForByte) {
  const std::pair<const char*, const char*> expected[] = {{"/", "index.html"}, {"/chat.js", "chat.js"}, {"/chat.css", "chat.css"}};
  ASSERT_EQ(web::embedded_files().size(), std::size(expected));
  for (const auto& [url, file] : expected) {
    const web::EmbeddedFile* found = nullptr;
    for (const auto& f : web::embedded_files())
      if (f.url == url) found = &f;
    ASSERT_NE(found, nullptr) << url;
    std::ifstream in(std::string(QWENRT_SOURCE_DIR "/src/server/web/") + file, std::ios::binary);
    std::ostringstream source;
    source << in.rdbuf();
    ASSERT_FALSE(source.str().empty()) << file;
    EXPECT_EQ(found->body, source.str()) << file;
    EXPECT_EQ(found->body.data()[found->body.size()], '\0');
  }
  EXPECT_EQ(web::embedded_files()[0].mime, "text/html");
}

}  // namespace
}  // namespace qwenrt::server

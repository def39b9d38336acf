// Which chat template a checkpoint directory provides, following transformers' loading precedence.
#include "text/jinja/chat_template_loader.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace qwenrt::text {
namespace {

namespace fs = std::filesystem;

class ChatTemplateLoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("qwenrt_chat_template_" + std::to_string(::getpid()) + "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const fs::path& rel, const std::string& text) {
    fs::create_directories((dir_ / rel).parent_path());
    std::ofstream(dir_ / rel, std::ios::binary) << text;
  }
  fs::path dir_;
};

TEST_F(ChatTemplateLoaderTest, ConfigStringTemplate) {
  write("tokenizer_config.json", R"({"chat_template": "{{ 'from config' }}", "eos_token": "<|im_end|>",
                                     "bos_token": null, "pad_token": {"content": "<|endoftext|>", "special": true}})");
  const ChatTemplateSet set = ChatTemplateSet::from_directory(dir_);
  EXPECT_EQ(set.select(), "{{ 'from config' }}");
  EXPECT_EQ(set.special_tokens().eos_token.value_or(""), "<|im_end|>");
  EXPECT_FALSE(set.special_tokens().bos_token.has_value());
  EXPECT_EQ(set.special_tokens().pad_token.value_or(""), "<|endoftext|>");
}

TEST_F(ChatTemplateLoaderTest, JinjaFileTakesPrecedenceOverConfig) {
  write("tokenizer_config.json", R"({"chat_template": "config"})");
  write("chat_template.jinja", "jinja file");
  EXPECT_EQ(ChatTemplateSet::from_directory(dir_).select(), "jinja file");
}

TEST_F(ChatTemplateLoaderTest, NamedTemplatesFromConfigList) {
  write("tokenizer_config.json", R"({"chat_template": [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}]})");
  const ChatTemplateSet set = ChatTemplateSet::from_directory(dir_);
  EXPECT_EQ(set.select(), "D");
  EXPECT_EQ(set.select(std::nullopt, /*has_tools=*/true), "T");
  EXPECT_EQ(set.select(std::string("tool_use")), "T");
  EXPECT_THROW(set.select(std::string("missing")), std::runtime_error);
}

TEST_F(ChatTemplateLoaderTest, AdditionalTemplatesDirectory) {
  write("chat_template.jinja", "D");
  write("additional_chat_templates/rag.jinja", "R");
  const ChatTemplateSet set = ChatTemplateSet::from_directory(dir_);
  EXPECT_EQ(set.templates().size(), 2u);
  EXPECT_EQ(set.select(), "D");
  EXPECT_EQ(set.select(std::string("rag")), "R");
}

TEST_F(ChatTemplateLoaderTest, NoDefaultAmongSeveralIsAnError) {
  write("tokenizer_config.json", R"({"chat_template": [{"name": "a", "template": "A"}, {"name": "b", "template": "B"}]})");
  EXPECT_THROW(ChatTemplateSet::from_directory(dir_).select(), std::runtime_error);
}

TEST_F(ChatTemplateLoaderTest, NoTemplateIsAnError) {
  write("tokenizer_config.json", R"({"eos_token": "x"})");
  const ChatTemplateSet set = ChatTemplateSet::from_directory(dir_);
  EXPECT_TRUE(set.empty());
  EXPECT_THROW(set.select(), std::runtime_error);
}

TEST_F(ChatTemplateLoaderTest, SharedQwen3ConfigRendersLikeTheJinjaFile) {
  const std::string shared = std::string(QWENRT_SOURCE_DIR) + "/tests/data/chat_template/";
  std::ifstream in(shared + "qwen3_chat_template.jinja", std::ios::binary);
  const std::string jinja((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  nlohmann::ordered_json config = {{"chat_template", jinja}, {"eos_token", "<|im_end|>"}};
  const ChatTemplateSet set = ChatTemplateSet::from_tokenizer_config(config);
  const ChatTemplate tpl = ChatTemplate::parse(set.select());
  const auto request = nlohmann::ordered_json::parse(R"({"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": true})");
  EXPECT_EQ(tpl.apply(request, set.special_tokens()), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

}  // namespace
}  // namespace qwenrt::text

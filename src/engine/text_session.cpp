#include "engine/text_session.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/text_output.h"
#include "formats/generation_config.h"
#include "text/jinja/chat_template_loader.h"
#include "text/output/tool_call_parser.h"

namespace qwenrt {

TextSession::TextSession(const std::string& model_dir, bool verbose, const DeviceSpec& device) {
  namespace fs = std::filesystem;
  const auto t0 = std::chrono::steady_clock::now();
  if (verbose) std::fprintf(stderr, "loading %s ...", model_dir.c_str());
  model_ = std::make_unique<Qwen35Model>(Qwen35Model::load(model_dir));
  model_->use_device(device);
  tokenizer_ = std::make_unique<text::Tokenizer>(text::Tokenizer::load(model_dir));
  try {
    auto set = text::ChatTemplateSet::from_directory(model_dir);
    if (set.empty()) fail(model_dir, ": no chat template (tokenizer_config.json chat_template or chat_template.jinja)");
    template_ = std::make_unique<text::ChatTemplate>(text::ChatTemplate::parse(set.select()));
    special_ = set.special_tokens();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail(model_dir, ": chat template: ", e.what());
  }
  if (tokenizer_->vocab_size() > model_->config().vocab_size)
    fail(model_dir, ": the tokenizer has ", tokenizer_->vocab_size(), " tokens but the model only ", model_->config().vocab_size);
  stop_ids_ = tokenizer_->stop_ids();

  // Sampling defaults from generation_config.json, as transformers and vLLM use them.
  defaults_.seed = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  if (fs::exists(fs::path(model_dir) / "generation_config.json")) {
    const GenerationConfig g = read_generation_config(fs::path(model_dir) / "generation_config.json");
    if (g.do_sample == false) defaults_.temperature = 0.0f;
    else if (g.temperature) defaults_.temperature = static_cast<float>(*g.temperature);
    if (g.top_k) defaults_.top_k = *g.top_k;
    if (g.top_p) defaults_.top_p = static_cast<float>(*g.top_p);
    if (g.min_p) defaults_.min_p = static_cast<float>(*g.min_p);
    if (g.repetition_penalty) defaults_.repetition_penalty = static_cast<float>(*g.repetition_penalty);
    defaults_.validate();
  }
  if (verbose)
    std::fprintf(stderr, " done in %.1f s (%s, %lld layers)\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                 model_->config().architecture.c_str(), static_cast<long long>(model_->config().num_layers));
}

TextSession::TextSession(std::unique_ptr<Qwen35Model> model, text::Tokenizer tokenizer)
    : model_(std::move(model)), tokenizer_(std::make_unique<text::Tokenizer>(std::move(tokenizer))) {
  defaults_.seed = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
}

std::string TextSession::render(const nlohmann::ordered_json& messages, bool enable_thinking) const {
  return render_request({{"messages", messages}, {"add_generation_prompt", true}, {"enable_thinking", enable_thinking}});
}

std::string TextSession::render_request(const nlohmann::ordered_json& request) const {
  if (!template_) fail("this model has no chat template");
  try {
    return template_->apply(request, special_);
  } catch (const std::exception& e) {
    fail("chat template: ", e.what());
  }
}

TurnResult TextSession::turn(const nlohmann::ordered_json& messages, bool enable_thinking, const SampledGenerationOptions& options,
                             const std::function<void(const std::string&)>& on_content, const std::function<void(const std::string&)>& on_reasoning) {
  const std::string prompt_text = render(messages, enable_thinking);
  const std::vector<int32_t> prompt = tokenizer_->encode(prompt_text);
  SampledGenerationOptions opt = options;
  opt.stop_ids.insert(opt.stop_ids.end(), stop_ids_.begin(), stop_ids_.end());
  ModelCache cache = model_->new_cache(1);
  const int slot = cache.acquire();
  TextOutputOptions out_opt;
  out_opt.starts_in_reasoning = prompt_opens_reasoning(prompt_text);
  TextOutput output(*tokenizer_, out_opt);
  TurnResult result;
  auto emit = [&](const OutputDelta& d) {
    if (!d.reasoning.empty()) on_reasoning(d.reasoning), result.reasoning += d.reasoning;
    if (!d.content.empty()) on_content(d.content), result.content += d.content;
  };
  result.stats = generate_sampled(
      *model_, cache, slot, prompt, opt,
      [&](const SampledToken& t) {
        result.tokens.push_back(t.id);
        emit(output.push(t.id));
        return true;
      },
      ThreadPool::global());
  emit(output.finish());
  auto parsed = text::parse_tool_calls(result.content);
  for (const auto& c : parsed.calls) result.tool_calls.push_back({{"name", c.name}, {"arguments", c.arguments}});
  if (!parsed.calls.empty()) result.content = parsed.content;
  return result;
}

}  // namespace qwenrt

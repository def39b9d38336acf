// qwenrt tokenize / template: the text pipeline on its own, exactly as the reference stack does it.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "cli/commands.h"
#include "cli/options.h"
#include "core/error.h"
#include "formats/json_file.h"
#include "text/jinja/chat_template_loader.h"
#include "text/tokenizer/tokenizer.h"

namespace qwenrt::cli {

int run_tokenize(const Args& args) {
  Options opt("tokenize", {"model"}, {"no-special"});
  opt.parse(args);
  apply_process_options(opt);
  device_option(opt);  // accepted everywhere; this command computes nothing on it
  const auto tok = text::Tokenizer::load(opt.str("model"));
  std::string input((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  const auto ids = tok.encode(input, !opt.flag("no-special"));
  std::string out = "[";
  for (std::size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
  std::printf("%s]\n", out.c_str());
  return 0;
}

int run_template(const Args& args) {
  Options opt("template", {"model", "request", "template-name"}, {});
  opt.parse(args);
  apply_process_options(opt);
  device_option(opt);  // accepted everywhere; this command computes nothing on it
  const std::string dir = opt.str("model");
  // Ordered: key order reaches the template (tojson keeps insertion order, as Python does).
  const std::string request_path = opt.str("request");
  const std::string request_text = read_input_file(request_path, "template: --request");
  check_json_depth(request_text, request_path);
  const nlohmann::ordered_json request = nlohmann::ordered_json::parse(request_text, nullptr, false);
  if (request.is_discarded()) fail(request_path, ": invalid JSON");
  if (!request.is_object()) fail(request_path, ": the request must be a JSON object");
  try {
    const auto set = text::ChatTemplateSet::from_directory(dir);
    if (set.empty()) fail(dir, ": no chat template (tokenizer_config.json chat_template or chat_template.jinja)");
    const bool has_tools = request.contains("tools") && !request["tools"].is_null();
    const std::optional<std::string> name = opt.has("template-name") ? std::optional(opt.str("template-name")) : std::nullopt;
    const auto tmpl = text::ChatTemplate::parse(set.select(name, has_tools));
    const std::string rendered = tmpl.apply(request, set.special_tokens());
    std::fwrite(rendered.data(), 1, rendered.size(), stdout);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail(e.what());
  }
  return 0;
}

}  // namespace qwenrt::cli

// Tokenizer::load: reads tokenizer.json (+ tokenizer_config.json, generation_config.json) and
// checks that every part of the pipeline is one this engine reproduces exactly. A feature it
// does not implement is an error naming the file and the feature, never silently ignored --
// except truncation and padding, which concern batching, not what the ids of a text are.
#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "formats/generation_config.h"
#include "formats/json_file.h"
#include "text/tokenizer/tokenizer.h"
#include "text/tokenizer/tokenizer_byte_level.h"
#include "text/tokenizer/tokenizer_impl.h"

namespace qwenrt::text {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

[[noreturn]] void fail(const fs::path& file, const std::string& what) { throw TokenizerError("tokenizer: " + file.string() + ": " + what); }

json read_json(const fs::path& file) {
  if (fs::exists(file) && !fs::is_regular_file(file)) fail(file, "not a regular file (a directory, FIFO or device?)");
  std::ifstream in(file, std::ios::binary);
  if (!in) fail(file, "cannot open file");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  try {
    check_json_depth(text, "tokenizer: " + file.string());
  } catch (const qwenrt::Error& e) {
    throw TokenizerError(e.what());
  }
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    fail(file, std::string("malformed JSON: ") + e.what());
  }
}

std::string type_of(const json& j) {
  const auto it = j.find("type");
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// A regex matching `literal` exactly (for Split patterns given as {"String": ...}).
std::string escape_regex(std::string_view literal) {
  std::string out;
  for (const char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

class Loader {
 public:
  explicit Loader(fs::path file) : file_(std::move(file)) {}

  std::shared_ptr<Tokenizer::Impl> load_tokenizer_json() {
    const json root = read_json(file_);
    if (!root.is_object()) fail(file_, "top level is not a JSON object");
    try {
      auto impl = std::make_shared<Tokenizer::Impl>(load_model(member(root, "model")));
      impl->source = file_;
      impl->nfc = load_normalizer(root.value("normalizer", json()));
      impl->pre_tokenizer = PreTokenizer(load_pre_tokenizer(root.value("pre_tokenizer", json())));
      check_decoder(root.value("decoder", json()));
      check_post_processor(root.value("post_processor", json()));
      load_added_tokens(root.value("added_tokens", json::array()), *impl);
      return impl;
    } catch (const json::exception& e) {
      fail(file_, std::string("unexpected JSON structure: ") + e.what());
    }
  }

 private:
  // A token id: an integer in [0, kMaxTokenId).
  int32_t token_id(const json& id, const std::string& what) {
    if (!id.is_number_integer()) fail(file_, what + " has a non-integer id " + id.dump());
    const bool negative = id.is_number_unsigned() ? false : id.get<int64_t>() < 0;
    if (negative) fail(file_, what + " has a negative id " + id.dump());
    if (id.get<uint64_t>() >= static_cast<uint64_t>(kMaxTokenId)) {
      fail(file_, what + " has id " + id.dump() + ", not below " + std::to_string(kMaxTokenId) + " (limit kMaxTokenId)");
    }
    return static_cast<int32_t>(id.get<uint64_t>());
  }

  // The vocabulary's ids alone must be dense (the tables the model builds are indexed by id).
  void check_id_density(const std::vector<BpeVocabEntry>& vocab, std::size_t count, const char* what) {
    int32_t max_id = -1;
    for (const auto& e : vocab) max_id = std::max(max_id, e.id);
    if (static_cast<int64_t>(max_id) >= kMaxTokenIdSparsity * static_cast<int64_t>(count) + kTokenIdSlack) {
      fail(file_, std::string(what) + " has id " + std::to_string(max_id) + ", far beyond its " + std::to_string(count) +
                      " tokens (ids must be below " + std::to_string(kMaxTokenIdSparsity) + " x tokens + " + std::to_string(kTokenIdSlack) +
                      ": kMaxTokenIdSparsity)");
    }
  }

  const json& member(const json& j, const char* key) {
    const auto it = j.find(key);
    if (it == j.end()) fail(file_, std::string("missing \"") + key + "\"");
    return *it;
  }

  void require(bool ok, const std::string& unsupported_feature) {
    if (!ok) fail(file_, "unsupported " + unsupported_feature);
  }

  BpeModel load_model(const json& m) {
    const std::string type = type_of(m);
    require(type == "BPE" || (type.empty() && m.contains("merges")), "model type \"" + type + "\" (only BPE)");
    require(m.value("dropout", json()).is_null() || m["dropout"].get<double>() == 0.0, "BPE dropout");
    require(!m.value("byte_fallback", false), "BPE byte_fallback");
    for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      const json v = m.value(affix, json());
      require(v.is_null() || v.get<std::string>().empty(), std::string("BPE ") + affix);
    }
    const json& vocab_json = member(m, "vocab");
    if (!vocab_json.is_object()) fail(file_, "model.vocab is not an object");
    std::vector<BpeVocabEntry> vocab;
    vocab.reserve(vocab_json.size());
    for (const auto& [token, id] : vocab_json.items()) {
      auto bytes = byte_level::decode_token(token);
      if (!bytes) {
        fail(file_, "vocab token \"" + token +
                        "\" is not in the ByteLevel alphabet (only "
                        "byte-level BPE vocabularies are supported)");
      }
      vocab.push_back({std::move(*bytes), token_id(id, "model.vocab \"" + token + "\"")});
    }
    check_id_density(vocab, vocab_json.size(), "model.vocab");
    std::vector<BpeMerge> merges;
    const json& merges_json = member(m, "merges");
    merges.reserve(merges_json.size());
    for (const json& merge : merges_json) {
      std::string left, right;
      if (merge.is_string()) {  // older files: "a b"
        const std::string s = merge.get<std::string>();
        const std::size_t space = s.find(' ');
        if (space == std::string::npos) fail(file_, "merge \"" + s + "\" has no space");
        left = s.substr(0, space);
        right = s.substr(space + 1);
      } else if (merge.is_array() && merge.size() == 2) {
        left = merge[0].get<std::string>();
        right = merge[1].get<std::string>();
      } else {
        fail(file_, "a merge is neither \"a b\" nor [\"a\", \"b\"]");
      }
      auto l = byte_level::decode_token(left);
      auto r = byte_level::decode_token(right);
      if (!l || !r) fail(file_, "merge \"" + left + " " + right + "\" is not in the ByteLevel alphabet");
      merges.push_back({std::move(*l), std::move(*r)});
    }
    return BpeModel::build(std::move(vocab), merges, m.value("ignore_merges", false), file_.string());
  }

  // Returns whether NFC applies.
  bool load_normalizer(const json& n) {
    if (n.is_null()) return false;
    const std::string type = type_of(n);
    if (type == "NFC") return true;
    if (type == "Sequence") {
      bool nfc = false;
      for (const json& child : member(n, "normalizers")) {
        require(type_of(child) == "NFC", "normalizer \"" + type_of(child) + "\" (only NFC)");
        nfc = true;
      }
      return nfc;
    }
    require(false, "normalizer \"" + type + "\" (only NFC)");
    return false;
  }

  std::vector<SplitStage> load_pre_tokenizer(const json& p) {
    std::vector<SplitStage> stages;
    bool byte_level = false;
    add_pre_tokenizer(p, stages, byte_level);
    require(byte_level, "pre_tokenizer without ByteLevel (only byte-level BPE)");
    return stages;
  }

  void add_pre_tokenizer(const json& p, std::vector<SplitStage>& stages, bool& byte_level, int depth = 0) {
    if (p.is_null()) return;
    const std::string type = type_of(p);
    if (stages.size() >= kMaxPreTokenizerStages && (type == "Split" || type == "ByteLevel")) {
      fail(file_, "pre_tokenizer has more than " + std::to_string(kMaxPreTokenizerStages) + " split stages (limit kMaxPreTokenizerStages)");
    }
    if (type == "Sequence") {
      if (depth >= kMaxPreTokenizerNesting) {
        fail(file_, "pre_tokenizer nests \"Sequence\" more than " + std::to_string(kMaxPreTokenizerNesting) +
                        " levels deep (limit kMaxPreTokenizerNesting)");
      }
      for (const json& child : member(p, "pretokenizers")) add_pre_tokenizer(child, stages, byte_level, depth + 1);
    } else if (type == "Split") {
      const json& pattern = member(p, "pattern");
      std::string regex;
      if (pattern.contains("Regex")) {
        regex = pattern["Regex"].get<std::string>();
      } else if (pattern.contains("String")) {
        regex = escape_regex(pattern["String"].get<std::string>());
      } else {
        fail(file_, "Split pattern is neither {\"Regex\": ...} nor {\"String\": ...}");
      }
      const std::string behavior = p.value("behavior", std::string("Isolated"));
      require(behavior == "Isolated" || behavior == "Removed", "Split behavior \"" + behavior + "\" (only Isolated and Removed)");
      try {
        stages.push_back({Regex::compile(regex), behavior == "Removed", p.value("invert", false)});
      } catch (const TokenizerError& e) {
        fail(file_, std::string("pre_tokenizer Split: ") + e.what());
      }
    } else if (type == "ByteLevel") {
      require(!p.value("add_prefix_space", false), "ByteLevel add_prefix_space=true");
      if (p.value("use_regex", true)) stages.push_back({Regex::compile(kGpt2SplitPattern)});
      byte_level = true;
    } else {
      require(false, "pre_tokenizer \"" + type + "\"");
    }
  }

  void check_decoder(const json& d) {
    require(!d.is_null() && type_of(d) == "ByteLevel", "decoder \"" + (d.is_null() ? std::string("null") : type_of(d)) + "\" (only ByteLevel)");
  }

  void check_post_processor(const json& p, int depth = 0) {
    // ByteLevel post-processing only adjusts offsets; anything else (TemplateProcessing, ...)
    // would add tokens this engine does not add.
    if (p.is_null()) return;
    const std::string type = type_of(p);
    if (type == "Sequence") {
      if (depth >= kMaxPreTokenizerNesting) {
        fail(file_, "post_processor nests \"Sequence\" more than " + std::to_string(kMaxPreTokenizerNesting) +
                        " levels deep (limit kMaxPreTokenizerNesting)");
      }
      for (const json& child : member(p, "processors")) check_post_processor(child, depth + 1);
      return;
    }
    require(type == "ByteLevel", "post_processor \"" + type + "\" (only ByteLevel or null)");
  }

  void load_added_tokens(const json& list, Tokenizer::Impl& impl) {
    std::vector<std::pair<std::string, int32_t>> raw, normalized;
    int32_t max_id = impl.model.id_limit() - 1;
    for (const json& a : list) {
      const std::string content = a.at("content").get<std::string>();
      AddedToken token{token_id(a.at("id"), "added token \"" + content + "\""), content, a.value("special", false), a.value("normalized", false)};
      for (const char* flag : {"single_word", "lstrip", "rstrip"}) {
        require(!a.value(flag, false), std::string("added token option ") + flag + " (token \"" + token.content + "\")");
      }
      if (token.id < 0) fail(file_, "added token \"" + token.content + "\" has a negative id");
      if (impl.added_by_id.count(token.id)) {
        fail(file_, "added token id " + std::to_string(token.id) + " appears twice");
      }
      max_id = std::max(max_id, token.id);
      (token.normalized ? normalized : raw).push_back({token.content, token.id});
      impl.added_by_id[token.id] = impl.added.size();
      impl.added.push_back(std::move(token));
    }
    if (static_cast<int64_t>(max_id) >= kMaxTokenIdSparsity * static_cast<int64_t>(impl.model.vocab_count() + impl.added.size()) + kTokenIdSlack) {
      fail(file_, "token id " + std::to_string(max_id) + " is far beyond the " + std::to_string(impl.model.vocab_count() + impl.added.size()) +
                      " tokens defined (ids must be below " + std::to_string(kMaxTokenIdSparsity) + " x tokens + " + std::to_string(kTokenIdSlack) +
                      ": kMaxTokenIdSparsity)");
    }
    impl.raw_matcher = AddedTokenMatcher(raw);
    impl.normalized_matcher = AddedTokenMatcher(normalized);
    impl.vocab_size = max_id + 1;
  }

  fs::path file_;
};

// bos_token etc. are null, a string, or {"content": "...", ...} (older AddedToken dicts).
std::optional<int32_t> special_from_config(const json& config, const char* key, const Tokenizer& tok, const fs::path& file) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  std::string content;
  if (it->is_string()) {
    content = it->get<std::string>();
  } else if (it->is_object() && it->contains("content")) {
    content = (*it)["content"].get<std::string>();
  } else {
    fail(file, std::string("\"") + key + "\" is neither a string nor a token object");
  }
  const auto id = tok.token_id(content);
  if (!id) fail(file, std::string("\"") + key + "\" is \"" + content + "\", which is not a token");
  return id;
}

}  // namespace

Tokenizer Tokenizer::load(const fs::path& dir_or_file) {
  fs::path file = dir_or_file;
  if (fs::is_directory(dir_or_file)) file = dir_or_file / "tokenizer.json";
  if (!fs::exists(file)) {
    throw TokenizerError("tokenizer: " + file.string() + ": no such file");
  }
  std::shared_ptr<Impl> impl = Loader(file).load_tokenizer_json();
  const fs::path dir = file.parent_path();

  // The ids of the config's token names need lookups on the loaded tokenizer.
  const Tokenizer partial = make_tokenizer(impl);
  const fs::path config_file = dir / "tokenizer_config.json";
  if (fs::exists(config_file)) {
    const json config = read_json(config_file);
    if (!config.is_object()) fail(config_file, "top level is not a JSON object");
    try {
      impl->bos = special_from_config(config, "bos_token", partial, config_file);
      impl->eos = special_from_config(config, "eos_token", partial, config_file);
      impl->pad = special_from_config(config, "pad_token", partial, config_file);
    } catch (const json::exception& e) {
      fail(config_file, std::string("unexpected JSON structure: ") + e.what());
    }
  }
  if (impl->eos) impl->stop_ids.push_back(*impl->eos);
  const fs::path generation_file = dir / "generation_config.json";
  if (fs::exists(generation_file)) {
    GenerationConfig generation;
    try {
      generation = read_generation_config(generation_file);
      check_generation_token_ids(generation, impl->vocab_size, generation_file.string());
    } catch (const qwenrt::Error& e) {
      throw TokenizerError(std::string("tokenizer: ") + e.what());
    }
    const std::vector<int32_t>& ids = generation.eos_token_ids;
    for (const int32_t id : ids) {
      if (std::find(impl->stop_ids.begin(), impl->stop_ids.end(), id) == impl->stop_ids.end()) {
        impl->stop_ids.push_back(id);
      }
    }
  }
  return make_tokenizer(std::move(impl));
}

}  // namespace qwenrt::text

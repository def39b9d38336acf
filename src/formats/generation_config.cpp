#include "formats/generation_config.h"

#include <cmath>

#include "core/error.h"
#include "formats/json_file.h"

namespace qwenrt {

namespace {

using nlohmann::json;

// A value as it appears in the file, cut short for error messages.
std::string shown(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

const json* field(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

// An integer in [lo, hi]; JSON numbers outside int64 (unsigned above 2^63) are out of range too.
int64_t integer(const json& v, const std::string& source, const std::string& key, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) fail(source, ": \"", key, "\" must be an integer in [", lo, ", ", hi, "], got ", shown(v));
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
    fail(source, ": \"", key, "\" = ", v.get<uint64_t>(), " is outside [", lo, ", ", hi, "]");
  const int64_t i = v.get<int64_t>();
  if (i < lo || i > hi) fail(source, ": \"", key, "\" = ", i, " is outside [", lo, ", ", hi, "]");
  return i;
}

double number(const json& v, const std::string& source, const char* key, double lo, double hi, bool lo_open) {
  const char* range = lo_open ? "(" : "[";
  if (!v.is_number()) fail(source, ": \"", key, "\" must be a number in ", range, lo, ", ", hi, "], got ", shown(v));
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < lo || d > hi || (lo_open && d == lo)) fail(source, ": \"", key, "\" = ", d, " is outside ", range, lo, ", ", hi, "]");
  return d;
}

int32_t token_id(const json& v, const std::string& source, const std::string& key) {
  return static_cast<int32_t>(integer(v, source, key, 0, kMaxGenerationTokenId));
}

}  // namespace

GenerationConfig parse_generation_config(const json& j, const std::string& source) {
  if (!j.is_object()) fail(source, ": must hold a JSON object, got ", j.type_name());
  GenerationConfig g;
  if (const json* eos = field(j, "eos_token_id")) {
    if (eos->is_array()) {
      if (eos->size() > kMaxEosTokenIds) fail(source, ": \"eos_token_id\" lists ", eos->size(), " ids, more than the limit of ", kMaxEosTokenIds);
      for (std::size_t i = 0; i < eos->size(); ++i) g.eos_token_ids.push_back(token_id((*eos)[i], source, "eos_token_id[" + std::to_string(i) + "]"));
    } else if (eos->is_number_integer()) {
      g.eos_token_ids.push_back(token_id(*eos, source, "eos_token_id"));
    } else {
      fail(source, ": \"eos_token_id\" must be a token id or a list of token ids, got ", shown(*eos));
    }
  }
  if (const json* v = field(j, "bos_token_id")) g.bos_token_id = token_id(*v, source, "bos_token_id");
  if (const json* v = field(j, "pad_token_id")) g.pad_token_id = token_id(*v, source, "pad_token_id");
  if (const json* v = field(j, "do_sample")) {
    if (!v->is_boolean()) fail(source, ": \"do_sample\" must be true or false, got ", shown(*v));
    g.do_sample = v->get<bool>();
  }
  if (const json* v = field(j, "temperature")) g.temperature = number(*v, source, "temperature", 0.0, 100.0, false);
  if (const json* v = field(j, "top_k")) g.top_k = static_cast<int32_t>(integer(*v, source, "top_k", 0, kMaxGenerationTopK));
  if (const json* v = field(j, "top_p")) g.top_p = number(*v, source, "top_p", 0.0, 1.0, true);
  if (const json* v = field(j, "min_p")) g.min_p = number(*v, source, "min_p", 0.0, 1.0, false);
  if (const json* v = field(j, "repetition_penalty")) g.repetition_penalty = number(*v, source, "repetition_penalty", 0.0, 100.0, true);
  return g;
}

GenerationConfig read_generation_config(const std::filesystem::path& file) { return parse_generation_config(read_json_file(file), file.string()); }

void check_generation_token_ids(const GenerationConfig& g, int64_t vocab_size, const std::string& source) {
  auto check = [&](int32_t id, const char* key) {
    if (id >= vocab_size)
      fail(source, ": ", key, " ", id, " is not a token id (the vocabulary has ", vocab_size, " tokens: ids 0 to ", vocab_size - 1, ")");
  };
  for (int32_t id : g.eos_token_ids) check(id, "eos_token_id");
  if (g.bos_token_id) check(*g.bos_token_id, "bos_token_id");
  if (g.pad_token_id) check(*g.pad_token_id, "pad_token_id");
}

}  // namespace qwenrt

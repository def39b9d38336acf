// Single-threaded tokenizer throughput: load time, encode MB/s and tokens/s, decode MB/s.
//
//   tokenizer_bench <tokenizer dir or tokenizer.json> <text file> [repetitions]
//
// Prints one JSON line so tools/text/bench_tokenizer.py can compare it with HF tokenizers on
// the same text. The whole file is encoded as one string (as a long prompt would be); the
// first repetition also fills the word cache, so the best of several runs is reported along
// with the first.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "text/tokenizer/tokenizer.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s <tokenizer dir|tokenizer.json> <text file> [repetitions]\n", argv[0]);
    return 2;
  }
  const int repetitions = argc > 3 ? std::max(1, std::atoi(argv[3])) : 5;
  try {
    auto t0 = std::chrono::steady_clock::now();
    const auto tok = qwenrt::text::Tokenizer::load(argv[1]);
    const double load_s = seconds_since(t0);

    std::ifstream in(argv[2], std::ios::binary);
    if (!in) throw std::runtime_error(std::string("cannot open ") + argv[2]);
    std::ostringstream buffer;
    buffer << in.rdbuf();
    const std::string text = buffer.str();

    std::vector<int32_t> ids;
    double first_s = 0, best_s = 1e30;
    for (int r = 0; r < repetitions; ++r) {
      t0 = std::chrono::steady_clock::now();
      ids = tok.encode(text);
      const double s = seconds_since(t0);
      if (r == 0) first_s = s;
      best_s = std::min(best_s, s);
    }
    t0 = std::chrono::steady_clock::now();
    const std::string decoded = tok.decode(ids);
    const double decode_s = seconds_since(t0);

    // FNV-1a over the ids, so the caller can check they equal another tokenizer's.
    uint64_t ids_hash = 1469598103934665603ull;
    for (const int32_t id : ids) ids_hash = (ids_hash ^ static_cast<uint32_t>(id)) * 1099511628211ull;
    const double mb = static_cast<double>(text.size()) / 1e6;
    std::printf(
        "{\"bytes\": %zu, \"tokens\": %zu, \"load_s\": %.3f, \"encode_first_s\": %.4f, "
        "\"encode_best_s\": %.4f, \"encode_mb_per_s\": %.2f, \"encode_mtok_per_s\": %.3f, "
        "\"decode_mb_per_s\": %.1f, \"ids_fnv1a\": \"%016llx\"}\n",
        text.size(), ids.size(), load_s, first_s, best_s, mb / best_s, static_cast<double>(ids.size()) / 1e6 / best_s, mb / decode_s,
        static_cast<unsigned long long>(ids_hash));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

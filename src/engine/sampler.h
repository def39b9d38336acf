#pragma once
// Turns one row of logits into the next token the way the engines users know do it:
// penalties (repetition over prompt and output; presence and frequency over the output), then
// temperature, top-k, top-p and min-p, then a draw from a seeded generator. Temperature 0 is
// argmax. Reported logprobs are those of the model's raw distribution.
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace qwenrt {

struct SamplingParams {
  float temperature = 1.0f;
  int32_t top_k = 0;                // 0: off
  float top_p = 1.0f;               // 1: off
  float min_p = 0.0f;               // 0: off
  float repetition_penalty = 1.0f;  // 1: off; > 1 discourages tokens already seen
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  bool logprobs = false;     // report the sampled token's logprob (costs a pass over the vocabulary)
  int32_t top_logprobs = 0;  // how many alternatives to report (implies logprobs)
  uint64_t seed = 0;

  // Throws Error naming the first parameter out of range.
  void validate() const;
};

struct SampledToken {
  int32_t id;
  float logprob;                               // log p(id) under the raw logits, when asked for (else NaN)
  std::vector<std::pair<int32_t, float>> top;  // top_logprobs best (id, logprob), best first

  // A greedy pick known by its id alone (an argmax step's: no logits came home).
  static SampledToken picked(int32_t id) { return {id, std::numeric_limits<float>::quiet_NaN(), {}}; }
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // `prompt` and `output` are the sequence so far (for penalties).
  SampledToken sample(std::span<const float> logits, std::span<const int32_t> prompt, std::span<const int32_t> output);

  const SamplingParams& params() const { return params_; }

 private:
  double uniform();  // [0, 1), 53 random bits: the same on every platform
  // Without top-k: the ids top-p and min-p keep and their weights e^((l − max)/T).
  void keep_without_top_k(std::span<const float> logits, std::vector<int32_t>& idx, std::vector<double>& weight);

  SamplingParams params_;
  std::mt19937_64 rng_;
  // Reused from call to call: the penalised logits, tokens marked seen, candidate ids and weights.
  std::vector<float> logits_;
  std::vector<uint8_t> seen_;
  std::vector<int32_t> idx_;
  std::vector<double> prob_, all_weights_, bucket_mass_;
};

}  // namespace qwenrt

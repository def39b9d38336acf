#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>

#include "core/error.h"

namespace qwenrt {

void SamplingParams::validate() const {
  if (!(temperature >= 0.0f) || !std::isfinite(temperature)) fail("temperature must be a finite number >= 0, got ", temperature);
  if (top_k < 0) fail("top_k must be >= 0 (0 disables it), got ", top_k);
  if (!(top_p > 0.0f && top_p <= 1.0f)) fail("top_p must be in (0, 1], got ", top_p);
  if (!(min_p >= 0.0f && min_p <= 1.0f)) fail("min_p must be in [0, 1], got ", min_p);
  if (!(repetition_penalty > 0.0f) || !std::isfinite(repetition_penalty)) fail("repetition_penalty must be > 0, got ", repetition_penalty);
  if (!(std::abs(presence_penalty) <= 2.0f)) fail("presence_penalty must be in [-2, 2], got ", presence_penalty);
  if (!(std::abs(frequency_penalty) <= 2.0f)) fail("frequency_penalty must be in [-2, 2], got ", frequency_penalty);
  if (top_logprobs < 0 || top_logprobs > 20) fail("top_logprobs must be in [0, 20], got ", top_logprobs);
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) { params_.validate(); }

double Sampler::uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

namespace {

// log-softmax of the raw logits for the chosen token and the best alternatives.
void fill_logprobs(std::span<const float> logits, int32_t n_top, SampledToken& out) {
  const float mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l - mx));
  const double log_z = static_cast<double>(mx) + std::log(sum);
  out.logprob = static_cast<float>(logits[static_cast<std::size_t>(out.id)] - log_z);
  if (n_top == 0) return;
  std::vector<int32_t> idx(logits.size());
  std::iota(idx.begin(), idx.end(), 0);
  const auto k = std::min<std::size_t>(static_cast<std::size_t>(n_top), idx.size());
  std::partial_sort(idx.begin(), idx.begin() + static_cast<long>(k), idx.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  for (std::size_t i = 0; i < k; ++i) out.top.emplace_back(idx[i], static_cast<float>(logits[idx[i]] - log_z));
}

}  // namespace

SampledToken Sampler::sample(std::span<const float> raw, std::span<const int32_t> prompt, std::span<const int32_t> output) {
  if (raw.empty()) fail("sampler: empty logits");
  const SamplingParams& p = params_;
  std::vector<float> logits(raw.begin(), raw.end());
  const auto V = static_cast<int32_t>(logits.size());

  // Penalties. Repetition (HF/vLLM): divide positive logits, multiply negative ones, for every
  // token seen in prompt or output. Presence/frequency (OpenAI): subtract per output occurrence.
  if (p.repetition_penalty != 1.0f) {
    std::vector<bool> seen(static_cast<std::size_t>(V), false);
    for (auto s : {prompt, output})
      for (int32_t t : s)
        if (t >= 0 && t < V) seen[static_cast<std::size_t>(t)] = true;
    for (int32_t t = 0; t < V; ++t)
      if (seen[static_cast<std::size_t>(t)]) {
        float& l = logits[static_cast<std::size_t>(t)];
        l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
      }
  }
  if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {
    std::unordered_map<int32_t, int> counts;
    for (int32_t t : output)
      if (t >= 0 && t < V) ++counts[t];
    for (const auto& [t, n] : counts) logits[static_cast<std::size_t>(t)] -= p.presence_penalty + p.frequency_penalty * static_cast<float>(n);
  }

  SampledToken out{};
  if (p.temperature == 0.0f) {
    out.id = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    fill_logprobs(raw, p.top_logprobs, out);
    return out;
  }

  // Candidates sorted by logit (ties: lower id first), truncated by top-k.
  std::vector<int32_t> idx(static_cast<std::size_t>(V));
  std::iota(idx.begin(), idx.end(), 0);
  auto better = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  std::size_t keep = static_cast<std::size_t>(V);
  if (p.top_k > 0 && p.top_k < V) {
    keep = static_cast<std::size_t>(p.top_k);
    std::partial_sort(idx.begin(), idx.begin() + static_cast<long>(keep), idx.end(), better);
  } else {
    std::sort(idx.begin(), idx.end(), better);
  }
  // Probabilities at this temperature over the candidates.
  std::vector<double> prob(keep);
  const double mx = logits[idx[0]];
  double z = 0;
  for (std::size_t i = 0; i < keep; ++i) z += prob[i] = std::exp((logits[idx[i]] - mx) / p.temperature);
  for (double& q : prob) q /= z;
  // Top-p: the smallest prefix whose mass reaches top_p. Min-p: drop tokens below min_p · p_max.
  if (p.top_p < 1.0f) {
    double cum = 0;
    std::size_t n = 0;
    while (n < keep && cum < p.top_p) cum += prob[n++];
    keep = std::max<std::size_t>(n, 1);
  }
  if (p.min_p > 0.0f) {
    const double floor = p.min_p * prob[0];
    std::size_t n = 1;
    while (n < keep && prob[n] >= floor) ++n;
    keep = n;
  }
  double mass = 0;
  for (std::size_t i = 0; i < keep; ++i) mass += prob[i];
  const double u = uniform() * mass;
  double cum = 0;
  out.id = idx[keep - 1];
  for (std::size_t i = 0; i < keep; ++i) {
    cum += prob[i];
    if (u < cum) {
      out.id = idx[i];
      break;
    }
  }
  fill_logprobs(raw, p.top_logprobs, out);
  return out;
}

}  // namespace qwenrt

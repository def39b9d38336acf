#include "engine/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
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

// e^x in double without libm (a vocabulary-sized pass of std::exp costs milliseconds): x = n·ln2 + r
// with |r| <= ln2/2, e^r by its Taylor series to r^13 (truncation below 1e-17 relative), 2^n put
// into the exponent. Arguments below -708 (and NaN) give e^-708 (about 3e-308): nothing a sum of
// these terms, each at most 1 here, can see.
inline double exp_of(double x) {
  x = x > -708.0 ? x : -708.0;           // NaN too: a NaN logit weighs nothing (vectorised: -fno-trapping-math)
  constexpr double kShifter = 0x1.8p52;  // adding it rounds x/ln2 to an integer held in the low bits
  const double kd = x * 1.4426950408889634074 + kShifter;
  const double n = kd - kShifter;
  const double r = (x - n * 6.93147180369123816490e-01) - n * 1.90821492927058770002e-10;  // ln2 split: n·hi exact
  // Horner in two interleaved halves (even and odd powers) for a shorter dependency chain.
  const double r2 = r * r;
  const double even =
      ((((((1.0 / 479001600.0) * r2 + 1.0 / 3628800.0) * r2 + 1.0 / 40320.0) * r2 + 1.0 / 720.0) * r2 + 1.0 / 24.0) * r2 + 0.5) * r2 + 1.0;
  const double odd =
      ((((((1.0 / 6227020800.0) * r2 + 1.0 / 39916800.0) * r2 + 1.0 / 362880.0) * r2 + 1.0 / 5040.0) * r2 + 1.0 / 120.0) * r2 + 1.0 / 6.0) * r2 + 1.0;
  const double p = even + r * odd;
  const auto ni = static_cast<int64_t>(std::bit_cast<uint64_t>(kd) - std::bit_cast<uint64_t>(kShifter));
  return p * std::bit_cast<double>(static_cast<uint64_t>(ni + 1023) << 52);
}

// w_i = e^((l_i − mx)·inv_t) into w (when kStore) and their sum, four interleaved partial sums
// (ids i mod 4, added in that order) so the loop runs on vector registers.
template <bool kStore>
double exp_weights(std::span<const float> logits, double mx, double inv_t, double* w) {
  const std::size_t n = logits.size(), whole = n / 4 * 4;
  double acc[4] = {0, 0, 0, 0};
  for (std::size_t i = 0; i < whole; i += 4) {
    double e[4];
    for (int j = 0; j < 4; ++j) e[j] = exp_of((static_cast<double>(logits[i + j]) - mx) * inv_t);
    for (int j = 0; j < 4; ++j) acc[j] += e[j];
    if constexpr (kStore)
      for (int j = 0; j < 4; ++j) w[i + j] = e[j];
  }
  double z = ((acc[0] + acc[1]) + acc[2]) + acc[3];
  for (std::size_t i = whole; i < n; ++i) {
    const double e = exp_of((static_cast<double>(logits[i]) - mx) * inv_t);
    z += e;
    if constexpr (kStore) w[i] = e;
  }
  return z;
}

// Logit a ranks before logit b: larger first, the lower id among equals.
struct Ranks {
  std::span<const float> logits;
  bool operator()(int32_t a, int32_t b) const { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); }
};

// The k best ids in rank order, in one pass keeping a heap of the best so far (its worst on top).
// Ids arrive in increasing order, so a newcomer beats the worst kept only with a strictly larger logit.
void best_k(std::span<const float> logits, std::size_t k, std::vector<int32_t>& out) {
  const Ranks better{logits};
  out.clear();
  for (int32_t i = 0; i < static_cast<int32_t>(logits.size()); ++i) {
    if (out.size() < k) {
      out.push_back(i);
      std::push_heap(out.begin(), out.end(), better);
    } else if (logits[i] > logits[out.front()]) {
      std::pop_heap(out.begin(), out.end(), better);
      out.back() = i;
      std::push_heap(out.begin(), out.end(), better);
    }
  }
  std::sort_heap(out.begin(), out.end(), better);
}

// log-softmax of the raw logits for the chosen token and the best alternatives.
void fill_logprobs(std::span<const float> logits, int32_t n_top, SampledToken& out) {
  const float mx = *std::max_element(logits.begin(), logits.end());
  const double log_z = static_cast<double>(mx) + std::log(exp_weights<false>(logits, mx, 1.0, nullptr));
  out.logprob = static_cast<float>(logits[static_cast<std::size_t>(out.id)] - log_z);
  if (n_top == 0) return;
  std::vector<int32_t> best;
  best_k(logits, std::min<std::size_t>(static_cast<std::size_t>(n_top), logits.size()), best);
  for (int32_t id : best) out.top.emplace_back(id, static_cast<float>(logits[static_cast<std::size_t>(id)] - log_z));
}

}  // namespace

SampledToken Sampler::sample(std::span<const float> raw, std::span<const int32_t> prompt, std::span<const int32_t> output) {
  if (raw.empty()) fail("sampler: empty logits");
  const SamplingParams& p = params_;
  logits_.assign(raw.begin(), raw.end());
  std::vector<float>& logits = logits_;
  const auto V = static_cast<int32_t>(logits.size());

  // Penalties. Repetition (HF/vLLM): divide positive logits, multiply negative ones, for every
  // token seen in prompt or output. Presence/frequency (OpenAI): subtract per output occurrence.
  if (p.repetition_penalty != 1.0f) {
    seen_.resize(static_cast<std::size_t>(V), 0);
    for (auto s : {prompt, output})
      for (int32_t t : s)
        if (t >= 0 && t < V && !seen_[static_cast<std::size_t>(t)]) {
          seen_[static_cast<std::size_t>(t)] = 1;
          float& l = logits[static_cast<std::size_t>(t)];
          l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
        }
    for (auto s : {prompt, output})
      for (int32_t t : s)
        if (t >= 0 && t < V) seen_[static_cast<std::size_t>(t)] = 0;
  }
  if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {
    std::unordered_map<int32_t, int> counts;
    for (int32_t t : output)
      if (t >= 0 && t < V) ++counts[t];
    for (const auto& [t, n] : counts) logits[static_cast<std::size_t>(t)] -= p.presence_penalty + p.frequency_penalty * static_cast<float>(n);
  }

  SampledToken out{};
  out.logprob = std::numeric_limits<float>::quiet_NaN();
  const bool report = p.logprobs || p.top_logprobs > 0;
  if (p.temperature == 0.0f) {
    out.id = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    if (report) fill_logprobs(raw, p.top_logprobs, out);
    return out;
  }

  // The kept candidates and their weights (probabilities up to a common factor), then one draw
  // over them in the order listed. With top-k the k best in rank order, as the engines users know
  // do it; otherwise the vocabulary's weights are normalised over all of it and top-p / min-p keep
  // sets, found without sorting the vocabulary.
  std::vector<int32_t>& idx = idx_;
  std::vector<double>& prob = prob_;
  const std::span<const float> view(logits);
  if (p.top_k > 0 && p.top_k < V) {
    best_k(view, static_cast<std::size_t>(p.top_k), idx);
    std::size_t keep = idx.size();
    prob.resize(keep);
    const double mx = logits[idx[0]];
    double z = 0;
    for (std::size_t i = 0; i < keep; ++i) z += prob[i] = std::exp((logits[idx[i]] - mx) / p.temperature);
    for (double& q : prob) q /= z;
    // Top-p: the shortest ranked prefix whose mass reaches top_p. Min-p: drop tokens below
    // min_p · p_max.
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
    idx.resize(keep);
    prob.resize(keep);
  } else {
    keep_without_top_k(view, idx, prob);
  }
  double mass = 0;
  for (double q : prob) mass += q;
  const double u = uniform() * mass;
  double cum = 0;
  out.id = idx.back();
  for (std::size_t i = 0; i < idx.size(); ++i) {
    cum += prob[i];
    if (u < cum) {
      out.id = idx[i];
      break;
    }
  }
  if (report) fill_logprobs(raw, p.top_logprobs, out);
  return out;
}

void Sampler::keep_without_top_k(std::span<const float> logits, std::vector<int32_t>& idx, std::vector<double>& weight) {
  const SamplingParams& p = params_;
  const auto V = static_cast<int32_t>(logits.size());
  const double mx = *std::max_element(logits.begin(), logits.end());
  // w_i = e^((l_i − mx)/T): the best token weighs 1.
  all_weights_.resize(logits.size());
  const double inv_t = 1.0 / static_cast<double>(p.temperature);
  const double z = exp_weights<true>(logits, mx, inv_t, all_weights_.data());
  const std::vector<double>& w = all_weights_;
  idx.clear();
  weight.clear();
  // Min-p keeps w_i >= min_p (p_max · min_p with p_max's weight 1); applied after top-p.
  auto keep = [&](int32_t i) {
    if (w[static_cast<std::size_t>(i)] >= static_cast<double>(p.min_p)) {
      idx.push_back(i);
      weight.push_back(w[static_cast<std::size_t>(i)]);
    }
  };
  if (p.top_p >= 1.0f) {
    for (int32_t i = 0; i < V; ++i) keep(i);
    return;
  }
  // Top-p: the shortest prefix of the ranking whose mass reaches top_p. The weights go into
  // buckets by (mx − l)/T (the ranking's order, coarsely); whole buckets before the one where the
  // mass crosses top_p are kept, and only that bucket is ranked to find where the prefix ends.
  constexpr int kBuckets = 4096;
  constexpr double kSpan = 40.0;  // (mx − l)/T beyond this share the last bucket (weights < 5e-18)
  auto bucket_of = [&](int32_t i) {
    const double d = (mx - static_cast<double>(logits[i])) * inv_t * (kBuckets / kSpan);
    return d < kBuckets - 1 ? static_cast<int>(d) : kBuckets - 1;  // NaN and beyond-span land last
  };
  bucket_mass_.assign(kBuckets, 0.0);
  for (int32_t i = 0; i < V; ++i) bucket_mass_[static_cast<std::size_t>(bucket_of(i))] += w[static_cast<std::size_t>(i)];
  const double target = static_cast<double>(p.top_p) * z;
  double before = 0;  // mass of the buckets wholly kept
  int cut = 0;
  while (cut < kBuckets - 1 && before + bucket_mass_[static_cast<std::size_t>(cut)] < target) before += bucket_mass_[static_cast<std::size_t>(cut++)];
  std::vector<int32_t> edge;  // the crossing bucket's ids, ranked
  for (int32_t i = 0; i < V; ++i) {
    const int b = bucket_of(i);
    if (b < cut) keep(i);
    else if (b == cut) edge.push_back(i);
  }
  std::sort(edge.begin(), edge.end(), Ranks{logits});
  double cum = before;
  for (std::size_t j = 0; j < edge.size() && (j == 0 || cum < target); ++j) {
    cum += w[static_cast<std::size_t>(edge[j])];
    keep(edge[j]);
  }
  if (idx.empty()) {  // min-p dropped everything top-p kept: keep the best token
    const auto best = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    idx.push_back(best);
    weight.push_back(1.0);
  }
}

}  // namespace qwenrt

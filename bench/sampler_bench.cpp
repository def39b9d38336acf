// Time to pick one token from a real-sized vocabulary (248320 logits) with the sampling settings
// chat users run, against one pass over the logits (a memcpy of them, measured in the same run):
//   bench/sampler_bench
// The GPU decodes a 0.8B token in about 1.1 ms, so the host's pick must take a fraction of that.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "engine/sampler.h"

using namespace qwenrt;

namespace {
double now_ms() { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
}  // namespace

int main() {
  const std::size_t V = 248320;
  std::mt19937 rng(1);
  // A long tail with a few dominant tokens, as a language model's logits are.
  std::normal_distribution<float> tail(-4.0f, 2.5f);
  std::vector<float> logits(V), copy(V);
  for (auto& v : logits) v = tail(rng);
  for (int i = 0; i < 40; ++i) logits[rng() % V] = 8.0f + static_cast<float>(i % 9) * 0.4f;
  std::vector<int32_t> prompt(600), output(300);
  for (auto& t : prompt) t = static_cast<int32_t>(rng() % V);
  for (auto& t : output) t = static_cast<int32_t>(rng() % V);

  const int reps = 50;
  double t0 = now_ms();
  for (int i = 0; i < reps; ++i) {
    std::memcpy(copy.data(), logits.data(), V * sizeof(float));
    logits[static_cast<std::size_t>(i)] += copy[static_cast<std::size_t>(reps - i)] * 0.0f;  // keep the copies
  }
  const double pass_ms = (now_ms() - t0) / reps;
  std::printf("vocabulary %zu; one copy of the logits %.3f ms\n\n%-44s %10s %8s\n", V, pass_ms, "settings", "ms/token", "copies");
  struct Case {
    const char* name;
    float t;
    int32_t k;
    float p, min_p, rep;
    bool logprobs;
  };
  for (const Case& c :
       {Case{"greedy (temperature 0)", 0.0f, 0, 1.0f, 0.0f, 1.0f, false},
        Case{"Qwen chat: T 0.7, top-k 20, top-p 0.8", 0.7f, 20, 0.8f, 0.0f, 1.0f, false},
        Case{"T 0.6, top-k 20, top-p 0.95, repetition 1.05", 0.6f, 20, 0.95f, 0.0f, 1.05f, false},
        Case{"T 1, top-p 0.95 (no top-k)", 1.0f, 0, 0.95f, 0.0f, 1.0f, false}, Case{"T 1, min-p 0.05 (no top-k)", 1.0f, 0, 1.0f, 0.05f, 1.0f, false},
        Case{"T 1, nothing truncated", 1.0f, 0, 1.0f, 0.0f, 1.0f, false}, Case{"Qwen chat + logprobs", 0.7f, 20, 0.8f, 0.0f, 1.0f, true}}) {
    SamplingParams p;
    p.temperature = c.t;
    p.top_k = c.k;
    p.top_p = c.p;
    p.min_p = c.min_p;
    p.repetition_penalty = c.rep;
    p.logprobs = c.logprobs;
    p.seed = 3;
    Sampler s(p);
    s.sample(logits, prompt, output);  // buffers sized
    long long sum = 0;
    t0 = now_ms();
    for (int i = 0; i < reps; ++i) sum += s.sample(logits, prompt, output).id;
    const double ms = (now_ms() - t0) / reps;
    std::printf("%-44s %10.3f %8.1f   (ids %lld)\n", c.name, ms, ms / pass_ms, sum);
  }
  return 0;
}

#pragma once
// One sequence generated with a sampler: prefill the prompt in windows, then decode token by token,
// handing each token to a callback (which streams it and may stop generation).
#include <cstdint>
#include <functional>
#include <vector>

#include "engine/mtp_speculator.h"
#include "engine/sampler.h"
#include "model/qwen35_model.h"

namespace qwenrt {

struct SampledGenerationOptions {
  SamplingParams sampling;
  int64_t max_tokens = 256;
  std::vector<int32_t> stop_ids;  // generation ends after one of these (it is reported)
  int64_t prefill_chunk = 512;
  // --speculative mtp: draft with the checkpoint's MTP block and verify (engine/mtp_speculator);
  // the tokens are the same as without. Needs a fresh cache slot.
  bool speculative = false;
  SpeculationOptions speculation;
  // --deterministic: prompt windows cut at fixed positions (multiples of prefill_chunk) whatever
  // the cache already holds, so the tokens depend on nothing but the request.
  bool deterministic = false;
};

struct GenerationStats {
  int64_t prompt_tokens = 0, generated_tokens = 0;
  double prefill_s = 0, decode_s = 0;
  enum class Finish { Length, StopId, Callback } finish = Finish::Length;
  bool speculative = false;
  SpeculationStats speculation;  // when speculative
};

// on_token returns false to stop. The cache slot must be fresh or hold exactly a prefix of the
// prompt (its rows are reused, the rest is prefilled). Afterwards it holds the prompt and the
// generated tokens, all of them or all but the last (greedy picks on the model's side run a step
// ahead: a stop there has already fed the last token).
GenerationStats generate_sampled(const Qwen35Model& model, ModelCache& cache, int slot, const std::vector<int32_t>& prompt,
                                 const SampledGenerationOptions& options, const std::function<bool(const SampledToken&)>& on_token, ThreadPool& pool);

}  // namespace qwenrt

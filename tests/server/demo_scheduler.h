#pragma once
// What the scheduler tests share: the demo model's session, greedy requests, and collecting a
// request's events.
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "engine/scheduler.h"
#include "engine/text_session.h"
#include "support/fixtures.h"

namespace qwenrt::test {

// The demo model of the source tree (or of $QWENRT_SOURCE_DIR where the binaries were carried).
inline std::string demo_model() {
  namespace fs = std::filesystem;
  const fs::path root = fixtures_dir().parent_path().parent_path() / "models";
  if (fs::exists(root))
    for (const auto& e : fs::directory_iterator(root))
      if (fs::exists(e.path() / "config.json")) return e.path().string();
  return "";
}

inline TextSession& session() {
  static TextSession s(demo_model(), false);
  return s;
}

// The first `tokens` tokens of a long made-up text (several prompt chunks' worth).
inline std::vector<int32_t> long_prompt(const text::Tokenizer& tokenizer, std::size_t tokens) {
  std::string text;
  std::vector<int32_t> ids;
  for (int i = 0; ids.size() < tokens; ++i) {
    text += "Sentence " + std::to_string(i) + " talks about the weather in city number " + std::to_string(i * 13 % 97) + ". ";
    ids = tokenizer.encode(text);
  }
  ids.resize(tokens);
  return ids;
}

inline GenerationRequest greedy(std::vector<int32_t> prompt, int64_t max_tokens) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0.0f;
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.output.split_reasoning = false;
  return r;
}

struct Result {
  std::map<int, std::string> text;  // per choice
  std::map<int, GenerationEvent> finish;
  std::map<int, std::vector<TokenLogprob>> logprobs;
};

inline Result collect(RequestHandle& h) {
  Result r;
  std::vector<GenerationEvent> events;
  while (h.wait(events, std::chrono::seconds(60))) {
    for (auto& e : events) {
      r.text[e.choice] += e.delta.content;
      r.logprobs[e.choice].insert(r.logprobs[e.choice].end(), e.logprobs.begin(), e.logprobs.end());
      if (e.finished) r.finish[e.choice] = e;
    }
    events.clear();
  }
  return r;
}

// One traced request run alone, then as request `index` among `others` more (other(i) makes
// request i): its text and every logits row it sampled from, both times.
struct AloneAndAmong {
  Result alone, among;
  std::vector<std::vector<float>> alone_rows, among_rows;
};

inline AloneAndAmong alone_and_among(TextSession& session, const SchedulerOptions& opt, const GenerationRequest& traced, int index, int count,
                                     const std::function<GenerationRequest(int)>& other) {
  AloneAndAmong r;
  auto watched = [&](std::vector<std::vector<float>>& rows) {
    GenerationRequest q = traced;
    q.on_logits = [&rows](int, std::span<const float> l) { rows.emplace_back(l.begin(), l.end()); };
    return q;
  };
  {
    Scheduler s(session.model(), session.tokenizer(), session.stop_ids(), opt, ThreadPool::global());
    r.alone = collect(*s.submit(watched(r.alone_rows)));
  }
  Scheduler s(session.model(), session.tokenizer(), session.stop_ids(), opt, ThreadPool::global());
  std::vector<std::shared_ptr<RequestHandle>> handles;
  for (int i = 0; i < count; ++i) handles.push_back(s.submit(i == index ? watched(r.among_rows) : other(i)));
  r.among = collect(*handles[static_cast<std::size_t>(index)]);
  for (auto& h : handles) collect(*h);
  return r;
}

// A sequence decoding (24 greedy tokens, its logits rows traced with `watch`) while a long prompt
// prefills in 16-token windows beside it, with or without mixed steps.
struct MixedRun {
  Result decoding, prefilling;
  std::vector<std::vector<float>> rows;
  int64_t mixed_steps = 0;
};
inline MixedRun run_beside_a_prefill(TextSession& session, std::vector<int32_t> decoding_prompt, bool mixed, bool watch) {
  SchedulerOptions opt;
  opt.max_seqs = 4;
  opt.prefill_chunk = opt.window_budget = 16;  // the long prompt takes ~19 window steps
  opt.mixed_steps = mixed;
  MixedRun r;
  Scheduler s(session.model(), session.tokenizer(), session.stop_ids(), opt, ThreadPool::global());
  GenerationRequest decoding = greedy(std::move(decoding_prompt), 24);
  if (watch) decoding.on_logits = [&r](int, std::span<const float> l) { r.rows.emplace_back(l.begin(), l.end()); };
  auto first = s.submit(decoding);
  auto second = s.submit(greedy(long_prompt(session.tokenizer(), 300), 6));
  r.decoding = collect(*first);
  r.prefilling = collect(*second);
  r.mixed_steps = s.stats().mixed_steps;
  return r;
}

// The speculation tests' traced request (40 sampled tokens) and the i-th of the others around it
// (greedy and sampled, of several lengths), from prompts the caller makes.
inline GenerationRequest sampled_traced(std::vector<int32_t> prompt) {
  GenerationRequest r = greedy(std::move(prompt), 40);
  r.sampling.temperature = 0.7f;
  r.sampling.seed = 5;
  return r;
}
inline GenerationRequest mixed_other(std::vector<int32_t> prompt, int i) {
  GenerationRequest r = greedy(std::move(prompt), 10 + 7 * i);
  if (i % 2) r.sampling.temperature = 1.0f, r.sampling.seed = static_cast<uint64_t>(i);
  return r;
}

}  // namespace qwenrt::test

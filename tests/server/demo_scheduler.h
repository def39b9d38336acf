#pragma once
// What the scheduler tests share: the demo model's session, greedy requests, and collecting a
// request's events.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

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

}  // namespace qwenrt::test

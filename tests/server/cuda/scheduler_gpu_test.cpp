// engine/Scheduler on the GPU, with the demo model (released head sizes): what holds on the GPU is
// that decode steps of at most 8 rows are batch-invariant (the skinny products and the attention
// and DeltaNet decode kernels compute each row alone) and a prompt window computes one sequence's
// chunk the same way whatever else waits. With --max-seqs 8 and a window budget of one chunk (each
// window step carries one sequence), a greedy request's logits are bitwise the same alone and
// among 7 others, some of them sampling.
#include <gtest/gtest.h>

#include <cstring>

#include "backend/cuda/gpu_test_support.h"
#include "core/thread_pool.h"
#include "engine/scheduler.h"
#include "engine/text_session.h"
#include "server/demo_scheduler.h"

namespace qwenrt {
namespace {

using namespace test;

TextSession& gpu_session() {
  static TextSession s(demo_model(), false, DeviceSpec{DeviceSpec::Kind::Cuda, 0});
  return s;
}

std::vector<int32_t> prompt_of(int i) {
  return gpu_session().tokenizer().encode("Prompt number " + std::to_string(i) + ": tell me something about the number " + std::to_string(i * 7) +
                                          ".");
}

TEST(SchedulerGpu, GreedyLogitsAloneAndAmongSevenOthers) {
  QWENRT_REQUIRE_GPU();
  if (demo_model().empty()) GTEST_SKIP() << "no demo model";
  TextSession& session = gpu_session();
  SchedulerOptions opt;
  opt.max_seqs = 8;
  opt.prefill_chunk = opt.window_budget = 16;  // prompts of several chunks; one sequence per window step
  const auto [alone, among, alone_rows, among_rows] = alone_and_among(session, opt, greedy(prompt_of(3), 40), 5, 8, [](int i) {
    GenerationRequest r = greedy(prompt_of(300 + i), 6 + 5 * i);
    if (i % 3 == 0) r.sampling.temperature = 0.8f, r.sampling.seed = static_cast<uint64_t>(i);
    return r;
  });
  EXPECT_EQ(alone.text.at(0), among.text.at(0));
  ASSERT_EQ(alone_rows.size(), 40u);
  ASSERT_EQ(among_rows.size(), 40u);
  for (std::size_t t = 0; t < alone_rows.size(); ++t)
    ASSERT_EQ(0, std::memcmp(alone_rows[t].data(), among_rows[t].data(), alone_rows[t].size() * sizeof(float))) << "logits of token " << t;
}

}  // namespace
}  // namespace qwenrt

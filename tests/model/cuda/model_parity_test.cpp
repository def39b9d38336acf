// The whole model on the GPU against the float64 oracle fixtures: logits no further from float64
// than transformers' own bf16 run on the same fixture (recorded in reference.json), greedy tokens
// identical where the reference's margin is clear of bf16 noise, and the invariances (prefill
// windows, batching) within the same bound.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "backend/cpu/matmul.h"
#include "backend/cuda/gpu_test_support.h"
#include "backend/cuda/runtime/runtime_options.h"
#include "core/half.h"
#include "engine/greedy_generation.h"
#include "engine/sampled_generation.h"
#include "engine/step_queue.h"
#include "formats/json_file.h"
#include "formats/npy.h"
#include "model/cuda/cuda_forward.h"
#include "model/qwen35_model.h"
#include "support/fixtures.h"
#include "support/queued_steps.h"

namespace qwenrt {
namespace {

// A top-2 gap this large is far outside bf16 noise at these logit scales.
constexpr double kClearMargin = 0.05;

class CudaParity : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    QWENRT_REQUIRE_GPU();
    dir_ = test::fixtures_dir() / GetParam();
    const auto probe = Qwen35Model::load(dir_);
    if (const std::string why = CudaForward::unsupported(probe.config()); !why.empty()) GTEST_SKIP() << why;
    ref_ = test::load_reference(GetParam());
    bf16_bound_ = read_json_file(dir_ / "reference.json").at("bfloat16_hf_rel_l2").get<double>();
    model_ = std::make_unique<Qwen35Model>(Qwen35Model::load(dir_));
    model_->use_device(parse_device("cuda"));
  }
  std::filesystem::path dir_;
  test::Reference ref_;
  double bf16_bound_ = 0;
  std::unique_ptr<Qwen35Model> model_;
  ThreadPool pool_{1};
};

TEST_P(CudaParity, LogitsWithinTransformersBf16Error) {
  const auto expected = read_npy(dir_ / "logits.npy");
  const int64_t T = static_cast<int64_t>(ref_.prompt.size());
  for (int64_t chunk : {T, int64_t{64}, int64_t{7}, int64_t{1}}) {
    const auto logits = prompt_logits(*model_, ref_.prompt, chunk, pool_);
    const double err = test::relative_l2(logits, expected.values);
    std::printf("[ parity   ] %s prefill window %lld: qwenrt cuda rel_l2 %.3e, transformers bf16 %.3e\n", GetParam().c_str(),
                static_cast<long long>(chunk), err, bf16_bound_);
    RecordProperty("cuda_rel_l2_window_" + std::to_string(chunk), std::to_string(err));
    EXPECT_LE(err, bf16_bound_) << GetParam() << " window " << chunk;
  }
}

TEST_P(CudaParity, GreedyTokensMatchWhereMarginIsClear) {
  GenerationOptions opt;
  opt.max_tokens = static_cast<int64_t>(ref_.greedy.size());
  const auto got = generate_greedy(*model_, {ref_.prompt}, opt, pool_)[0];
  ASSERT_EQ(got.size(), ref_.greedy.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (i < ref_.greedy_margins.size() && ref_.greedy_margins[i] < kClearMargin) break;  // may legitimately differ from here
    ASSERT_EQ(got[i], ref_.greedy[i]) << GetParam() << " step " << i;
  }
}

// A sequence decoded in a batch with two others (at other positions) gives its logits alone.
TEST_P(CudaParity, BatchedDecodeMatchesAlone) {
  const int64_t V = model_->config().vocab_size;
  auto run = [&](bool with_others) {
    ModelCache cache = model_->new_cache(3);
    const int a = cache.acquire();
    std::vector<int> others;
    model_->forward({Phase::Window, {{a, ref_.prompt}}, false}, cache, pool_);
    if (with_others) {
      for (int n : {5, 40}) {
        const int s = cache.acquire();
        others.push_back(s);
        std::vector<int32_t> p(ref_.prompt.rbegin(), ref_.prompt.rbegin() + n);
        model_->forward({Phase::Window, {{s, p}}, false}, cache, pool_);
      }
    }
    std::vector<float> mine;
    for (std::size_t i = 0; i < 4; ++i) {
      Step step{Phase::Decode, {{a, {ref_.greedy[i]}}}, false};
      for (int s : others) step.sequences.push_back({s, {static_cast<int32_t>((i * 7 + static_cast<std::size_t>(s)) % static_cast<std::size_t>(V))}});
      const auto logits = model_->forward(step, cache, pool_);
      mine.insert(mine.end(), logits.begin(), logits.begin() + V);
    }
    return mine;
  };
  const auto alone = run(false), batched = run(true);
  const double diff = test::relative_l2(batched, std::vector<double>(alone.begin(), alone.end()));
  std::printf("[ parity   ] %s batched vs alone: rel_l2 %.3e\n", GetParam().c_str(), diff);
  EXPECT_LE(diff, bf16_bound_) << GetParam();
}

// A window whose leading spans are one row each (the decode rows a mixed step carries ahead of
// its prompt chunks) runs them through the decode kernels, and its other spans (a prompt chunk, then
// a one-token prompt behind it) through the window kernels: every sequence's logits as in separate
// decode and window steps, within the bf16 bound.
TEST_P(CudaParity, MixedWindowMatchesSeparateSteps) {
  const int64_t V = model_->config().vocab_size;
  const std::size_t P = ref_.prompt.size();
  constexpr std::size_t kChunk = 6;
  auto token = [&](std::size_t i, int s) { return static_cast<int32_t>((i * 7 + static_cast<std::size_t>(s) * 13) % static_cast<std::size_t>(V)); };
  auto run = [&](bool mixed) {
    ModelCache cache = model_->new_cache(4);
    const int a = cache.acquire(), b = cache.acquire(), c = cache.acquire(), d = cache.acquire();
    model_->forward({Phase::Window, {{a, ref_.prompt}}, false}, cache, pool_);
    model_->forward({Phase::Window, {{b, {ref_.prompt.begin(), ref_.prompt.begin() + std::min<std::size_t>(P, 5)}}}, false}, cache, pool_);
    std::vector<std::vector<float>> per_seq(4);  // a, b, c, d: each round's last-row logits
    auto keep = [&](const std::vector<float>& logits, std::initializer_list<int> order) {
      auto row = logits.begin();
      for (int s : order) {
        auto& mine = per_seq[static_cast<std::size_t>(s)];
        mine.insert(mine.end(), row, row + V);
        row += V;
      }
    };
    for (std::size_t i = 0; i < 4; ++i) {
      const StepSequence sa{a, {ref_.greedy[i]}}, sb{b, {token(i, b)}}, sc{c, {token(i, c)}};
      StepSequence sd{d, {}};
      for (std::size_t j = 0; j < kChunk; ++j) sd.tokens.push_back(ref_.prompt[(i * kChunk + j) % P]);
      if (mixed) {
        keep(model_->forward({Phase::Window, {sa, sb, sd, sc}, false}, cache, pool_), {0, 1, 3, 2});
      } else {
        keep(model_->forward({Phase::Decode, {sa, sb, sc}, false}, cache, pool_), {0, 1, 2});
        keep(model_->forward({Phase::Window, {sd}, false}, cache, pool_), {3});
      }
    }
    return per_seq;
  };
  const auto mixed = run(true), separate = run(false);
  for (std::size_t s = 0; s < 4; ++s) {
    const double diff = test::relative_l2(mixed[s], std::vector<double>(separate[s].begin(), separate[s].end()));
    std::printf("[ parity   ] %s mixed window vs separate steps, sequence %c: rel_l2 %.3e\n", GetParam().c_str(), static_cast<char>('a' + s), diff);
    EXPECT_LE(diff, bf16_bound_) << GetParam() << " sequence " << static_cast<char>('a' + s);
  }
}

// Decode steps replayed from captured CUDA graphs give the eager steps' logits bit for bit.
TEST_P(CudaParity, GraphReplayMatchesEagerBitwise) {
  cuda::RuntimeOptions eager_options = cuda::runtime_options();
  eager_options.graphs = false;
  auto no_graphs = std::make_unique<cuda::ScopedRuntimeOptions>(eager_options);
  Qwen35Model eager = Qwen35Model::load(dir_);
  eager.use_device(parse_device("cuda"));
  no_graphs.reset();
  auto run = [&](const Qwen35Model& m) {
    ModelCache cache = m.new_cache(2);
    const int a = cache.acquire(), b = cache.acquire();
    m.forward({Phase::Window, {{a, ref_.prompt}, {b, {ref_.prompt.begin(), ref_.prompt.begin() + 9}}}, false}, cache, pool_);
    std::vector<float> all;
    for (std::size_t i = 0; i < 8; ++i) {  // each shape runs eagerly, is captured, then replayed
      Step step{Phase::Decode, {{a, {ref_.greedy[i]}}}, false};
      if (i % 2 == 0) step.sequences.push_back({b, {ref_.greedy[i]}});  // the batch size changes too
      const auto l = m.forward(step, cache, pool_);
      all.insert(all.end(), l.begin(), l.end());
    }
    return all;
  };
  const auto replayed = run(*model_), eager_logits = run(eager);
  ASSERT_EQ(replayed.size(), eager_logits.size());
  EXPECT_EQ(0, std::memcmp(replayed.data(), eager_logits.data(), replayed.size() * sizeof(float))) << GetParam();
}

// Greedy steps that pick their tokens on the GPU (StepQueue) pick the argmax of the logits
// the same steps return (forward), through eager steps, graph capture and replay and a changing batch.
TEST_P(CudaParity, ArgmaxStepsPickTheLogitsArgmax) {
  const int64_t V = model_->config().vocab_size;
  ModelCache with_logits = model_->new_cache(2), with_argmax = model_->new_cache(2);
  std::vector<float> logits;
  std::vector<int32_t> picked;
  StepQueue queue(*model_, with_argmax, pool_);
  for (ModelCache* cache : {&with_logits, &with_argmax}) {
    const int a = cache->acquire(), b = cache->acquire();
    model_->forward({Phase::Window, {{a, ref_.prompt}, {b, {ref_.prompt.begin(), ref_.prompt.begin() + 9}}}, false}, *cache, pool_);
  }
  for (std::size_t i = 0; i < 8; ++i) {
    Step step{Phase::Decode, {{0, {ref_.greedy[i]}}}, false};
    if (i % 2 == 0) step.sequences.push_back({1, {ref_.greedy[i]}});
    model_->forward(step, with_logits, pool_, logits);
    queue.run(step, picked);
    ASSERT_EQ(picked.size(), step.sequences.size());
    for (std::size_t r = 0; r < picked.size(); ++r)
      EXPECT_EQ(picked[r], argmax_row(&logits[r * static_cast<std::size_t>(V)], V)) << GetParam() << " step " << i << " row " << r;
  }
}

// Given embedding rows (vision features, MTP inputs) on the GPU: a row given its token's own
// embedding (as the GPU's bf16 table holds it) computes the same bits as the token; the hidden rows
// returned are what the head reads (their product with lm_head on the CPU gives the logits).
TEST_P(CudaParity, GivenEmbeddingsAndHiddenRows) {
  const int64_t H = model_->config().hidden_size, V = model_->config().vocab_size;
  const std::vector<int32_t> prompt(ref_.prompt.begin(), ref_.prompt.begin() + 9);
  auto run = [&](const StepSequence& seq, StepOutput& out) {
    ModelCache cache = model_->new_cache(1);
    cache.acquire();
    Step step{Phase::Window, {seq}, true};
    step.hidden = true;
    model_->forward(step, cache, pool_, out);
  };
  StepOutput plain, given;
  run({0, prompt}, plain);
  StepSequence seq{0, prompt};
  seq.embedding_rows = {3, 8};
  seq.embeddings.resize(static_cast<std::size_t>(2 * H));
  for (int i = 0; i < 2; ++i) {
    float* row = seq.embeddings.data() + i * H;
    model_->weights().embed.row_to_f32(prompt[static_cast<std::size_t>(seq.embedding_rows[static_cast<std::size_t>(i)])], row);
    for (int64_t d = 0; d < H; ++d) row[d] = bf16_to_f32(f32_to_bf16(row[d]));
  }
  run(seq, given);
  EXPECT_EQ(0, std::memcmp(given.logits.data(), plain.logits.data(), plain.logits.size() * sizeof(float))) << GetParam();
  ASSERT_EQ(plain.hidden.size(), prompt.size() * static_cast<std::size_t>(H));
  std::vector<float> logits(plain.logits.size());
  cpu::matmul(plain.hidden.data(), static_cast<int64_t>(prompt.size()), model_->weights().lm_head, logits.data(), pool_);
  EXPECT_LT(test::relative_l2(logits, plain.logits), 1e-5) << GetParam();
  EXPECT_EQ(plain.logits.size(), prompt.size() * static_cast<std::size_t>(V));
}

// Steps queued ahead of the host, taking their tokens from the step before on the GPU, pick what
// the same steps pick one at a time, through eager steps, graph capture and replay (captured while
// the step before still runs) and a batch that shrinks under a queued step.
TEST_P(CudaParity, QueuedArgmaxStepsPickWhatOneAtATimeDoes) {
  const auto [queued, one] = test::queued_and_one_at_a_time(*model_, ref_.prompt, 8, pool_);
  EXPECT_EQ(queued, one) << GetParam();
  EXPECT_EQ(one.size(), 2u + 3 * 2 + 5);
}

// Sampling at temperature 0 picks on the GPU one step ahead of the host (a stop id and the
// callback ending it on time) and gives greedy generation's tokens.
TEST_P(CudaParity, SampledAtTemperatureZeroIsGreedy) {
  GenerationOptions greedy;
  greedy.max_tokens = 8;
  const auto want = generate_greedy(*model_, {ref_.prompt}, greedy, pool_)[0];
  for (int64_t stop_after : {int64_t{0}, int64_t{3}}) {
    SampledGenerationOptions opt;
    opt.sampling.temperature = 0.0f;
    opt.max_tokens = 8;
    ModelCache cache = model_->new_cache(1);
    const int slot = cache.acquire();
    std::vector<int32_t> got;
    generate_sampled(
        *model_, cache, slot, ref_.prompt, opt,
        [&](const SampledToken& t) {
          got.push_back(t.id);
          return static_cast<int64_t>(got.size()) != stop_after;
        },
        pool_);
    const std::size_t n = stop_after ? static_cast<std::size_t>(stop_after) : want.size();
    EXPECT_EQ(got, std::vector<int32_t>(want.begin(), want.begin() + static_cast<long>(n))) << GetParam();
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaParity, ::testing::ValuesIn(test::fixture_names()), [](const auto& info) { return info.param; });

}  // namespace
}  // namespace qwenrt

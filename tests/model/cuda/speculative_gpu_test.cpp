// Speculation and deterministic mode on the GPU (the demo model: the fixtures' head sizes are not
// built for CUDA). The MTP block against the CPU's (itself within 1e-6 of float64); a committed
// window equal to decode rows bit for bit (logits, hidden rows, the DeltaNet state after them, and
// the KV they wrote, seen through the next step); rollback equal to never having drafted; greedy
// and seeded sampled runs identical with and without speculation; in deterministic mode, a row's
// logits independent of the batch around it.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "backend/cuda/gpu_test_support.h"
#include "engine/mtp_speculator.h"
#include "engine/sampled_generation.h"
#include "model/cuda/cuda_forward.h"
#include "model/qwen35_model.h"
#include "support/fixtures.h"
#include "support/greedy_traces.h"

namespace qwenrt {
namespace {

std::filesystem::path demo_dir() { return test::fixtures_dir().parent_path().parent_path() / "models" / "qwen35-demo-16m"; }

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class GpuSpeculation : public ::testing::Test {
 protected:
  void SetUp() override {
    QWENRT_REQUIRE_GPU();
    model_ = std::make_unique<Qwen35Model>(Qwen35Model::load(demo_dir()));
    ASSERT_TRUE(model_->has_mtp());
    model_->use_device(parse_device("cuda"));
    const int32_t ordinary = static_cast<int32_t>(model_->config().vocab_size) - 256;  // special tokens (the last ids) left out
    for (int32_t t = 0; t < 40; ++t) prompt_.push_back((t * 7919 + 13) % ordinary);
  }
  // The slot's DeltaNet state as the device keeps it.
  std::vector<float> state(ModelCache& cache, int slot) {
    std::vector<float> s(static_cast<std::size_t>(cache.snapshot_floats()));
    cache.save_state(slot, s.data());
    return s;
  }
  std::vector<float> forward(ModelCache& cache, const Step& step) { return model_->forward(step, cache, pool_); }

  std::unique_ptr<Qwen35Model> model_;
  std::vector<int32_t> prompt_;
  ThreadPool pool_{1};
};

// The block on the GPU from the CPU's hidden rows: within bf16 rounding of the CPU's block (bf16
// weights and activations: the main model's own GPU error on this model is ~3e-3).
TEST_F(GpuSpeculation, MtpBlockMatchesTheCpu) {
  const Qwen35Model cpu = Qwen35Model::load(demo_dir());
  const int64_t T = static_cast<int64_t>(prompt_.size()), H = cpu.config().hidden_size;
  ModelCache main = cpu.new_cache(1);
  StepOutput hidden;
  cpu.forward({Phase::Window, {{main.acquire(), prompt_}}, true, true}, main, pool_, hidden);
  auto run = [&](const Qwen35Model& m) {
    ModelCache mtp = m.new_mtp_cache(1);
    const int slot = mtp.acquire();
    StepOutput out, all;
    // The prompt's rows in two committed steps, then a decode row (the first draft).
    for (auto [b, e] : {std::pair<int64_t, int64_t>{0, 20}, {20, T - 1}, {T - 1, T}}) {
      Step s{e - b == 1 ? Phase::Decode : Phase::Committed, {{slot, {}}}, true, true};
      for (int64_t t = b; t < e; ++t) s.sequences[0].tokens.push_back(t + 1 < T ? prompt_[static_cast<std::size_t>(t + 1)] : 5);
      s.sequences[0].hidden_in.assign(hidden.hidden.begin() + b * H, hidden.hidden.begin() + e * H);
      m.mtp_forward(s, mtp, pool_, out);
      all.logits.insert(all.logits.end(), out.logits.begin(), out.logits.end());
      all.hidden.insert(all.hidden.end(), out.hidden.begin(), out.hidden.end());
    }
    return all;
  };
  const StepOutput want = run(cpu), got = run(*model_);
  const double logits_err = test::relative_l2(got.logits, std::vector<double>(want.logits.begin(), want.logits.end()));
  const double hidden_err = test::relative_l2(got.hidden, std::vector<double>(want.hidden.begin(), want.hidden.end()));
  std::printf("[ mtp gpu  ] logits rel_l2 %.3e, hidden rows %.3e vs the CPU\n", logits_err, hidden_err);
  EXPECT_LT(logits_err, 1e-2);
  EXPECT_LT(hidden_err, 1e-2);
}

// k+1 known rows in one committed step equal k+1 decode steps, bit for bit; also 2 and 6 sequences
// (11 and 34 rows: past the 8 one decode launch takes, products over several row tiles).
TEST_F(GpuSpeculation, CommittedWindowEqualsDecodeRows) {
  const std::vector<std::vector<int32_t>> more = {{5, 17, 3, 11, 2}, {7, 1, 9, 4, 8, 6}, {3, 3, 3, 3, 3, 3, 3, 3}, {1, 2}, {9}, {4, 5, 6, 7, 8, 9, 10, 11}};
  for (int seqs : {1, 2, 6}) {
    ModelCache one = model_->new_cache(6), win = model_->new_cache(6);
    std::vector<int> a, b;
    for (int s = 0; s < seqs; ++s) {
      a.push_back(one.acquire()), b.push_back(win.acquire());
      const std::vector<int32_t> p(prompt_.begin() + s, prompt_.end());
      forward(one, {Phase::Window, {{a.back(), p}}, false});
      forward(win, {Phase::Window, {{b.back(), p}}, false});
    }
    std::vector<std::vector<float>> logits(static_cast<std::size_t>(seqs)), hidden(logits.size());
    StepOutput out;
    for (int s = 0; s < seqs; ++s)
      for (int32_t t : more[static_cast<std::size_t>(s)]) {
        model_->forward({Phase::Decode, {{a[static_cast<std::size_t>(s)], {t}}}, false, true}, one, pool_, out);
        logits[static_cast<std::size_t>(s)].insert(logits[static_cast<std::size_t>(s)].end(), out.logits.begin(), out.logits.end());
        hidden[static_cast<std::size_t>(s)].insert(hidden[static_cast<std::size_t>(s)].end(), out.hidden.begin(), out.hidden.end());
      }
    Step committed{Phase::Committed, {}, true, true};
    for (int s = 0; s < seqs; ++s) committed.sequences.push_back({b[static_cast<std::size_t>(s)], more[static_cast<std::size_t>(s)]});
    model_->forward(committed, win, pool_, out);
    std::vector<float> want_logits, want_hidden;
    for (int s = 0; s < seqs; ++s) {
      want_logits.insert(want_logits.end(), logits[static_cast<std::size_t>(s)].begin(), logits[static_cast<std::size_t>(s)].end());
      want_hidden.insert(want_hidden.end(), hidden[static_cast<std::size_t>(s)].begin(), hidden[static_cast<std::size_t>(s)].end());
    }
    EXPECT_TRUE(same_bits(out.logits, want_logits)) << seqs << " sequences";
    EXPECT_TRUE(same_bits(out.hidden, want_hidden)) << seqs << " sequences";
    for (int s = 0; s < seqs; ++s) {
      EXPECT_TRUE(same_bits(state(one, a[static_cast<std::size_t>(s)]), state(win, b[static_cast<std::size_t>(s)]))) << "sequence " << s;
      // The K/V the rows wrote, through the next step.
      EXPECT_TRUE(same_bits(forward(one, {Phase::Decode, {{a[static_cast<std::size_t>(s)], {42}}}, false}),
                            forward(win, {Phase::Decode, {{b[static_cast<std::size_t>(s)], {42}}}, false})))
          << "sequence " << s;
    }
  }
}

// A verify step of 5 rows with every row's state kept, cut back to its first j rows: the slot equals
// one fed only those j rows, one at a time, and goes on identically.
TEST_F(GpuSpeculation, RollbackEqualsNeverDrafted) {
  const std::vector<int32_t> window = {9, 4, 27, 1, 8};
  for (int keep = 1; keep <= static_cast<int>(window.size()); ++keep) {
    ModelCache plain = model_->new_cache(1), spec = model_->new_cache(1);
    const int a = plain.acquire(), b = spec.acquire();
    forward(plain, {Phase::Window, {{a, prompt_}}, false});
    forward(spec, {Phase::Window, {{b, prompt_}}, false});
    for (int i = 0; i < keep; ++i) forward(plain, {Phase::Decode, {{a, {window[static_cast<std::size_t>(i)]}}}, false});
    spec.keep_row_states(b, static_cast<int>(window.size()));
    forward(spec, {Phase::Committed, {{b, window}}, true, true});
    spec.truncate(b, static_cast<int64_t>(prompt_.size()) + keep);
    EXPECT_TRUE(same_bits(state(plain, a), state(spec, b))) << "keep " << keep;
    EXPECT_TRUE(same_bits(forward(plain, {Phase::Decode, {{a, {42}}}, false}), forward(spec, {Phase::Decode, {{b, {42}}}, false}))) << "keep " << keep;
  }
}

TEST_F(GpuSpeculation, GreedyTokensAndLogitsIdenticalForEveryK) {
  const int n = 24;
  const test::Traced plain = test::plain_greedy(*model_, prompt_, n, pool_);
  for (int k = 1; k <= 4; ++k) {
    const test::Traced spec = test::speculative_greedy(*model_, prompt_, n, {k, false}, pool_);
    ASSERT_EQ(spec.tokens, plain.tokens) << "k " << k;
    EXPECT_TRUE(same_bits(spec.logits, plain.logits)) << "k " << k;
    EXPECT_EQ(spec.stats.tokens, n - 1);
    EXPECT_EQ(spec.stats.tokens, spec.stats.steps + spec.stats.accepted);
    EXPECT_LT(spec.stats.steps, n - 1) << "no draft accepted at k " << k;  // the demo's head agrees often
  }
  EXPECT_EQ(test::speculative_greedy(*model_, prompt_, n, {4, true}, pool_).tokens, plain.tokens);
}

TEST_F(GpuSpeculation, SeededSampledRunIsIdentical) {
  SampledGenerationOptions opt;
  opt.sampling.temperature = 0.9f;
  opt.sampling.top_k = 40;
  opt.sampling.top_p = 0.95f;
  opt.sampling.seed = 1234;
  opt.max_tokens = 32;
  auto run = [&](bool speculative, int k) {
    SampledGenerationOptions o = opt;
    o.speculative = speculative;
    o.speculation = {k, false};
    ModelCache cache = model_->new_cache(1);
    std::vector<int32_t> ids;
    generate_sampled(
        *model_, cache, cache.acquire(), prompt_, o, [&](const SampledToken& t) { return ids.push_back(t.id), true; }, pool_);
    return ids;
  };
  const auto plain = run(false, 1);
  ASSERT_EQ(plain.size(), 32u);
  for (int k : {1, 3}) EXPECT_EQ(run(true, k), plain) << "k " << k;
}

// Deterministic mode: a sequence's logits are the same bits alone and among 11 others (decode rows
// past the 8 one launch takes; its window batched with another's), and speculation keeps them.
TEST_F(GpuSpeculation, DeterministicRowsDoNotDependOnTheBatch) {
  model_->set_deterministic(true);
  const int others = 11;
  auto run = [&](bool batched) {
    ModelCache cache = model_->new_cache(others + 1);
    const int a = cache.acquire();
    std::vector<int> slots;
    Step window{Phase::Window, {{a, prompt_}}, false};
    for (int s = 0; batched && s < others; ++s) {
      slots.push_back(cache.acquire());
      window.sequences.push_back({slots.back(), std::vector<int32_t>(prompt_.begin() + s + 1, prompt_.end())});
    }
    std::vector<float> first = forward(cache, window);
    std::vector<float> mine(first.begin(), first.begin() + model_->config().vocab_size);
    for (int i = 0; i < 4; ++i) {
      Step step{Phase::Decode, {{a, {prompt_[static_cast<std::size_t>(i)]}}}, false};
      for (int s : slots) step.sequences.push_back({s, {static_cast<int32_t>(7 * i + s)}});
      const auto l = forward(cache, step);
      mine.insert(mine.end(), l.begin(), l.begin() + model_->config().vocab_size);
    }
    return mine;
  };
  EXPECT_TRUE(same_bits(run(false), run(true)));
  model_->set_deterministic(false);
}

}  // namespace
}  // namespace qwenrt

// The gated-attention kernels (prepare, decode, prefill) against the math in double, on ragged
// batches over shuffled paged caches.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cuda/attention/attention_harness.h"

namespace qwenrt {
namespace {

using test::AttentionShape;
using test::Batch;
using test::kDh;
using test::PagedCache;
using test::Window;

// bf16 output (relative rounding up to 2^-9) plus bf16 softmax weights in the P·V product: about
// 1.5e-3 relative L2 is expected; 4e-3 leaves room without hiding an indexing error (those give
// O(1)).
constexpr double kOutputTolerance = 4e-3;
// q and K after norm and RoPE: the GPU's f32 may round to the other bf16 neighbour now and then.
constexpr double kPrepareTolerance = 1e-3;

double q_error(const Batch& b, int nq, int64_t* far_off) {
  const auto got = test::download_bf16(b.d_q, static_cast<std::size_t>(b.rows * nq * kDh));
  *far_off = 0;
  std::vector<double> ref(b.q.begin(), b.q.end());
  for (std::size_t i = 0; i < got.size(); ++i) *far_off += test::bf16_far(got[i], b.q[i]);
  return test::relative_l2(got, ref);
}

double output_error(const cuda::DeviceBuffer& out, const std::vector<double>& ref) {
  return test::relative_l2(test::download_bf16(out, ref.size()), ref);
}

void run_decode(const PagedCache& cache, Batch& b, cudaStream_t stream = nullptr) {
  const AttentionShape& sh = cache.shape();
  const std::size_t ws = cuda::attention_decode_workspace_bytes(b.rows, sh.nq, cache.max_capacity());
  cuda::DeviceBuffer workspace(ws);
  test::poison(workspace);
  cuda::attention_decode(b.d_q.as<__nv_bfloat16>(), b.d_qg.as<float>(), b.d_positions.as<int32_t>(), b.rows, sh.nq, cache.max_capacity(),
                         cache.view(), workspace.get(), ws, b.d_out.as<__nv_bfloat16>(), stream);
  QWENRT_CUDA_CHECK(cudaDeviceSynchronize());
}

void run_prefill(const PagedCache& cache, Batch& b, cuda::PrefillKernel kernel) {
  const cuda::PrefillWindows w{b.d_first_row.as<int32_t>(), b.d_positions.as<int32_t>(), cache.num_seqs(), b.rows};
  test::poison(b.d_out);
  cuda::attention_prefill(b.d_q.as<__nv_bfloat16>(), b.d_qg.as<float>(), w, cache.shape().nq, cache.view(), b.d_out.as<__nv_bfloat16>(), nullptr,
                          kernel);
  QWENRT_CUDA_CHECK(cudaDeviceSynchronize());
}

// Every prefill kernel this GPU runs (the wgmma ones need Hopper and an sm_90a build).
std::vector<cuda::PrefillKernel> prefill_kernels() {
  std::vector<cuda::PrefillKernel> ks;
  for (auto k : {cuda::PrefillKernel::Mma, cuda::PrefillKernel::Wgmma})
    if (cuda::attention_prefill_supports(k)) ks.push_back(k);
  return ks;
}

struct RaggedCase {
  AttentionShape shape;
  const char* name;
};

class AttentionRagged : public ::testing::TestWithParam<RaggedCase> {};

// Four sequences with prompts of 1, 70, 300 and 0 tokens: two prefill steps of windows (some
// empty, one starting mid-sequence), then three decode steps of all four (the last starts at
// position 0, so decode sees a single key). Every step's q, the cache and both attention kernels
// are checked; decode steps also run through the prefill kernel (windows of one row).
TEST_P(AttentionRagged, PrefillWindowsThenDecode) {
  QWENRT_REQUIRE_GPU();
  const AttentionShape sh = GetParam().shape;
  test::FastRandom rng(11 + sh.nq + sh.block_size);
  const test::NormWeights norms = test::random_norms(rng);
  PagedCache cache(sh, {8, 80, 310, 8}, 3 + sh.block_size);

  const std::vector<std::vector<Window>> steps = {
      {{0, 1}, {0, 70}, {0, 100}, {0, 0}}, {{1, 0}, {70, 0}, {100, 200}, {0, 0}}, {{1, 1}, {70, 1}, {300, 1}, {0, 1}},
      {{2, 1}, {71, 1}, {301, 1}, {1, 1}}, {{3, 1}, {72, 1}, {302, 1}, {2, 1}},
  };
  for (std::size_t step = 0; step < steps.size(); ++step) {
    Batch b = test::prepare_batch(cache, norms, steps[step], rng);
    int64_t far_off = 0;
    const double qe = q_error(b, sh.nq, &far_off);
    EXPECT_LT(qe, kPrepareTolerance) << "step " << step << ": q after norm and RoPE";
    EXPECT_EQ(far_off, 0) << "step " << step << ": q elements more than one bf16 step off";

    const std::vector<double> ref = test::reference_attention(cache, b);
    double pe = 0;
    for (cuda::PrefillKernel k : prefill_kernels()) {
      run_prefill(cache, b, k);
      const double e = output_error(b.d_out, ref);
      EXPECT_LT(e, kOutputTolerance) << "step " << step << ": prefill, " << cuda::prefill_kernel_name(k);
      pe = std::max(pe, e);
    }
    const bool decode_step = step >= 2;
    double de = 0;
    if (decode_step) {
      test::poison(b.d_out);
      run_decode(cache, b);
      de = output_error(b.d_out, ref);
      EXPECT_LT(de, kOutputTolerance) << "step " << step << ": decode";
    }
    std::printf("[ %s step %zu ] %lld rows: q rel L2 %.2e, prefill (worst kernel) %.2e%s", GetParam().name, step, static_cast<long long>(b.rows), qe,
                pe, decode_step ? "" : "\n");
    if (decode_step) std::printf(", decode %.2e\n", de);
  }
  int64_t far_off = 0, stray = 0;
  const double ce = cache.check_pools(&far_off, &stray);
  std::printf("[ %s ] cache rel L2 %.2e, %lld elements off by more than one bf16 step, %lld stray writes\n", GetParam().name, ce,
              static_cast<long long>(far_off), static_cast<long long>(stray));
  EXPECT_LT(ce, kPrepareTolerance);
  EXPECT_EQ(far_off, 0);
  EXPECT_EQ(stray, 0) << "pool elements outside the written positions changed";
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionRagged,
                         ::testing::Values(RaggedCase{{8, 2, 64}, "group4_block64"}, RaggedCase{{12, 2, 48}, "group6_block48"},
                                           RaggedCase{{24, 4, 37}, "27B_heads_block37"}),
                         [](const auto& info) { return std::string(info.param.name); });

// A prompt long enough that prepare takes one block per row (512 rows and more) rather than
// spreading each row's heads over blocks: q, the cache and the prefill output against double.
TEST(AttentionPrompt, LongWindowPreparesAndAttends) {
  QWENRT_REQUIRE_GPU();
  const AttentionShape sh{24, 4, 64};
  test::FastRandom rng(5);
  const test::NormWeights norms = test::random_norms(rng);
  PagedCache cache(sh, {530, 8}, 9);
  Batch b = test::prepare_batch(cache, norms, {{0, 520}, {0, 3}}, rng);
  int64_t far_off = 0, stray = 0;
  EXPECT_LT(q_error(b, sh.nq, &far_off), kPrepareTolerance);
  EXPECT_EQ(far_off, 0);
  const std::vector<double> ref = test::reference_attention(cache, b);
  for (cuda::PrefillKernel k : prefill_kernels()) {
    run_prefill(cache, b, k);
    EXPECT_LT(output_error(b.d_out, ref), kOutputTolerance) << cuda::prefill_kernel_name(k);
  }
  EXPECT_LT(cache.check_pools(&far_off, &stray), kPrepareTolerance);
  EXPECT_EQ(far_off, 0);
  EXPECT_EQ(stray, 0);
}

// Long contexts: many splits, a last split of a few keys (5000 = 39·128 + 8), splits longer than the
// minimum (9000: 57 splits of 160). The cache is filled directly; decode of both rows, then each
// sequence alone must give the same bits (split boundaries depend on the length only). The last
// rows of each sequence also go through the prefill kernel.
TEST(AttentionLong, DecodeAndPrefillOverThousandsOfKeys) {
  QWENRT_REQUIRE_GPU();
  const AttentionShape sh{24, 4, 64};
  test::FastRandom rng(5);
  PagedCache cache(sh, {9000, 5000}, 17);
  cache.fill_direct({9000, 5000}, rng);
  EXPECT_EQ(cuda::decode_splits(9000), 57);
  EXPECT_EQ(cuda::decode_splits(5000), 40);

  auto make = [&](const std::vector<Window>& windows) {
    Batch b = test::layout_batch(windows, sh.nq);
    rng.fill(b.qg);
    std::vector<uint16_t> qbits(b.q.size());
    for (std::size_t i = 0; i < b.q.size(); ++i) {
      qbits[i] = f32_to_bf16(rng.uniform());
      b.q[i] = bf16_to_f32(qbits[i]);
    }
    b.d_qg = test::to_device(b.qg);
    b.d_q.upload(qbits.data(), qbits.size() * 2);
    return b;
  };

  Batch dec = make({{8999, 1}, {4999, 1}});
  run_decode(cache, dec);
  const double de = output_error(dec.d_out, test::reference_attention(cache, dec));
  EXPECT_LT(de, kOutputTolerance);
  const auto both = test::to_host<uint16_t>(dec.d_out, static_cast<std::size_t>(2 * sh.nq * kDh));

  // Each row alone: a one-sequence view of the same tables, queries and gates.
  for (int r = 0; r < 2; ++r) {
    cuda::PagedKv kv = cache.view();
    kv.block_tables += r * cache.max_blocks();
    const std::size_t ws = cuda::attention_decode_workspace_bytes(1, sh.nq, cache.max_capacity());
    cuda::DeviceBuffer workspace(ws), out(static_cast<std::size_t>(sh.nq * kDh * 2));
    test::poison(out);
    cuda::attention_decode(dec.d_q.as<__nv_bfloat16>() + r * sh.nq * kDh, dec.d_qg.as<float>() + r * sh.nq * 2 * kDh,
                           dec.d_positions.as<int32_t>() + r, 1, sh.nq, cache.max_capacity(), kv, workspace.get(), ws, out.as<__nv_bfloat16>(),
                           nullptr);
    const auto alone = test::to_host<uint16_t>(out, static_cast<std::size_t>(sh.nq * kDh));
    EXPECT_EQ(0, std::memcmp(alone.data(), both.data() + r * sh.nq * kDh, alone.size() * 2)) << "row " << r << " alone differs";
  }

  Batch pre = make({{8976, 24}, {4992, 8}});
  const std::vector<double> ref = test::reference_attention(cache, pre);
  double pe = 0;
  for (cuda::PrefillKernel k : prefill_kernels()) {
    run_prefill(cache, pre, k);
    const double e = output_error(pre.d_out, ref);
    EXPECT_LT(e, kOutputTolerance) << cuda::prefill_kernel_name(k);
    std::printf("[ long ] prefill %s: rel L2 %.2e\n", cuda::prefill_kernel_name(k), e);
    pe = std::max(pe, e);
  }
  std::printf("[ long ] decode at 9000 and 5000 keys rel L2 %.2e; prefill of their last 24 and 8 rows %.2e\n", de, pe);
}

TEST(AttentionArguments, BadShapesAreRejected) {
  QWENRT_REQUIRE_GPU();
  const AttentionShape sh{8, 2, 16};
  PagedCache cache(sh, {64}, 1);
  test::FastRandom rng(2);
  const test::NormWeights norms = test::random_norms(rng);
  cuda::DeviceBuffer buf(1 << 20);
  float* f = buf.as<float>();
  auto* h = buf.as<__nv_bfloat16>();
  auto* i = buf.as<int32_t>();
  const cuda::AttentionRows rows{i, i, 1};
  const cuda::PagedKv kv = cache.view();
  const cuda::QkNormRope nr = norms.device(sh);

  auto prepare = [&](const cuda::PagedKv& v, int nq, const cuda::QkNormRope& n, const float* qg) {
    cuda::attention_prepare(rows, qg, f, f, nq, n, v, h, nullptr);
  };
  cuda::PagedKv bad = kv;
  bad.head_dim = 128;
  EXPECT_THROW(prepare(bad, 8, nr, f), Error);
  bad = kv;
  bad.block_size = 0;
  EXPECT_THROW(prepare(bad, 8, nr, f), Error);
  bad = kv;
  bad.block_tables = nullptr;
  EXPECT_THROW(prepare(bad, 8, nr, f), Error);
  EXPECT_THROW(prepare(kv, 7, nr, f), Error);      // not a multiple of the kv heads
  EXPECT_THROW(prepare(kv, 8, nr, f + 1), Error);  // misaligned
  EXPECT_THROW(prepare(kv, 8, nr, nullptr), Error);
  cuda::QkNormRope odd = nr;
  odd.rotary_dim = 40;
  EXPECT_THROW(prepare(kv, 8, odd, f), Error);
  odd.rotary_dim = 512;
  EXPECT_THROW(prepare(kv, 8, odd, f), Error);

  const std::size_t ws = cuda::attention_decode_workspace_bytes(1, 8, 64);
  auto decode = [&](int64_t batch, int nq, int64_t max_len, std::size_t bytes) {
    cuda::attention_decode(h, f, i, batch, nq, max_len, kv, buf.get(), bytes, h, nullptr);
  };
  EXPECT_THROW(decode(0, 8, 64, ws), Error);
  EXPECT_THROW(decode(1, 18, 64, 1 << 20), Error);  // 9 query heads per kv head
  EXPECT_THROW(decode(1, 8, 65, 1 << 20), Error);   // longer than the block table reaches
  EXPECT_THROW(decode(1, 8, 0, ws), Error);
  EXPECT_THROW(decode(1, 8, 64, ws - 4), Error);  // workspace too small

  const cuda::PrefillWindows w{i, i, 1, 1};
  EXPECT_THROW(cuda::attention_prefill(h, f, w, 9, kv, h, nullptr), Error);
  EXPECT_THROW(cuda::attention_prefill(h, f, {i, i, 0, 1}, 8, kv, h, nullptr), Error);
  EXPECT_THROW(cuda::attention_prefill(h, f, {nullptr, i, 1, 1}, 8, kv, h, nullptr), Error);
  EXPECT_THROW(cuda::attention_prefill(h + 1, f, w, 8, kv, h, nullptr), Error);
}

}  // namespace
}  // namespace qwenrt

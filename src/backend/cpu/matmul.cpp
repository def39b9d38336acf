#include "backend/cpu/matmul.h"

#include <algorithm>
#include <vector>

#include "backend/cpu/matmul_blocked.h"
#include "backend/cpu/matmul_formats.h"
#include "core/error.h"

namespace qwenrt::cpu {

namespace {

// The row kernel of a weight's format: the seam where each format's file plugs in.
RowKernel row_kernel(const Weight& w) {
  switch (w.format) {
    case WeightFormat::F32:
    case WeightFormat::F16:
    case WeightFormat::BF16: return dense_rows;
    case WeightFormat::MlxAffine: return mlx_affine_rows;
    case WeightFormat::Fp8Block: return fp8_block_rows;
  }
  fail("matmul: weights in format ", weight_format_name(w.format), " have no CPU kernel");
}

}  // namespace

const char* matmul_isa() { return have_avx512vl() ? "avx2+avx512vl" : have_avx2() ? "avx2" : "scalar"; }

void matmul_multi(const float* x, int64_t n, int64_t k, std::span<const MatmulOutput> outputs, ThreadPool& pool) {
  // Concatenate all outputs' rows into one index space and split it across threads.
  std::vector<int64_t> starts{0};
  for (const auto& o : outputs) {
    if (o.w.cols != k) fail("matmul: weight has ", o.w.cols, " columns but the input has ", k);
    starts.push_back(starts.back() + o.w.rows);
  }
  const int64_t total = starts.back();
  if (n == 0 || total == 0) return;
  // Grain: enough rows that a task streams a useful amount of weight, at least a register tile.
  const std::size_t grain = static_cast<std::size_t>(std::max<int64_t>(4, std::min<int64_t>(64, total / (8 * pool.size()) / 4 * 4)));
  std::vector<RowKernel> kernels;
  for (const auto& o : outputs) {
    // Prompt windows take the blocked kernel where the format has one: the same bits per
    // (row, output) as the row kernel, so the choice cannot change a result.
    RowKernel blocked = n >= kBlockedMinRows ? blocked_kernel(o.w) : nullptr;
    kernels.push_back(blocked ? blocked : row_kernel(o.w));
  }
  pool.parallel_for(static_cast<std::size_t>(total), grain, [&](std::size_t b, std::size_t e) {
    for (std::size_t o = 0; o < outputs.size(); ++o) {
      int64_t lo = std::max<int64_t>(static_cast<int64_t>(b), starts[o]);
      int64_t hi = std::min<int64_t>(static_cast<int64_t>(e), starts[o + 1]);
      if (lo < hi) kernels[o](x, n, k, outputs[o].w, outputs[o].y, outputs[o].ldy, lo - starts[o], hi - starts[o]);
    }
  });
}

}  // namespace qwenrt::cpu

#include "backend/cpu/matmul.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <vector>

#include "backend/cpu/matmul_blocked.h"
#include "backend/cpu/matmul_formats.h"
#include "backend/cpu/mlx_affine_int8.h"
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

const char* matmul_isa() { return have_avx512() ? "avx2, avx512 windows" : have_avx2() ? "avx2" : "scalar"; }

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
  // MLX affine products read x in their position order (mlx_affine_positions.h): made once per
  // order here, shared by every thread and every output in that order.
  std::vector<std::unique_ptr<mlx_affine::Activations>> prepared;
  auto activations = [&](const Weight& w) -> const mlx_affine::Activations& {
    const mlx_affine::Positions P = mlx_affine::positions(w);
    for (const auto& a : prepared)
      if (a->positions() == P) return *a;
    return *prepared.emplace_back(std::make_unique<mlx_affine::Activations>(x, n, P));
  };
  // The same for int8 activations (mlx_affine_int8.h), when that mode is on.
  std::vector<std::unique_ptr<mlx_affine::Int8Activations>> rounded;
  auto int8_activations_for = [&](const Weight& w) -> const mlx_affine::Int8Activations& {
    const auto L = mlx_affine::Int8Activations::layout_of(w);
    for (const auto& a : rounded)
      if (a->layout() == L) return *a;
    return *rounded.emplace_back(std::make_unique<mlx_affine::Int8Activations>(x, n, L));
  };
  const bool int8 = int8_activations();
  std::vector<std::function<void(int64_t, int64_t)>> products;
  for (const auto& o : outputs) {
    if (int8 && int8_product_applies(o.w)) {
      const mlx_affine::Int8Activations* a = &int8_activations_for(o.w);
      products.emplace_back([a, &o](int64_t lo, int64_t hi) { mlx_affine_int8_rows(*a, o.w, o.y, o.ldy, lo, hi); });
      continue;
    }
    // Prompt windows take the blocked kernel where the format has one: the same bits per
    // (row, output) as the row kernel, so the choice cannot change a result.
    const bool window = n >= kBlockedMinRows;
    if (o.w.format == WeightFormat::MlxAffine) {
      const mlx_affine::Activations* a = &activations(o.w);
      products.emplace_back([a, &o, window](int64_t lo, int64_t hi) {
        if (window) mlx_affine_rows_blocked(*a, o.w, o.y, o.ldy, lo, hi);
        else mlx_affine_rows(*a, o.w, o.y, o.ldy, lo, hi);
      });
      continue;
    }
    RowKernel blocked = window ? blocked_kernel(o.w) : nullptr;
    RowKernel kernel = blocked ? blocked : row_kernel(o.w);
    products.emplace_back([kernel, &o, x, n, k](int64_t lo, int64_t hi) { kernel(x, n, k, o.w, o.y, o.ldy, lo, hi); });
  }
  pool.parallel_for(static_cast<std::size_t>(total), grain, [&](std::size_t b, std::size_t e) {
    for (std::size_t o = 0; o < outputs.size(); ++o) {
      int64_t lo = std::max<int64_t>(static_cast<int64_t>(b), starts[o]);
      int64_t hi = std::min<int64_t>(static_cast<int64_t>(e), starts[o + 1]);
      if (lo < hi) products[o](lo - starts[o], hi - starts[o]);
    }
  });
}

}  // namespace qwenrt::cpu

// Blocked prompt-window products over block-scaled FP8 weights: a panel is the weight rows decoded
// and scaled once per k-block, w = (e4m3(q) / 256) · (256 · scale) in f32 exactly as the row
// kernels compute it (fp8_block_decode.h), then reused by every x row of the block.
#include <immintrin.h>

#include "backend/cpu/fp8_block_decode.h"
#include "backend/cpu/matmul_blocked.h"
#include "backend/cpu/matmul_blocked_driver.h"
#include "backend/cpu/scale_format_dispatch.h"

namespace qwenrt::cpu {

namespace {

using fp8_block::scaled_256;

// Where column c of weight row j goes in a panel laid out [kc / 8][nr][8].
float* panel_at(float* dst, int nr, int j, int64_t c) { return dst + (c / 8 * nr + j) * 8 + c % 8; }

template <WeightFormat S>
void pack_scalar(const Weight& w, int64_t r, int nr, int64_t c0, int64_t kc, float* dst) {
  for (int j = 0; j < nr; ++j)
    for (int64_t c = 0; c < kc; ++c) *panel_at(dst, nr, j, c) = fp8_block::element<S>(w, r + j, c0 + c);
}

// An 8-column step never straddles two column blocks (fp8_block::check), so one scale a step.
template <WeightFormat S>
__attribute__((target("avx2,fma,f16c"))) void pack_avx2(const Weight& w, int64_t r, int nr, int64_t c0, int64_t kc, float* dst) {
  const int64_t bc = w.fp8.block_cols;
  for (int j = 0; j < nr; ++j) {
    const auto* row = reinterpret_cast<const uint8_t*>(w.data + static_cast<std::size_t>(r + j) * w.row_bytes());
    for (int64_t c = c0; c < c0 + kc; c += 8)
      _mm256_store_ps(panel_at(dst, nr, j, c - c0), _mm256_mul_ps(fp8_block::decode8(row, c), _mm256_set1_ps(scaled_256<S>(w, r + j, c / bc))));
  }
}

template <WeightFormat S>
void run(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1, bool avx2) {
  blocked::run(avx2 ? pack_avx2<S> : pack_scalar<S>, fp8_block::element<S>, avx2, x, n, k, w, y, ldy, r0, r1);
}

void dispatch(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1, bool avx2) {
  fp8_block::check(w, k);
  return with_scale_format(w.fp8.scale_format, [&]<WeightFormat S>() { return run<S>(x, n, k, w, y, ldy, r0, r1, avx2); });
}

}  // namespace

void fp8_block_rows_blocked(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  dispatch(x, n, k, w, y, ldy, r0, r1, have_avx2());
}

void fp8_block_rows_blocked_scalar(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  dispatch(x, n, k, w, y, ldy, r0, r1, false);
}

}  // namespace qwenrt::cpu

// Blocked prompt-window products over dense weights (f32, f16, bf16): a panel is the weight rows
// widened to f32, exactly as the row kernels widen them (bf16: the 16 bits shifted up; f16: the
// F16C conversion or its exact scalar twin).
#include <immintrin.h>

#include <cstring>

#include "backend/cpu/matmul_blocked.h"
#include "backend/cpu/matmul_blocked_driver.h"
#include "core/half.h"

namespace qwenrt::cpu {

namespace {

float element(const Weight& w, int64_t r, int64_t c) {
  const std::byte* p = w.data + static_cast<std::size_t>(r) * w.row_bytes();
  switch (w.format) {
    case WeightFormat::BF16: {
      uint16_t h;
      std::memcpy(&h, p + 2 * c, 2);
      return bf16_to_f32(h);
    }
    case WeightFormat::F16: {
      uint16_t h;
      std::memcpy(&h, p + 2 * c, 2);
      return f16_to_f32(h);
    }
    default: {
      float f;
      std::memcpy(&f, p + 4 * c, 4);
      return f;
    }
  }
}

void pack_scalar(const Weight& w, int64_t r, int nr, int64_t c0, int64_t kc, float* dst) {
  for (int j = 0; j < nr; ++j)
    for (int64_t c = 0; c < kc; ++c) dst[(c / 8 * nr + j) * 8 + c % 8] = element(w, r + j, c0 + c);
}

template <WeightFormat T>
__attribute__((target("avx2,fma,f16c"))) void pack_avx2(const Weight& w, int64_t r, int nr, int64_t c0, int64_t kc, float* dst) {
  const std::size_t stride = w.row_bytes();
  for (int j = 0; j < nr; ++j) {
    const std::byte* p = w.data + static_cast<std::size_t>(r + j) * stride;
    for (int64_t c = 0; c < kc; c += 8) {
      __m256 v;
      if constexpr (T == WeightFormat::BF16) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * (c0 + c)));
        v = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
      } else if constexpr (T == WeightFormat::F16) {
        v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * (c0 + c))));
      } else {
        v = _mm256_loadu_ps(reinterpret_cast<const float*>(p + 4 * (c0 + c)));
      }
      _mm256_store_ps(dst + (c / 8 * nr + j) * 8, v);
    }
  }
}

blocked::PackPanel pack_avx2_for(WeightFormat f) {
  switch (f) {
    case WeightFormat::BF16: return pack_avx2<WeightFormat::BF16>;
    case WeightFormat::F16: return pack_avx2<WeightFormat::F16>;
    default: return pack_avx2<WeightFormat::F32>;
  }
}

}  // namespace

void dense_rows_blocked(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  if (!have_avx2()) return dense_rows_blocked_scalar(x, n, k, w, y, ldy, r0, r1);
  blocked::run(pack_avx2_for(w.format), element, true, x, n, k, w, y, ldy, r0, r1);
}

void dense_rows_blocked_scalar(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  blocked::run(pack_scalar, element, false, x, n, k, w, y, ldy, r0, r1);
}

}  // namespace qwenrt::cpu

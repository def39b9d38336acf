// The gated delta rule on the CPU (deltanet.h): the recurrence, one row at a time (decode and
// committed steps: S ← αS, δ = β(v − Sᵀk), S ← S + kδᵀ, o = Sᵀq), and the chunked (WY) form
// (windows). Within a chunk of C rows with cumulative log decay γ,
//   (I + A) U = βV,  (I + A) W = β·exp(γ)·K,  A_rs = β_r·exp(γ_r − γ_s)·(k_r·k_s) for s < r,
//   V' = U − W·S,  O_r = exp(γ_r)·q_r·S + Σ_{s≤r} exp(γ_r − γ_s)(q_r·k_s) V'_s,
//   S ← exp(γ_C)·S + Σ_s exp(γ_C − γ_s) k_s V'_sᵀ.
// Algebraically the recurrence; rows enter as matrix products instead of one at a time.
//
// Written once over a lane type: AVX2 (8 floats a register) where the CPU has it, and a scalar
// twin that does the same fmas on 8 lanes in the same order, so both give the same bits. Each
// product over the columns keeps a block of 4 registers of its output row in registers and runs
// over the rows it sums (every output element sums its terms in the one order of the definition
// above); the dot products over dk are cpu::dot's (8 lane sums in the fixed order, then the tail).
//
// Denormals: a head that decays fast drives exp(γ_r − γ_s) and the decayed keys and state through
// the float denormal range (below 1.2e-38) within a chunk, and every arithmetic operation on a
// denormal costs x86 cores a microcode assist (measured: the whole 0.8B 64-token prefill 15-25%
// slower). Both forms flush them to zero (MXCSR FTZ and DAZ for their own duration): the values
// change by less than 1.2e-38 each, and the same inputs still give the same bits.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "backend/cpu/matmul_formats.h"
#include "backend/cpu/vector_ops.h"
#include "model/cpu/deltanet.h"

namespace qwenrt {
namespace {

struct ScalarLanes {
  struct V {
    float l[8];
  };
  static V load(const float* p) {
    V v;
    for (int i = 0; i < 8; ++i) v.l[i] = p[i];
    return v;
  }
  static void store(float* p, V v) {
    for (int i = 0; i < 8; ++i) p[i] = v.l[i];
  }
  static V set1(float x) {
    V v;
    for (float& l : v.l) l = x;
    return v;
  }
  static V mul(V a, V b) {
    for (int i = 0; i < 8; ++i) a.l[i] *= b.l[i];
    return a;
  }
  static V sub(V a, V b) {
    for (int i = 0; i < 8; ++i) a.l[i] -= b.l[i];
    return a;
  }
  static V fma(V a, V b, V c) {  // a·b + c
    for (int i = 0; i < 8; ++i) c.l[i] = std::fma(a.l[i], b.l[i], c.l[i]);
    return c;
  }
  static V fnma(V a, V b, V c) {  // c − a·b
    for (int i = 0; i < 8; ++i) c.l[i] = std::fma(-a.l[i], b.l[i], c.l[i]);
    return c;
  }
};

namespace scalar {
using Lanes = ScalarLanes;
#include "model/cpu/delta_rule_lanes.inc"
}  // namespace scalar

// Everything defined up to the pop (the included body, its lambdas) is compiled for AVX2 and FMA;
// it runs only where the CPU has both. (GCC takes the target pragma, clang its attribute pragma.)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif
namespace avx2 {
struct Lanes {
  using V = __m256;
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V fnma(V a, V b, V c) { return _mm256_fnmadd_ps(a, b, c); }
};
#include "model/cpu/delta_rule_lanes.inc"
}  // namespace avx2
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

// FTZ and DAZ for the scope (see the top of the file).
class FlushDenormals {
 public:
  FlushDenormals() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | 0x8040u); }
  ~FlushDenormals() { _mm_setcsr(saved_); }
  FlushDenormals(const FlushDenormals&) = delete;
  FlushDenormals& operator=(const FlushDenormals&) = delete;

 private:
  unsigned saved_;
};

}  // namespace

void delta_rule_chunked(const DeltaRuleHead& h, int64_t rows, int64_t dk, int64_t dv, float* S, int64_t chunk, DeltaRuleIsa isa) {
  if (rows <= 0) return;
  const FlushDenormals flush;
  const bool simd = isa == DeltaRuleIsa::Best ? cpu::have_avx2() : isa == DeltaRuleIsa::Avx2;
  if (simd) avx2::chunked(h, rows, dk, dv, S, chunk);
  else scalar::chunked(h, rows, dk, dv, S, chunk);
}

void delta_rule_recurrent(const DeltaRuleHead& h, int64_t rows, int64_t dk, int64_t dv, float* S, DeltaRuleIsa isa) {
  if (rows <= 0) return;
  const FlushDenormals flush;
  const bool simd = isa == DeltaRuleIsa::Best ? cpu::have_avx2() : isa == DeltaRuleIsa::Avx2;
  if (simd) avx2::recurrent(h, rows, dk, dv, S);
  else scalar::recurrent(h, rows, dk, dv, S);
}

}  // namespace qwenrt

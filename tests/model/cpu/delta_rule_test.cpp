#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/matmul_formats.h"
#include "backend/cpu/ops.h"
#include "model/cpu/deltanet.h"

namespace qwenrt {
namespace {

// Independent double-precision recurrence, written straight from the definition:
// S ← α(I − βkkᵀ)S + βkvᵀ, o = Sᵀq.
void reference(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v, const std::vector<double>& beta,
               const std::vector<double>& g, int64_t T, int64_t dk, int64_t dv, std::vector<double>& S, std::vector<double>& o) {
  for (int64_t t = 0; t < T; ++t) {
    const double a = std::exp(g[t]);
    std::vector<double> kS(dv, 0.0);
    for (int64_t i = 0; i < dk; ++i)
      for (int64_t j = 0; j < dv; ++j) kS[j] += k[t * dk + i] * S[i * dv + j];
    for (int64_t i = 0; i < dk; ++i)
      for (int64_t j = 0; j < dv; ++j)
        S[i * dv + j] = a * (S[i * dv + j] - beta[t] * k[t * dk + i] * kS[j]) + beta[t] * k[t * dk + i] * v[t * dv + j];
    for (int64_t j = 0; j < dv; ++j) {
      double s = 0;
      for (int64_t i = 0; i < dk; ++i) s += S[i * dv + j] * q[t * dk + i];
      o[t * dv + j] = s;
    }
  }
}

struct Case {
  int64_t T, dk, dv, chunk;
};

// A head's T rows: q and k normalised (q scaled), β in [0, 1), log decays g in (−decay, 0], a
// random start state.
struct Inputs {
  int64_t T, dk, dv;
  std::vector<float> q, k, v, beta, g, S0;

  Inputs(int64_t T_, int64_t dk_, int64_t dv_, float decay, unsigned seed) : T(T_), dk(dk_), dv(dv_) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd;
    std::uniform_real_distribution<float> ud(0.0f, 1.0f);
    q.resize(T * dk), k.resize(T * dk), v.resize(T * dv), beta.resize(T), g.resize(T), S0.resize(dk * dv);
    for (auto& x : q) x = nd(rng);
    for (auto& x : k) x = nd(rng);
    for (auto& x : v) x = nd(rng);
    for (auto& x : S0) x = 0.1f * nd(rng);
    for (int64_t t = 0; t < T; ++t) {
      cpu::l2_normalize(&q[t * dk], dk, 1e-6f, 1.0f / std::sqrt(static_cast<float>(dk)));
      cpu::l2_normalize(&k[t * dk], dk, 1e-6f, 1.0f);
      beta[t] = ud(rng);
      g[t] = -decay * ud(rng);
    }
  }
  DeltaRuleHead head(float* o) const { return {q.data(), k.data(), v.data(), beta.data(), g.data(), o, dk, dk, dv, dv, 1}; }
  // The double-precision recurrence from S0: output rows and final state.
  void reference_run(std::vector<double>& S, std::vector<double>& o) const {
    S.assign(S0.begin(), S0.end());
    o.assign(static_cast<std::size_t>(T * dv), 0.0);
    reference({q.begin(), q.end()}, {k.begin(), k.end()}, {v.begin(), v.end()}, {beta.begin(), beta.end()}, {g.begin(), g.end()}, T, dk, dv, S, o);
  }
};

double relative_l2(const std::vector<float>& got, const std::vector<double>& ref) {
  double e = 0, n = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) e += (got[i] - ref[i]) * (got[i] - ref[i]), n += ref[i] * ref[i];
  return std::sqrt(e / n);
}

class DeltaRuleTest : public ::testing::TestWithParam<Case> {};

TEST_P(DeltaRuleTest, RecurrentAndChunkedMatchDoubleReference) {
  const auto [T, dk, dv, chunk] = GetParam();
  const Inputs in(T, dk, dv, 2.0f, static_cast<unsigned>(T * 131 + dk));
  std::vector<double> Sd, od;
  in.reference_run(Sd, od);
  for (bool chunked : {false, true}) {
    std::vector<float> S = in.S0, o(T * dv);
    const DeltaRuleHead h = in.head(o.data());
    if (chunked) delta_rule_chunked(h, T, dk, dv, S.data(), chunk);
    else delta_rule_recurrent(h, T, dk, dv, S.data());
    EXPECT_LT(relative_l2(o, od), 1e-5) << (chunked ? "chunked" : "recurrent") << " output";
    EXPECT_LT(relative_l2(S, Sd), 1e-5) << (chunked ? "chunked" : "recurrent") << " state";
  }
}

// The AVX2 forms and their scalar twins give the same bits, on shapes with and without column tails
// and with decays strong enough to pass through the denormal range (flushed by both).
TEST(DeltaRule, Avx2AndScalarGiveTheSameBits) {
  if (!cpu::have_avx2()) GTEST_SKIP() << "this CPU has no AVX2 and FMA";
  for (const Case c : {Case{64, 128, 128, 64}, Case{150, 40, 44, 64}, Case{37, 12, 20, 8}}) {
    for (float decay : {2.0f, 60.0f}) {
      const Inputs in(c.T, c.dk, c.dv, decay, static_cast<unsigned>(c.T + c.dk * 7 + static_cast<int>(decay)));
      std::vector<float> S[2] = {in.S0, in.S0}, o[2] = {std::vector<float>(c.T * c.dv), std::vector<float>(c.T * c.dv)};
      for (bool chunked : {false, true}) {
        for (int i = 0; i < 2; ++i) {
          S[i] = in.S0;
          const DeltaRuleIsa isa = i == 0 ? DeltaRuleIsa::Avx2 : DeltaRuleIsa::Scalar;
          if (chunked) delta_rule_chunked(in.head(o[i].data()), c.T, c.dk, c.dv, S[i].data(), c.chunk, isa);
          else delta_rule_recurrent(in.head(o[i].data()), c.T, c.dk, c.dv, S[i].data(), isa);
        }
        const char* form = chunked ? "chunked" : "recurrent";
        EXPECT_EQ(0, std::memcmp(o[0].data(), o[1].data(), o[0].size() * sizeof(float))) << form << " output, T " << c.T << " decay " << decay;
        EXPECT_EQ(0, std::memcmp(S[0].data(), S[1].data(), S[0].size() * sizeof(float))) << form << " state, T " << c.T << " decay " << decay;
      }
    }
  }
}

// A head that decays by up to e^-60 a row: the decay factors underflow (through the denormal range,
// flushed) and the state forgets; both forms still give the recurrence's values.
TEST(DeltaRule, StrongDecayMatchesDoubleReference) {
  const int64_t T = 100, dk = 16, dv = 24;
  const Inputs in(T, dk, dv, 60.0f, 5);
  std::vector<double> Sd, od;
  in.reference_run(Sd, od);
  for (bool chunked : {false, true}) {
    std::vector<float> S = in.S0, o(T * dv);
    if (chunked) delta_rule_chunked(in.head(o.data()), T, dk, dv, S.data(), 64);
    else delta_rule_recurrent(in.head(o.data()), T, dk, dv, S.data());
    EXPECT_LT(relative_l2(o, od), 1e-5) << (chunked ? "chunked" : "recurrent");
    EXPECT_LT(relative_l2(S, Sd), 1e-5) << (chunked ? "chunked" : "recurrent");
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, DeltaRuleTest,
                         ::testing::Values(Case{1, 8, 8, 64}, Case{7, 16, 8, 64}, Case{64, 16, 16, 64}, Case{65, 8, 12, 64}, Case{150, 32, 16, 64},
                                           Case{37, 12, 20, 8}));

}  // namespace
}  // namespace qwenrt

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

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

class DeltaRuleTest : public ::testing::TestWithParam<Case> {};

TEST_P(DeltaRuleTest, RecurrentAndChunkedMatchDoubleReference) {
  const auto [T, dk, dv, chunk] = GetParam();
  std::mt19937 rng(static_cast<unsigned>(T * 131 + dk));
  std::normal_distribution<float> nd;
  std::uniform_real_distribution<float> ud(0.0f, 1.0f);
  std::vector<float> q(T * dk), k(T * dk), v(T * dv), beta(T), g(T), S0(dk * dv);
  for (auto& x : q) x = nd(rng);
  for (auto& x : k) x = nd(rng);
  for (auto& x : v) x = nd(rng);
  for (auto& x : S0) x = 0.1f * nd(rng);
  for (int64_t t = 0; t < T; ++t) {
    cpu::l2_normalize(&q[t * dk], dk, 1e-6f, 1.0f / std::sqrt(static_cast<float>(dk)));
    cpu::l2_normalize(&k[t * dk], dk, 1e-6f, 1.0f);
    beta[t] = ud(rng);
    g[t] = -2.0f * ud(rng);
  }
  std::vector<double> Sd(S0.begin(), S0.end()), od(T * dv);
  reference({q.begin(), q.end()}, {k.begin(), k.end()}, {v.begin(), v.end()}, {beta.begin(), beta.end()}, {g.begin(), g.end()}, T, dk, dv, Sd, od);

  for (bool chunked : {false, true}) {
    std::vector<float> S = S0, o(T * dv);
    DeltaRuleHead h{q.data(), k.data(), v.data(), beta.data(), g.data(), o.data(), dk, dk, dv, dv, 1};
    if (chunked) delta_rule_chunked(h, T, dk, dv, S.data(), chunk);
    else delta_rule_recurrent(h, T, dk, dv, S.data());
    double eo = 0, no = 0, es = 0, ns = 0;
    for (int64_t i = 0; i < T * dv; ++i) eo += (o[i] - od[i]) * (o[i] - od[i]), no += od[i] * od[i];
    for (int64_t i = 0; i < dk * dv; ++i) es += (S[i] - Sd[i]) * (S[i] - Sd[i]), ns += Sd[i] * Sd[i];
    EXPECT_LT(std::sqrt(eo / no), 1e-5) << (chunked ? "chunked" : "recurrent") << " output";
    EXPECT_LT(std::sqrt(es / ns), 1e-5) << (chunked ? "chunked" : "recurrent") << " state";
  }
}

// The AVX2 form and its scalar twin give the same bits, on shapes with and without column tails
// and with decays strong enough to pass through the denormal range (flushed by both).
TEST(DeltaRuleChunked, Avx2AndScalarGiveTheSameBits) {
  if (!delta_rule_has_avx2()) GTEST_SKIP() << "this CPU has no AVX2 and FMA";
  for (const Case c : {Case{64, 128, 128, 64}, Case{150, 40, 44, 64}, Case{37, 12, 20, 8}}) {
    for (float decay : {2.0f, 60.0f}) {
      std::mt19937 rng(static_cast<unsigned>(c.T + c.dk * 7 + static_cast<int>(decay)));
      std::normal_distribution<float> nd;
      std::uniform_real_distribution<float> ud(0.0f, 1.0f);
      std::vector<float> q(c.T * c.dk), k(c.T * c.dk), v(c.T * c.dv), beta(c.T), g(c.T), S0(c.dk * c.dv);
      for (auto& x : q) x = nd(rng);
      for (auto& x : k) x = nd(rng);
      for (auto& x : v) x = nd(rng);
      for (auto& x : S0) x = 0.1f * nd(rng);
      for (int64_t t = 0; t < c.T; ++t) {
        cpu::l2_normalize(&q[t * c.dk], c.dk, 1e-6f, 1.0f / std::sqrt(static_cast<float>(c.dk)));
        cpu::l2_normalize(&k[t * c.dk], c.dk, 1e-6f, 1.0f);
        beta[t] = ud(rng);
        g[t] = -decay * ud(rng);
      }
      std::vector<float> S[2] = {S0, S0}, o[2] = {std::vector<float>(c.T * c.dv), std::vector<float>(c.T * c.dv)};
      for (int i = 0; i < 2; ++i) {
        DeltaRuleHead h{q.data(), k.data(), v.data(), beta.data(), g.data(), o[i].data(), c.dk, c.dk, c.dv, c.dv, 1};
        delta_rule_chunked(h, c.T, c.dk, c.dv, S[i].data(), c.chunk, i == 0 ? DeltaRuleIsa::Avx2 : DeltaRuleIsa::Scalar);
      }
      EXPECT_EQ(0, std::memcmp(o[0].data(), o[1].data(), o[0].size() * sizeof(float))) << "output, T " << c.T << " decay " << decay;
      EXPECT_EQ(0, std::memcmp(S[0].data(), S[1].data(), S[0].size() * sizeof(float))) << "state, T " << c.T << " decay " << decay;
    }
  }
}

// A head that decays by up to e^-60 a row: the chunk's decay factors underflow (through the
// denormal range, flushed) and the state forgets; still the recurrence's values.
TEST(DeltaRuleChunked, StrongDecayMatchesDoubleReference) {
  const int64_t T = 100, dk = 16, dv = 24;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  std::uniform_real_distribution<float> ud(0.0f, 1.0f);
  std::vector<float> q(T * dk), k(T * dk), v(T * dv), beta(T), g(T), S0(dk * dv);
  for (auto& x : q) x = nd(rng);
  for (auto& x : k) x = nd(rng);
  for (auto& x : v) x = nd(rng);
  for (auto& x : S0) x = 0.1f * nd(rng);
  for (int64_t t = 0; t < T; ++t) {
    cpu::l2_normalize(&q[t * dk], dk, 1e-6f, 1.0f / std::sqrt(static_cast<float>(dk)));
    cpu::l2_normalize(&k[t * dk], dk, 1e-6f, 1.0f);
    beta[t] = ud(rng);
    g[t] = -60.0f * ud(rng);
  }
  std::vector<double> Sd(S0.begin(), S0.end()), od(T * dv);
  reference({q.begin(), q.end()}, {k.begin(), k.end()}, {v.begin(), v.end()}, {beta.begin(), beta.end()}, {g.begin(), g.end()}, T, dk, dv, Sd, od);
  std::vector<float> S = S0, o(T * dv);
  DeltaRuleHead h{q.data(), k.data(), v.data(), beta.data(), g.data(), o.data(), dk, dk, dv, dv, 1};
  delta_rule_chunked(h, T, dk, dv, S.data(), 64);
  double eo = 0, no = 0, es = 0, ns = 0;
  for (int64_t i = 0; i < T * dv; ++i) eo += (o[i] - od[i]) * (o[i] - od[i]), no += od[i] * od[i];
  for (int64_t i = 0; i < dk * dv; ++i) es += (S[i] - Sd[i]) * (S[i] - Sd[i]), ns += Sd[i] * Sd[i];
  EXPECT_LT(std::sqrt(eo / no), 1e-5);
  EXPECT_LT(std::sqrt(es / ns), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Shapes, DeltaRuleTest,
                         ::testing::Values(Case{1, 8, 8, 64}, Case{7, 16, 8, 64}, Case{64, 16, 16, 64}, Case{65, 8, 12, 64}, Case{150, 32, 16, 64},
                                           Case{37, 12, 20, 8}));

}  // namespace
}  // namespace qwenrt

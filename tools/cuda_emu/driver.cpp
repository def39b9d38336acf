// Runs the chunked DeltaNet kernels (emulated) on the GPU test's cases and data, against a double
// row-by-row reference with the CPU layer's arithmetic.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <random>
#include <set>
#include <vector>

#include "backend/cuda/deltanet/deltanet_prefill.h"
#include "backend/cuda/runtime/runtime_options.h"
#include "backend/cuda/runtime/wgmma_probe.h"

using namespace qwenrt;
constexpr int kD = 128, kK = 4;

std::vector<float> random_f32(std::size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> out(n);
  for (auto& v : out) v = nd(rng);
  return out;
}
struct Layer {
  int nk, nv;
  int64_t key_dim, value_dim, conv_dim;
  std::vector<float> conv_w, neg_exp_a, dt_bias, norm_w;
  float eps = 1e-6f;
};
Layer random_layer(int nk, int nv, std::mt19937& rng, bool weak) {
  Layer L{nk, nv, int64_t{nk} * kD, int64_t{nv} * kD, 0};
  L.conv_dim = 2 * L.key_dim + L.value_dim;
  L.conv_w = random_f32(L.conv_dim * kK, rng, 0.5f);
  L.neg_exp_a = random_f32(nv, rng, 0.5f);
  for (float& v : L.neg_exp_a) v = -std::exp(v) * (weak ? 0.02f : 1.0f);
  L.dt_bias = random_f32(nv, rng);
  L.norm_w = random_f32(kD, rng, 0.2f);
  for (float& v : L.norm_w) v += 1.0f;
  return L;
}
double silu(double x) { return x / (1 + std::exp(-x)); }
double sigm(double x) { return 1 / (1 + std::exp(-x)); }
double softplus(double x) { return x > 20 ? x : std::log1p(std::exp(x)); }
void ref_row(const Layer& L, const float* qkv, const float* z, const float* b, const float* a, int64_t pos, float* ring, double* S,
             std::vector<double>& out) {
  std::vector<double> mixed(L.conv_dim);
  for (int64_t ch = 0; ch < L.conv_dim; ++ch) {
    double s = 0;
    for (int j = 0; j < kK; ++j) {
      const int64_t pj = pos - (kK - 1) + j;
      const double h = j == kK - 1 ? qkv[ch] : pj < 0 ? 0.0 : ring[(pj % kK) * L.conv_dim + ch];
      s += L.conv_w[ch * kK + j] * h;
    }
    mixed[ch] = silu(s);
  }
  std::copy(qkv, qkv + L.conv_dim, ring + (pos % kK) * L.conv_dim);
  auto norm = [](double* x, double scale) {
    double ss = 0;
    for (int i = 0; i < kD; ++i) ss += x[i] * x[i];
    const double inv = 1 / std::sqrt(ss + 1e-6) * scale;
    for (int i = 0; i < kD; ++i) x[i] *= inv;
  };
  for (int hk = 0; hk < L.nk; ++hk) {
    norm(&mixed[hk * kD], 1 / std::sqrt(128.0));
    norm(&mixed[L.key_dim + hk * kD], 1.0);
  }
  out.assign(L.value_dim, 0.0);
  const int ratio = L.nv / L.nk;
  for (int hv = 0; hv < L.nv; ++hv) {
    const int hk = hv / ratio;
    const double beta = sigm(b[hv]), g = L.neg_exp_a[hv] * softplus(a[hv] + L.dt_bias[hv]);
    const double* q = &mixed[hk * kD];
    const double* k = &mixed[L.key_dim + hk * kD];
    const double* v = &mixed[2 * L.key_dim + hv * kD];
    double* s = S + int64_t{hv} * kD * kD;
    const double al = std::exp(g);
    std::vector<double> kv(kD, 0.0);
    for (int i = 0; i < kD; ++i)
      for (int j = 0; j < kD; ++j) {
        s[i * kD + j] *= al;
        kv[j] += s[i * kD + j] * k[i];
      }
    for (int j = 0; j < kD; ++j) kv[j] = beta * (v[j] - kv[j]);
    double* o = &out[hv * kD];
    for (int i = 0; i < kD; ++i)
      for (int j = 0; j < kD; ++j) {
        s[i * kD + j] += k[i] * kv[j];
        o[j] += s[i * kD + j] * q[i];
      }
    double ss = 0;
    for (int j = 0; j < kD; ++j) ss += o[j] * o[j];
    const double inv = 1 / std::sqrt(ss / kD + L.eps);
    for (int j = 0; j < kD; ++j) o[j] = o[j] * inv * L.norm_w[j] * silu(z[hv * kD + j]);
  }
}
float bf2f(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct SpanCase {
  int rows, start_position, slot;
};
int failures = 0;
std::vector<uint16_t> g_out;  // the last window's output and states, bit for bit
std::vector<float> g_state;
void run_window(int nk, int nv, int n_slots, const std::vector<SpanCase>& cases, bool weak, unsigned seed, int64_t out_pad = 16) {
  std::mt19937 rng(seed);
  const Layer L = random_layer(nk, nv, rng, weak);
  std::vector<cuda::DeltaNetSpan> spans;
  int32_t T = 0;
  for (const auto& c : cases) {
    spans.push_back({T, c.rows, c.start_position, c.slot});
    T += c.rows;
  }
  const int64_t ld_qkv = L.conv_dim + 8, ld_z = L.value_dim + 4, ld_ba = 2 * nv + 3, ld_out = L.value_dim + out_pad;
  const int64_t conv_slot = kK * L.conv_dim + 12, rec_slot = int64_t{nv} * kD * kD + 4;
  std::vector<float> ring = random_f32(n_slots * conv_slot, rng);
  std::vector<float> state = random_f32(n_slots * rec_slot, rng, 0.3f);
  const std::vector<float> state0 = state;
  const auto qkv = random_f32(T * ld_qkv, rng);
  const auto z = random_f32(T * ld_z, rng);
  const auto b = random_f32(T * ld_ba, rng);
  auto a = random_f32(T * ld_ba, rng);
  a[0] = 30.0f;
  std::vector<float> d_ring = ring, d_state = state;
  std::vector<uint16_t> d_out(T * ld_out, 0xffff);
  const std::size_t ws_bytes = cuda::deltanet_prefill_workspace_bytes(spans, nk, nv);
  std::vector<unsigned char> ws_store(ws_bytes + 256, 0xff);
  void* ws = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(ws_store.data()) + 255) & ~uintptr_t{255});
  cuda::DeltaNetDecodeArgs args;
  args.conv_w = L.conv_w.data();
  args.neg_exp_a = L.neg_exp_a.data();
  args.dt_bias = L.dt_bias.data();
  args.norm_w = L.norm_w.data();
  args.eps = L.eps;
  args.nk = nk;
  args.nv = nv;
  args.dk = args.dv = kD;
  args.K = kK;
  args.qkv = qkv.data();
  args.ld_qkv = ld_qkv;
  args.z = z.data();
  args.ld_z = ld_z;
  args.b = b.data();
  args.a = a.data() + nv + 1;
  args.ld_ba = ld_ba;
  args.conv_state = d_ring.data();
  args.conv_slot_stride = conv_slot;
  args.rec_state = d_state.data();
  args.rec_slot_stride = rec_slot;
  args.out = reinterpret_cast<__nv_bfloat16*>(d_out.data());
  args.ld_out = ld_out;
  cuda::deltanet_prefill(args, cuda::plan_deltanet_window(spans, nk, nv, ws, ws_bytes, nullptr), nullptr);

  double worst_out = 0, worst_state = 0, sum_out = 0;
  int n_rows = 0;
  bool pad_ok = true;
  std::vector<double> Sd(state.begin(), state.end());
  std::vector<float> ring_ref = ring;
  for (const auto& sp : spans) {
    for (int r = 0; r < sp.rows; ++r) {
      const int64_t row = sp.first_row + r;
      std::vector<double> ref;
      ref_row(L, &qkv[row * ld_qkv], &z[row * ld_z], &b[row * ld_ba], &a[row * ld_ba + nv + 1], sp.start_position + r, &ring_ref[sp.slot * conv_slot],
              &Sd[sp.slot * rec_slot], ref);
      double err = 0, nrm = 0;
      for (int64_t j = 0; j < L.value_dim; ++j) {
        const float got = bf2f(d_out[row * ld_out + j]);
        if (std::isnan(got)) {
          err = INFINITY;
          break;
        }
        err += (got - ref[j]) * (got - ref[j]);
        nrm += ref[j] * ref[j];
      }
      const double e = std::sqrt(err / (nrm > 0 ? nrm : 1));
      worst_out = std::max(worst_out, e);
      sum_out += e;
      ++n_rows;
      if (getenv("ROWS") && e > 4e-3) std::printf("  slot %d row %d: %.2e\n", sp.slot, r, e);
      for (int64_t j = L.value_dim; j < ld_out; ++j) pad_ok &= d_out[row * ld_out + j] == 0xffff;
    }
  }
  const bool ring_ok = std::memcmp(d_ring.data(), ring_ref.data(), ring.size() * 4) == 0;
  bool unused_ok = true, state_pad_ok = true;
  for (int s = 0; s < n_slots; ++s) {
    const int64_t first = s * rec_slot, used = int64_t{nv} * kD * kD;
    const bool is_used = std::any_of(spans.begin(), spans.end(), [&](auto& sp) { return sp.slot == s; });
    if (!is_used) {
      unused_ok &= std::equal(d_state.begin() + first, d_state.begin() + first + rec_slot, state0.begin() + first);
      continue;
    }
    double err = 0, nrm = 0;
    for (int64_t i = 0; i < used; ++i) {
      const double d = d_state[first + i] - Sd[first + i];
      if (std::isnan(d_state[first + i])) err = INFINITY;
      err += d * d;
      nrm += Sd[first + i] * Sd[first + i];
    }
    worst_state = std::isnan(err) ? INFINITY : std::max(worst_state, std::sqrt(err / nrm));
    state_pad_ok &= std::equal(d_state.begin() + first + used, d_state.begin() + first + rec_slot, state0.begin() + first + used);
  }
  g_out = d_out;
  g_state = d_state;
  const bool ok = worst_out < 4e-3 && worst_state < 2e-3 && pad_ok && ring_ok && unused_ok && state_pad_ok;
  failures += !ok;
  std::printf(
      "[nk %d nv %d%s] output rel L2 worst %.2e mean %.2e (tol 4e-3), state worst %.2e (tol 2e-3); ring %s, padding %s, unused slots %s, state "
      "padding %s\n",
      nk, nv, weak ? " weak" : "", worst_out, sum_out / n_rows, worst_state, ring_ok ? "ok" : "BAD", pad_ok ? "ok" : "BAD", unused_ok ? "ok" : "BAD",
      state_pad_ok ? "ok" : "BAD");
  std::fflush(stdout);
}

int wgmma_check();
// The emulator has Hopper's warpgroup products (mock/backend/cuda/ptx/wgmma.cuh);
// RuntimeOptions::state_wgmma (QWENRT_CUDA_STATE_WGMMA=1) runs the state kernel on them, as on the GPU.
bool qwenrt::cuda::wgmma_available() { return true; }

int moe_check();    // moe_check.cpp
int quant_check();  // quant_check.cpp

int main(int argc, char** argv) {
  emu::g_policy = argc > 1 ? std::atoi(argv[1]) : 0;
  emu::g_eager_copies = argc > 2 && std::atoi(argv[2]) != 0;
  emu::g_seed = argc > 3 ? std::atoi(argv[3]) : 1;
  const int which = argc > 4 ? std::atoi(argv[4]) : -1;
  if (which < 0 || which == 5) failures += wgmma_check();
  if (which < 0 || which == 8) failures += moe_check();
  if (which < 0 || which == 9) failures += quant_check();
  const std::vector<SpanCase> kMixed = {{1, 0, 3}, {64, 5, 0}, {150, 0, 5}, {3, 2, 1}, {70, 300, 6}};
  if (which < 0 || which == 0) run_window(2, 2, 8, kMixed, false, 21);
  if (which < 0 || which == 1) run_window(2, 6, 8, kMixed, false, 22);
  if (which < 0 || which == 2) run_window(1, 2, 2, {{1000, 0, 1}, {129, 7, 0}}, true, 23);
  if (which < 0 || which == 4) run_window(2, 4, 8, kMixed, false, 25, 3);  // an odd output row stride
  // Value heads >= 32: blocks of 64 state columns, the wgmma state kernel, then the mma.sync one
  // on the same data: the same products in the same order per accumulator, so the same bits.
  auto both_state_kernels = [](auto run) {
    qwenrt::cuda::RuntimeOptions on_wgmma = qwenrt::cuda::runtime_options(), on_mma = on_wgmma;
    on_wgmma.state_wgmma = true;
    on_mma.state_wgmma = false;
    std::optional<qwenrt::cuda::ScopedRuntimeOptions> options;
    options.emplace(on_wgmma);
    run();
    const auto out = g_out;
    const auto state = g_state;
    options.emplace(on_mma);
    run();
    options.reset();
    const bool same = out == g_out && std::memcmp(state.data(), g_state.data(), state.size() * sizeof(float)) == 0;
    std::printf("  wgmma state kernel vs mma.sync: %s\n", same ? "same bits" : "DIFFERENT");
    failures += !same;
  };
  if (which < 0 || which == 6) both_state_kernels([&] { run_window(2, 32, 8, kMixed, false, 26); });
  if (which < 0 || which == 3) both_state_kernels([] { run_window(16, 48, 3, {{200, 0, 2}, {65, 1000, 0}}, true, 24); });
  if (which < 0 || which == 7) both_state_kernels([] { run_window(1, 32, 2, {{300, 0, 1}, {129, 7, 0}}, true, 27); });
  return failures;
}

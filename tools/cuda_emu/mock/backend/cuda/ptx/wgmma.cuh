#pragma once
// Emulated wgmma.cuh: Hopper's warpgroup products with the operand layouts the PTX ISA gives for
// the 128-byte swizzle (the only one the kernels use), read the way the kernels' own descriptors
// (wgmma_layout.cuh) say; the attention kernel's use of them is proven on the H200, and
// wgmma_check (driver) lays tiles out as that kernel does and checks the products here against
// plain ones.
//
// A product runs when the wait that covers its group returns (the hardware reads its operands any
// time before that): shared memory overwritten before the wait, or accumulators read before it,
// give wrong results here as they would there.
#include <cuda_bf16.h>

#include "backend/cuda/ptx/mma.cuh"
#include "backend/cuda/ptx/wgmma_layout.cuh"
namespace qwenrt::cuda {

namespace wgmma_emu {
struct Desc {
  uint32_t start, lead, stride;
};
inline Desc decode(uint64_t d) {
  if ((d >> 62) != 1) {
    std::fprintf(stderr, "wgmma: descriptor layout %llu is not the 128-byte swizzle\n", (unsigned long long)(d >> 62));
    std::abort();
  }
  if (((d >> 49) & 7) != 0) {
    std::fprintf(stderr, "wgmma: descriptor base offset is not 0\n");
    std::abort();
  }
  return {static_cast<uint32_t>(d & 0x3FFF) << 4, static_cast<uint32_t>((d >> 16) & 0x3FFF) << 4, static_cast<uint32_t>((d >> 32) & 0x3FFF) << 4};
}
inline float at(uint32_t addr) {
  addr ^= ((addr >> 7) & 7) << 4;  // the swizzle: address bits [4,7) ^= bits [7,10)
  uint16_t b;
  std::memcpy(&b, emu_smem(addr, 2), 2);
  return emu_bf2f(b);
}
// Operand stored [mn][k] (K-major): 8-row groups `stride` apart, rows 128 bytes apart inside one,
// the instruction's 16 k (32 bytes) inside one 128-byte row.
inline float k_major(const Desc& d, int mn, int k) {
  if (d.start % 16 != 0 || d.start % 128 + 32 > 128) {
    std::fprintf(stderr, "wgmma: K-major start %u leaves its 128-byte row\n", d.start);
    std::abort();
  }
  return at(d.start + (mn / 8) * d.stride + (mn % 8) * 128 + 2 * k);
}
// Operand stored [k][mn] (MN-major): 64 mn per 128-byte row, column blocks of 64 `lead` apart,
// 8-row groups of k `stride` apart. Only whole swizzle rows are used (start on a 128-byte boundary).
inline float mn_major(const Desc& d, int k, int mn) {
  if (d.start % 128 != 0) {
    std::fprintf(stderr, "wgmma: MN-major start %u inside a 128-byte row\n", d.start);
    std::abort();
  }
  return at(d.start + (mn / 64) * d.lead + (k / 8) * d.stride + (k % 8) * 128 + 2 * (mn % 64));
}

struct Op {
  float* d;
  int n;  // N of m64nNk16
  bool a_in_regs;
  uint32_t a[4];  // this lane's A fragment (a_in_regs)
  uint64_t desc_a, desc_b;
  bool b_mn_major;
  bool accumulate;
};
// Runs `op` for the calling thread: its accumulators are rows 16w + g (+8) of the 64, w its warp in
// the warpgroup, columns 8j + 2t (+1). A warp collective where A comes from registers.
inline void run(const Op& op) {
  const int lane = emu::lane(), w = (emu::me().tid / 32) % 4, g = lane / 4, t = lane % 4;
  float A[2][16];
  if (op.a_in_regs) {
    uint64_t* s = emu::slot(lane);
    for (int i = 0; i < 4; ++i) s[i] = op.a[i];
    emu::syncwarp();
    for (int tt = 0; tt < 4; ++tt) {
      const uint64_t* o = emu::slot(4 * g + tt);
      for (int h = 0; h < 2; ++h) {  // h: row g (a0, a2) or g + 8 (a1, a3)
        const uint32_t lo = uint32_t(o[h]), hi = uint32_t(o[2 + h]);
        A[h][2 * tt] = lo_bf(lo);
        A[h][2 * tt + 1] = hi_bf(lo);
        A[h][2 * tt + 8] = lo_bf(hi);
        A[h][2 * tt + 9] = hi_bf(hi);
      }
    }
    emu::syncwarp();
  } else {
    const Desc da = decode(op.desc_a);
    for (int h = 0; h < 2; ++h)
      for (int k = 0; k < 16; ++k) A[h][k] = k_major(da, 16 * w + g + 8 * h, k);
  }
  const Desc db = decode(op.desc_b);
  for (int j = 0; j < op.n / 8; ++j)
    for (int i = 0; i < 4; ++i) {
      const int h = i / 2, col = 8 * j + 2 * t + (i % 2);
      double acc = 0;
      for (int k = 0; k < 16; ++k) acc += static_cast<double>(A[h][k]) * (op.b_mn_major ? mn_major(db, k, col) : k_major(db, col, k));
      float& d = op.d[4 * j + i];
      d = static_cast<float>((op.accumulate ? d : 0.0f) + acc);
    }
}
inline void issue(const Op& op) {
  auto& f = emu::me();
  f.wgmma_ops.push_back({f.wgmma_groups, [op] { run(op); }});
}
}  // namespace wgmma_emu

inline void wgmma_fence() {}
inline void fence_proxy_async_shared() {}
inline void wgmma_commit() { ++emu::me().wgmma_groups; }
template <int N>
inline void wgmma_wait() {
  auto& f = emu::me();
  std::vector<std::pair<int, std::function<void()>>> keep, run;
  for (auto& op : f.wgmma_ops) (op.first < f.wgmma_groups - N ? run : keep).push_back(op);
  f.wgmma_ops.swap(keep);
  for (auto& op : run) op.second();
}
template <int N>
inline void wgmma_hold(float (&)[N]) {}

inline void wgmma_64x64_ss(float (&d)[32], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  wgmma_emu::issue({d, 64, false, {}, desc_a, desc_b, false, accumulate != 0});
}
inline void wgmma_64x256_ss(float (&d)[128], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  wgmma_emu::issue({d, 256, false, {}, desc_a, desc_b, false, accumulate != 0});
}
inline void wgmma_64x64_ss_nmajor(float (&d)[32], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  wgmma_emu::issue({d, 64, false, {}, desc_a, desc_b, true, accumulate != 0});
}
inline void wgmma_64x256_rs_nmajor(float (&d)[128], const uint32_t (&a)[4], uint64_t desc_b, int accumulate) {
  wgmma_emu::issue({d, 256, true, {a[0], a[1], a[2], a[3]}, 0, desc_b, true, accumulate != 0});
}
inline void wgmma_64x64_rs(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b, int accumulate) {
  wgmma_emu::issue({d, 64, true, {a[0], a[1], a[2], a[3]}, 0, desc_b, false, accumulate != 0});
}
}  // namespace qwenrt::cuda

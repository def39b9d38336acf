#pragma once
// Emulated mma.cuh: the pieces the DeltaNet chunk kernels use, with the PTX ISA's fragment layouts.
#include <cuda_bf16.h>
namespace qwenrt::cuda {
inline uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  uint32_t r;
  std::memcpy(&r, &v, 4);
  return r;
}
inline float lo_bf(uint32_t r) { return emu_bf2f(static_cast<uint16_t>(r & 0xffff)); }
inline float hi_bf(uint32_t r) { return emu_bf2f(static_cast<uint16_t>(r >> 16)); }
// m16n8k16 row.col bf16 -> f32. Fragments per PTX ISA (groupID g = lane>>2, t = lane%4):
// A: a0 (g, 2t..2t+1) a1 (g+8, 2t..) a2 (g, 2t+8..) a3 (g+8, 2t+8..); B: b0 (k 2t.., n g) b1 (k 2t+8.., n g);
// C/D: c0,c1 (g, 2t..2t+1) c2,c3 (g+8, 2t..).
inline void mma_bf16_16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
  uint64_t* s = emu::slot(emu::lane());
  s[0] = a0;
  s[1] = a1;
  s[2] = a2;
  s[3] = a3;
  s[4] = b0;
  s[5] = b1;
  emu::syncwarp();
  float A[16][16], B[16][8];
  for (int l = 0; l < 32; ++l) {
    const uint64_t* o = emu::slot(l);
    const int g = l / 4, t = l % 4;
    const uint32_t a[4] = {uint32_t(o[0]), uint32_t(o[1]), uint32_t(o[2]), uint32_t(o[3])};
    A[g][2 * t] = lo_bf(a[0]);
    A[g][2 * t + 1] = hi_bf(a[0]);
    A[g + 8][2 * t] = lo_bf(a[1]);
    A[g + 8][2 * t + 1] = hi_bf(a[1]);
    A[g][2 * t + 8] = lo_bf(a[2]);
    A[g][2 * t + 9] = hi_bf(a[2]);
    A[g + 8][2 * t + 8] = lo_bf(a[3]);
    A[g + 8][2 * t + 9] = hi_bf(a[3]);
    B[2 * t][g] = lo_bf(uint32_t(o[4]));
    B[2 * t + 1][g] = hi_bf(uint32_t(o[4]));
    B[2 * t + 8][g] = lo_bf(uint32_t(o[5]));
    B[2 * t + 9][g] = hi_bf(uint32_t(o[5]));
  }
  emu::syncwarp();
  const int g = emu::lane() / 4, t = emu::lane() % 4;
  const int rows[4] = {g, g, g + 8, g + 8}, cols[4] = {2 * t, 2 * t + 1, 2 * t, 2 * t + 1};
  for (int i = 0; i < 4; ++i) {
    double acc = 0;
    for (int k = 0; k < 16; ++k) acc += static_cast<double>(A[rows[i]][k]) * B[k][cols[i]];
    d[i] = static_cast<float>(d[i] + acc);
  }
}
// ldmatrix .x4 (.trans): lane l addresses row l%8 of matrix l/8 (16 bytes). Plain: lane gets, of
// each matrix, row g, elements 2t, 2t+1. Trans: rows 2t and 2t+1, element g.
inline void emu_ldmatrix(uint32_t (&r)[4], uint32_t addr, bool trans) {
  if (addr % 16 != 0) {
    std::fprintf(stderr, "ldmatrix row address %u not 16-byte aligned\n", addr);
    std::abort();
  }
  emu::slot(emu::lane())[0] = addr;
  emu::syncwarp();
  const int g = emu::lane() / 4, t = emu::lane() % 4;
  for (int m = 0; m < 4; ++m) {
    uint16_t e0, e1;
    if (!trans) {
      const unsigned char* row = emu_smem(uint32_t(emu::slot(8 * m + g)[0]), 16);
      std::memcpy(&e0, row + 4 * t, 2);
      std::memcpy(&e1, row + 4 * t + 2, 2);
    } else {
      const unsigned char* r0 = emu_smem(uint32_t(emu::slot(8 * m + 2 * t)[0]), 16);
      const unsigned char* r1 = emu_smem(uint32_t(emu::slot(8 * m + 2 * t + 1)[0]), 16);
      std::memcpy(&e0, r0 + 2 * g, 2);
      std::memcpy(&e1, r1 + 2 * g, 2);
    }
    r[m] = static_cast<uint32_t>(e0) | (static_cast<uint32_t>(e1) << 16);
  }
  emu::syncwarp();
}
inline void ldmatrix_x4(uint32_t (&r)[4], uint32_t a) { emu_ldmatrix(r, a, false); }
inline void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t a) { emu_ldmatrix(r, a, true); }
// cp.async: copied at issue (eager) or at the wait that covers its group (deferred).
inline void cp_async16(uint32_t smem_addr, const void* gmem, bool fill) {
  if (smem_addr % 16 || reinterpret_cast<uintptr_t>(gmem) % 16) {
    std::fprintf(stderr, "cp.async misaligned\n");
    std::abort();
  }
  unsigned char* dst = emu_smem(smem_addr, 16);
  if (!fill) {
    std::memset(dst, 0, 16);
    return;
  }
  if (emu::g_eager_copies) std::memcpy(dst, gmem, 16);
  else emu::me().pending.push_back({dst, static_cast<const unsigned char*>(gmem), 16, emu::me().group});
}
inline void cp_async16(void* smem, const void* gmem) { cp_async16(static_cast<uint32_t>(__cvta_generic_to_shared(smem)), gmem, true); }
inline void cp_async_commit() { ++emu::me().group; }
template <int N>
inline void cp_async_wait() {
  auto& f = emu::me();
  std::vector<emu::Pending> keep;
  for (auto& p : f.pending) {
    if (p.group < f.group - N) std::memcpy(p.dst, p.src, p.bytes);
    else keep.push_back(p);
  }
  f.pending.swap(keep);
}
}  // namespace qwenrt::cuda
// tf32 pieces, for running the previous (tf32) kernels through the same emulator.
namespace qwenrt::cuda {
inline uint32_t to_tf32(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) != 0x7f800000u) {
    u += 0x1000u;
    u &= 0xffffe000u;
  }  // cvt.rna: ties away
  return u;
}
inline void mma_tf32_1688(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  uint64_t* s = emu::slot(emu::lane());
  for (int i = 0; i < 4; ++i) s[i] = a[i];
  s[4] = b[0];
  s[5] = b[1];
  emu::syncwarp();
  float A[16][8], B[8][8];
  auto f = [](uint64_t r) {
    uint32_t u = uint32_t(r);
    float x;
    std::memcpy(&x, &u, 4);
    return x;
  };
  for (int l = 0; l < 32; ++l) {
    const uint64_t* o = emu::slot(l);
    const int g = l / 4, t = l % 4;
    A[g][t] = f(o[0]);
    A[g + 8][t] = f(o[1]);
    A[g][t + 4] = f(o[2]);
    A[g + 8][t + 4] = f(o[3]);
    B[t][g] = f(o[4]);
    B[t + 4][g] = f(o[5]);
  }
  emu::syncwarp();
  const int g = emu::lane() / 4, t = emu::lane() % 4;
  const int rows[4] = {g, g, g + 8, g + 8}, cols[4] = {2 * t, 2 * t + 1, 2 * t, 2 * t + 1};
  for (int i = 0; i < 4; ++i) {
    double acc = 0;
    for (int k = 0; k < 8; ++k) acc += static_cast<double>(A[rows[i]][k]) * B[k][cols[i]];
    d[i] = static_cast<float>(d[i] + acc);
  }
}
// Chained launches and ready counters: the emulator runs kernels one after another, so a counter
// is complete by the time anything waits on it.
inline void grid_launch_dependents() {}
inline void grid_dependency_wait() {}
inline void chained_kernel_start() {}
inline uint4 load_stream16(const void* p) { return *static_cast<const uint4*>(p); }
inline uint4 load_shared16(const void* p) { return *static_cast<const uint4*>(p); }
inline uint2 load_stream8(const void* p) { return *static_cast<const uint2*>(p); }
inline uint2 load_shared8_now(const void* p) { return *static_cast<const uint2*>(p); }
inline uint32_t load_stream4(const void* p) { return *static_cast<const uint32_t*>(p); }
inline void signal_ready(int32_t* counter) { __atomic_fetch_add(counter, 1, __ATOMIC_SEQ_CST); }
inline void wait_ready(const int32_t* counter, int32_t count) {
  if (__atomic_load_n(counter, __ATOMIC_SEQ_CST) < count) {
    std::fprintf(stderr, "wait_ready: counter %d < %d\n", *counter, count);
    std::abort();
  }
}
}  // namespace qwenrt::cuda

#pragma once
// A tiny SIMT emulator: CUDA threads as cooperative fibers (ucontext), one block at a time.
// Barriers and warp collectives are sync points; the scheduler picks runnable fibers by a
// per-warp priority that is reshuffled at every block barrier (exposes cross-warp races).
#include <ucontext.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__
#define __launch_bounds__(...)
#ifndef __CUDACC__
#define __CUDACC__ 1
#endif

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct alignas(8) float2 {
  float x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(8) uint2 {
  uint32_t x, y;
};
struct alignas(16) uint4 {
  uint32_t x, y, z, w;
};
inline float2 make_float2(float a, float b) { return {a, b}; }
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
inline uint2 make_uint2(uint32_t a, uint32_t b) { return {a, b}; }
inline uint4 make_uint4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) { return {a, b, c, d}; }

namespace emu {
struct Pending {
  unsigned char* dst;
  const unsigned char* src;
  int bytes;
  int group;
};
struct Fiber {
  ucontext_t ctx;
  std::vector<char> stack;
  int tid = 0;
  bool done = false;
  std::vector<Pending> pending;
  int group = 0;                                                 // groups committed so far
  std::vector<std::pair<int, std::function<void()>>> wgmma_ops;  // (group, the product), issued, not yet waited on
  int wgmma_groups = 0;                                          // wgmma groups committed so far
};
struct Block {
  dim3 block_idx, grid_dim, block_dim;
  std::vector<Fiber> fibers;
  unsigned char* smem = nullptr;
  std::size_t smem_bytes = 0;
  uint64_t bar_gen = 0;
  int bar_arrived = 0;
  std::vector<uint64_t> warp_gen;
  std::vector<int> warp_arrived;
  std::vector<std::vector<uint64_t>> slots;  // [warp][lane*8 + i]
  std::vector<int> prio;                     // per warp
  std::mt19937 rng;
  ucontext_t sched;
  int cur = -1;
  uint64_t progress = 0;
};
inline Block* g_block = nullptr;
inline int g_policy = 0;  // 0 round robin, 1 random warp priority
inline bool g_eager_copies = false;
inline uint64_t g_seed = 1;
inline uint64_t g_launches = 0;

inline Fiber& me() { return g_block->fibers[g_block->cur]; }
inline void yield() { swapcontext(&me().ctx, &g_block->sched); }
inline void reprioritise() {
  if (g_policy == 1) std::shuffle(g_block->prio.begin(), g_block->prio.end(), g_block->rng);
}
inline void syncthreads() {
  Block& b = *g_block;
  const uint64_t gen = b.bar_gen;
  if (++b.bar_arrived == static_cast<int>(b.fibers.size())) {
    b.bar_arrived = 0;
    ++b.bar_gen;
    ++b.progress;
    reprioritise();
  } else {
    while (b.bar_gen == gen) yield();
  }
}
inline void syncwarp() {
  Block& b = *g_block;
  const int w = me().tid / 32;
  const uint64_t gen = b.warp_gen[w];
  if (++b.warp_arrived[w] == 32) {
    b.warp_arrived[w] = 0;
    ++b.warp_gen[w];
    ++b.progress;
  } else {
    while (b.warp_gen[w] == gen) yield();
  }
}
inline uint64_t* slot(int lane) { return &g_block->slots[me().tid / 32][lane * 8]; }
inline int lane() { return me().tid % 32; }

inline void fiber_main(int idx);
inline void trampoline(unsigned lo, unsigned hi) {
  auto* f = reinterpret_cast<std::function<void()>*>((static_cast<uint64_t>(hi) << 32) | lo);
  (*f)();
  me().done = true;
  ++g_block->progress;
  swapcontext(&me().ctx, &g_block->sched);
}

template <typename Kernel, typename... Args>
void launch(Kernel kernel, dim3 grid, dim3 block, std::size_t smem_bytes, Args... args) {
  ++g_launches;
  const int nthreads = block.x * block.y * block.z;
  std::vector<unsigned char> smem_store(smem_bytes + 256);
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        Block b;
        b.block_idx = dim3(bx, by, bz);
        b.grid_dim = grid;
        b.block_dim = block;
        b.smem = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(smem_store.data()) + 127) & ~uintptr_t{127});
        b.smem_bytes = smem_bytes;
        std::memset(b.smem, 0xff, smem_bytes);  // NaN garbage
        b.fibers.resize(nthreads);
        b.warp_gen.assign((nthreads + 31) / 32, 0);
        b.warp_arrived.assign((nthreads + 31) / 32, 0);
        b.slots.assign((nthreads + 31) / 32, std::vector<uint64_t>(32 * 8));
        b.prio.resize((nthreads + 31) / 32);
        for (std::size_t i = 0; i < b.prio.size(); ++i) b.prio[i] = static_cast<int>(i);
        b.rng.seed(static_cast<unsigned>(g_seed * 1000003u + g_launches * 7919u + bx * 31u + by * 17u + bz));
        g_block = &b;
        reprioritise();
        std::function<void()> body = [&] { kernel(args...); };
        for (int i = 0; i < nthreads; ++i) {
          Fiber& f = b.fibers[i];
          f.tid = i;
          f.stack.resize(256 * 1024);
          getcontext(&f.ctx);
          f.ctx.uc_stack.ss_sp = f.stack.data();
          f.ctx.uc_stack.ss_size = f.stack.size();
          f.ctx.uc_link = nullptr;
          const uint64_t p = reinterpret_cast<uint64_t>(&body);
          makecontext(&f.ctx, reinterpret_cast<void (*)()>(trampoline), 2, static_cast<unsigned>(p & 0xffffffffu), static_cast<unsigned>(p >> 32));
        }
        // Schedule.
        for (;;) {
          bool alive = false;
          const uint64_t before = b.progress;
          if (g_policy == 0) {
            for (int i = 0; i < nthreads; ++i)
              if (!b.fibers[i].done) {
                alive = true;
                b.cur = i;
                swapcontext(&b.sched, &b.fibers[i].ctx);
              }
          } else {
            // Highest-priority warp first; run its lanes until none of them can move.
            std::vector<int> order(b.prio.size());
            for (std::size_t w = 0; w < b.prio.size(); ++w) order[b.prio[w]] = static_cast<int>(w);
            for (int w : order) {
              for (int l = 0; l < 32 && 32 * w + l < nthreads; ++l) {
                const int i = 32 * w + l;
                if (b.fibers[i].done) continue;
                alive = true;
                b.cur = i;
                swapcontext(&b.sched, &b.fibers[i].ctx);
              }
              if (b.progress != before) break;  // something moved: restart from the top priority
            }
          }
          if (!alive) break;
          if (b.progress == before) {
            // Nothing moved in a full pass: every fiber spins on a barrier that cannot complete.
            bool any_spin = false;
            for (auto& f : b.fibers) any_spin |= !f.done;
            if (any_spin) {
              std::fprintf(stderr, "deadlock in block (%u,%u,%u)\n", bx, by, bz);
              std::abort();
            }
          }
        }
        for (auto& f : b.fibers)
          if (!f.pending.empty()) {
            std::fprintf(stderr, "cp.async left pending at exit\n");
          }
        for (auto& f : b.fibers)
          if (!f.wgmma_ops.empty()) {
            std::fprintf(stderr, "wgmma left without a wait at exit\n");
            std::abort();
          }
        g_block = nullptr;
      }
}
}  // namespace emu

struct EmuIdx {
  unsigned x, y, z;
};
inline EmuIdx emu_thread_idx() {
  const int t = emu::me().tid;
  const dim3 bd = emu::g_block->block_dim;
  return {t % bd.x, (t / bd.x) % bd.y, t / (bd.x * bd.y)};
}
#define threadIdx (emu_thread_idx())
#define blockIdx (emu::g_block->block_idx)
#define blockDim (emu::g_block->block_dim)
#define gridDim (emu::g_block->grid_dim)

inline void __syncthreads() { emu::syncthreads(); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu::syncwarp(); }

template <typename T>
T warp_pick(T v, int src_lane_fn(int, int), int arg);

// Warp collectives: post, sync, read, sync.
template <typename T>
inline T emu_shfl(T v, int src) {
  static_assert(sizeof(T) <= 8);
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  emu::slot(emu::lane())[0] = bits;
  emu::syncwarp();
  const uint64_t got = emu::slot(src)[0];
  emu::syncwarp();
  T r;
  std::memcpy(&r, &got, sizeof(T));
  return r;
}
template <typename T>
inline T __shfl_sync(unsigned, T v, int src) {
  return emu_shfl(v, src & 31);
}
template <typename T>
inline T __shfl_xor_sync(unsigned, T v, int m) {
  return emu_shfl(v, (emu::lane() ^ m) & 31);
}
template <typename T>
inline T __shfl_up_sync(unsigned, T v, unsigned d) {
  const int l = emu::lane();
  return emu_shfl(v, l >= static_cast<int>(d) ? l - static_cast<int>(d) : l);
}
template <typename T>
inline T __ldg(const T* p) {
  return *p;
}
template <typename T>
inline T __ldcs(const T* p) {
  return *p;
}
inline float __expf(float x) { return expf(x); }
// Fibers switch only at barriers and collectives: a plain add is atomic.
template <typename T>
inline T atomicAdd(T* p, T v) {
  const T old = *p;
  *p = old + v;
  return old;
}
inline float __fdividef(float a, float b) { return a / b; }
template <typename T>
inline void __stcs(T* p, T v) {
  *p = v;
}
inline std::size_t __cvta_generic_to_shared(const void* p) {
  const auto* c = static_cast<const unsigned char*>(p);
  if (c < emu::g_block->smem || c >= emu::g_block->smem + emu::g_block->smem_bytes) {
    std::fprintf(stderr, "cvta of a non-shared address\n");
    std::abort();
  }
  return static_cast<std::size_t>(c - emu::g_block->smem);
}
inline unsigned char* emu_smem(uint32_t addr, int bytes) {
  if (addr + bytes > emu::g_block->smem_bytes) {
    std::fprintf(stderr, "shared access out of range: %u\n", addr);
    std::abort();
  }
  return emu::g_block->smem + addr;
}
inline float __uint_as_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t __float_as_uint(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline uint32_t __byte_perm(uint32_t x, uint32_t y, uint32_t s) {
  const uint64_t v = (static_cast<uint64_t>(y) << 32) | x;
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) r |= static_cast<uint32_t>((v >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
  return r;
}
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }

#pragma once
// Inline-PTX building blocks shared by the kernels: streaming 16-byte loads, asynchronous copies into
// shared memory, and the bf16 tensor-core product m16n8k16 with its fragment loads, sm_80+.
#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/diagnostics/launch_trace.cuh"

namespace qwenrt::cuda {

// 16 bytes that are read once: not kept in L1, with a 256-byte L2 prefetch around them, and first
// to be evicted from L2, so that a decode step's weights streaming through do not push out what the
// step reads again (residual rows, activations, KV, DeltaNet conv rings): H200 decode 0.8B +7.7%,
// 27B +1.4%, 27B batch 8 +0.8%, 9B unchanged.
__device__ __forceinline__ uint4 load_stream16(const void* p) {
  uint4 v;
  uint64_t policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p), "l"(policy));
  return v;
}

// 8 and 4 bytes with the same policy (the quantized decode kernel's narrower pieces).
__device__ __forceinline__ uint2 load_stream8(const void* p) {
  uint2 v;
  uint64_t policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.L2::256B.v2.u32 {%0,%1}, [%2], %3;" : "=r"(v.x), "=r"(v.y) : "l"(p), "l"(policy));
  return v;
}
__device__ __forceinline__ uint32_t load_stream4(const void* p) {
  uint32_t v;
  uint64_t policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.L2::256B.u32 %0, [%1], %2;" : "=r"(v) : "l"(p), "l"(policy));
  return v;
}

// 16 bytes that other warps also read (activations): cached.
__device__ __forceinline__ uint4 load_shared16(const void* p) { return __ldg(static_cast<const uint4*>(p)); }

// 8 such bytes, issued where they stand: the compiler does not sink the load into the branch that
// uses it (a loop's activations all in flight before its first product, not one round trip each).
__device__ __forceinline__ uint2 load_shared8_now(const void* p) {
  uint2 v;
  asm volatile("ld.global.nc.v2.u32 {%0,%1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
  return v;
}

// d = a·b + d for A 16×16 (row), B 16×8 (col), bf16 in, f32 accumulate. Register layout per PTX:
// a = {(g, 2t..2t+1), (g+8, 2t..), (g, 2t+8..), (g+8, 2t+8..)}, b = {(2t.., g), (2t+8.., g)},
// d = {(g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1)} with g = lane/4, t = lane%4.
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Two floats as a bf16 pair, `lo` in the low half (the lower column of an mma fragment).
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// 16 bytes global → shared without passing through registers (L2 only, not L1). With `fill` false
// nothing is read and the 16 bytes are zeroed (masked rows then hold finite values).
__device__ __forceinline__ void cp_async16(uint32_t smem_addr, const void* gmem, bool fill) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_addr), "l"(gmem), "r"(fill ? 16 : 0) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// Whole-tile variant: always reads.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  cp_async16(static_cast<uint32_t>(__cvta_generic_to_shared(smem)), gmem, true);
}

// Four 8×8 bf16 matrices from shared memory; lane l gives the address of row l%8 of matrix l/8.
// Plain: lane (g, t) receives row g, columns 2t..2t+1 of each. Transposed: rows 2t..2t+1, column g.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr));
}

// Nanoseconds of the GPU's global timer (the same on every multiprocessor).
__device__ __forceinline__ uint64_t global_time_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
// Programmatic dependent launch (chained_launch.h): wait until the kernels before this one on the
// stream have finished and their writes are visible; then let the next kernel launch. No-ops when
// launched plainly or built for GPUs before sm_90.
__device__ __forceinline__ void grid_dependency_wait() {
#ifdef QWENRT_CUDA_LAUNCH_TRACE
  const uint64_t start = global_time_ns();
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
#ifdef QWENRT_CUDA_LAUNCH_TRACE
  launch_trace_record(start, global_time_ns());
#endif
}
__device__ __forceinline__ void grid_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
// A counter in global memory that one kernel raises and a kernel running beside it waits on: the
// add releases what the adding thread has written or seen (a barrier before it makes that the
// block's writes), the wait acquires it. A counter still short after 30 s (a bug, or its writer
// killed) ends the waiting kernel with an error rather than holding the GPU for ever.
__device__ __forceinline__ void signal_ready(int32_t* counter) { asm volatile("red.release.gpu.global.add.s32 [%0], 1;" ::"l"(counter) : "memory"); }
// Adds to a counter at GPU scope, releasing what this thread (and, after a block barrier, its block)
// wrote before and acquiring what the earlier adders released: the one ordering a "last block to
// arrive" pass needs, without a full fence (__threadfence) in every thread.
__device__ __forceinline__ uint32_t counter_add_acq_rel(uint32_t* counter, uint32_t v) {
  uint32_t old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(counter), "r"(v) : "memory");
  return old;
}
__device__ __forceinline__ void wait_ready(const int32_t* counter, int32_t count) {
  const uint64_t start = global_time_ns();
  for (;;) {
    int32_t v;
    asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(counter) : "memory");
    if (v >= count) return;
    if (global_time_ns() - start > 30'000'000'000ull) __trap();
    __nanosleep(256);
  }
}
// Both: the usual start of a chained kernel that has nothing to do before its inputs are ready.
__device__ __forceinline__ void chained_kernel_start() {
  grid_dependency_wait();
  grid_launch_dependents();
}

}  // namespace qwenrt::cuda

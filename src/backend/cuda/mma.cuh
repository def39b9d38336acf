#pragma once
// Inline-PTX building blocks shared by the kernels: streaming 16-byte loads and the bf16 tensor-core
// product m16n8k16 (sm_80+).
#include <cstdint>

namespace qwenrt::cuda {

// 16 bytes that are read once: not kept in L1, with a 256-byte L2 prefetch around them.
__device__ __forceinline__ uint4 load_stream16(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// 16 bytes that other warps also read (activations): cached.
__device__ __forceinline__ uint4 load_shared16(const void* p) { return __ldg(static_cast<const uint4*>(p)); }

// d = a·b + d for A 16×16 (row), B 16×8 (col), bf16 in, f32 accumulate. Register layout per PTX:
// a = {(g, 2t..2t+1), (g+8, 2t..), (g, 2t+8..), (g+8, 2t+8..)}, b = {(2t.., g), (2t+8.., g)},
// d = {(g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1)} with g = lane/4, t = lane%4.
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                               uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

}  // namespace qwenrt::cuda

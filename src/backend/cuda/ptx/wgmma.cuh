#pragma once
// Hopper warpgroup tensor-core products (wgmma, sm_90a only). Four warps (a warpgroup) compute one
// m64 x N x k16 product together; operands in shared memory are named by 64-bit descriptors, A may
// also come from registers. The instructions run asynchronously: fence, issue, commit, then wait
// before touching the accumulators.
//
// Built for other GPUs these compile to a trap; callers check wgmma_available() (wgmma_probe.h)
// first. Tile layout and descriptors: wgmma_layout.cuh.
#include <cstdint>

#include "backend/cuda/ptx/wgmma_layout.cuh"

namespace qwenrt::cuda {

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define QWENRT_WGMMA 1
#endif

__device__ __forceinline__ void wgmma_fence() {
#ifdef QWENRT_WGMMA
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#ifdef QWENRT_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#ifdef QWENRT_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
#endif
}
// Shared-memory writes by ordinary stores and cp.async become visible to wgmma's reads (the async
// proxy) after this fence (then a barrier for other threads' writes).
__device__ __forceinline__ void fence_proxy_async_shared() {
#ifdef QWENRT_WGMMA
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}
// Keeps the compiler from moving reads or writes of accumulator registers across the asynchronous
// product that owns them.
template <int N>
__device__ __forceinline__ void wgmma_hold(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// The accumulator operands d[i..i+7] of a wgmma, read and written ("+f"): the products below list
// 32 or 128 of them.
#define QWENRT_WGMMA_D8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])

// d (+)= A·B, m64n64k16: A [64 x 16] K-major and B [16 x 64] K-major, both in shared memory.
// Accumulator of warp w of the group, lane (g, t): d[4j..4j+3] = rows 16w+g (0, 1) and 16w+g+8 (2,
// 3), columns 8j+2t and 8j+2t+1, as mma.sync's m16n8 tiles side by side.
__device__ __forceinline__ void wgmma_64x64_ss(float (&d)[32], uint64_t desc_a, uint64_t desc_b, int accumulate) {
#ifdef QWENRT_WGMMA
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, "
      "0, 0;\n}"
      : QWENRT_WGMMA_D8(0), QWENRT_WGMMA_D8(8), QWENRT_WGMMA_D8(16), QWENRT_WGMMA_D8(24)
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
#else
  __trap();
#endif
}

// d (+)= A·B with A [64 x 16] from registers (mma.sync's A fragment of rows 16w.., per warp) and B
// [16 x N] N-major in shared memory (imm-trans-b).
__device__ __forceinline__ void wgmma_64x256_rs_nmajor(float (&d)[128], const uint32_t (&a)[4], uint64_t desc_b, int accumulate) {
#ifdef QWENRT_WGMMA
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%"
      "37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%"
      "72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%"
      "106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}, {%128,%129,%130,%131}, %132, "
      "p, 1, 1, 1;\n}"
      : QWENRT_WGMMA_D8(0), QWENRT_WGMMA_D8(8), QWENRT_WGMMA_D8(16), QWENRT_WGMMA_D8(24), QWENRT_WGMMA_D8(32), QWENRT_WGMMA_D8(40),
        QWENRT_WGMMA_D8(48), QWENRT_WGMMA_D8(56), QWENRT_WGMMA_D8(64), QWENRT_WGMMA_D8(72), QWENRT_WGMMA_D8(80), QWENRT_WGMMA_D8(88),
        QWENRT_WGMMA_D8(96), QWENRT_WGMMA_D8(104), QWENRT_WGMMA_D8(112), QWENRT_WGMMA_D8(120)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
#else
  __trap();
#endif
}

// d (+)= A·B, m64n256k16: A [64 x 16] K-major and B [16 x 256] K-major, both in shared memory.
// Accumulators as wgmma_64x64_ss's, 32 n8 tiles side by side.
__device__ __forceinline__ void wgmma_64x256_ss(float (&d)[128], uint64_t desc_a, uint64_t desc_b, int accumulate) {
#ifdef QWENRT_WGMMA
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%"
      "37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%"
      "72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%"
      "106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}, %128, %129, "
      "p, 1, 1, 0, 0;\n}"
      : QWENRT_WGMMA_D8(0), QWENRT_WGMMA_D8(8), QWENRT_WGMMA_D8(16), QWENRT_WGMMA_D8(24), QWENRT_WGMMA_D8(32), QWENRT_WGMMA_D8(40),
        QWENRT_WGMMA_D8(48), QWENRT_WGMMA_D8(56), QWENRT_WGMMA_D8(64), QWENRT_WGMMA_D8(72), QWENRT_WGMMA_D8(80), QWENRT_WGMMA_D8(88),
        QWENRT_WGMMA_D8(96), QWENRT_WGMMA_D8(104), QWENRT_WGMMA_D8(112), QWENRT_WGMMA_D8(120)
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
#else
  __trap();
#endif
}

// d (+)= A·B, m64n64k16: A [64 x 16] K-major and B [16 x 64] N-major (imm-trans-b), both in shared
// memory. Accumulators as wgmma_64x64_ss's.
__device__ __forceinline__ void wgmma_64x64_ss_nmajor(float (&d)[32], uint64_t desc_a, uint64_t desc_b, int accumulate) {
#ifdef QWENRT_WGMMA
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, "
      "0, 1;\n}"
      : QWENRT_WGMMA_D8(0), QWENRT_WGMMA_D8(8), QWENRT_WGMMA_D8(16), QWENRT_WGMMA_D8(24)
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
#else
  __trap();
#endif
}

// d (+)= A·B, m64n64k16: A [64 x 16] from registers (mma.sync's A fragment of rows 16w.., per warp)
// and B [16 x 64] K-major in shared memory. Accumulators as wgmma_64x64_ss's.
__device__ __forceinline__ void wgmma_64x64_rs(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b, int accumulate) {
#ifdef QWENRT_WGMMA
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, "
      "%36, p, 1, 1, 0;\n}"
      : QWENRT_WGMMA_D8(0), QWENRT_WGMMA_D8(8), QWENRT_WGMMA_D8(16), QWENRT_WGMMA_D8(24)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
#else
  __trap();
#endif
}

#undef QWENRT_WGMMA_D8

}  // namespace qwenrt::cuda

#pragma once
#include "simt.h"
struct __nv_bfloat16 {
  uint16_t bits;
};
struct alignas(4) __nv_bfloat162 {
  __nv_bfloat16 x, y;
};
inline uint16_t emu_f2bf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float emu_bf2f(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return {emu_f2bf(f)}; }
inline float __bfloat162float(__nv_bfloat16 b) { return emu_bf2f(b.bits); }
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) { return {{emu_f2bf(a)}, {emu_f2bf(b)}}; }
inline float2 __bfloat1622float2(__nv_bfloat162 v) { return {emu_bf2f(v.x.bits), emu_bf2f(v.y.bits)}; }
inline __nv_bfloat16 __ushort_as_bfloat16(uint16_t b) { return {b}; }
inline uint16_t __bfloat16_as_ushort(__nv_bfloat16 b) { return b.bits; }
inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) { return {a, b}; }
// bf16 products rounded once to bf16 (subnormal inputs kept, as sm_90's bf16 arithmetic does).
inline __nv_bfloat162 __hmul2(__nv_bfloat162 a, __nv_bfloat162 b) {
  return {{emu_f2bf(emu_bf2f(a.x.bits) * emu_bf2f(b.x.bits))}, {emu_f2bf(emu_bf2f(a.y.bits) * emu_bf2f(b.y.bits))}};
}
// bf16 differences rounded once to bf16.
inline __nv_bfloat162 __hsub2(__nv_bfloat162 a, __nv_bfloat162 b) {
  return {{emu_f2bf(emu_bf2f(a.x.bits) - emu_bf2f(b.x.bits))}, {emu_f2bf(emu_bf2f(a.y.bits) - emu_bf2f(b.y.bits))}};
}

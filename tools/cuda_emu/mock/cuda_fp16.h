#pragma once
#include "simt.h"
struct __half {
  uint16_t bits;
};
inline float __half2float(__half h) {
  const uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16, exp = (h.bits >> 10) & 0x1fu, man = h.bits & 0x3ffu;
  uint32_t u;
  if (exp == 0x1f) u = sign | 0x7f800000u | (man << 13);
  else if (exp != 0) u = sign | ((exp + 112u) << 23) | (man << 13);
  else {
    const float v = static_cast<float>(man) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline __half __ushort_as_half(unsigned short b) { return {b}; }

#include "backend/weight.h"

#include <cstring>

#include "core/error.h"
#include "core/half.h"

namespace qwenrt {

std::string_view weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::F32: return "f32";
    case WeightFormat::F16: return "f16";
    case WeightFormat::BF16: return "bf16";
  }
  return "?";
}

WeightFormat weight_format_of(DType t) {
  switch (t) {
    case DType::F32: return WeightFormat::F32;
    case DType::F16: return WeightFormat::F16;
    case DType::BF16: return WeightFormat::BF16;
    default: fail("weights of dtype ", dtype_name(t), " are not supported (BF16, F16 and F32 are)");
  }
}

std::size_t weight_element_bytes(WeightFormat f) { return f == WeightFormat::F32 ? 4 : 2; }

void Weight::row_to_f32(int64_t r, float* out) const {
  if (!data) fail("internal: weight without host data read on the host");
  const std::byte* p = data + static_cast<std::size_t>(r) * row_bytes();
  switch (format) {
    case WeightFormat::F32: std::memcpy(out, p, static_cast<std::size_t>(cols) * 4); return;
    case WeightFormat::BF16:
    case WeightFormat::F16:
      for (int64_t c = 0; c < cols; ++c) {
        uint16_t h;
        std::memcpy(&h, p + 2 * c, 2);
        out[c] = format == WeightFormat::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
      }
      return;
  }
}

}  // namespace qwenrt

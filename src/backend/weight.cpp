#include "backend/weight.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/half.h"

namespace qwenrt {

std::string_view weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::F32: return "f32";
    case WeightFormat::F16: return "f16";
    case WeightFormat::BF16: return "bf16";
    case WeightFormat::MlxAffine: return "mlx_affine";
    case WeightFormat::Fp8Block: return "fp8_e4m3";
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

std::size_t weight_element_bytes(WeightFormat f) {
  switch (f) {
    case WeightFormat::F32: return 4;
    case WeightFormat::F16:
    case WeightFormat::BF16: return 2;
    case WeightFormat::MlxAffine:
    case WeightFormat::Fp8Block: break;
  }
  fail("internal: weight_element_bytes of a quantized format");
}

void check_affine_params(int bits, int group_size, const std::string& what) {
  if (bits != 2 && bits != 3 && bits != 4 && bits != 5 && bits != 6 && bits != 8)
    fail(what, ": MLX affine bits = ", bits, " is not supported (2, 3, 4, 5, 6 or 8)");
  if (group_size != 32 && group_size != 64 && group_size != 128)
    fail(what, ": MLX affine group_size = ", group_size, " is not supported (32, 64 or 128)");
}

float fp8_e4m3_to_f32(uint8_t q) {
  // The e4m3 bits placed in an f16 (same 3-bit mantissa, exponent bias 15 instead of 7) give the
  // value / 256 exactly, subnormals included; the AVX2 kernels decode the same way.
  const auto h = static_cast<uint16_t>(((q & 0x80u) << 8) | ((q & 0x7fu) << 7));
  return f16_to_f32(h) * 256.0f;
}

float Weight::fp8_scale(int64_t r, int64_t cb) const {
  const int64_t i = (fp8.row_offset + r) / fp8.block_rows * fp8.scale_cols + cb;
  const std::byte* p = fp8.scales + static_cast<std::size_t>(i) * weight_element_bytes(fp8.scale_format);
  if (fp8.scale_format == WeightFormat::F32) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return fp8.scale_format == WeightFormat::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
}

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
    case WeightFormat::MlxAffine: {
      const int bits = quant.bits;
      const uint32_t mask = (1u << bits) - 1;
      const int64_t groups = cols / quant.group_size;
      std::vector<float> s(static_cast<std::size_t>(groups)), b(s.size());
      Weight sw{quant.scale_format, rows, groups, quant.scales}, bw{quant.scale_format, rows, groups, quant.biases};
      sw.row_to_f32(r, s.data());
      bw.row_to_f32(r, b.data());
      const auto* bytes = reinterpret_cast<const uint8_t*>(p);
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t bit = c * bits;
        const int64_t byte = bit >> 3;
        const int sh = static_cast<int>(bit & 7);
        uint32_t v = bytes[byte];
        if (sh + bits > 8) v |= static_cast<uint32_t>(bytes[byte + 1]) << 8;
        const float q = static_cast<float>((v >> sh) & mask);
        const auto g = static_cast<std::size_t>(c / quant.group_size);
        out[c] = std::fma(s[g], q, b[g]);
      }
      return;
    }
    case WeightFormat::Fp8Block: {
      const auto* bytes = reinterpret_cast<const uint8_t*>(p);
      for (int64_t c = 0; c < cols; ++c) out[c] = fp8_e4m3_to_f32(bytes[c]) * fp8_scale(r, c / fp8.block_cols);
      return;
    }
  }
}

}  // namespace qwenrt

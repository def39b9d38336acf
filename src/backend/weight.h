#pragma once
// A weight as every backend sees it: (format, shape, storage). A matrix is [rows, cols] row-major
// and products compute y = x · Wᵀ. `data` is the host storage in the weight's own format (a view
// into the mapped checkpoint or the synthetic-weight arena; a slice such as one expert of a fused
// tensor is an offset view). A backend that keeps weights elsewhere binds each one once, at load,
// and records where in `bound`; products dispatch on the format there (one file per format per
// backend: backend/cpu/matmul_<format>.cpp, model/cuda/weights_<format>.cpp). The quantized formats
// enter here, beside the dense ones, without the model changing.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "formats/dtype.h"

namespace qwenrt {

enum class WeightFormat : uint8_t {
  F32,   // dense float32
  F16,   // dense IEEE half
  BF16,  // dense bfloat16
};

std::string_view weight_format_name(WeightFormat f);
// The dense format of a checkpoint element type; Error for types no product reads.
WeightFormat weight_format_of(DType t);
// Bytes of one stored element (dense formats).
std::size_t weight_element_bytes(WeightFormat f);

// Where a backend other than the CPU keeps a weight (set once when the model moves there).
struct BoundWeight {
  WeightFormat format = WeightFormat::BF16;  // may differ from the host's (f16/f32 rounded at upload)
  const void* data = nullptr;
};

struct Weight {
  WeightFormat format = WeightFormat::BF16;
  int64_t rows = 0, cols = 0;
  const std::byte* data = nullptr;
  // Synthetic weights made on a device: no host data, uniform noise in [−random_scale,
  // random_scale] from this seed (nonzero) wherever the matrix is uploaded.
  uint64_t random_seed = 0;
  float random_scale = 0;
  BoundWeight bound;

  std::size_t row_bytes() const { return static_cast<std::size_t>(cols) * weight_element_bytes(format); }
  std::size_t bytes() const { return row_bytes() * static_cast<std::size_t>(rows); }
  // Rows [begin, begin + count) as a weight of their own.
  Weight row_slice(int64_t begin, int64_t count) const {
    Weight w = *this;
    w.rows = count;
    if (data) w.data = data + static_cast<std::size_t>(begin) * row_bytes();
    w.bound = {};
    return w;
  }
  // Row r widened to f32.
  void row_to_f32(int64_t r, float* out) const;
};

// A small parameter vector (norm weights, gates, conv taps): f32 on the host, widened at load, and
// where the backend keeps its copy.
struct ParamVector {
  std::vector<float> host;
  const float* bound = nullptr;

  ParamVector() = default;
  ParamVector(std::vector<float> v) : host(std::move(v)) {}  // NOLINT: a vector is a parameter
  const float* data() const { return host.data(); }
  float* data() { return host.data(); }
  std::size_t size() const { return host.size(); }
  bool empty() const { return host.empty(); }
  float operator[](std::size_t i) const { return host[i]; }
};

}  // namespace qwenrt

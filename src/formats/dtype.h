#pragma once
// Element types as checkpoints name them.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace qwenrt {

enum class DType : uint8_t { F64, F32, F16, BF16, I64, I32, I16, I8, U64, U32, U16, U8, Bool, F8E4M3, F8E5M2 };

std::size_t dtype_size(DType t);
std::string_view dtype_name(DType t);                         // safetensors spelling, e.g. "BF16"
std::optional<DType> dtype_from_name(std::string_view name);  // inverse of dtype_name

}  // namespace qwenrt

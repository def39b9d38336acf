#include "formats/dtype.h"

#include <array>

namespace qwenrt {

namespace {
struct DTypeInfo {
  DType type;
  std::string_view name;
  std::size_t size;
};
constexpr std::array<DTypeInfo, 15> kTypes{{
    {DType::F64, "F64", 8},
    {DType::F32, "F32", 4},
    {DType::F16, "F16", 2},
    {DType::BF16, "BF16", 2},
    {DType::I64, "I64", 8},
    {DType::I32, "I32", 4},
    {DType::I16, "I16", 2},
    {DType::I8, "I8", 1},
    {DType::U64, "U64", 8},
    {DType::U32, "U32", 4},
    {DType::U16, "U16", 2},
    {DType::U8, "U8", 1},
    {DType::Bool, "BOOL", 1},
    {DType::F8E4M3, "F8_E4M3", 1},
    {DType::F8E5M2, "F8_E5M2", 1},
}};
}  // namespace

std::size_t dtype_size(DType t) { return kTypes[static_cast<std::size_t>(t)].size; }
std::string_view dtype_name(DType t) { return kTypes[static_cast<std::size_t>(t)].name; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& info : kTypes)
    if (info.name == name) return info.type;
  return std::nullopt;
}

}  // namespace qwenrt

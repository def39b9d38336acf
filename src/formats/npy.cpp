#include "formats/npy.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/mapped_file.h"

namespace qwenrt {

void write_npy_f32(const std::filesystem::path& path, std::span<const int64_t> shape, std::span<const float> data) {
  std::ostringstream dict;
  dict << "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  for (std::size_t i = 0; i < shape.size(); ++i) dict << shape[i] << (shape.size() == 1 || i + 1 < shape.size() ? "," : "");
  dict << "), }";
  std::string header = dict.str();
  // Magic (6) + version (2) + length (2) + header + '\n' must be a multiple of 64.
  std::size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream out(path, std::ios::binary);
  if (!out) fail(path.string(), ": cannot open for writing");
  out.write("\x93NUMPY\x01\x00", 8);
  uint16_t len = static_cast<uint16_t>(header.size());
  char len_bytes[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  out.write(len_bytes, 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size_bytes()));
  if (!out) fail(path.string(), ": write failed");
}

namespace {

// The header is a Python dict literal: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }.
// Finds the value text after 'key': (spaces skipped), or npos.
std::size_t value_of(const std::string& header, const std::string& key) {
  const std::size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) return k;
  std::size_t p = k + key.size() + 2;
  while (p < header.size() && header[p] == ' ') ++p;
  if (p >= header.size() || header[p] != ':') return std::string::npos;
  ++p;
  while (p < header.size() && header[p] == ' ') ++p;
  return p;
}

}  // namespace

NpyArray parse_npy(std::span<const std::byte> image, const std::string& file) {
  auto byte = [&](std::size_t i) { return static_cast<uint8_t>(image[i]); };
  if (image.size() < 10 || std::memcmp(image.data(), "\x93NUMPY", 6) != 0) fail(file, ": not a .npy file (no \\x93NUMPY magic)");
  const uint8_t major = byte(6);
  if (major < 1 || major > 3) fail(file, ": .npy format version ", int(major), " is not supported (1, 2 or 3)");
  std::size_t header_len = byte(8) | std::size_t{byte(9)} << 8, header_at = 10;
  if (major != 1) {  // versions 2 and 3 use a 4-byte length
    if (image.size() < 12) fail(file, ": truncated .npy header");
    header_len |= std::size_t{byte(10)} << 16 | std::size_t{byte(11)} << 24;
    header_at = 12;
  }
  if (header_len > kMaxNpyHeaderBytes) fail(file, ": .npy header of ", header_len, " bytes is over the limit of ", kMaxNpyHeaderBytes);
  if (header_len > image.size() - header_at)
    fail(file, ": .npy header (", header_len, " bytes) runs past the end of the file (", image.size(), " bytes)");
  const std::string header(reinterpret_cast<const char*>(image.data() + header_at), header_len);

  std::size_t p = value_of(header, "descr");
  if (p == std::string::npos || p + 2 > header.size() || header[p] != '\'') fail(file, ": .npy header has no 'descr'");
  const std::size_t close = header.find('\'', p + 1);
  if (close == std::string::npos) fail(file, ": .npy header: unterminated 'descr'");
  const std::string descr = header.substr(p + 1, close - p - 1);
  bool f64 = false;
  if (descr == "<f8" || descr == "=f8" || descr == "f8") f64 = true;
  else if (descr != "<f4" && descr != "=f4" && descr != "f4")
    fail(file, ": dtype '", descr, "': only little-endian float32/float64 arrays are supported");

  p = value_of(header, "fortran_order");
  if (p == std::string::npos) fail(file, ": .npy header has no 'fortran_order'");
  if (header.compare(p, 5, "False") != 0) fail(file, ": Fortran order is not supported");

  p = value_of(header, "shape");
  if (p == std::string::npos || header[p] != '(') fail(file, ": .npy header has no 'shape' tuple");
  const std::size_t shape_end = header.find(')', p);
  if (shape_end == std::string::npos) fail(file, ": .npy header: unterminated 'shape' tuple");
  NpyArray arr;
  const std::size_t item = f64 ? 8 : 4;
  const std::size_t data_bytes = image.size() - header_at - header_len;
  uint64_t count = 1;
  for (std::size_t i = p + 1; i < shape_end;) {
    if (header[i] == ' ' || header[i] == ',') {
      ++i;
      continue;
    }
    if (header[i] < '0' || header[i] > '9') fail(file, ": 'shape' must hold non-negative integers, got '", header.substr(p, shape_end - p + 1), "'");
    uint64_t d = 0;
    for (; i < shape_end && header[i] >= '0' && header[i] <= '9'; ++i) {
      d = d * 10 + static_cast<uint64_t>(header[i] - '0');
      if (d > kMaxNpyDim) fail(file, ": a dimension of shape ", header.substr(p, shape_end - p + 1), " is over the limit of 2^40");
    }
    if (arr.shape.size() == kMaxNpyDims) fail(file, ": more than ", kMaxNpyDims, " dimensions");
    arr.shape.push_back(static_cast<int64_t>(d));
    if (__builtin_mul_overflow(count, d, &count)) count = UINT64_MAX;  // saturates; a zero dimension still wins below
  }
  uint64_t need = 0;
  if (__builtin_mul_overflow(count, item, &need)) need = UINT64_MAX;
  if (std::find(arr.shape.begin(), arr.shape.end(), 0) != arr.shape.end()) count = need = 0;
  if (need != data_bytes)
    fail(file, ": the shape needs ", need == UINT64_MAX ? std::string("over 2^64") : std::to_string(need), " bytes of data, the file holds ",
         data_bytes);
  arr.values.resize(static_cast<std::size_t>(count));
  const std::byte* data = image.data() + header_at + header_len;
  for (std::size_t i = 0; i < arr.values.size(); ++i) {
    if (f64) {
      std::memcpy(&arr.values[i], data + 8 * i, 8);
    } else {
      float v;
      std::memcpy(&v, data + 4 * i, 4);
      arr.values[i] = v;
    }
  }
  return arr;
}

NpyArray read_npy(const std::filesystem::path& path) {
  const MappedFile map(path);
  return parse_npy(map.bytes(), path.string());
}

}  // namespace qwenrt

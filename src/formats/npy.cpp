#include "formats/npy.h"

#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

#include "core/error.h"

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

NpyArray read_npy(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path.string(), ": cannot open");
  char magic[10];
  in.read(magic, 10);
  if (!in || std::memcmp(magic, "\x93NUMPY", 6) != 0) fail(path.string(), ": not a .npy file");
  uint32_t header_len = static_cast<uint8_t>(magic[8]) | static_cast<uint8_t>(magic[9]) << 8;
  if (magic[6] != 1) {  // versions 2 and 3 use a 4-byte length
    char extra[2];
    in.read(extra, 2);
    header_len |= static_cast<uint32_t>(static_cast<uint8_t>(extra[0])) << 16 | static_cast<uint32_t>(static_cast<uint8_t>(extra[1])) << 24;
  }
  std::string header(header_len, '\0');
  in.read(header.data(), header_len);
  std::smatch m;
  if (!std::regex_search(header, m, std::regex("'descr':\\s*'([<|=]?)(f4|f8)'")))
    fail(path.string(), ": only little-endian float32/float64 arrays are supported");
  bool f64 = m[2] == "f8";
  if (header.find("'fortran_order': False") == std::string::npos) fail(path.string(), ": Fortran order is not supported");
  if (!std::regex_search(header, m, std::regex("'shape':\\s*\\(([^)]*)\\)"))) fail(path.string(), ": no shape");
  NpyArray arr;
  std::string dims = m[1];
  std::stringstream ss(dims);
  std::string part;
  int64_t count = 1;
  while (std::getline(ss, part, ',')) {
    if (part.find_first_not_of(" ") == std::string::npos) continue;
    arr.shape.push_back(std::stoll(part));
    count *= arr.shape.back();
  }
  arr.values.resize(static_cast<std::size_t>(count));
  if (f64) {
    in.read(reinterpret_cast<char*>(arr.values.data()), count * 8);
  } else {
    std::vector<float> tmp(static_cast<std::size_t>(count));
    in.read(reinterpret_cast<char*>(tmp.data()), count * 4);
    for (std::size_t i = 0; i < tmp.size(); ++i) arr.values[i] = tmp[i];
  }
  if (!in) fail(path.string(), ": truncated data");
  return arr;
}

}  // namespace qwenrt

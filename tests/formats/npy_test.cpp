// .npy reading: round trip, and every malformed header or size an Error naming the file (before:
// std::stoll exceptions, negative or overflowing shapes sizing a vector, regex on hostile headers).
#include "formats/npy.h"

#include <gtest/gtest.h>

#include <cstring>

#include "core/error.h"

namespace qwenrt {
namespace {

std::vector<std::byte> npy(const std::string& dict, std::size_t data_bytes, char version = 1) {
  std::string h = dict;
  h.push_back('\n');
  std::string out = std::string("\x93NUMPY", 6) + version + '\0';
  if (version == 1) out += std::string{static_cast<char>(h.size() & 0xff), static_cast<char>(h.size() >> 8)};
  else out += std::string{static_cast<char>(h.size() & 0xff), static_cast<char>(h.size() >> 8), '\0', '\0'};
  out += h;
  out.append(data_bytes, '\0');
  std::vector<std::byte> bytes(out.size());
  std::memcpy(bytes.data(), out.data(), out.size());
  return bytes;
}

std::string error_of(const std::vector<std::byte>& image) {
  try {
    parse_npy(image, "x.npy");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Npy, RoundTrip) {
  const auto path = std::filesystem::temp_directory_path() / ("qwenrt_npy_" + std::to_string(::getpid()) + ".npy");
  const std::vector<int64_t> shape = {2, 3};
  const std::vector<float> data = {1, 2, 3, 4, 5, -6.5f};
  write_npy_f32(path, shape, data);
  const NpyArray a = read_npy(path);
  EXPECT_EQ(a.shape, shape);
  EXPECT_EQ(a.values, (std::vector<double>{1, 2, 3, 4, 5, -6.5}));
  std::filesystem::remove(path);

  const NpyArray v2 = parse_npy(npy("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", 24, 2), "x.npy");
  EXPECT_EQ(v2.shape, std::vector<int64_t>{3});
  const NpyArray scalar = parse_npy(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 4), "x.npy");
  EXPECT_TRUE(scalar.shape.empty());
  EXPECT_EQ(scalar.values.size(), 1u);
  const NpyArray empty = parse_npy(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 5), }", 0), "x.npy");
  EXPECT_TRUE(empty.values.empty());
}

TEST(Npy, MalformedFilesAreErrors) {
  const std::string ok_head = "{'descr': '<f4', 'fortran_order': False, 'shape': ";
  struct Case {
    std::vector<std::byte> image;
    std::string expect;
  };
  std::vector<Case> cases = {
      {npy(ok_head + "(a,), }", 4), "'shape' must hold non-negative integers"},
      {npy(ok_head + "(-1,), }", 4), "'shape' must hold non-negative integers"},
      {npy(ok_head + "(99999999999999999999999,), }", 4), "over the limit of 2^40"},
      {npy(ok_head + "(1099511627776, 1099511627776, 1099511627776), }", 16), "needs over 2^64 bytes of data, the file holds 16"},
      {npy(ok_head + "(65536, 65536, 65536, 65536), }", 64), "needs over 2^64 bytes"},
      {npy(ok_head + "(65536, 65536), }", 64), "needs 17179869184 bytes of data, the file holds 64"},
      {npy(ok_head + "(3,), }", 8), "the shape needs 12 bytes of data, the file holds 8"},
      {npy(ok_head + "(3,), }", 16), "the shape needs 12 bytes of data, the file holds 16"},
      {npy(ok_head + "(3, }", 12), "unterminated 'shape'"},
      {npy("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", 4), "only little-endian float32/float64"},
      {npy("{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }", 8), "dtype '<i8'"},
      {npy("{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }", 4), "Fortran order"},
      {npy("{'fortran_order': False, 'shape': (1,), }", 4), "no 'descr'"},
      {npy("{'descr': '<f4, }", 4), "unterminated 'descr'"},
      {npy(ok_head + "(1,), }", 4, 7), "version 7"},
  };
  auto truncated = npy(ok_head + "(1,), }", 4);
  truncated.resize(20);
  cases.push_back({truncated, "runs past the end of the file"});
  cases.push_back({std::vector<std::byte>(5), "not a .npy file"});
  for (const auto& c : cases) {
    const std::string e = error_of(c.image);
    EXPECT_NE(e.find("x.npy: "), std::string::npos) << c.expect << " -> " << e;
    EXPECT_NE(e.find(c.expect), std::string::npos) << c.expect << " -> " << e;
  }
  EXPECT_THROW(read_npy("/nonexistent/x.npy"), Error);
}

}  // namespace
}  // namespace qwenrt

#include "formats/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/error.h"

namespace qwenrt {

namespace {
// The format's own limit on header size; anything larger is a corrupt or hostile file.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

int64_t read_dim(const nlohmann::json& d, const std::string& file, const std::string& name) {
  if (!d.is_number_integer() && !d.is_number_unsigned()) fail(file, ": tensor '", name, "': shape entries must be non-negative integers");
  if (d.is_number_integer() && d.get<int64_t>() < 0) fail(file, ": tensor '", name, "': negative dimension ", d.get<int64_t>());
  uint64_t v = d.get<uint64_t>();
  if (v > (1ull << 40)) fail(file, ": tensor '", name, "': absurd dimension ", v);
  return static_cast<int64_t>(v);
}

uint64_t read_offset(const nlohmann::json& d, const std::string& file, const std::string& name) {
  if (!d.is_number_unsigned() && !(d.is_number_integer() && d.get<int64_t>() >= 0))
    fail(file, ": tensor '", name, "': data_offsets must be non-negative integers");
  return d.get<uint64_t>();
}
}  // namespace

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorInfo::shape_string() const {
  std::ostringstream out;
  out << '[';
  for (std::size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ']';
  return out.str();
}

std::vector<TensorInfo> parse_safetensors(std::span<const std::byte> image, const std::string& file) {
  if (image.size() < 8) fail(file, ": truncated safetensors file (", image.size(), " bytes, no header)");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = header_len << 8 | static_cast<uint8_t>(image[i]);
  if (header_len > kMaxHeaderBytes) fail(file, ": safetensors header length ", header_len, " exceeds the 100 MB limit");
  if (header_len > image.size() - 8)
    fail(file, ": safetensors header (", header_len, " bytes) runs past the end of the file (", image.size(), " bytes)");
  const char* header_begin = reinterpret_cast<const char*>(image.data() + 8);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(header_begin, header_begin + header_len);
  } catch (const nlohmann::json::exception& e) {
    fail(file, ": safetensors header is not valid JSON: ", e.what());
  }
  if (!header.is_object()) fail(file, ": safetensors header must be a JSON object");

  const std::byte* data = image.data() + 8 + header_len;
  const uint64_t data_size = image.size() - 8 - header_len;
  std::vector<TensorInfo> tensors;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail(file, ": __metadata__ must be an object");
      continue;
    }
    if (!entry.is_object()) fail(file, ": tensor '", name, "': entry must be an object");
    auto dt = entry.find("dtype"), sh = entry.find("shape"), off = entry.find("data_offsets");
    if (dt == entry.end() || sh == entry.end() || off == entry.end()) fail(file, ": tensor '", name, "': entry needs dtype, shape and data_offsets");
    if (!dt->is_string()) fail(file, ": tensor '", name, "': dtype must be a string");
    auto dtype = dtype_from_name(dt->get<std::string>());
    if (!dtype) fail(file, ": tensor '", name, "': unknown dtype '", dt->get<std::string>(), "'");
    if (!sh->is_array() || sh->size() > 8) fail(file, ": tensor '", name, "': shape must be an array of at most 8 dimensions");
    if (!off->is_array() || off->size() != 2) fail(file, ": tensor '", name, "': data_offsets must be [begin, end]");

    TensorInfo t;
    t.name = name;
    t.dtype = *dtype;
    t.file = file;
    uint64_t count = 1;
    for (const auto& d : *sh) {
      int64_t dim = read_dim(d, file, name);
      t.shape.push_back(dim);
      if (dim != 0 && count > std::numeric_limits<uint64_t>::max() / 16 / static_cast<uint64_t>(dim))
        fail(file, ": tensor '", name, "': shape ", t.shape_string(), " overflows");
      count *= static_cast<uint64_t>(dim);
    }
    uint64_t begin = read_offset((*off)[0], file, name), end = read_offset((*off)[1], file, name);
    if (begin > end) fail(file, ": tensor '", name, "': data_offsets [", begin, ", ", end, "] are reversed");
    if (end > data_size)
      fail(file, ": tensor '", name, "': data [", begin, ", ", end, ") runs past the end of the data (", data_size, " bytes; file truncated?)");
    uint64_t expected = count * dtype_size(t.dtype);
    if (end - begin != expected)
      fail(file, ": tensor '", name, "': ", end - begin, " bytes stored but shape ", t.shape_string(), " of ", dtype_name(t.dtype), " needs ",
           expected);
    t.data = data + begin;
    t.nbytes = static_cast<std::size_t>(expected);
    tensors.push_back(std::move(t));
    ranges.emplace_back(begin, end);
  }
  // Overlapping byte ranges mean a corrupt writer: two tensors would alias each other.
  std::vector<std::size_t> order(tensors.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](auto a, auto b) { return ranges[a] < ranges[b]; });
  for (std::size_t i = 1; i < order.size(); ++i) {
    auto prev = ranges[order[i - 1]], cur = ranges[order[i]];
    if (cur.first < prev.second && cur.first != cur.second && prev.first != prev.second)
      fail(file, ": tensors '", tensors[order[i - 1]].name, "' and '", tensors[order[i]].name, "' have overlapping data ranges");
  }
  return tensors;
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : map_(path), tensors_(parse_safetensors(map_.bytes(), path.string())) {}

}  // namespace qwenrt

#include "server/auth.h"

#include <cstdint>

namespace qwenrt::server {

bool constant_time_equal(std::string_view a, std::string_view b) {
  // Compares every byte of `b` (the candidate) against `a` cycled, so neither the position of the
  // first difference nor the key's content shows in the time.
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  if (a.empty()) return b.empty();
  for (std::size_t i = 0; i < b.size(); ++i) diff |= static_cast<uint8_t>(a[i % a.size()]) ^ static_cast<uint8_t>(b[i]);
  return diff == 0;
}

bool authorized(const std::string& key, const std::string& authorization, const std::string& x_api_key) {
  if (key.empty()) return true;
  bool ok = false;
  constexpr std::string_view bearer = "Bearer ";
  if (authorization.size() > bearer.size() && authorization.compare(0, bearer.size(), bearer) == 0)
    ok |= constant_time_equal(key, std::string_view(authorization).substr(bearer.size()));
  if (!x_api_key.empty()) ok |= constant_time_equal(key, x_api_key);
  return ok;
}

}  // namespace qwenrt::server

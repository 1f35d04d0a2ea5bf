// byte_size.cpp: the size grammar (byte_size.hpp).
#include "common/byte_size.hpp"

#include <cctype>
#include <limits>

namespace itertime {

std::optional<int64_t> parse_byte_size(std::string_view text) {
  if (!text.empty() && (text.back() == 'B' || text.back() == 'b')) text.remove_suffix(1);
  int shift = 0;
  if (!text.empty()) {
    const char suffix = static_cast<char>(std::toupper(static_cast<unsigned char>(text.back())));
    shift = suffix == 'K' ? 10 : suffix == 'M' ? 20 : suffix == 'G' ? 30 : 0;
    if (shift != 0) text.remove_suffix(1);
  }
  if (text.empty() || text.size() > 12) return std::nullopt;  // the sweep's grammar: at most 12 digits
  int64_t value = 0;
  for (const char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    value = value * 10 + (c - '0');  // at most 12 digits: no overflow
  }
  if (value > (std::numeric_limits<int64_t>::max() >> shift)) return std::nullopt;
  return value << shift;
}

std::string format_byte_size(int64_t bytes) {
  const char* suffixes = "KMG";
  for (int i = 2; i >= 0; --i) {
    const int64_t unit = int64_t{1} << (10 * (i + 1));
    if (bytes >= unit && bytes % unit == 0) return std::to_string(bytes / unit) + suffixes[i];
  }
  return std::to_string(bytes);
}

}  // namespace itertime

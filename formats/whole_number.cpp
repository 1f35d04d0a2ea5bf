// whole_number.cpp: the strict reading of a positive whole number (whole_number.hpp).
#include "formats/whole_number.hpp"

#include <exception>

namespace itertime::formats {

std::optional<int> positive_whole_number(const std::string& text) {
  std::size_t used = 0;
  int value = 0;
  try {
    value = std::stoi(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used != text.size() || value < 1) return std::nullopt;
  return value;
}

}  // namespace itertime::formats

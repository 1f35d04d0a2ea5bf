// dtype_list.cpp: text of a list of input dtypes (dtype_list.hpp).
#include "common/dtype_list.hpp"

namespace itertime {

std::string to_string(const DTypeList& dtypes) {
  std::string text;
  for (std::size_t i = 0; i < dtypes.size(); ++i) text += (i ? "," : "") + to_string(dtypes[i]);
  return text;
}

DTypeList parse_dtype_list(std::string_view text) {
  DTypeList dtypes;
  if (text.empty()) return dtypes;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    dtypes.push_back(parse_dtype(text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start)));
    if (comma == std::string_view::npos) return dtypes;
    start = comma + 1;
  }
}

}  // namespace itertime

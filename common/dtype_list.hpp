// dtype_list.hpp: the dtypes of an operator's tensor inputs, in argument order, as one typed list, and
// its text: the names joined by commas ("fp32,bf16"), what /ops/signatures input_dtypes stores (cut at
// the field's capacity, see common/calibration_records.hpp) and what regression groups are keyed by.
// Invariants: parse_dtype_list(to_string(list)) == list; the empty list is the empty text; parsing an
// unknown name is a UserError naming it (common/dtype.hpp).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/dtype.hpp"

namespace itertime {

using DTypeList = std::vector<DType>;

std::string to_string(const DTypeList& dtypes);  // "fp32,fp32,bf16"; "" when empty
DTypeList parse_dtype_list(std::string_view text);

}  // namespace itertime

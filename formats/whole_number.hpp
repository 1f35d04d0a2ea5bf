// whole_number.hpp: the strict reading of a positive whole number that the configuration readers share
// (a Megatron-LM launch line's --nnodes, a NeMo dump's parallel sizes).
// Invariants: std::stoi's reading (leading blanks and a sign allowed) that uses every character of the
// text and gives at least 1; anything else, an int's overflow included, is nullopt. Never throws.
#pragma once

#include <optional>
#include <string>

namespace itertime::formats {

std::optional<int> positive_whole_number(const std::string& text);

}  // namespace itertime::formats

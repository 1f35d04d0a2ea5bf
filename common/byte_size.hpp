// byte_size.hpp: the one size grammar of itertime's text (job files, the comm sweep's options, recipe text):
// an integer of at most 12 digits with an optional K, M or G suffix (powers of 1024, either case) and an
// optional trailing B.
// Invariants: pure; parse_byte_size(format_byte_size(n)) == n for every n >= 0; a text that is not such a
// size, or whose value exceeds int64_t, parses to nothing (the caller names the input in its error).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace itertime {

std::optional<int64_t> parse_byte_size(std::string_view text);
// 8, 1K, 64M, 3G when exact, else the plain number of bytes.
std::string format_byte_size(int64_t bytes);

}  // namespace itertime

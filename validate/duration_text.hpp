// duration_text.hpp: durations and sizes in the units a person reads, for the console reporters
// (JSON keeps machine units: microseconds, bytes). Pure functions.
// Invariants:
//  - duration_text(us): below 1 ms "µs" with one decimal ("512.3 µs"); below 1 s "ms" with one decimal
//    ("67.8 ms"); below 1 h "s" with two decimals ("20.36 s"); from 1 h on "h" with two decimals
//    ("10.35 h"). The unit is chosen after rounding, so 999.96 µs reads "1.0 ms", never "1000.0 µs".
//    Negative durations (a factor below 1 takes time away) keep their sign: "-2.4 ms".
//  - bytes_text(bytes): KiB below 1 MiB, MiB below 1 GiB, else GiB, two decimals ("79.25 GiB",
//    "12.50 MiB"), the unit chosen after rounding like duration_text's.
//  - right_aligned(text, width): text padded on the left to `width` characters as a terminal shows them
//    (UTF-8 code points, so "512.3 µs" lines up with "10.44 s"); longer text is returned as it is.
#pragma once

#include <cstdint>
#include <string>

namespace itertime::validate {

std::string duration_text(double us);
std::string bytes_text(int64_t bytes);
std::string right_aligned(const std::string& text, int width);

}  // namespace itertime::validate

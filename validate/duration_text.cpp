// duration_text.cpp: durations and sizes for people (duration_text.hpp).
#include "validate/duration_text.hpp"

#include <cmath>
#include <cstdio>

namespace itertime::validate {
namespace {

std::string with_unit(double value, int decimals, const char* unit) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f %s", decimals, value, unit);
  return text;
}

// Whether `value` shown with `decimals` decimals stays below `limit`.
bool below_after_rounding(double value, int decimals, double limit) {
  const double scale = std::pow(10.0, decimals);
  return std::round(value * scale) / scale < limit;
}

}  // namespace

std::string duration_text(double us) {
  if (!std::isfinite(us)) return std::isnan(us) ? "nan" : (us > 0 ? "inf" : "-inf");
  const double magnitude = std::fabs(us);
  const std::string sign = us < 0 && !below_after_rounding(magnitude, 1, 0.05) ? "-" : "";  // never "-0.0"

  if (below_after_rounding(magnitude, 1, 1e3)) return sign + with_unit(magnitude, 1, "\u00b5s");
  if (below_after_rounding(magnitude / 1e3, 1, 1e3)) return sign + with_unit(magnitude / 1e3, 1, "ms");
  if (below_after_rounding(magnitude / 1e6, 2, 3600.0)) return sign + with_unit(magnitude / 1e6, 2, "s");
  return sign + with_unit(magnitude / 3.6e9, 2, "h");
}

std::string bytes_text(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  const double kib = 1024.0, mib = kib * 1024.0, gib = mib * 1024.0;
  if (below_after_rounding(std::fabs(b) / kib, 2, 1024.0)) return with_unit(b / kib, 2, "KiB");
  if (below_after_rounding(std::fabs(b) / mib, 2, 1024.0)) return with_unit(b / mib, 2, "MiB");
  return with_unit(b / gib, 2, "GiB");
}

std::string right_aligned(const std::string& text, int width) {
  int shown = 0;
  for (unsigned char c : text) shown += (c & 0xC0) != 0x80;  // count code points, not continuation bytes
  return shown >= width ? text : std::string(static_cast<std::size_t>(width - shown), ' ') + text;
}

}  // namespace itertime::validate

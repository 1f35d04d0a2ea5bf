// half.hpp: IEEE fp16 and bfloat16 <-> float conversions, bit-exact, as pure inline functions.
// Invariants: float -> 16-bit rounds to nearest, ties to even; NaN stays NaN (quiet), infinities and
// signed zeros are kept; fp16 subnormals are produced and read correctly; 16-bit -> float is exact.
// Used by the MPI reductions on 16-bit floats (MPI has no such types) and by result checks.
#pragma once

#include <cstdint>
#include <cstring>

namespace itertime {

inline uint32_t float_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

inline float bits_float(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

inline float bf16_to_float(uint16_t value) { return bits_float(static_cast<uint32_t>(value) << 16); }

inline uint16_t float_to_bf16(float value) {
  const uint32_t bits = float_bits(value);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) {
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);  // quiet NaN, sign kept
  }
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);  // round to nearest, ties to even
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

inline float fp16_to_float(uint16_t value) {
  const uint32_t sign = static_cast<uint32_t>(value & 0x8000u) << 16;
  const uint32_t exponent = (value >> 10) & 0x1fu;
  uint32_t mantissa = value & 0x3ffu;
  if (exponent == 0) {
    if (mantissa == 0) return bits_float(sign);  // signed zero
    // Subnormal: normalize.
    int shift = 0;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      ++shift;
    }
    mantissa &= 0x3ffu;
    const uint32_t float_exponent = static_cast<uint32_t>(127 - 15 - shift + 1);
    return bits_float(sign | (float_exponent << 23) | (mantissa << 13));
  }
  if (exponent == 0x1fu) return bits_float(sign | 0x7f800000u | (mantissa << 13));  // inf / NaN
  return bits_float(sign | ((exponent + 127 - 15) << 23) | (mantissa << 13));
}

inline uint16_t float_to_fp16(float value) {
  const uint32_t bits = float_bits(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits >= 0x7f800000u) {  // inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (abs_bits > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs_bits >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  const int32_t exponent = static_cast<int32_t>(abs_bits >> 23) - 127 + 15;
  if (exponent <= 0) {
    // Subnormal or zero in fp16: shift the full mantissa (with the implicit bit) into place.
    if (exponent < -10) return sign;  // below half the smallest subnormal: zero
    const uint32_t mantissa = (abs_bits & 0x7fffffu) | 0x800000u;
    const uint32_t shift = static_cast<uint32_t>(14 - exponent);
    const uint32_t half_ulp = 1u << (shift - 1);
    const uint32_t remainder = mantissa & ((1u << shift) - 1u);
    uint32_t result = mantissa >> shift;
    if (remainder > half_ulp || (remainder == half_ulp && (result & 1u))) ++result;
    return static_cast<uint16_t>(sign | result);
  }
  uint32_t result = (static_cast<uint32_t>(exponent) << 10) | ((abs_bits >> 13) & 0x3ffu);
  const uint32_t remainder = abs_bits & 0x1fffu;
  if (remainder > 0x1000u || (remainder == 0x1000u && (result & 1u))) ++result;  // may carry into exponent: fine
  return static_cast<uint16_t>(sign | result);
}

}  // namespace itertime

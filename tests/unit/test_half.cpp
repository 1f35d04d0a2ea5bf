// Unit tests of common/half.hpp: the fp16 and bf16 <-> float conversions.
// - Decoding is checked exhaustively (all 65536 bit patterns) against an independent formula built
//   with std::ldexp in double, so a round trip cannot pass with a consistently wrong pair.
// - Encoding is checked exhaustively for round trips (every pattern -> float -> the same pattern, NaNs
//   stay NaN) and for rounding: between every pair of adjacent finite 16-bit values, the midpoint goes
//   to the even neighbour and the floats just either side of it go to the nearer one.
// - Hand-picked values: fp16 ties (2049 -> 2048, 2051 -> 2052), overflow at 65520, subnormals (2^-24),
//   bf16 rounding of 1+2^-8 and 1+3*2^-9, NaN payloads that would otherwise round to infinity.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "common/half.hpp"

namespace itertime {
namespace {

bool fp16_is_nan(uint16_t bits) { return (bits & 0x7c00u) == 0x7c00u && (bits & 0x03ffu) != 0; }
bool bf16_is_nan(uint16_t bits) { return (bits & 0x7f80u) == 0x7f80u && (bits & 0x007fu) != 0; }

// IEEE binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits, computed without bit tricks.
double fp16_reference(uint16_t bits) {
  const double sign = (bits & 0x8000u) ? -1.0 : 1.0;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  if (exponent == 0x1f) return mantissa ? std::numeric_limits<double>::quiet_NaN() : sign * HUGE_VAL;
  if (exponent == 0) return sign * std::ldexp(static_cast<double>(mantissa), -24);
  return sign * std::ldexp(static_cast<double>(1024 + mantissa), exponent - 25);
}

// bfloat16: 1 sign, 8 exponent (bias 127), 7 mantissa bits.
double bf16_reference(uint16_t bits) {
  const double sign = (bits & 0x8000u) ? -1.0 : 1.0;
  const int exponent = (bits >> 7) & 0xff;
  const int mantissa = bits & 0x7f;
  if (exponent == 0xff) return mantissa ? std::numeric_limits<double>::quiet_NaN() : sign * HUGE_VAL;
  if (exponent == 0) return sign * std::ldexp(static_cast<double>(mantissa), -133);
  return sign * std::ldexp(static_cast<double>(128 + mantissa), exponent - 134);
}

TEST(Half, Fp16DecodesEveryPatternExactly) {
  for (uint32_t b = 0; b <= 0xffffu; ++b) {
    const auto bits = static_cast<uint16_t>(b);
    const float value = fp16_to_float(bits);
    const double want = fp16_reference(bits);
    if (fp16_is_nan(bits)) {
      ASSERT_TRUE(std::isnan(value)) << "pattern 0x" << std::hex << b;
      ASSERT_EQ(std::signbit(value), (bits & 0x8000u) != 0) << "pattern 0x" << std::hex << b;
    } else {
      ASSERT_EQ(static_cast<double>(value), want) << "pattern 0x" << std::hex << b;
      ASSERT_EQ(std::signbit(value), (bits & 0x8000u) != 0) << "pattern 0x" << std::hex << b;  // -0 too
    }
  }
}

TEST(Half, Fp16RoundTripsEveryPatternBitExactly) {
  int nans = 0;
  for (uint32_t b = 0; b <= 0xffffu; ++b) {
    const auto bits = static_cast<uint16_t>(b);
    const uint16_t back = float_to_fp16(fp16_to_float(bits));
    if (fp16_is_nan(bits)) {
      ++nans;
      ASSERT_TRUE(fp16_is_nan(back)) << "NaN pattern 0x" << std::hex << b << " came back as 0x" << back;
      ASSERT_EQ(back & 0x8000u, bits & 0x8000u) << "NaN sign lost for 0x" << std::hex << b;
      ASSERT_NE(back & 0x0200u, 0u) << "NaN not quiet for 0x" << std::hex << b;
    } else {
      ASSERT_EQ(back, bits) << "pattern 0x" << std::hex << b;
    }
  }
  EXPECT_EQ(nans, 2 * 1023);
}

TEST(Half, Bf16DecodesEveryPatternExactly) {
  for (uint32_t b = 0; b <= 0xffffu; ++b) {
    const auto bits = static_cast<uint16_t>(b);
    const float value = bf16_to_float(bits);
    if (bf16_is_nan(bits)) {
      ASSERT_TRUE(std::isnan(value)) << "pattern 0x" << std::hex << b;
    } else {
      ASSERT_EQ(static_cast<double>(value), bf16_reference(bits)) << "pattern 0x" << std::hex << b;
      ASSERT_EQ(std::signbit(value), (bits & 0x8000u) != 0) << "pattern 0x" << std::hex << b;
    }
  }
}

TEST(Half, Bf16RoundTripsEveryPatternBitExactly) {
  int nans = 0;
  for (uint32_t b = 0; b <= 0xffffu; ++b) {
    const auto bits = static_cast<uint16_t>(b);
    const uint16_t back = float_to_bf16(bf16_to_float(bits));
    if (bf16_is_nan(bits)) {
      ++nans;
      ASSERT_TRUE(bf16_is_nan(back)) << "NaN pattern 0x" << std::hex << b << " came back as 0x" << back;
      ASSERT_EQ(back & 0x8000u, bits & 0x8000u) << "NaN sign lost for 0x" << std::hex << b;
    } else {
      ASSERT_EQ(back, bits) << "pattern 0x" << std::hex << b;
    }
  }
  EXPECT_EQ(nans, 2 * 127);
}

// Between every two adjacent positive finite 16-bit values lo < hi: the exact midpoint (representable
// in float) rounds to the one with an even mantissa; the next float below it to lo, above it to hi.
// Negative values mirror. `decode`/`encode` are the pair under test; lo runs over [0, top).
template <typename Decode, typename Encode>
void check_rounding_between_neighbours(Decode decode, Encode encode, uint16_t top) {
  for (uint16_t lo = 0; lo < top; ++lo) {
    const auto hi = static_cast<uint16_t>(lo + 1);
    const float a = decode(lo);
    const float b = decode(hi);
    const float mid = static_cast<float>((static_cast<double>(a) + static_cast<double>(b)) / 2.0);
    ASSERT_EQ(static_cast<double>(mid), (static_cast<double>(a) + static_cast<double>(b)) / 2.0)
        << "midpoint not exact in float for 0x" << std::hex << lo;
    const uint16_t even = (lo & 1u) ? hi : lo;
    ASSERT_EQ(encode(mid), even) << "tie between 0x" << std::hex << lo << " and 0x" << hi;
    ASSERT_EQ(encode(std::nextafter(mid, 0.0f)), lo) << "just below the midpoint of 0x" << std::hex << lo;
    ASSERT_EQ(encode(std::nextafter(mid, HUGE_VALF)), hi) << "just above the midpoint of 0x" << std::hex << lo;
    ASSERT_EQ(encode(-mid), static_cast<uint16_t>(even | 0x8000u)) << "negative tie at 0x" << std::hex << lo;
    ASSERT_EQ(encode(-std::nextafter(mid, HUGE_VALF)), static_cast<uint16_t>(hi | 0x8000u));
  }
}

TEST(Half, Fp16RoundsToNearestEvenBetweenEveryNeighbourPair) {
  // Every pair up to the largest finite, 0x7bff; the pair above it (overflow at 65520) is checked by
  // Fp16OverflowsToInfinityFrom65520.
  check_rounding_between_neighbours(fp16_to_float, float_to_fp16, 0x7bff);
}

TEST(Half, Bf16RoundsToNearestEvenBetweenEveryNeighbourPair) {
  // The midpoint above the largest finite bf16 (0x7f7f) exceeds FLT_MAX; stop one pair earlier.
  check_rounding_between_neighbours(bf16_to_float, float_to_bf16, 0x7f7f);
}

TEST(Half, Fp16HandPickedRounding) {
  // In [2048, 4096) fp16 values are 2 apart: 2049 and 2051 are ties.
  EXPECT_EQ(fp16_to_float(float_to_fp16(2049.0f)), 2048.0f);
  EXPECT_EQ(fp16_to_float(float_to_fp16(2051.0f)), 2052.0f);
  EXPECT_EQ(fp16_to_float(float_to_fp16(2049.5f)), 2050.0f);
  EXPECT_EQ(fp16_to_float(float_to_fp16(2050.9f)), 2050.0f);
  EXPECT_EQ(float_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(float_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie: 1 is even
  EXPECT_EQ(float_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie: 1+2^-9 is even
  EXPECT_EQ(float_to_fp16(-2.0f), 0xc000);
  EXPECT_EQ(float_to_fp16(0.1f), 0x2e66);
  EXPECT_EQ(float_to_fp16(0.0f), 0x0000);
  EXPECT_EQ(float_to_fp16(-0.0f), 0x8000);
}

TEST(Half, Fp16OverflowsToInfinityFrom65520) {
  EXPECT_EQ(float_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_fp16(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(float_to_fp16(65520.0f), 0x7c00);
  EXPECT_EQ(float_to_fp16(-65520.0f), 0xfc00);
  EXPECT_EQ(float_to_fp16(1e10f), 0x7c00);
  EXPECT_EQ(float_to_fp16(std::numeric_limits<float>::max()), 0x7c00);
  EXPECT_EQ(float_to_fp16(HUGE_VALF), 0x7c00);
  EXPECT_EQ(float_to_fp16(-HUGE_VALF), 0xfc00);
  EXPECT_TRUE(std::isinf(fp16_to_float(0x7c00)));
}

TEST(Half, Fp16Subnormals) {
  const float tiny = std::ldexp(1.0f, -24);  // smallest fp16 subnormal
  EXPECT_EQ(float_to_fp16(tiny), 0x0001);
  EXPECT_EQ(fp16_to_float(0x0001), tiny);
  EXPECT_EQ(float_to_fp16(-tiny), 0x8001);
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -25)), 0x0000);  // tie with 0: 0 is even
  EXPECT_EQ(float_to_fp16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(float_to_fp16(3 * std::ldexp(1.0f, -25)), 0x0002);         // 1.5 * 2^-24: tie, 2 is even
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -14)), 0x0400);             // smallest normal
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -14) - tiny), 0x03ff);      // largest subnormal
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -14) - tiny / 2), 0x0400);  // tie into the normals
  EXPECT_EQ(float_to_fp16(1e-10f), 0x0000);
  EXPECT_EQ(float_to_fp16(-1e-10f), 0x8000);
  EXPECT_EQ(float_to_fp16(std::numeric_limits<float>::denorm_min()), 0x0000);
}

TEST(Half, Fp16NaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(fp16_is_nan(float_to_fp16(nan)));
  EXPECT_TRUE(fp16_is_nan(float_to_fp16(-nan)));
  // A float NaN whose payload lives only in the low 13 bits must not become infinity.
  EXPECT_TRUE(fp16_is_nan(float_to_fp16(bits_float(0x7f800001u))));
  EXPECT_TRUE(fp16_is_nan(float_to_fp16(bits_float(0xff800001u))));
  EXPECT_TRUE(std::isnan(fp16_to_float(0x7e00)));
  EXPECT_TRUE(std::isnan(fp16_to_float(0x7c01)));
}

TEST(Half, Bf16HandPickedRounding) {
  // In [1, 2) bf16 values are 2^-7 apart.
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);      // tie: 1 is even
  EXPECT_EQ(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -9)), 0x3f81);  // 0.75 ulp: up
  EXPECT_EQ(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie: 0x3f82 is even
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -9)), 0x3f80);      // 0.25 ulp: down
  EXPECT_EQ(bf16_to_float(0x3f81), 1.0f + std::ldexp(1.0f, -7));
  EXPECT_EQ(float_to_bf16(-1.0f), 0xbf80);
  EXPECT_EQ(float_to_bf16(-0.0f), 0x8000);
  // Values above the largest finite bf16 plus half an ulp round to infinity.
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(float_to_bf16(HUGE_VALF), 0x7f80);
  EXPECT_EQ(float_to_bf16(-HUGE_VALF), 0xff80);
  // bf16 shares float's exponent range: float subnormals map onto bf16 subnormals.
  EXPECT_EQ(float_to_bf16(std::ldexp(1.0f, -133)), 0x0001);
}

TEST(Half, Bf16NaN) {
  EXPECT_TRUE(bf16_is_nan(float_to_bf16(std::numeric_limits<float>::quiet_NaN())));
  // Payload only in the low 16 bits: truncation would give infinity, rounding would carry into the sign.
  EXPECT_TRUE(bf16_is_nan(float_to_bf16(bits_float(0x7f800001u))));
  EXPECT_TRUE(bf16_is_nan(float_to_bf16(bits_float(0x7fffffffu))));
  EXPECT_EQ(float_to_bf16(bits_float(0x7fffffffu)) & 0x8000u, 0u);
  EXPECT_TRUE(bf16_is_nan(float_to_bf16(bits_float(0xff800001u))));
  EXPECT_NE(float_to_bf16(bits_float(0xff800001u)) & 0x8000u, 0u);
}

}  // namespace
}  // namespace itertime

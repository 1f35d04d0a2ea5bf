// Tests of common/byte_size: the one size grammar (job files, the comm sweep, recipe text).
#include "common/byte_size.hpp"

#include <gtest/gtest.h>

#include <cstdint>

namespace itertime {
namespace {

TEST(ByteSize, ParsesSuffixesInEitherCaseAndATrailingB) {
  EXPECT_EQ(parse_byte_size("8"), 8);
  EXPECT_EQ(parse_byte_size("64K"), int64_t{64} << 10);
  EXPECT_EQ(parse_byte_size("64k"), int64_t{64} << 10);
  EXPECT_EQ(parse_byte_size("25MB"), int64_t{25} << 20);
  EXPECT_EQ(parse_byte_size("3g"), int64_t{3} << 30);
  EXPECT_EQ(parse_byte_size("0"), 0);
}

TEST(ByteSize, RefusesWhatIsNotASizeOrOverflows) {
  for (const char* bad : {"", "K", "B", "-1", "1.5M", "4X", "4 M", "M4", "99999999999999999999"}) {
    EXPECT_FALSE(parse_byte_size(bad).has_value()) << bad;
  }
  EXPECT_FALSE(parse_byte_size("9000000000G").has_value());              // 9e9 GiB exceeds int64
  EXPECT_EQ(parse_byte_size("8589934591G"), int64_t{8589934591} << 30);  // the largest that fits
  EXPECT_EQ(parse_byte_size("999999999999"), int64_t{999999999999});     // 12 digits
  EXPECT_FALSE(parse_byte_size("9999999999999").has_value());            // 13
}

TEST(ByteSize, FormatsExactMultiplesAndRoundTrips) {
  EXPECT_EQ(format_byte_size(8), "8");
  EXPECT_EQ(format_byte_size(1024), "1K");
  EXPECT_EQ(format_byte_size(int64_t{25} << 20), "25M");
  EXPECT_EQ(format_byte_size((int64_t{1} << 30) + 1024), "1048577K");
  EXPECT_EQ(format_byte_size(1000), "1000");
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{1023}, int64_t{4096}, int64_t{3} << 30, int64_t{1} << 40}) {
    EXPECT_EQ(parse_byte_size(format_byte_size(n)), n) << n;
  }
}

}  // namespace
}  // namespace itertime

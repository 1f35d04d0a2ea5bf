// test_duration_text.cpp: validate/duration_text (issue 33): durations and sizes in the unit a person reads.
#include <gtest/gtest.h>

#include "validate/duration_text.hpp"

namespace itertime::validate {
namespace {

TEST(DurationText, EachUnitWhereItReads) {
  EXPECT_EQ(duration_text(0.0), "0.0 \u00b5s");
  EXPECT_EQ(duration_text(512.34), "512.3 \u00b5s");
  EXPECT_EQ(duration_text(67800.0), "67.8 ms");
  EXPECT_EQ(duration_text(20356457.2), "20.36 s");
  EXPECT_EQ(duration_text(37264233512.8), "10.35 h");
}

TEST(DurationText, TheUnitIsChosenAfterRounding) {
  EXPECT_EQ(duration_text(999.94), "999.9 \u00b5s");
  EXPECT_EQ(duration_text(999.96), "1.0 ms");
  EXPECT_EQ(duration_text(999960.0), "1.00 s");
  EXPECT_EQ(duration_text(3599996000.0), "1.00 h");
}

TEST(DurationText, NegativeKeepsItsSignButNeverMinusZero) {
  EXPECT_EQ(duration_text(-2400.0), "-2.4 ms");
  EXPECT_EQ(duration_text(-1e-9), "0.0 \u00b5s");
}

TEST(BytesText, KibMibGib) {
  EXPECT_EQ(bytes_text(512), "0.50 KiB");
  EXPECT_EQ(bytes_text(int64_t{12800} * 1024), "12.50 MiB");
  EXPECT_EQ(bytes_text(int64_t{85093} * 1024 * 1024), "83.10 GiB");
  EXPECT_EQ(bytes_text(int64_t{1024} * 1024 * 1024 - 1), "1.00 GiB");
}

TEST(RightAligned, CountsWhatATerminalShowsNotBytes) {
  EXPECT_EQ(right_aligned("512.3 \u00b5s", 10), "  512.3 \u00b5s");  // 8 characters, 9 bytes
  EXPECT_EQ(right_aligned("10.44 s", 10), "   10.44 s");
  EXPECT_EQ(right_aligned("too long for it", 4), "too long for it");
}

}  // namespace
}  // namespace itertime::validate

// test_enum_names.cpp: common/enum_names.hpp: a value's name, a name's value, the listed names and the
// one-to-one check, on a small table written here (each real table is asserted one-to-one where it is
// defined, and round-trips in its own vocabulary test).
#include "common/enum_names.hpp"

#include <gtest/gtest.h>

namespace itertime {
namespace {

enum class Colour { kRed, kGreen, kBlue, kUnnamed };

constexpr EnumName<Colour> kColours[] = {{Colour::kRed, "red"}, {Colour::kGreen, "green"}, {Colour::kBlue, "blue"}};
static_assert(enum_names_one_to_one(kColours));

constexpr EnumName<Colour> kValueTwice[] = {{Colour::kRed, "red"}, {Colour::kRed, "crimson"}};
constexpr EnumName<Colour> kNameTwice[] = {{Colour::kRed, "red"}, {Colour::kGreen, "red"}};
static_assert(!enum_names_one_to_one(kValueTwice));
static_assert(!enum_names_one_to_one(kNameTwice));

TEST(EnumNames, NameOfEachValueAndValueOfEachName) {
  for (const EnumName<Colour>& entry : kColours) {
    EXPECT_EQ(name_of(kColours, entry.value, "colour"), entry.name);
    ASSERT_TRUE(value_named(kColours, entry.name).has_value());
    EXPECT_EQ(*value_named(kColours, entry.name), entry.value);
  }
  EXPECT_EQ(values_in(kColours), (std::vector<Colour>{Colour::kRed, Colour::kGreen, Colour::kBlue}));
}

TEST(EnumNames, ANameIsExactAndAMissingValueIsAnInternalError) {
  EXPECT_FALSE(value_named(kColours, "Red").has_value());
  EXPECT_FALSE(value_named(kColours, "red ").has_value());
  EXPECT_FALSE(value_named(kColours, "").has_value());
  try {
    name_of(kColours, Colour::kUnnamed, "colour");
    FAIL() << "a value the table lacks was named";
  } catch (const InternalError& error) {
    EXPECT_NE(std::string(error.what()).find("unknown colour"), std::string::npos) << error.what();
  }
}

TEST(EnumNames, NamesListedInTableOrder) {
  EXPECT_EQ(names_listed(kColours), "red, green, blue");
  EXPECT_EQ(names_listed(kColours, " or "), "red, green or blue");
  constexpr EnumName<Colour> one[] = {{Colour::kRed, "red"}};
  EXPECT_EQ(names_listed(one, " or "), "red");
  constexpr EnumName<Colour> two[] = {{Colour::kRed, "red"}, {Colour::kBlue, "blue"}};
  EXPECT_EQ(names_listed(two, " or "), "red or blue");
}

}  // namespace
}  // namespace itertime

// enum_names.hpp: an enumeration's names as one table, from which its to_string, its parser and the
// list its refusal names are all read (instead of a switch, a parse and a hand-written list that can
// drift apart). Header-only.
// Invariants: a table lists each value once and each name once (enum_names_one_to_one, asserted at
// compile time beside each table); name_of a value the table lacks is an InternalError and parse_named a name it lacks a
// UserError listing its names (a table that missed a new enumerator fails loudly, never prints a wrong name); value_named is
// exact (case and spelling) and returns nothing for a name the table lacks; names_listed keeps the table's order.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/errors.hpp"

namespace itertime {

template <class Enum>
struct EnumName {
  Enum value;
  std::string_view name;
};

// The name of `value` in `table`; InternalError "unknown <what>" when the table lacks it.
template <class Enum, std::size_t N>
std::string name_of(const EnumName<Enum> (&table)[N], Enum value, const char* what) {
  for (const EnumName<Enum>& entry : table) {
    if (entry.value == value) return std::string(entry.name);
  }
  throw InternalError(std::string("unknown ") + what, __FILE__, __LINE__);
}

// The value named `text` in `table`, or nothing.
template <class Enum, std::size_t N>
std::optional<Enum> value_named(const EnumName<Enum> (&table)[N], std::string_view text) {
  for (const EnumName<Enum>& entry : table) {
    if (entry.name == text) return entry.value;
  }
  return std::nullopt;
}

// The values in table order.
template <class Enum, std::size_t N>
std::vector<Enum> values_in(const EnumName<Enum> (&table)[N]) {
  std::vector<Enum> values;
  for (const EnumName<Enum>& entry : table) values.push_back(entry.value);
  return values;
}

// The names in table order, "a, b, c"; with `last_separator` (e.g. " or ") before the last one.
template <class Enum, std::size_t N>
std::string names_listed(const EnumName<Enum> (&table)[N], std::string_view last_separator = ", ") {
  std::string out;
  for (std::size_t i = 0; i < N; ++i) {
    if (i > 0) out += (i + 1 == N) ? last_separator : std::string_view(", ");
    out += table[i].name;
  }
  return out;
}

// The value named `text`; else UserError "unknown <what> '<text>': use a, b or c" (the table's names).
template <class Enum, std::size_t N>
Enum parse_named(const EnumName<Enum> (&table)[N], std::string_view text, std::string_view what) {
  if (const std::optional<Enum> value = value_named(table, text)) return *value;
  throw UserError("unknown " + std::string(what) + " '" + std::string(text) + "': use " + names_listed(table, " or "));
}

// Whether no value and no name stands twice in `table`.
template <class Enum, std::size_t N>
constexpr bool enum_names_one_to_one(const EnumName<Enum> (&table)[N]) {
  for (std::size_t i = 0; i < N; ++i) {
    for (std::size_t j = i + 1; j < N; ++j) {
      if (table[i].value == table[j].value || table[i].name == table[j].name) return false;
    }
  }
  return true;
}

}  // namespace itertime

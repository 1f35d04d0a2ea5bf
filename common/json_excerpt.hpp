// json_excerpt.hpp: a JSON value as an error message quotes it: scalars as JSON text (strings cut to 80
// characters), arrays and objects only by kind and size.
// Invariants: never recurses into a value (a value nested a hundred thousand levels deep would overflow
// the stack in nlohmann's dump()); header-only; the text has no line break a string did not carry.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace itertime {

inline std::string json_excerpt(const nlohmann::json& value) {
  if (value.is_array()) return "an array of " + std::to_string(value.size()) + " items";
  if (value.is_object()) return "an object of " + std::to_string(value.size()) + " fields";
  if (value.is_string()) {
    const std::string& text = value.get_ref<const std::string&>();
    if (text.size() > 80) return nlohmann::json(text.substr(0, 80)).dump() + "...";
  }
  return value.dump();
}

}  // namespace itertime

// user_error.hpp: the message of the UserError an action throws, for the tests of refusals.
// Invariants: an action that throws no UserError fails the calling test (and yields "(no UserError)");
// any other exception goes through to the test.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "common/errors.hpp"

namespace itertime::testing {

template <typename Action>
std::string user_error_of(Action&& action) {
  try {
    action();
  } catch (const UserError& error) {
    return error.what();
  }
  ADD_FAILURE() << "expected a UserError";
  return "(no UserError)";
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace itertime::testing

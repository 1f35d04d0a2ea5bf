// fuzz_common.hpp: what every fuzz test shares: reading seed files, classifying one input's outcome,
// printing the tally and the failing inputs (escaped, with the index that reproduces them).
// Invariants: an input's outcome is accepted, a UserError with a message, or a failure (any other
// exception, json's out_of_range for 1e999 included, and an empty UserError). Nothing is excluded. A
// UserError's text may carry a line break the input held: the one-line rule is the command's (main.cpp
// prints line breaks escaped), checked where the binary runs (Fuzz.Cli, FixedBugs.CliErrorIsOneLine);
// parse_recipe_text, whose text is one line by itself, is held to it in Fuzz.SizeAndNameGrammar.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <typeinfo>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/errors.hpp"
#include "fuzz_runner.hpp"
#include "mutator.hpp"

namespace itertime::fuzz {

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Contents of the files with extension `ext` directly in `dir`, sorted by name.
inline std::vector<std::pair<std::string, std::string>> files_in(const std::filesystem::path& dir, const std::string& ext) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().extension() == ext)
      out.emplace_back(entry.path().filename().string(), read_file(entry.path()));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The outcome of one call of `body`: accepted, UserError, or a failure naming the exception.
inline Verdict classify(const std::function<void()>& body) {
  try {
    body();
    return {Result::kAccepted, ""};
  } catch (const UserError& error) {
    const std::string message = error.what();
    if (message.empty()) return {Result::kOther, "empty UserError message"};
    return {Result::kUserError, ""};
  } catch (const std::exception& error) {
    return {Result::kOther, std::string("exception ") + typeid(error).name() + ": " + error.what()};
  } catch (...) {
    return {Result::kOther, "a non-std exception"};
  }
}

// Prints the tally (and each failing input via `input_of`) and fails the test on crashes, hangs and
// other exceptions.
inline void report(const std::string& target, const Tally& tally, const std::function<std::string(int64_t)>& input_of) {
  std::printf(
      "[fuzz] %s: %lld inputs in %.1f s (%.0f/s): accepted %lld, UserError %lld, other %lld, "
      "crash %lld, hang %lld; slowest input #%lld: %.3f s (seed %llu; #-1: not timed)\n",
      target.c_str(), static_cast<long long>(tally.inputs), tally.seconds,
      tally.seconds > 0 ? static_cast<double>(tally.inputs) / tally.seconds : 0.0, static_cast<long long>(tally.accepted),
      static_cast<long long>(tally.user_error), static_cast<long long>(tally.other), static_cast<long long>(tally.crash),
      static_cast<long long>(tally.hang), static_cast<long long>(tally.slowest_index), tally.slowest_seconds,
      static_cast<unsigned long long>(fuzz_seed()));
  // ITERTIME_FUZZ_DUMP=FOLDER: every failing input reported is also written there whole.
  const char* dump_dir = std::getenv("ITERTIME_FUZZ_DUMP");
  if (dump_dir != nullptr && *dump_dir != '\0') {
    for (const Failure& f : tally.failures) {
      std::ofstream out(std::filesystem::path(dump_dir) / (target + "-" + std::to_string(f.index) + ".input"), std::ios::binary);
      out << input_of(f.index);
    }
  }
  for (const Failure& f : tally.failures) {
    ADD_FAILURE() << target << ": " << f.kind << " on input #" << f.index << ": " << escaped(f.message, 600) << "\n    input: \""
                  << escaped(input_of(f.index), 700) << "\"\n    reproduce: ITERTIME_FUZZ_SEED=" << fuzz_seed()
                  << " ITERTIME_FUZZ_FIRST=" << f.index << " ITERTIME_FUZZ_INPUTS=1";
  }
  std::fflush(stdout);
  EXPECT_EQ(tally.accepted + tally.user_error + tally.other + tally.crash + tally.hang, tally.inputs);
}

// True when `dir` holds nothing (the worker's working folder after a run).
inline bool empty_dir(const std::filesystem::path& dir) {
  return std::filesystem::directory_iterator(dir) == std::filesystem::directory_iterator();
}

}  // namespace itertime::fuzz

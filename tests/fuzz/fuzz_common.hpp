// fuzz_common.hpp: what every fuzz test shares: reading seed files, classifying one input's outcome,
// printing the tally and the failing inputs (escaped, with the index that reproduces them).
// Invariants: an input's outcome is accepted, a one-line UserError, or a failure (any other exception);
// a UserError whose message spans several lines breaks "one `itertime: error:` line" and is counted as
// excluded (a known bug class, reported with its input) rather than silently accepted.
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
    if (entry.is_regular_file() && entry.path().extension() == ext) out.emplace_back(entry.path().filename().string(), read_file(entry.path()));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Thrown by a target's check for an input of a known bug class (reported): counted as excluded.
class KnownBug : public std::runtime_error {
 public:
  explicit KnownBug(const std::string& message) : std::runtime_error(message) {}
};

// The outcome of one call of `body`: accepted, UserError (one line), or a failure naming the exception.
inline Verdict classify(const std::function<void()>& body) {
  try {
    body();
    return {Result::kAccepted, ""};
  } catch (const UserError& error) {
    const std::string message = error.what();
    // Known bug class (reported): messages echo input text verbatim, so a newline in a key or value
    // makes the one-line error several lines.
    if (message.find('\n') != std::string::npos) return {Result::kExcluded, "multi-line UserError: " + message};
    if (message.empty()) return {Result::kOther, "empty UserError message"};
    return {Result::kUserError, ""};
  } catch (const KnownBug& error) {
    return {Result::kExcluded, error.what()};
  } catch (const nlohmann::json::out_of_range& error) {
    // Known bug class (reported): json::parse throws out_of_range 406 for a number beyond double
    // ("1e999"); parse_job, parse_llama_config and parse_hardware_spec catch only parse_error, so the
    // command ends in "internal error", status 1.
    if (error.id == 406) return {Result::kExcluded, std::string("json out_of_range 406 escapes the parser: ") + error.what()};
    return {Result::kOther, std::string("exception nlohmann::json::out_of_range: ") + error.what()};
  } catch (const std::exception& error) {
    return {Result::kOther, std::string("exception ") + typeid(error).name() + ": " + error.what()};
  } catch (...) {
    return {Result::kOther, "a non-std exception"};
  }
}

// Prints the tally (and each failing input via `input_of`) and fails the test on crashes, hangs and
// other exceptions.
inline void report(const std::string& target, const Tally& tally, const std::function<std::string(int64_t)>& input_of) {
  std::printf("[fuzz] %s: %lld inputs in %.1f s (%.0f/s): accepted %lld, UserError %lld, excluded %lld, other %lld, "
              "crash %lld, hang %lld; slowest input #%lld: %.3f s (seed %llu; #-1: not timed)\n",
              target.c_str(), static_cast<long long>(tally.inputs), tally.seconds,
              tally.seconds > 0 ? static_cast<double>(tally.inputs) / tally.seconds : 0.0,
              static_cast<long long>(tally.accepted), static_cast<long long>(tally.user_error),
              static_cast<long long>(tally.excluded), static_cast<long long>(tally.other),
              static_cast<long long>(tally.crash), static_cast<long long>(tally.hang),
              static_cast<long long>(tally.slowest_index), tally.slowest_seconds,
              static_cast<unsigned long long>(fuzz_seed()));
  for (const Failure& f : tally.excluded_examples) {
    std::printf("[fuzz] %s: excluded (known bug class) input #%lld: %s\n    input: \"%s\"\n", target.c_str(),
                static_cast<long long>(f.index), escaped(f.message, 300).c_str(), escaped(input_of(f.index), 600).c_str());
  }
  // ITERTIME_FUZZ_DUMP=FOLDER: every failing or excluded input reported is also written there whole.
  const char* dump_dir = std::getenv("ITERTIME_FUZZ_DUMP");
  if (dump_dir != nullptr && *dump_dir != '\0') {
    for (const auto* list : {&tally.failures, &tally.excluded_examples}) {
      for (const Failure& f : *list) {
        std::ofstream out(std::filesystem::path(dump_dir) / (target + "-" + std::to_string(f.index) + ".input"), std::ios::binary);
        out << input_of(f.index);
      }
    }
  }
  for (const Failure& f : tally.failures) {
    ADD_FAILURE() << target << ": " << f.kind << " on input #" << f.index << ": " << escaped(f.message, 600)
                  << "\n    input: \"" << escaped(input_of(f.index), 700) << "\"\n    reproduce: ITERTIME_FUZZ_SEED="
                  << fuzz_seed() << " ITERTIME_FUZZ_FIRST=" << f.index << " ITERTIME_FUZZ_INPUTS=1";
  }
  std::fflush(stdout);
  EXPECT_EQ(tally.accepted + tally.user_error + tally.excluded + tally.other + tally.crash + tally.hang, tally.inputs);
}

// True when `dir` holds nothing (the worker's working folder after a run).
inline bool empty_dir(const std::filesystem::path& dir) {
  return std::filesystem::directory_iterator(dir) == std::filesystem::directory_iterator();
}

}  // namespace itertime::fuzz

// Unit tests of the parser bugs the fuzzers found (tests/fuzz, issue 19) and that were fixed, one test
// per bug class, so that a regression fails here by name and not only as a fuzz input: a JSON value
// nested 100,000 deep (the error message's dump() recursed: a stack overflow) in the model-config, job
// and hardware parsers; a number beyond double (1e999: json's out_of_range escaped as an internal error);
// sweep world sizes, cp and vp above 2^20 (truncated to int and factorized for minutes); hardware
// figures that overflow once converted to base units (an infinite peak, bytes past int64); a recipe
// text holding a line break (a message of several lines). Each is a UserError of one line naming the
// input. The command's own one-line rule (main.cpp) is tested where the binary runs
// (tests/fuzz: FixedBugs.CliErrorIsOneLine).
// Invariants: reads data/models and data/hardware under ITERTIME_SOURCE_DIR; writes only into a TempDir.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>
#include <string>

#include "common/errors.hpp"
#include "common/hardware_spec.hpp"
#include "common/job.hpp"
#include "common/model_spec.hpp"
#include "common/training_techniques.hpp"
#include "temp_dir.hpp"
#include "user_error.hpp"

namespace itertime {
namespace {

const std::string kSource = ITERTIME_SOURCE_DIR;
const std::string kModelPath = kSource + "/data/models/tiny-llama.json";

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

using itertime::testing::user_error_of;  // fails the test when the input is accepted or something else is thrown

void expect_one_line(const std::string& message) {
  EXPECT_FALSE(message.empty());
  EXPECT_EQ(message.find_first_of("\n\r"), std::string::npos) << message;
  EXPECT_LT(message.size(), 1000u) << "a message should quote, not copy, a huge input";
}

const std::string kDeep = std::string(100000, '[') + "1" + std::string(100000, ']');

// The H100 description with one figure's value replaced by the raw JSON text `raw` (key "" for a
// top-level figure such as memory_capacity).
std::string h100_with(const std::string& section, const std::string& key, const std::string& raw) {
  nlohmann::json doc = nlohmann::json::parse(read_text(kSource + "/data/hardware/h100-sxm.json"));
  (key.empty() ? doc[section] : doc[section][key])["value"] = "RAW";
  std::string text = doc.dump();
  text.replace(text.find("\"RAW\""), 5, raw);
  return text;
}

std::string sweep_job(const std::string& field, const std::string& value) {
  std::string sweep =
      "\"world_sizes\": [2], \"precisions\": [\"fp32\"], \"micro_batch\": 1, \"global_batch\": 4, \"seq_len\": 32";
  if (field == "world_sizes")
    sweep =
        "\"world_sizes\": [" + value + "], \"precisions\": [\"fp32\"], \"micro_batch\": 1, \"global_batch\": 4, \"seq_len\": 32";
  else
    sweep += ", \"" + field + "\": [" + value + "]";
  return "{\"model\": \"" + kModelPath + "\", \"sweep\": {" + sweep + "}}";
}

TEST(ParserFixes, DeepNestingIsAOneLineUserError) {
  testing::TempDir folder;
  std::string message = user_error_of([&] { parse_llama_config("{\"hidden_size\": " + kDeep + "}", "deep.json"); });
  expect_one_line(message);
  EXPECT_NE(message.find("hidden_size"), std::string::npos) << message;
  EXPECT_NE(message.find("an array of 1 items"), std::string::npos) << message;

  message =
      user_error_of([&] { parse_job("{\"model\": \"" + kModelPath + "\", \"seed\": " + kDeep + "}", folder.file("job.json")); });
  expect_one_line(message);
  EXPECT_NE(message.find("seed"), std::string::npos) << message;

  nlohmann::json doc = nlohmann::json::parse(read_text(kSource + "/data/hardware/h100-sxm.json"));
  doc["peak_flops_dense"]["fp32"] = "DEEP";
  std::string text = doc.dump();
  text.replace(text.find("\"DEEP\""), 6, kDeep);
  message = user_error_of([&] { parse_hardware_spec(text, "deep"); });
  expect_one_line(message);
  EXPECT_NE(message.find("peak_flops_dense.fp32"), std::string::npos) << message;
  message = user_error_of([&] { parse_hardware_spec(h100_with("peak_flops_dense", "fp32", kDeep), "deep"); });
  expect_one_line(message);
}

TEST(ParserFixes, NumberBeyondDoubleIsAUserError) {
  testing::TempDir folder;
  const std::string model = read_text(kModelPath);
  for (const std::string number : {"1e999", "-1e999"}) {
    std::string message = user_error_of(
        [&] { parse_llama_config(model.substr(0, model.rfind('}')) + ", \"rope_theta\": " + number + "}", "m.json"); });
    expect_one_line(message);
    EXPECT_NE(message.find("m.json: not valid JSON"), std::string::npos) << message;

    message = user_error_of(
        [&] { parse_job("{\"model\": \"" + kModelPath + "\", \"seed\": " + number + "}", folder.file("job.json")); });
    expect_one_line(message);
    EXPECT_NE(message.find("not valid JSON"), std::string::npos) << message;

    message = user_error_of([&] { parse_hardware_spec(h100_with("peak_flops_dense", "fp32", number), "hw"); });
    expect_one_line(message);
    EXPECT_NE(message.find("hw: not valid JSON"), std::string::npos) << message;
  }
}

TEST(ParserFixes, SweepWorldSizeAbove2To20IsRefused) {
  testing::TempDir folder;
  // 2^20 + 1 and 2^31 - 1 were factorized for minutes; 2^32 + 1 was truncated to 1 by get<int>().
  for (const std::string world : {"1048577", "2147483647", "4294967297", "44294967296", "18446744073709551615"}) {
    const std::string message = user_error_of([&] { parse_job(sweep_job("world_sizes", world), folder.file("job.json")); });
    expect_one_line(message);
    EXPECT_NE(message.find("world sizes must be integers from 1 to 1048576"), std::string::npos) << world << ": " << message;
  }
  for (const std::string field : {"cp", "vp"}) {
    for (const std::string degree : {"1048577", "4294967297"}) {
      const std::string message = user_error_of([&] { parse_job(sweep_job(field, degree), folder.file("job.json")); });
      expect_one_line(message);
      EXPECT_NE(message.find("'" + field + "' must be a non-empty array of positive integers"), std::string::npos)
          << field << " " << degree << ": " << message;
    }
  }
  // The bound itself is no error of its own: 2 ranks still expand.
  EXPECT_FALSE(parse_job(sweep_job("world_sizes", "2"), folder.file("job.json")).configs.empty());
}

TEST(ParserFixes, HardwareFigureOverflowingItsUnitIsRefused) {
  // 6.7e301 is finite, but times 1e12 (TFLOP/s) it is infinite.
  std::string message = user_error_of([&] { parse_hardware_spec(h100_with("peak_flops_dense", "fp32", "6.7e301"), "hw"); });
  expect_one_line(message);
  EXPECT_NE(message.find("'peak_flops_dense.fp32.value': is out of range once converted from TFLOP/s"), std::string::npos)
      << message;
  message = user_error_of([&] { parse_hardware_spec(h100_with("memory_bandwidth", "", "1e300"), "hw"); });
  expect_one_line(message);
  EXPECT_NE(message.find("'memory_bandwidth.value': is out of range once converted from TB/s"), std::string::npos) << message;
  // 1e13 MiB (the shipped H100 unit) is 1.05e19 bytes: finite as a double, past int64 as bytes.
  message = user_error_of([&] { parse_hardware_spec(h100_with("memory_capacity", "", "1e13"), "hw"); });
  expect_one_line(message);
  EXPECT_NE(message.find("'memory_capacity.value': is implausibly large"), std::string::npos) << message;
  // The shipped figure still loads.
  EXPECT_GT(parse_hardware_spec(h100_with("memory_capacity", "", "81559"), "hw").memory_bytes, 0);
}

TEST(ParserFixes, RecipeWithLineBreakIsOneLine) {
  std::string message = user_error_of([] { parse_recipe_text("sp\nvp"); });
  expect_one_line(message);
  EXPECT_NE(message.find("training recipe 'sp\\nvp': unknown token 'sp\\nvp'"), std::string::npos) << message;
  message = user_error_of([] { parse_recipe_text("dopt+ovl\r"); });
  expect_one_line(message);
  EXPECT_NE(message.find("'dopt+ovl\\r'"), std::string::npos) << message;
  message = user_error_of([] { parse_recipe_text(std::string("sp+\x01", 4)); });
  expect_one_line(message);
  EXPECT_NE(message.find("unknown token '\\x01'"), std::string::npos) << message;
  message = user_error_of([] { parse_recipe_text("ovl-4\nM"); });
  expect_one_line(message);
  EXPECT_NE(message.find("'ovl-4\\nM' is not a bucket size"), std::string::npos) << message;
  // Canonical texts are untouched.
  EXPECT_EQ(recipe_text(parse_recipe_text("sp+dopt+ovl")), "sp+dopt+ovl");
}

}  // namespace
}  // namespace itertime

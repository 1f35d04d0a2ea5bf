// fuzz_parsers.cpp: mutational fuzzing of itertime's text parsers, in memory: job files (parse_job),
// LLaMA configs (parse_llama_config), hardware descriptions (parse_hardware_spec) and the size/sweep
// grammar (byte sizes, recipe texts, precision, attention, dtype, collective, comm-kind, phase ... names).
// Invariants checked for every input (ITERTIME_FUZZ_INPUTS, default 100,000 per target): the parser
// returns or throws a UserError (the recipe parser's on one line); any other exception, a crash or a hang
// (> 3 s) fails the test and prints the input, whatever bug class it belongs to (none is excluded);
// accepted results keep the parsers' documented invariants (positive sizes, finite figures in base
// units, round trips of the canonical texts); the worker's working folder stays empty and the seed files
// (models the jobs load) are unchanged. KnownBugProbes pins one input of each bug class fixed since.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <typeinfo>
#include <filesystem>
#include <string>
#include <vector>

#include "common/attention.hpp"
#include "common/byte_size.hpp"
#include "common/calibration_records.hpp"
#include "common/collective.hpp"
#include "common/cpu_load.hpp"
#include "common/dtype.hpp"
#include "common/dtype_list.hpp"
#include "common/errors.hpp"
#include "common/hardware_spec.hpp"
#include "common/job.hpp"
#include "common/model_spec.hpp"
#include "common/phase.hpp"
#include "common/precision.hpp"
#include "common/training_techniques.hpp"
#include "formats/log_import.hpp"
#include "formats/log_timings.hpp"
#include "formats/megatron_args.hpp"
#include "formats/megatron_log.hpp"
#include "formats/nemo_config.hpp"
#include "formats/nemo_log.hpp"
#include "formats/torchtitan_log.hpp"
#include "formats/torchtitan_toml.hpp"
#include "fuzz_common.hpp"
#include "tests/unit/temp_dir.hpp"

namespace itertime::fuzz {
namespace {

namespace fs = std::filesystem;
const fs::path kSource = ITERTIME_SOURCE_DIR;
constexpr int64_t kDefaultInputs = 100000;
constexpr double kHangLimitS = 3.0;

std::vector<std::string> texts_of(const std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<std::string> out;
  for (const auto& [name, text] : files) out.push_back(text);
  return out;
}

// Runs a text target: `seeds` mutated (JSON-aware when `json`), each input given to `parse`.
void fuzz_text_target(const std::string& target, const std::vector<std::string>& seeds, bool json,
                      const std::function<void(const std::string&)>& parse, int64_t default_inputs = kDefaultInputs) {
  ASSERT_FALSE(seeds.empty());
  testing::TempDir work;
  const uint64_t seed = fuzz_seed();
  auto input_of = [&](int64_t index) {
    Rng rng = input_rng(seed, target, static_cast<uint64_t>(index));
    return mutate(rng, seeds, json);
  };
  const Tally tally =
      run_isolated(fuzz_first(), fuzz_inputs(default_inputs), kHangLimitS, work.path().string(), [&](int64_t index) {
        const std::string input = input_of(index);
        return classify([&] { parse(input); });
      });
  report(target, tally, input_of);
  EXPECT_TRUE(empty_dir(work.path())) << target << ": the parser created files in its working folder";
  EXPECT_EQ(tally.failed(), 0);
}

// Job files whose model resolves: the seed models copied where the shipped jobs point (../data/models).
TEST(Fuzz, JobFile) {
  testing::TempDir folder;
  fs::create_directories(folder.path() / "jobs");
  fs::create_directories(folder.path() / "data" / "models");
  const auto models = files_in(kSource / "data" / "models", ".json");
  for (const auto& [name, text] : models) folder.write("data/models/" + name, text);
  std::vector<std::string> seeds = texts_of(files_in(kSource / "jobs", ".json"));
  for (const auto& text : texts_of(files_in(kSource / "jobs" / "slurm", ".json"))) seeds.push_back(text);
  const std::string job_path = folder.file("jobs/job.json");  // never written: parse_job takes the text
  fuzz_text_target("job", seeds, true, [&](const std::string& text) {
    // Huge sweep world sizes (above 2^20, or truncated from above 2^31) are refused by parse_job; were
    // they not, factorizations() would run past the hang limit or a truncated size would be accepted
    // (tests/unit/test_parser_fixes.cpp pins both).
    const Job job = parse_job(text, job_path);
    if (job.configs.empty()) throw std::logic_error("an accepted job has no configuration");
    if (job.max_world_size() < 1) throw std::logic_error("an accepted job has a world size below 1");
  });
  for (const auto& [name, text] : models) {
    EXPECT_EQ(read_file(folder.path() / "data" / "models" / name), text) << "the job parser changed " << name;
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(folder.path() / "jobs"), fs::directory_iterator()), 0);
}

// The users' own formats (formats/, issue 34): each input read as a Megatron-LM arguments file, a NeMo /
// Megatron-Bridge YAML and a torchtitan TOML; each reader returns a UserRun whose model and layout keep
// their invariants, or refuses with one UserError line. Three readers per input: 20,000 inputs by default
// (about 4 s; ITERTIME_FUZZ_INPUTS sets it as for the others).
TEST(Fuzz, UserFormats) {
  std::vector<std::string> seeds;
  for (const char* ext : {".sh", ".yaml", ".toml"})
    for (const auto& text : texts_of(files_in(kSource / "tests" / "formats" / "fixtures", ext))) seeds.push_back(text);
  fuzz_text_target(
      "user-formats", seeds, false,
      [](const std::string& text) {
        const auto check = [](const formats::UserRun& run) {
          const LlamaSpec& m = run.model;
          if (m.num_layers < 1 || m.hidden_size < 1 || m.num_heads < 1 || m.num_kv_heads < 1 || m.vocab_size < 1 ||
              m.num_heads % m.num_kv_heads != 0 || m.hidden_size != m.num_heads * m.head_dim)
            throw std::logic_error("an accepted run breaks LlamaSpec's invariants");
          if (run.data_parallel_given && !run.config.violations(m, 0).empty())
            throw std::logic_error("an accepted run has an illegal layout");
        };
        const auto one_line = [](const UserError& e) {
          if (std::string(e.what()).find('\n') != std::string::npos) throw std::logic_error("a refusal of more than one line");
        };
        try {
          check(formats::user_run_from_megatron(formats::megatron_arguments_from_text(text, "fuzz.sh")));
        } catch (const UserError& e) {
          one_line(e);
        }
        try {
          check(formats::read_nemo_config_text(text, "fuzz.yaml"));
        } catch (const UserError& e) {
          one_line(e);
        }
        try {
          check(formats::read_torchtitan_toml_text(text, "fuzz.toml"));
        } catch (const UserError& e) {
          one_line(e);
        }
      },
      20000);
}

TEST(Fuzz, ModelConfig) {
  const std::vector<std::string> seeds = texts_of(files_in(kSource / "data" / "models", ".json"));
  fuzz_text_target("model-config", seeds, true, [](const std::string& text) {
    const LlamaSpec spec = parse_llama_config(text, "fuzz/config.json");
    if (spec.hidden_size < 1 || spec.intermediate_size < 1 || spec.num_layers < 1 || spec.num_heads < 1 ||
        spec.num_kv_heads < 1 || spec.head_dim < 1 || spec.vocab_size < 1 || spec.num_heads % spec.num_kv_heads != 0 ||
        !(spec.rms_norm_eps > 0) || !(spec.rope_theta > 0)) {
      throw std::logic_error("an accepted config breaks LlamaSpec's invariants");
    }
  });
}

TEST(Fuzz, HardwareSpec) {
  const auto files = files_in(kSource / "data" / "hardware", ".json");
  std::vector<std::string> seeds = texts_of(files);
  // The name must equal the source's stem: parse every input as the file of the first seed's name or
  // as a source without .json (the stem check then does not apply).
  const std::string source = "data/hardware/" + files.front().first;
  fuzz_text_target("hardware", seeds, true, [&](const std::string& text) {
    const std::string from = text.size() % 2 ? source : std::string("fuzz-input");
    const HardwareSpec spec = parse_hardware_spec(text, from);
    const auto fp32 = spec.peak(ComputeDType::kFp32);
    if (!fp32 || !(*fp32 > 0) || !std::isfinite(*fp32) || !(spec.memory_bandwidth_bytes_per_s > 0) ||
        !std::isfinite(spec.memory_bandwidth_bytes_per_s)) {
      throw std::logic_error("an accepted description lacks a positive, finite fp32 peak or memory bandwidth");
    }
    // Every figure once converted to base units is finite (a value times its unit overflowed before
    // the fix: 6.7e301 TFLOP/s was an infinite peak) and every size positive (no int64 overflow).
    for (const auto* peaks : {&spec.peak_flops_per_s, &spec.peak_flops_per_s_per_core}) {
      for (const auto& [dtype, value] : *peaks) {
        if (!std::isfinite(value) || !(value > 0)) throw std::logic_error("an accepted peak is not finite and positive");
      }
    }
    for (const std::optional<double> value : {spec.nvlink_bandwidth_bytes_per_s, spec.nic_bandwidth_bytes_per_s}) {
      if (value && (!std::isfinite(*value) || !(*value > 0)))
        throw std::logic_error("an accepted bandwidth is not finite and positive");
    }
    if (spec.memory_bytes < 0 || spec.l2_bytes.value_or(0) < 0) throw std::logic_error("an accepted size is negative");
  });
}

// The size/sweep grammar: every short-text parser gets every input.
TEST(Fuzz, SizeAndNameGrammar) {
  std::vector<std::string> seeds = {
      "8",        "1K",    "64K",  "16M",       "1G",     "256KB",   "4mb", "999999999999", "999999999999G",
      "0",        "sp",    "vp",   "dopt",      "rc-sel", "rc-full", "ovl", "ovl-4M",       "sp+vp+dopt+rc-full+ovl-64K",
      "dopt+ovl", "plain", "none", "selective", "full"};
  for (const std::string name : {"fp32",
                                 "tf32",
                                 "bf16",
                                 "fp16",
                                 "amp-bf16",
                                 "amp-fp16",
                                 "eager",
                                 "sdpa",
                                 "auto",
                                 "cpu",
                                 "cuda",
                                 "float16",
                                 "float32",
                                 "bfloat16",
                                 "fp32,fp32,bf16",
                                 "all_reduce",
                                 "all_gather",
                                 "reduce_scatter",
                                 "sendrecv",
                                 "consecutive",
                                 "strided",
                                 "latency",
                                 "pipelined",
                                 "tp_all_reduce",
                                 "pp_send_backward",
                                 "dp_reduce_scatter",
                                 "forward",
                                 "backward",
                                 "optimizer",
                                 "dp_buffer",
                                 "sp_grads",
                                 "ok",
                                 "skipped",
                                 "failed",
                                 "oom",
                                 "fp8"}) {
    seeds.push_back(name);
  }
  seeds.push_back("cpu  10 0 20 30 40 50 60 70 0 0\ncpu0 5 0 10 15 20 25 30 35 0 0\nintr 1\n");
  auto parse_all = [](const std::string& text) {
    int refused = 0, attempts = 0;
    auto attempt = [&](const std::function<void()>& body) {
      ++attempts;
      try {
        body();
      } catch (const UserError&) {
        ++refused;
      }
    };
    const auto bytes = parse_byte_size(text);
    if (bytes && (*bytes < 0 || parse_byte_size(format_byte_size(*bytes)) != bytes)) {
      throw std::logic_error("parse_byte_size: no round trip through format_byte_size");
    }
    attempt([&] {
      try {
        const TrainingTechniques t = parse_recipe_text(text);
        // Any order of the tokens is accepted (issue 33); what it accepts must be the canonical text's
        // techniques, with as many tokens.
        const std::string canonical = recipe_text(t);
        if (parse_recipe_text(canonical) != t ||
            std::count(canonical.begin(), canonical.end(), '+') != std::count(text.begin(), text.end(), '+')) {
          throw std::logic_error("parse_recipe_text accepted a text that is not an order of the canonical one");
        }
      } catch (const UserError& error) {
        // The recipe parser quotes its input with line breaks escaped: its message is one line itself.
        if (std::string(error.what()).find_first_of("\n\r") != std::string::npos) {
          throw std::logic_error(std::string("parse_recipe_text: a message of several lines: ") + error.what());
        }
        throw;
      }
    });
    attempt([&] {
      const PrecisionPolicy& p = parse_precision(text);
      if (parse_precision(to_string(p.name)).name != p.name) throw std::logic_error("parse_precision: no round trip");
    });
    attempt([&] { parse_attention(text); });
    attempt([&] { parse_recompute(text); });
    attempt([&] { parse_dtype(text); });
    attempt([&] { parse_backend(text); });
    attempt([&] {
      const DTypeList list = parse_dtype_list(text);
      if (parse_dtype_list(to_string(list)) != list) throw std::logic_error("parse_dtype_list: no round trip");
    });
    attempt([&] { parse_collective(text); });
    attempt([&] { parse_group_layout(text); });
    attempt([&] { parse_timing_mode(text); });
    attempt([&] { parse_comm_kind(text); });
    attempt([&] { parse_phase(text); });
    attempt([&] { store::parse_run_status(text); });
    attempt([&] { parse_compute_dtype(text); });
    attempt([&] {
      const MachineCpuTimes times = parse_proc_stat(text, 100.0);
      if (times.available && (std::isnan(times.busy_s) || std::isnan(times.steal_s))) {
        throw std::logic_error("parse_proc_stat: NaN CPU times");
      }
    });
    if (refused == attempts - 1) throw UserError("refused by every name parser");  // counted as UserError
  };
  fuzz_text_target("grammar", seeds, false, parse_all);
}

// One input of each bug class the fuzzers found and that was fixed (commit 96fbbe4, and the recipe
// parser's line breaks since), each run once in a worker: each must end in a one-line UserError within
// the hang limit. Any other outcome (accepted, another exception, a message of several lines, a crash
// such as the stack overflow of a value nested 100,000 deep, a hang) fails the test and names the probe.
// Training logs (issue 34 part 2, `itertime import`): the fixtures of tests/data/logs mutated, each
// given to every reader (the format detected, as import does) and, when accepted, to the warm-up rule;
// a Megatron-LM log's arguments also to user_run_from_megatron. An accepted measurement has a finite,
// positive median inside [min, max] and a finite, non-negative floor.
TEST(Fuzz, TrainingLogs) {
  const std::vector<std::string> seeds = texts_of(files_in(kSource / "tests" / "data" / "logs", ".log"));
  fuzz_text_target("training-log", seeds, false, [](const std::string& text) {
    const formats::LogText log = formats::log_from_text("fuzz.log", text);
    std::vector<formats::LogInterval> intervals;
    switch (formats::detect_log_format(log)) {
      case formats::LogFormat::kMegatron: {
        const formats::MegatronLog parsed = formats::parse_megatron_log(log);
        intervals = parsed.intervals;
        try {
          formats::user_run_from_megatron(parsed.arguments);
        } catch (const UserError&) {
          // a mutated arguments block may well not describe a run
        }
        break;
      }
      case formats::LogFormat::kNemo: intervals = formats::parse_nemo_log(log); break;
      case formats::LogFormat::kTorchtitan:
        intervals = formats::torchtitan_intervals(formats::parse_torchtitan_log(log), 8 * 8192, 8);
        break;
      case formats::LogFormat::kAuto: throw std::logic_error("no format detected, yet no error");
    }
    const formats::LogMeasurement m = formats::settle("fuzz.log", intervals);
    if (!std::isfinite(m.time_us_median) || !(m.time_us_median > 0) || m.time_us_median < m.time_us_min ||
        m.time_us_median > m.time_us_max || !std::isfinite(m.spread_pct) || m.spread_pct < 0) {
      throw std::logic_error("an accepted log's measurement breaks its invariants");
    }
  });
}

TEST(Fuzz, KnownBugProbes) {
  testing::TempDir work;
  const std::string deep = std::string(100000, '[') + "1" + std::string(100000, ']');
  const std::string model = read_file(kSource / "data" / "models" / "tiny-llama.json");
  const std::string model_path = (kSource / "data" / "models" / "tiny-llama.json").string();
  const std::string hardware = read_file(kSource / "data" / "hardware" / "h100-sxm.json");
  // The H100 description with one member's value replaced by the raw text `raw`.
  auto hardware_with = [&](const std::string& section, const std::string& key, const std::string& raw) {
    nlohmann::json doc = nlohmann::json::parse(hardware);
    (key.empty() ? doc[section] : doc[section][key])["value"] = "RAW";
    std::string text = doc.dump();
    text.replace(text.find("\"RAW\""), 5, raw);
    return text;
  };
  auto sweep_job = [&](const std::string& world) {
    return "{\"model\": \"" + model_path + "\", \"sweep\": {\"world_sizes\": [" + world +
           "], \"precisions\": [\"fp32\"], \"micro_batch\": 1, \"global_batch\": 4, \"seq_len\": 32}}";
  };
  struct Probe {
    std::string name;
    std::function<void()> body;
  };
  const std::vector<Probe> probes = {
      {"model config: hidden_size nested 100000 deep",
       [&] { parse_llama_config("{\"hidden_size\": " + deep + "}", "deep.json"); }},
      {"job: seed nested 100000 deep",
       [&] { parse_job("{\"model\": \"" + model_path + "\", \"seed\": " + deep + "}", work.file("job.json")); }},
      {"hardware: peak_flops_dense.fp32 nested 100000 deep",
       [&] {
         nlohmann::json doc = nlohmann::json::parse(hardware);
         doc["peak_flops_dense"]["fp32"] = "DEEP";
         std::string text = doc.dump();
         text.replace(text.find("\"DEEP\""), 6, deep);
         parse_hardware_spec(text, "x");
       }},
      {"model config: 1e999",
       [&] { parse_llama_config(model.substr(0, model.rfind('}')) + ", \"rope_theta\": 1e999}", "m.json"); }},
      {"job: seed 1e999", [&] { parse_job("{\"model\": \"" + model_path + "\", \"seed\": 1e999}", work.file("job.json")); }},
      {"hardware: fp32 peak 1e999", [&] { parse_hardware_spec(hardware_with("peak_flops_dense", "fp32", "1e999"), "x"); }},
      {"job: sweep world size 2^20 + 1", [&] { parse_job(sweep_job("1048577"), work.file("job.json")); }},
      {"job: sweep world size 2^31 - 1", [&] { parse_job(sweep_job("2147483647"), work.file("job.json")); }},
      {"job: sweep world size 2^32 + 1 (1 once truncated to int)",
       [&] { parse_job(sweep_job("4294967297"), work.file("job.json")); }},
      {"hardware: fp32 peak 6.7e301 TFLOP/s (infinite in FLOP/s)",
       [&] { parse_hardware_spec(hardware_with("peak_flops_dense", "fp32", "6.7e301"), "x"); }},
      {"hardware: memory capacity 1e13 MiB (past int64 bytes)",
       [&] { parse_hardware_spec(hardware_with("memory_capacity", "", "1e13"), "x"); }},
      {"recipe text with a newline", [&] { parse_recipe_text("sp\nvp"); }},
      {"recipe text with a carriage return", [&] { parse_recipe_text("dopt+ovl\r"); }},
  };
  // One worker per probe: the runner keeps only the first few failures of a kind, and each probe's
  // outcome is reported by name.
  for (std::size_t i = 0; i < probes.size(); ++i) {
    const Tally tally = run_isolated(static_cast<int64_t>(i), 1, kHangLimitS, work.path().string(), [&](int64_t index) {
      try {
        probes[static_cast<std::size_t>(index)].body();
        return Verdict{Result::kOther, "accepted, expected a UserError"};
      } catch (const UserError& error) {
        const std::string message = error.what();
        if (message.empty()) return Verdict{Result::kOther, "an empty UserError"};
        if (message.find_first_of("\n\r") != std::string::npos)
          return Verdict{Result::kOther, "a UserError of several lines: " + message};
        return Verdict{Result::kUserError, ""};
      } catch (const std::exception& error) {
        return Verdict{Result::kOther, std::string("exception ") + typeid(error).name() + ": " + error.what()};
      }
    });
    const bool passed = tally.user_error == 1 && tally.failed() == 0;
    std::string how = passed ? "a one-line UserError" : "FAILS";
    for (const Failure& f : tally.failures) how += ": " + f.kind + " " + escaped(f.message, 300);
    std::printf("[fuzz] known bug probe '%s': %s\n", probes[i].name.c_str(), how.c_str());
    EXPECT_TRUE(passed) << "known bug probe '" << probes[i].name << "' regressed: " << how;
  }
  std::fflush(stdout);
}

}  // namespace
}  // namespace itertime::fuzz

// test_log_readers.cpp: the training-log readers on logs written with the frameworks' own format strings
// (tests/data/logs/make_logs.py), the warm-up rule, and the one-line errors of hostile logs.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "formats/log_timings.hpp"
#include "formats/megatron_log.hpp"
#include "formats/nemo_log.hpp"
#include "formats/torchtitan_log.hpp"

namespace itertime::formats {
namespace {

MegatronLog megatron(const LogText& log) { return parse_megatron_log(log); }

LogText fixture(const std::string& name) { return read_log(std::string(ITERTIME_LOGS_DIR) + "/" + name); }

// The UserError's text of parsing `log` with `parse`, with the fixture folder cut off.
template <typename Parse>
std::string error_of(const LogText& log, Parse parse) {
  try {
    parse(log);
  } catch (const UserError& error) {
    std::string text = error.what();
    const std::string dir = std::string(ITERTIME_LOGS_DIR) + "/";
    if (text.rfind(dir, 0) == 0) text = text.substr(dir.size());
    return text;
  }
  return "no error";
}

TEST(MegatronLog, ArgumentsBlockAndTimingLines) {
  const MegatronLog log = parse_megatron_log(fixture("megatron_llama8b_tp2.log"));
  EXPECT_EQ(log.arguments.values.at("num_layers"), "32");
  EXPECT_EQ(log.arguments.values.at("num_query_groups"), "8");
  EXPECT_EQ(log.arguments.values.at("bf16"), "true");   // Python True
  EXPECT_EQ(log.arguments.values.at("fp16"), "false");  // Python False
  EXPECT_EQ(log.arguments.values.count("fp8"), 0u);     // None: not stored
  EXPECT_EQ(log.arguments.values.at("normalization"), "RMSNorm");
  EXPECT_GT(log.arguments.line_of.at("fp8"), 2);   // where it was printed
  EXPECT_EQ(log.arguments.line_of.at("bf16"), 4);  // after the header (line 2) and add_bias_linear, sorted
  ASSERT_EQ(log.intervals.size(), 10u);
  EXPECT_EQ(log.train_iters, 500);
  EXPECT_EQ(log.intervals[0].iterations, 10);
  EXPECT_EQ(log.intervals[9].last_iteration, 100);
  EXPECT_DOUBLE_EQ(log.intervals[2].time_us, 16488.2e3);
}

TEST(LogTimings, WarmupDroppedUntilTheTimesSettle) {
  const MegatronLog log = parse_megatron_log(fixture("megatron_llama8b_tp2.log"));
  const LogMeasurement m = settle("x.log", log.intervals);
  EXPECT_EQ(m.intervals_warmup, 2u);  // the first always; the second (18012 ms) is > 5% off the later median
  EXPECT_EQ(m.warmup_iters, 20);
  EXPECT_EQ(m.timed_iters, 80);
  EXPECT_NEAR(m.time_us_median, 16498.9e3, 1.0);  // median of the 8 steady intervals
  EXPECT_GT(m.spread_pct, 0.05);
  EXPECT_LT(m.spread_pct, 0.3);
  EXPECT_EQ(m.steady_us.size(), 8u);
}

TEST(LogTimings, TooFewSteadyIntervals) {
  std::vector<LogInterval> intervals(2);
  intervals[0].time_us = 20;
  intervals[1].time_us = 10;
  EXPECT_THROW(settle("x.log", intervals), UserError);
  intervals.resize(3);
  intervals[2].time_us = 10;
  EXPECT_EQ(settle("x.log", intervals).steady_us.size(), 2u);
}

TEST(LogTimings, ChecksumIsSha256) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(LogTimings, NumbersAndColours) {
  double v = 0;
  EXPECT_TRUE(parse_number(" 1,234 ", v, true));
  EXPECT_DOUBLE_EQ(v, 1234);
  EXPECT_FALSE(parse_number("nan", v));
  EXPECT_FALSE(parse_number("12ms", v));
  EXPECT_EQ(strip_ansi("\x1b[31mstep:  1\x1b[39m"), "step:  1");
}

TEST(MegatronLog, HostileLogsOneLineEach) {
  EXPECT_EQ(error_of(fixture("megatron_truncated.log"), megatron),
            "megatron_truncated.log:58: the log ends mid-line (a timing line without its elapsed time)");
  EXPECT_EQ(error_of(fixture("megatron_interleaved.log"), megatron),
            "megatron_interleaved.log:55: iteration 10 after iteration 50: two runs interleaved, or a restart in one log");
  EXPECT_EQ(error_of(fixture("megatron_not_a_number.log"), megatron),
            "megatron_not_a_number.log:54: elapsed time per iteration (ms) 'nan(ind)' is not a positive number");
  EXPECT_EQ(error_of(fixture("megatron_no_arguments.log"), megatron),
            "megatron_no_arguments.log:2: a timing line before any arguments block: not the whole Megatron-LM log (its "
            "start, with '------------------------ arguments ------------------------', is needed for the layout; a "
            "Megatron-Bridge log prints none: give its --config)");
}

// A Megatron-Bridge log: the same timing lines, no arguments block (its run comes from its YAML).
TEST(MegatronLog, TimingLinesOnlyWhenTheRunIsGiven) {
  const MegatronLog log = parse_megatron_log(fixture("megatron_no_arguments.log"), /*arguments_required=*/false);
  EXPECT_TRUE(log.arguments.values.empty());
  ASSERT_EQ(log.intervals.size(), 10u);
  EXPECT_EQ(log.intervals[0].line, 2u);
}

TEST(MegatronLog, TwoRunsAndUnfinishedBlocks) {
  const LogText one = fixture("megatron_llama8b_tp2.log");
  EXPECT_EQ(error_of(log_from_text("two.log", one.bytes + one.bytes), megatron),
            "two.log:61: a second arguments block (the first at line 2): two runs in one log; import each run's log on its own");
  const std::string head = one.bytes.substr(0, one.bytes.find("  fp16"));
  EXPECT_EQ(error_of(log_from_text("cut.log", head), megatron),
            "cut.log:2: the arguments block has no end ('end of arguments'): the log is truncated");
  // Another rank's output inside the block is skipped; an argument printed twice is refused.
  std::string mixed = one.bytes;
  mixed.insert(mixed.find("  bf16 "), "3: [W socket.cpp:464] [c10d] The server socket has failed to listen\n");
  EXPECT_EQ(parse_megatron_log(log_from_text("mixed.log", mixed)).arguments.values.at("bf16"), "true");
  std::string twice = one.bytes;
  twice.insert(twice.find("  bf16 "), "  bf16 ............................................ False\n");
  EXPECT_EQ(error_of(log_from_text("twice.log", twice), megatron), "twice.log:5: argument bf16 printed twice (first at line 4)");
  // srun's rank prefix before every line is read through.
  std::string prefixed;
  for (const std::string& line : one.lines) prefixed += "0: " + line + "\n";
  EXPECT_EQ(parse_megatron_log(log_from_text("srun.log", prefixed)).arguments.values.at("hidden_size"), "4096");
}

TEST(NemoLog, ProgressPrinterLines) {
  const std::vector<LogInterval> steps = parse_nemo_log(fixture("nemo_llama8b.log"));
  ASSERT_EQ(steps.size(), 10u);
  EXPECT_EQ(steps[0].line, 2u);
  EXPECT_DOUBLE_EQ(steps[2].time_us, 7.549e6);
  EXPECT_EQ(steps[3].iterations, 1);
  const LogMeasurement m = settle("nemo.log", steps);
  EXPECT_EQ(m.intervals_warmup, 2u);
  EXPECT_NEAR(m.time_us_median, 7.5635e6, 1.0);
}

TEST(NemoLog, DeltaTimingLines) {
  const std::vector<LogInterval> steps = parse_nemo_log(fixture("nemo_delta_timing.log"));
  ASSERT_EQ(steps.size(), 10u);
  EXPECT_DOUBLE_EQ(steps[9].time_us, 7.572e6);
  EXPECT_EQ(error_of(log_from_text("mixed.log", fixture("nemo_llama8b.log").bytes + fixture("nemo_delta_timing.log").bytes),
                     parse_nemo_log),
            "mixed.log:12: progress-printer and per-step timing lines mixed: two runs or two callbacks interleaved");
  EXPECT_EQ(error_of(log_from_text("nan.log", "Step 0: train_step_timing in s=abc\n"), parse_nemo_log),
            "nan.log:1: train_step_timing in s 'abc' is not a positive number");
}

// Found by Fuzz.TrainingLogs under UBSan: a global_step far beyond int64 was cast to it (undefined), and
// the step difference of the next line overflowed.
TEST(NemoLog, GlobalStepMustBeAStepNumber) {
  const std::string line = "Training epoch 0, iteration 1/9 | global_step: %s | train_step_timing in s: 7.5 |\n";
  for (const char* bad : {"-1e30", "1e30", "-1", "2.5"}) {
    char text[160];
    std::snprintf(text, sizeof(text), line.c_str(), bad);
    EXPECT_EQ(error_of(log_from_text("g.log", text), parse_nemo_log),
              "g.log:1: global_step is not a step number (a whole number from 0)")
        << bad;
  }
}

TEST(TorchtitanLog, MetricsLinesAndTheTimeFromTps) {
  const std::vector<TorchtitanStep> steps = parse_torchtitan_log(fixture("torchtitan_llama8b.log"));
  ASSERT_EQ(steps.size(), 10u);  // the "validate step:" line is not a training step
  EXPECT_EQ(steps[0].step, 1);
  EXPECT_EQ(steps[1].steps, 9);
  EXPECT_DOUBLE_EQ(steps[2].tps, 6433);
  const std::vector<LogInterval> intervals = torchtitan_intervals(steps, 8 * 8192, 8);
  EXPECT_NEAR(intervals[2].time_us, 1e6 * 65536.0 / (6433.0 * 8), 1e-6);
  // Colours around the fields (a terminal) are read through.
  const LogText coloured = log_from_text(
      "c.log",
      "\x1b[31mstep:  1  \x1b[32mloss: 12.00000  \x1b[34mtps: 6,433  \x1b[36mtflops: 1.00  \x1b[35mmfu: 1.00%\x1b[39m\n");
  EXPECT_DOUBLE_EQ(parse_torchtitan_log(coloured)[0].tps, 6433);
  EXPECT_EQ(
      error_of(log_from_text("t.log", "step: 10  loss:  1.00000  tps: 6,4x3  tflops: 1.00  mfu: 1.00%\n"), parse_torchtitan_log),
      "t.log:1: tps '6,4x3' is not a positive number");
  EXPECT_EQ(error_of(log_from_text("t.log",
                                   "step: 10  loss:  1.00000  tps: 100  mfu: 1%\nstep:  5  loss:  1.00000  tps: 100  mfu: 1%\n"),
                     parse_torchtitan_log),
            "t.log:2: step 5 after step 10: two runs interleaved, or a restart in one log");
  EXPECT_EQ(error_of(log_from_text("t.log", "step: 10  loss:  1.00000  tps: 100  mfu: 1%\nstep: 20  loss:  1.00000  tps: 1"),
                     parse_torchtitan_log),
            "t.log:2: the log ends mid-line (the metrics line is cut)");
}

}  // namespace
}  // namespace itertime::formats

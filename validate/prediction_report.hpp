// prediction_report.hpp: the reporters of `itertime fit` and `predict` (console tables and JSON), beside
// plan_report.hpp and validation_report.hpp. They present records that predict/ computed; they compute nothing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/parallel_config.hpp"
#include "predict/answer_check.hpp"
#include "predict/memory_split.hpp"
#include "predict/model/fitted_model.hpp"
#include "predict/prediction_range.hpp"
#include "predict/predictor.hpp"
#include "predict/throughput.hpp"

namespace itertime::validate {

// One configuration's prediction with what it was made from and its memory verdict.
// The console table (print_prediction) shows durations in the unit a person reads (duration_text.hpp),
// a breakdown on the critical pipeline rank whose lines add up to the iteration (the raw parts, the
// per-call overhead's share, the calibration factor's), what overlap hid beside it (not counted),
// what the prediction rests on, its range where something measured one, its FLAG lines (findings the
// user chose to see, --allow-implausible), and the peak memory's split with the device's limit. The JSON
// keeps machine units (microseconds, bytes) and carries the same facts.
struct PredictionRecord {
  std::string source;      // the fitted model or calibration file it was predicted from
  std::string model_name;  // the LLaMA config's name
  ParallelConfig config;
  std::string precision;                    // the policy's name
  bool blind = false;                       // the precision-blind baseline
  std::string recipe = "plain";             // the training techniques (recipe_label)
  std::string attention, libtorch_version;  // how the calibration ran (empty version: 1.13, not recorded)
  std::string described;                    // set when predicted from a hardware description: what was carried to it, in words
  predict::Prediction prediction;
  int64_t peak_memory_bytes = 0;  // the memory model's busiest stage
  bool exceeds_device_memory = false;
  predict::PooledCheck regression_check;
  predict::Throughput throughput;  // tokens/s per rank; MFU against `hardware` when it has the peak
  std::string hardware;            // the description's name, "" when there is none
  bool framework = false;          // the framework model (Megatron-Core + TE), not itertime's own trainer
  predict::MemorySplit memory;     // the peak's split (memory.total_bytes == peak_memory_bytes)
  double device_memory_bytes = 0;  // the limit it is held against (0: none known)
  predict::PredictionRange range;
  std::vector<predict::Finding> flags;  // findings shown rather than refused (--allow-implausible)
  std::vector<std::string> defaults;    // options left out and what they defaulted to, in words
};

// What the prediction rests on, in one line ("4 traced stages; operator time 96 % profiled, ...").
std::string rests_on_text(const PredictionRecord& record);

void print_prediction(const PredictionRecord& record);
std::string prediction_json(const PredictionRecord& record);  // indented JSON text

// `itertime fit`: what was fitted (comm tables and their residuals, operator signatures, regressions,
// the calibration per occupancy) from `calibration_file` into `model_file`.
void print_fit_summary(const predict::FittedModel& model, const std::string& calibration_file, const std::string& model_file);

}  // namespace itertime::validate

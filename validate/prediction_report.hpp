// prediction_report.hpp: the reporters of `itertime fit` and `predict` (console tables and JSON), beside
// plan_report.hpp and validation_report.hpp. They present records that predict/ computed; they compute nothing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/parallel_config.hpp"
#include "predict/model/fitted_model.hpp"
#include "predict/throughput.hpp"
#include "predict/predictor.hpp"

namespace itertime::validate {

// One configuration's prediction with what it was made from and its memory verdict.
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
};

void print_prediction(const PredictionRecord& record);
std::string prediction_json(const PredictionRecord& record);  // indented JSON text

// `itertime fit`: what was fitted (comm tables and their residuals, operator signatures, regressions,
// the calibration per occupancy) from `calibration_file` into `model_file`.
void print_fit_summary(const predict::FittedModel& model, const std::string& calibration_file, const std::string& model_file);

}  // namespace itertime::validate

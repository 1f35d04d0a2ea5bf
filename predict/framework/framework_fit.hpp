// framework_fit.hpp: the Megatron-Core + TE framework model fitted on a cluster's own logs (issue 46):
// measured step times of runs on one GPU kind (imported training logs, published-figure files) fit a
// handful of physically named terms (FrameworkTerms: GEMM efficiency per dtype, attention and memory-bound
// efficiency, communication efficiency, the compute slowdown beside overlapped communication), each
// bounded and pulled toward its described value (common/regularized_fit.hpp), and are written to a file
// that predict and plan take (--fitted FILE).
// Invariants:
//  - Residuals are ln(predicted / measured) per row over the step times' sigma (3 %, or the rows' own
//    scatter after a first fit when larger: rows that disagree are trusted less); every term's prior is its described value (the
//    scales 1 in log space, the slowdown the training conditions'), so with no rows the fit is the
//    described model, and with few rows it moves only as far as the rows pull against the prior.
//  - Every row must be on the target's GPU (one fit = one cluster); a row the model refuses is a
//    UserError naming it (the caller drops refused rows first, or reports them).
//  - The terms file round-trips: read_fitted_terms(write_fitted_terms_json(fit)) gives the same terms;
//    a file for another GPU is refused naming both.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "predict/framework/framework_predictor.hpp"

namespace itertime::predict::framework {

struct FrameworkObservation {
  std::string id;     // the row or log, e.g. "nemotron4-dgxc-h100/15B-bf16-16"
  std::string model;  // the model's name (leave-one-model-out groups by it)
  FrameworkRequest request;
  double measured_us = 0;
  bool amd_host_cpu = false;  // NCCL tuning of the row's nodes
};

struct FittedTerm {
  std::string name;      // e.g. "gemm16_efficiency"
  std::string meaning;   // one line
  std::string unit;      // "x kernel figures", "fraction"
  double described = 0;  // the described value (the prior)
  double fitted = 0;
  double sigma = 0;         // one standard deviation of the fitted value
  double moved_sigmas = 0;  // (fitted - described) / the prior's sigma: how far the logs moved it
};

struct FrameworkFit {
  std::string hardware;  // the GPU description's name
  FrameworkTerms terms;
  std::vector<FittedTerm> table;
  std::vector<std::string> rows;  // the observations' ids
  double rms_log_error_described = 0, rms_log_error_fitted = 0;
  double step_time_sigma = 0.03;  // how far a row was trusted (3 %, or the rows' own scatter when larger)
  int iterations = 0;
  // How the fit does on models it did not see (leave-one-model-out over `rows`; set by the caller, e.g.
  // `itertime fit --framework`): the range a fitted prediction quotes. NaN: not measured (one model only).
  double lomo_mape_pct = NAN;
  int lomo_rows = 0, models = 0;
};

// A model's identity for leave-one-model-out: its sizes (logs name one model differently: "llama3.1-8b",
// "llama3_8b"), e.g. "h4096 l32 ffn14336 heads32/8 v128256".
std::string model_key(const TransformerShape& shape);

// The prediction of one observation on `target` (its own NCCL tuning), in microseconds; UserError with
// the row named when the model refuses it.
double predict_observation(const FrameworkTarget& target, const FrameworkObservation& row);

// Fits the terms on `rows` (all on target.hardware) starting from `described` (target.terms ignored).
FrameworkFit fit_framework_terms(const FrameworkTarget& described, const std::vector<FrameworkObservation>& rows);

// The fitted file: JSON text (terms, table, rows), and its reader (UserError naming the file and field;
// a file for another GPU than `hardware_name` when that is not empty).
std::string write_fitted_terms_json(const FrameworkFit& fit);
FrameworkFit read_fitted_terms(const std::string& path, const std::string& hardware_name = "");
// Reads the terms file for target's GPU into target.terms (and terms_source); returns the fit (its range).
FrameworkFit apply_fitted_terms(FrameworkTarget& target, const std::string& path);

}  // namespace itertime::predict::framework

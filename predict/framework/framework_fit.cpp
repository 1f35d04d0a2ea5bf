// framework_fit.cpp: fitting FrameworkTerms on measured step times, and the fitted file
// (framework_fit.hpp; the terms, their priors and bounds: docs/framework.md "Fitted on a cluster's logs").
#include "predict/framework/framework_fit.hpp"

#include <cmath>
#include <nlohmann/json.hpp>

#include "common/errors.hpp"
#include "common/input_file.hpp"
#include "common/json_fields.hpp"
#include "common/regularized_fit.hpp"

namespace itertime::predict::framework {

// A term in the terms file: its members by their names (read back by read_framework_fit, which checks them).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(FittedTerm, name, meaning, unit, described, fitted, sigma, moved_sigmas)

namespace {

using nlohmann::json;

// One fitted term: how it is named and explained, and how the fit's coordinate maps to FrameworkTerms.
struct TermSpec {
  const char* name;
  const char* meaning;
  const char* unit;
  bool log_scale;                    // the coordinate is ln(time scale); shown as an efficiency 1 / scale
  double prior_sigma, lower, upper;  // in the coordinate
};

// ln(1.25): a described efficiency is trusted to about 25 % (one sigma); communication to about 50 %.
// A measured step time is trusted to about 3 % (one sigma of ln(measured)): the run-to-run and day-to-day
// spread of training step times (the Llama 3 paper's 1-2 % diurnal swing; logs' steady intervals differ by
// 1-3 %), so that rows outweigh the priors as soon as several agree.
constexpr double kStepTimeSigma = 0.03;
const TermSpec kTerms[] = {
    {"gemm16_efficiency", "bf16/fp16 GEMM throughput relative to the kernel figures", "x kernel figures", true, 0.2231,
     std::log(0.7), std::log(2.0)},
    {"gemm8_efficiency", "fp8 GEMM throughput relative to the kernel figures", "x kernel figures", true, 0.2231, std::log(0.7),
     std::log(2.0)},
    {"attention_efficiency", "fused attention throughput relative to the kernel figures", "x kernel figures", true, 0.2231,
     std::log(0.7), std::log(2.0)},
    {"memory_efficiency", "memory-bound kernels' bandwidth relative to the kernel figures", "x kernel figures", true, 0.2231,
     std::log(0.7), std::log(2.0)},
    {"comm_efficiency", "collectives' and transfers' bandwidth relative to NCCL's cost model of the description", "x described",
     true, 0.4055, std::log(0.5), std::log(3.0)},
    {"overlap_compute_slowdown", "compute slowdown beside overlapped communication (training conditions)", "fraction", false, 0.1,
     0.0, 1.0},
};
constexpr size_t kTermCount = sizeof(kTerms) / sizeof(kTerms[0]);

FrameworkTerms terms_at(const std::vector<double>& x) {
  FrameworkTerms t;
  t.gemm16_time_scale = std::exp(x[0]);
  t.gemm8_time_scale = std::exp(x[1]);
  t.attention_time_scale = std::exp(x[2]);
  t.memory_time_scale = std::exp(x[3]);
  t.comm_time_scale = std::exp(x[4]);
  t.overlap_compute_slowdown = x[5];
  return t;
}

std::vector<double> coordinates_of(const FrameworkTerms& t, double described_slowdown) {
  return {std::log(t.gemm16_time_scale),    std::log(t.gemm8_time_scale),
          std::log(t.attention_time_scale), std::log(t.memory_time_scale),
          std::log(t.comm_time_scale),      t.overlap_compute_slowdown >= 0 ? t.overlap_compute_slowdown : described_slowdown};
}

// The value as shown: an efficiency for the scales, the fraction itself for the slowdown.
double shown(const TermSpec& spec, double coordinate) { return spec.log_scale ? std::exp(-coordinate) : coordinate; }

std::vector<double> log_errors(const FrameworkTarget& target, const std::vector<FrameworkObservation>& rows) {
  std::vector<double> r;
  r.reserve(rows.size());
  for (const FrameworkObservation& row : rows) r.push_back(std::log(predict_observation(target, row) / row.measured_us));
  return r;
}

double rms(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return v.empty() ? 0.0 : std::sqrt(s / static_cast<double>(v.size()));
}

}  // namespace

std::string model_key(const TransformerShape& s) {
  return "h" + std::to_string(s.hidden) + " l" + std::to_string(s.layers) + " ffn" + std::to_string(s.ffn) + " heads" +
         std::to_string(s.heads) + "/" + std::to_string(s.kv_heads) + " v" + std::to_string(s.vocab);
}

double predict_observation(const FrameworkTarget& target, const FrameworkObservation& row) {
  FrameworkTarget own = target;
  own.tuning.amd_host_cpu = row.amd_host_cpu;
  const FrameworkOutcome outcome = predict_framework(own, row.request);
  if (!outcome.ok()) throw UserError("row " + row.id + ": the framework model refuses it: " + outcome.reason);
  return outcome.prediction->total_us;
}

FrameworkFit fit_framework_terms(const FrameworkTarget& described, const std::vector<FrameworkObservation>& rows) {
  FrameworkTarget base = described;
  base.terms = FrameworkTerms{};
  const double described_slowdown = described.conditions.overlap_compute_slowdown;
  std::vector<FitParameter> parameters;
  const std::vector<double> prior = coordinates_of(FrameworkTerms{}, described_slowdown);
  for (size_t k = 0; k < kTermCount; ++k) {
    parameters.push_back(FitParameter{kTerms[k].name, prior[k], kTerms[k].prior_sigma, kTerms[k].lower, kTerms[k].upper});
  }
  double step_sigma = kStepTimeSigma;
  auto residuals = [&](const std::vector<double>& x) {
    FrameworkTarget target = base;
    target.terms = terms_at(x);
    std::vector<double> r = log_errors(target, rows);
    for (double& e : r) e /= step_sigma;
    return r;
  };
  FrameworkFit fit;
  fit.hardware = described.hardware.name;
  for (const FrameworkObservation& row : rows) fit.rows.push_back(row.id);
  fit.rms_log_error_described = rms(residuals(prior)) * step_sigma;
  RegularizedFit result = fit_regularized(parameters, residuals, 40, 1e-3);
  // Rows that the terms cannot bring within 3 % of each other (another framework's log, a disturbed run)
  // are trusted less: once, the fit again with the rows' own scatter, rms x sqrt(n / (n - p)), when larger.
  const double n = static_cast<double>(rows.size()), p = static_cast<double>(kTermCount);
  if (n > p) {
    const double scatter = rms(residuals(result.values)) * step_sigma * std::sqrt(n / (n - p));
    if (scatter > step_sigma) {
      step_sigma = scatter;
      result = fit_regularized(parameters, residuals, 40, 1e-3);
    }
  }
  fit.step_time_sigma = step_sigma;
  fit.terms = terms_at(result.values);
  fit.rms_log_error_fitted = rms(residuals(result.values)) * step_sigma;
  fit.iterations = result.iterations;
  for (size_t k = 0; k < kTermCount; ++k) {
    const TermSpec& spec = kTerms[k];
    FittedTerm term;
    term.name = spec.name;
    term.meaning = spec.meaning;
    term.unit = spec.unit;
    term.described = shown(spec, prior[k]);
    term.fitted = shown(spec, result.values[k]);
    // For an efficiency e = exp(-x): sigma_e = e sigma_x.
    term.sigma = spec.log_scale ? term.fitted * result.sigma[k] : result.sigma[k];
    term.moved_sigmas = (result.values[k] - prior[k]) / spec.prior_sigma * (spec.log_scale ? -1.0 : 1.0);
    fit.table.push_back(term);
  }
  return fit;
}

std::string write_fitted_terms_json(const FrameworkFit& fit) {
  json doc;
  doc["kind"] = "itertime framework-terms";
  doc["framework"] = "megatron-te";
  doc["hardware"] = fit.hardware;
  doc["terms"] = fit.table;
  doc["rows"] = fit.rows;
  doc["rms_log_error"] = {{"described", fit.rms_log_error_described}, {"fitted", fit.rms_log_error_fitted}};
  doc["models"] = fit.models;
  doc["step_time_sigma"] = fit.step_time_sigma;
  if (std::isfinite(fit.lomo_mape_pct))
    doc["leave_one_model_out"] = {{"mape_percent", fit.lomo_mape_pct}, {"rows", fit.lomo_rows}};
  return doc.dump(1) + "\n";
}

FrameworkFit apply_fitted_terms(FrameworkTarget& target, const std::string& path) {
  FrameworkFit fit = read_fitted_terms(path, target.hardware.name);
  target.terms = fit.terms;
  target.terms_source = path;
  return fit;
}

FrameworkFit read_fitted_terms(const std::string& path, const std::string& hardware_name) {
  const json doc =
      parse_json_text(read_input_file(path, {"no such file", "is a directory, not a terms file", "cannot be read"}), path);
  JsonFieldReader reader(path);
  if (!doc.is_object() || doc.value("kind", "") != "itertime framework-terms")
    throw UserError(path + ": not a framework terms file (written by `itertime fit --framework megatron-te`)");
  reader.only_known(
      doc, "",
      {"kind", "framework", "hardware", "terms", "rows", "rms_log_error", "models", "leave_one_model_out", "step_time_sigma"});
  FrameworkFit fit;
  if (!doc.contains("hardware") || !doc.at("hardware").is_string()) reader.fail("hardware", "missing");
  fit.hardware = doc.at("hardware").get<std::string>();
  if (!hardware_name.empty() && fit.hardware != hardware_name) {
    throw UserError(path + ": fitted on " + fit.hardware + ", not " + hardware_name +
                    "; fit on that GPU's logs or predict --hardware " + fit.hardware);
  }
  if (!doc.contains("terms") || !doc.at("terms").is_array()) reader.fail("terms", "missing or not a list");
  std::vector<double> x(kTermCount);
  std::vector<bool> seen(kTermCount, false);
  for (const json& t : doc.at("terms")) {
    if (!t.is_object() || !t.contains("name") || !t.at("name").is_string() || !t.contains("fitted") ||
        !t.at("fitted").is_number())
      reader.fail("terms", "each term needs a name and a fitted number");
    const std::string name = t.at("name").get<std::string>();
    size_t k = 0;
    while (k < kTermCount && name != kTerms[k].name) ++k;
    if (k == kTermCount) reader.fail("terms." + name, "unknown term");
    const double value = t.at("fitted").get<double>();
    const double coordinate = kTerms[k].log_scale ? (value > 0 ? -std::log(value) : NAN) : value;
    if (!std::isfinite(coordinate) || coordinate < kTerms[k].lower - 1e-9 || coordinate > kTerms[k].upper + 1e-9)
      reader.fail("terms." + name + ".fitted", "outside the term's bounds");
    x[k] = coordinate;
    seen[k] = true;
    FittedTerm term;
    term.name = name;
    term.meaning = t.value("meaning", "");
    term.unit = t.value("unit", "");
    term.described = t.value("described", 0.0);
    term.fitted = value;
    term.sigma = t.value("sigma", 0.0);
    term.moved_sigmas = t.value("moved_sigmas", 0.0);
    fit.table.push_back(term);
  }
  for (size_t k = 0; k < kTermCount; ++k)
    if (!seen[k]) reader.fail(std::string("terms.") + kTerms[k].name, "missing");
  fit.terms = terms_at(x);
  if (doc.contains("rows") && doc.at("rows").is_array())
    for (const json& r : doc.at("rows"))
      if (r.is_string()) fit.rows.push_back(r.get<std::string>());
  if (doc.contains("rms_log_error") && doc.at("rms_log_error").is_object()) {
    fit.rms_log_error_described = doc.at("rms_log_error").value("described", 0.0);
    fit.rms_log_error_fitted = doc.at("rms_log_error").value("fitted", 0.0);
  }
  fit.models = doc.value("models", 0);
  fit.step_time_sigma = doc.value("step_time_sigma", kStepTimeSigma);
  if (doc.contains("leave_one_model_out") && doc.at("leave_one_model_out").is_object()) {
    fit.lomo_mape_pct = doc.at("leave_one_model_out").value("mape_percent", NAN);
    fit.lomo_rows = doc.at("leave_one_model_out").value("rows", 0);
  }
  return fit;
}

}  // namespace itertime::predict::framework

// training_conditions.cpp: reading data/training/<gpu>.json (training_conditions.hpp; every term's source
// and rule: docs/framework.md "Training conditions").
#include "predict/framework/training_conditions.hpp"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/data_folder.hpp"
#include "common/errors.hpp"
#include "common/input_file.hpp"
#include "common/json_excerpt.hpp"
#include "common/json_fields.hpp"

#ifndef ITERTIME_DEFAULT_TRAINING_DIR
#define ITERTIME_DEFAULT_TRAINING_DIR "data/training"
#endif

namespace itertime::predict::framework {
namespace {

using nlohmann::json;

// Phi^-1(p) for 0 < p < 1: Acklam's rational approximation (relative error below 1.2e-9).
double inverse_normal_cdf(double p) {
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                             1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01,
                             -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00};
  const double low = 0.02425;
  if (p < low) {
    const double q = std::sqrt(-2 * std::log(p));
    return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  if (p > 1 - low) return -inverse_normal_cdf(1 - p);
  const double q = p - 0.5, r = q * q;
  return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
         (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

class Reader : public JsonFieldReader {
 public:
  Reader(std::string path, TrainingConditions& out) : JsonFieldReader(std::move(path)), out_(out) {}

  // A term: {"value", "unit", "source", optional "derived" + "rule"}; the value within [low, high].
  double term(const json& doc, const std::string& key, const std::string& unit, double low, double high) {
    if (!doc.contains(key)) fail(key, "missing (every term must be given, with its source)");
    const json& t = doc.at(key);
    if (!t.is_object()) fail(key, "must be an object with value, unit and source, got " + json_excerpt(t));
    only_known(t, key, {"value", "unit", "source", "derived", "rule"});
    if (!t.contains("value") || !t.at("value").is_number()) fail(key + ".value", "must be a number");
    const double value = t.at("value").get<double>();
    if (!std::isfinite(value) || value < low || value > high) {
      fail(key + ".value", "must be within [" + json(low).dump() + ", " + json(high).dump() + "], got " + json(value).dump());
    }
    if (!t.contains("unit") || !t.at("unit").is_string() || t.at("unit").get<std::string>() != unit)
      fail(key + ".unit", "must be \"" + unit + "\"");
    std::string source = text(t, "source", key + ".source");
    if (t.contains("derived")) {
      if (!t.at("derived").is_boolean()) fail(key + ".derived", "must be true or false");
      if (t.at("derived").get<bool>()) source += " [derived: " + text(t, "rule", key + ".rule") + "]";
    }
    out_.sources[key] = source;
    return value;
  }

  std::string text(const json& object, const std::string& key, const std::string& path) const {
    if (!object.contains(key) || !object.at(key).is_string() || object.at(key).get<std::string>().empty())
      fail(path, "missing or not a non-empty text");
    return object.at(key).get<std::string>();
  }

 private:
  TrainingConditions& out_;
};

}  // namespace

double TrainingConditions::userbuffers_slowdown() const {
  if (tp_overlap_sms <= 0 || sm_count <= tp_overlap_sms) return 0.0;
  return static_cast<double>(sm_count) / static_cast<double>(sm_count - tp_overlap_sms) - 1.0;
}

double TrainingConditions::straggler_slowdown(int64_t gpus) const { return gpu_speed_sigma * expected_max_standard_normal(gpus); }

std::string TrainingConditions::summary() const {
  if (is_neutral()) return "training conditions: none described for this GPU (kernel figures' own conditions)";
  return "training conditions " + shown_data_path(path, ITERTIME_DEFAULT_TRAINING_DIR, "data/training") + " (" + summary_text +
         ")";
}

double expected_max_standard_normal(int64_t n) {
  if (n <= 1) return 0.0;
  const double count = static_cast<double>(n);
  return inverse_normal_cdf((count - 0.375) / (count + 0.25));
}

std::string training_conditions_dir() { return data_folder("ITERTIME_TRAINING_DIR", ITERTIME_DEFAULT_TRAINING_DIR); }

TrainingConditions load_training_conditions(const HardwareSpec& hardware, const std::string& dir) {
  const std::string path = device_file(dir, hardware.name);
  std::error_code error;
  if (!std::filesystem::exists(path, error)) return TrainingConditions::neutral();
  const json doc = read_json_object_file(path, {"no such file", "is a directory, not training conditions", "cannot be read"});
  TrainingConditions out;
  out.path = path;
  Reader reader(path, out);
  reader.only_known(doc, "",
                    {"name", "description", "summary", "sustained_clock", "overlap_compute_slowdown", "tp_overlap_sms",
                     "host_us_per_kernel", "gpu_speed_sigma"});
  out.gpu = reader.text(doc, "name", "name");
  if (out.gpu != hardware.name)
    reader.fail("name", "'" + out.gpu + "' differs from the hardware description's name '" + hardware.name + "'");
  reader.text(doc, "description", "description");
  out.summary_text = reader.text(doc, "summary", "summary");
  out.sustained_clock_fraction = reader.term(doc, "sustained_clock", "fraction", 0.5, 1.0);
  out.overlap_compute_slowdown = reader.term(doc, "overlap_compute_slowdown", "fraction", 0.0, 2.0);
  out.tp_overlap_sms = static_cast<int>(reader.term(doc, "tp_overlap_sms", "count", 0, 1024));
  out.host_us_per_kernel = reader.term(doc, "host_us_per_kernel", "us", 0.0, 1000.0);
  out.gpu_speed_sigma = reader.term(doc, "gpu_speed_sigma", "fraction", 0.0, 0.5);
  out.sm_count = hardware.sm_count.value_or(0);
  if (out.tp_overlap_sms > 0 && out.sm_count <= out.tp_overlap_sms)
    reader.fail("tp_overlap_sms", "needs the description's sm_count above it (" + std::to_string(out.sm_count) + ")");
  return out;
}

}  // namespace itertime::predict::framework

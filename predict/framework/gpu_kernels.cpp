// gpu_kernels.cpp: reading data/kernels/<gpu>.json and the kernel time model (gpu_kernels.hpp; the
// format, every figure's source and the rules are in docs/kernels.md).
//
// GEMM interpolation, and why. A GEMM's achieved throughput depends on its shape, not on its FLOPs alone:
// a skinny product (one small dimension) fills fewer output tiles and reaches less of the peak than a
// square one of the same FLOPs, and small products are latency-bound. The published tables (OpenXLA's
// measured sm_90 / sm_100 tables) give m, n, k on a lattice, so the model interpolates on that lattice
// in (log m, log n, log k), the variables along which tile counts and waves grow geometrically. It
// interpolates log(time) rather than throughput: time is what must be monotone, and a multilinear
// interpolation of lattice values that are monotone along each axis is itself monotone along each axis.
// The measured log-times are first made monotone along every axis (a larger product is never predicted
// faster than a smaller one; the measurements break this at a few points, by kernel choice and noise):
// each becomes the mean of its majorant (the largest time of the lattice points no larger in any
// dimension) and its minorant (the smallest time of those no smaller in any dimension). Both are
// monotone, so their mean is; it leaves monotone data unchanged and splits an outlier's effect instead
// of spreading the slowest small product's time over every larger one. Outside the lattice: below
// its smallest value of a dimension the time is held (a product smaller than the smallest measured one
// is latency-bound, not faster), above its largest it grows in proportion to that dimension (the
// throughput of the largest measured product is kept). A file that gives only some lattice points (the
// A100's square sweep) has the others filled by the throughput of the measured points interpolated in
// log(FLOPs), a stated rule. The lattice is extended by one node per axis at four times its largest
// value; the products there that are at least the largest measured one in every dimension reach the
// file's measured maximum achievable (MAMF, a brute-force search's best over large shapes), the others
// keep the throughput of their projection onto the measured lattice: so a large product approaches the
// MAMF, while a skinny one (one small dimension) keeps the low throughput measured for its kind. Last,
// the throughput is capped at the description's dense peak and at the file's MAMF, bounds that no
// kernel of that GPU exceeds.
#include "predict/framework/gpu_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "common/data_folder.hpp"
#include "common/errors.hpp"
#include "common/input_file.hpp"
#include "common/json_excerpt.hpp"
#include "common/json_fields.hpp"

#ifndef ITERTIME_DEFAULT_KERNELS_DIR
#define ITERTIME_DEFAULT_KERNELS_DIR "data/kernels"
#endif

namespace itertime::predict::framework {
namespace {

using nlohmann::json;

enum class Quantity { kFlops, kBandwidth, kTime };

struct Unit {
  const char* name;
  Quantity quantity;
  double factor;  // to FLOP/s, bytes/s or microseconds
};

constexpr Unit kUnits[] = {
    {"GFLOP/s", Quantity::kFlops, 1e9},  {"TFLOP/s", Quantity::kFlops, 1e12},  {"PFLOP/s", Quantity::kFlops, 1e15},
    {"GB/s", Quantity::kBandwidth, 1e9}, {"TB/s", Quantity::kBandwidth, 1e12}, {"ns", Quantity::kTime, 1e-3},
    {"us", Quantity::kTime, 1.0},        {"ms", Quantity::kTime, 1e3},
};

std::string units_of(Quantity quantity) {
  std::string out;
  for (const Unit& unit : kUnits) {
    if (unit.quantity == quantity) out += (out.empty() ? "" : ", ") + std::string(unit.name);
  }
  return out;
}

// Reads one file; every mistake is one UserError naming the file and the field.
class Reader : public JsonFieldReader {
 public:
  Reader(std::string path, GpuKernelFigures& figures) : JsonFieldReader(std::move(path)), figures_(figures) {}

  const json& member(const json& object, const std::string& key, const std::string& path) const {
    if (!object.is_object() || !object.contains(key)) fail(path, "missing");
    return object.at(key);
  }

  std::string text(const json& object, const std::string& key, const std::string& path) const {
    const json& value = member(object, key, path);
    if (!value.is_string() || value.get<std::string>().find_first_not_of(" \t\n") == std::string::npos) {
      fail(path, "must be a non-empty string");
    }
    return value.get<std::string>();
  }

  // "source" (required) and the optional "derived" / "rule" pair of a figure or table; records the
  // source (with the rule) under `path`.
  void record_source(const json& object, const std::string& path) {
    std::string recorded = text(object, "source", path + ".source");
    if (object.contains("derived")) {
      const json& derived = object.at("derived");
      if (!derived.is_boolean()) fail(path + ".derived", "must be true or false");
      if (derived.get<bool>()) {
        if (!object.contains("rule")) fail(path + ".rule", "missing: a derived figure states the rule that derives it");
        recorded += " (derived: " + text(object, "rule", path + ".rule") + ")";
      }
    } else if (object.contains("rule")) {
      text(object, "rule", path + ".rule");
    }
    figures_.sources[path] = recorded;
  }

  const Unit& unit(const json& object, const std::string& path, Quantity quantity) const {
    const json& unit_json = member(object, "unit", path + ".unit");
    const std::string name = unit_json.is_string() ? unit_json.get<std::string>() : json_excerpt(unit_json);
    for (const Unit& candidate : kUnits) {
      if (candidate.quantity == quantity && name == candidate.name) return candidate;
    }
    fail(path + ".unit", "'" + name + "' is not one of " + units_of(quantity));
  }

  double positive(const json& value, const std::string& path) const {
    if (!value.is_number()) fail(path, "must be a number, got " + json_excerpt(value));
    const double number = value.get<double>();
    if (!std::isfinite(number) || number <= 0) fail(path, "must be a positive number, got " + json_excerpt(value));
    return number;
  }

  int64_t whole(const json& value, const std::string& path) const {
    const double number = positive(value, path);
    if (std::floor(number) != number || number > 1e12) fail(path, "must be a positive whole number, got " + json_excerpt(value));
    return static_cast<int64_t>(number);
  }

  // A figure {"value", "unit", "source", "derived"?, "rule"?} in base units.
  double figure(const json& object, const std::string& key, const std::string& path, Quantity quantity) {
    const json& item = member(object, key, path);
    if (!item.is_object()) fail(path, "must be an object {\"value\": ..., \"unit\": ..., \"source\": ...}");
    only_known(item, path, {"value", "unit", "source", "derived", "rule"});
    record_source(item, path);
    return positive(member(item, "value", path + ".value"), path + ".value") * unit(item, path, quantity).factor;
  }

 private:
  GpuKernelFigures& figures_;
};

double peak_or_fail(const Reader& reader, const HardwareSpec& hardware, ComputeDType dtype, const std::string& field) {
  const auto peak = hardware.peak(dtype);
  if (!peak) {
    reader.fail(field, "the hardware description '" + hardware.name + "' has no dense " + to_string(dtype) +
                           " peak, so it has no " + to_string(dtype) + " kernels");
  }
  return *peak;
}

// The dtype `name` names (a section's key, a "same_as"); else fails at `field` with `problem`.
ComputeDType dtype_or_fail(const Reader& reader, const std::string& name, const std::string& field, const std::string& problem) {
  try {
    return parse_compute_dtype(name);
  } catch (const UserError&) {
    reader.fail(field, problem);
  }
}

// A table given as another dtype's ("same_as"): checked, its source recorded and the alias noted in
// `aliases` (resolved once every measured table is read); false for a measured table, left to the caller.
bool read_same_as(Reader& reader, const json& table, const std::string& field, ComputeDType dtype,
                  std::map<ComputeDType, std::string>& aliases) {
  if (!table.contains("same_as")) return false;
  reader.only_known(table, field, {"same_as", "derived", "rule", "source"});
  if (!table.contains("derived") || !table.at("derived").is_boolean() || !table.at("derived").get<bool>()) {
    reader.fail(field + ".derived", "a \"same_as\" table is derived: write \"derived\": true and its \"rule\"");
  }
  reader.record_source(table, field);
  aliases[dtype] = reader.text(table, "same_as", field + ".same_as");
  return true;
}

// Throughput interpolated in log(FLOPs) over measured points (sorted by FLOPs, equal FLOPs merged to
// the largest throughput), held at the ends: the rule that fills lattice points a file does not give.
double by_flops(const std::vector<std::pair<double, double>>& points, double flops) {
  if (flops <= points.front().first) return points.front().second;
  if (flops >= points.back().first) return points.back().second;
  const auto upper = std::upper_bound(points.begin(), points.end(), flops,
                                      [](double f, const std::pair<double, double>& p) { return f < p.first; });
  const auto lower = upper - 1;
  const double w = std::log(flops / lower->first) / std::log(upper->first / lower->first);
  return std::exp((1 - w) * std::log(lower->second) + w * std::log(upper->second));
}

// `max_achievable`: the file's measured maximum achievable throughput (MAMF), 0 when it gives none.
GpuKernelFigures::GemmLattice build_lattice(const std::vector<GpuKernelFigures::GemmPoint>& points, double ceiling,
                                            double max_achievable) {
  std::set<int64_t> ms, ns, ks;
  std::map<std::tuple<int64_t, int64_t, int64_t>, double> measured;
  std::map<double, double> best_by_flops;
  for (const auto& point : points) {
    ms.insert(point.shape.m);
    ns.insert(point.shape.n);
    ks.insert(point.shape.k);
    double& slot = measured[{point.shape.m, point.shape.n, point.shape.k}];
    slot = std::max(slot, point.achieved_flops_per_s);
    double& best = best_by_flops[point.shape.flops()];
    best = std::max(best, point.achieved_flops_per_s);
  }
  const std::vector<std::pair<double, double>> flops_curve(best_by_flops.begin(), best_by_flops.end());
  // Each axis gains one node at four times its largest measured value. A node there takes the throughput
  // of its projection onto the measured lattice (the largest product's throughput is kept, as beyond the
  // nodes), raised to the measured maximum achievable when the node is at least the lattice's largest
  // in every dimension: the MAMF is what large products reach on that GPU.
  const int64_t top_m = *ms.rbegin(), top_n = *ns.rbegin(), top_k = *ks.rbegin();
  ms.insert(4 * top_m);
  ns.insert(4 * top_n);
  ks.insert(4 * top_k);
  auto measured_achieved = [&](int64_t m, int64_t n, int64_t k) {
    const auto it = measured.find({m, n, k});
    return it != measured.end() ? it->second : by_flops(flops_curve, GemmShape{m, n, k}.flops());
  };
  GpuKernelFigures::GemmLattice lattice;
  lattice.ceiling_flops_per_s = ceiling;
  for (int64_t m : ms) lattice.log_m.push_back(std::log(static_cast<double>(m)));
  for (int64_t n : ns) lattice.log_n.push_back(std::log(static_cast<double>(n)));
  for (int64_t k : ks) lattice.log_k.push_back(std::log(static_cast<double>(k)));
  const std::size_t nm = ms.size(), nn = ns.size(), nk = ks.size();
  lattice.log_time_s.assign(nm * nn * nk, 0.0);
  std::size_t index = 0;
  for (int64_t m : ms) {
    for (int64_t n : ns) {
      for (int64_t k : ks) {
        double achieved = measured_achieved(std::min(m, top_m), std::min(n, top_n), std::min(k, top_k));
        const bool beyond = m > top_m || n > top_n || k > top_k;
        if (beyond && m >= top_m && n >= top_n && k >= top_k) achieved = std::max(achieved, max_achievable);
        lattice.log_time_s[index++] = std::log(GemmShape{m, n, k}.flops() / achieved);
      }
    }
  }
  // Monotone along every axis: the mean (in log time) of the majorant, a running maximum along each axis
  // in turn (the largest time of the points no larger in any dimension), and the minorant, a running
  // minimum from the far end (the smallest time of the points no smaller in any dimension).
  std::vector<double> upper = lattice.log_time_s, lower = lattice.log_time_s;
  auto at = [&](std::vector<double>& v, std::size_t i, std::size_t j, std::size_t l) -> double& {
    return v[(i * nn + j) * nk + l];
  };
  for (std::size_t i = 0; i < nm; ++i) {
    for (std::size_t j = 0; j < nn; ++j) {
      for (std::size_t l = 0; l < nk; ++l) {
        double& u = at(upper, i, j, l);
        if (i > 0) u = std::max(u, at(upper, i - 1, j, l));
        if (j > 0) u = std::max(u, at(upper, i, j - 1, l));
        if (l > 0) u = std::max(u, at(upper, i, j, l - 1));
      }
    }
  }
  for (std::size_t i = nm; i-- > 0;) {
    for (std::size_t j = nn; j-- > 0;) {
      for (std::size_t l = nk; l-- > 0;) {
        double& v = at(lower, i, j, l);
        if (i + 1 < nm) v = std::min(v, at(lower, i + 1, j, l));
        if (j + 1 < nn) v = std::min(v, at(lower, i, j + 1, l));
        if (l + 1 < nk) v = std::min(v, at(lower, i, j, l + 1));
      }
    }
  }
  for (std::size_t p = 0; p < lattice.log_time_s.size(); ++p) lattice.log_time_s[p] = 0.5 * (upper[p] + lower[p]);
  return lattice;
}

// Where x falls on an axis: the lower node, the weight of the upper one, and how far beyond the last
// node it lies (0 inside; below the first node it is held at the first).
struct AxisPosition {
  std::size_t lower = 0;
  double weight = 0;
  double beyond = 0;
};

AxisPosition locate(const std::vector<double>& axis, double x) {
  AxisPosition position;
  if (axis.size() == 1 || x <= axis.front()) return position;
  if (x >= axis.back()) {
    position.lower = axis.size() - 2;
    position.weight = 1;
    position.beyond = x - axis.back();
    return position;
  }
  const auto upper = std::upper_bound(axis.begin(), axis.end(), x);
  position.lower = static_cast<std::size_t>(upper - axis.begin()) - 1;
  position.weight = (x - axis[position.lower]) / (axis[position.lower + 1] - axis[position.lower]);
  return position;
}

void read_gemm(Reader& reader, const json& doc, const HardwareSpec& hardware, GpuKernelFigures& figures) {
  const json& section = reader.member(doc, "gemm", "gemm");
  if (!section.is_object() || section.empty()) reader.fail("gemm", "must be an object with a table per dtype");
  std::map<ComputeDType, std::string> aliases;
  std::map<ComputeDType, double> max_achievable;
  for (const auto& item : section.items()) {
    const std::string field = "gemm." + item.key();
    const ComputeDType dtype = dtype_or_fail(reader, item.key(), field, "not a dtype (fp32, tf32, bf16, fp16, fp8)");
    const double peak = peak_or_fail(reader, hardware, dtype, field);
    const json& table = item.value();
    if (!table.is_object()) reader.fail(field, "must be an object");
    if (read_same_as(reader, table, field, dtype, aliases)) continue;
    reader.only_known(table, field, {"unit", "source", "derived", "rule", "shapes", "max_achievable"});
    reader.record_source(table, field);
    const double factor = reader.unit(table, field, Quantity::kFlops).factor;
    const json& shapes = reader.member(table, "shapes", field + ".shapes");
    if (!shapes.is_array() || shapes.empty()) reader.fail(field + ".shapes", "must be a non-empty array of [m, n, k, achieved]");
    std::vector<GpuKernelFigures::GemmPoint> points;
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      const std::string where = field + ".shapes[" + std::to_string(i) + "]";
      const json& row = shapes[i];
      if (!row.is_array() || row.size() != 4) reader.fail(where, "must be [m, n, k, achieved], got " + json_excerpt(row));
      GpuKernelFigures::GemmPoint point;
      point.shape = {reader.whole(row[0], where + "[0]"), reader.whole(row[1], where + "[1]"),
                     reader.whole(row[2], where + "[2]")};
      point.achieved_flops_per_s = reader.positive(row[3], where + "[3]") * factor;
      if (point.achieved_flops_per_s > peak * (1 + 1e-9)) {
        reader.fail(where + "[3]", "achieves more than the dense " + to_string(dtype) + " peak of " + hardware.name + " (" +
                                       std::to_string(peak / 1e12) + " TFLOP/s)");
      }
      points.push_back(point);
    }
    double ceiling = peak;
    if (table.contains("max_achievable")) {
      const double mamf = reader.figure(table, "max_achievable", field + ".max_achievable", Quantity::kFlops);
      if (mamf > peak * (1 + 1e-9)) reader.fail(field + ".max_achievable.value", "is above the dense peak");
      ceiling = std::min(ceiling, mamf);
      max_achievable[dtype] = mamf;
    }
    figures.gemm[dtype] = points;
    figures.gemm_lattice[dtype] = build_lattice(points, ceiling, max_achievable.count(dtype) ? max_achievable[dtype] : 0.0);
  }
  for (const auto& [dtype, target_name] : aliases) {
    const std::string field = "gemm." + to_string(dtype) + ".same_as";
    const ComputeDType target = dtype_or_fail(reader, target_name, field, "'" + target_name + "' is not a dtype");
    if (figures.gemm_lattice.count(target) == 0) reader.fail(field, "'" + target_name + "' has no measured table in this file");
    figures.gemm[dtype] = figures.gemm[target];
    GpuKernelFigures::GemmLattice lattice = figures.gemm_lattice[target];
    double ceiling = *hardware.peak(dtype);
    if (max_achievable.count(target) != 0) ceiling = std::min(ceiling, max_achievable[target]);
    lattice.ceiling_flops_per_s = ceiling;
    figures.gemm_lattice[dtype] = lattice;
  }
}

void read_attention(Reader& reader, const json& doc, const HardwareSpec& hardware, GpuKernelFigures& figures) {
  const json& section = reader.member(doc, "attention", "attention");
  if (!section.is_object() || section.empty()) reader.fail("attention", "must be an object with tables per dtype");
  std::map<ComputeDType, std::string> aliases;
  for (const auto& item : section.items()) {
    const std::string field = "attention." + item.key();
    const ComputeDType dtype = dtype_or_fail(reader, item.key(), field, "not a dtype (fp32, tf32, bf16, fp16, fp8)");
    const double peak = peak_or_fail(reader, hardware, dtype, field);
    figures.attention_peak_flops_per_s[dtype] = peak;
    const json& block = item.value();
    if (!block.is_object()) reader.fail(field, "must be an object");
    if (read_same_as(reader, block, field, dtype, aliases)) continue;
    reader.only_known(block, field, {"kernel", "unit", "tables"});
    figures.sources[field + ".kernel"] = reader.text(block, "kernel", field + ".kernel");
    const double factor = reader.unit(block, field, Quantity::kFlops).factor;
    const json& tables = reader.member(block, "tables", field + ".tables");
    if (!tables.is_array() || tables.empty()) reader.fail(field + ".tables", "must be a non-empty array");
    std::vector<GpuKernelFigures::AttentionPoint> points;
    std::set<std::tuple<int64_t, bool, bool>> seen;
    for (std::size_t t = 0; t < tables.size(); ++t) {
      const std::string where = field + ".tables[" + std::to_string(t) + "]";
      const json& table = tables[t];
      if (!table.is_object()) reader.fail(where, "must be an object");
      reader.only_known(table, where, {"head_dim", "causal", "pass", "seq", "values", "source", "derived", "rule"});
      reader.record_source(table, where);
      const int64_t head_dim = reader.whole(reader.member(table, "head_dim", where + ".head_dim"), where + ".head_dim");
      const json& causal = reader.member(table, "causal", where + ".causal");
      if (!causal.is_boolean()) reader.fail(where + ".causal", "must be true or false");
      const std::string pass = reader.text(table, "pass", where + ".pass");
      if (pass != "forward" && pass != "backward") reader.fail(where + ".pass", "must be \"forward\" or \"backward\"");
      if (!seen.insert({head_dim, causal.get<bool>(), pass == "backward"}).second) {
        reader.fail(where, "a second table for this head dim, mask and pass");
      }
      const json& seq = reader.member(table, "seq", where + ".seq");
      const json& values = reader.member(table, "values", where + ".values");
      if (!seq.is_array() || seq.empty() || !values.is_array() || values.size() != seq.size()) {
        reader.fail(where + ".values", "seq and values must be non-empty arrays of the same length");
      }
      int64_t previous = 0;
      for (std::size_t i = 0; i < seq.size(); ++i) {
        GpuKernelFigures::AttentionPoint point;
        point.head_dim = head_dim;
        point.causal = causal.get<bool>();
        point.backward = pass == "backward";
        point.seq = reader.whole(seq[i], where + ".seq[" + std::to_string(i) + "]");
        if (point.seq <= previous) reader.fail(where + ".seq", "must be ascending");
        previous = point.seq;
        point.achieved_flops_per_s = reader.positive(values[i], where + ".values[" + std::to_string(i) + "]") * factor;
        if (point.achieved_flops_per_s > peak * (1 + 1e-9)) {
          reader.fail(where + ".values[" + std::to_string(i) + "]", "achieves more than the dense " + to_string(dtype) + " peak");
        }
        points.push_back(point);
      }
    }
    figures.attention[dtype] = points;
  }
  for (const auto& [dtype, target_name] : aliases) {
    const std::string field = "attention." + to_string(dtype) + ".same_as";
    const ComputeDType target = dtype_or_fail(reader, target_name, field, "'" + target_name + "' is not a dtype");
    if (aliases.count(target) != 0 || figures.attention.count(target) == 0) {
      reader.fail(field, "'" + target_name + "' has no measured tables in this file");
    }
    figures.attention[dtype] = figures.attention[target];
  }
  for (const auto& [dtype, points] : figures.attention) {  // the curves attention_time_us reads (aliases too)
    std::vector<GpuKernelFigures::AttentionCurve>& curves = figures.attention_curves[dtype];
    for (const auto& point : points) {
      auto it = std::find_if(curves.begin(), curves.end(), [&](const GpuKernelFigures::AttentionCurve& c) {
        return c.head_dim == point.head_dim && c.causal == point.causal && c.backward == point.backward;
      });
      if (it == curves.end()) {
        curves.push_back({point.head_dim, point.causal, point.backward, {}, {}});
        it = curves.end() - 1;
      }
      it->log_seq.push_back(std::log(static_cast<double>(point.seq)));  // ascending within a table (checked)
      it->achieved_flops_per_s.push_back(point.achieved_flops_per_s);
    }
  }
}

std::string known_gpus(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code error;
  if (std::filesystem::is_directory(dir, error)) {
    for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
      if (entry.path().extension() == ".json") names.push_back(entry.path().stem().string());
    }
  }
  std::sort(names.begin(), names.end());
  std::string list;
  for (const auto& name : names) list += (list.empty() ? "" : ", ") + name;
  return list.empty() ? "none (is ITERTIME_KERNELS_DIR right?)" : list;
}

}  // namespace

double AttentionShape::forward_flops() const {
  const double flops = 4.0 * static_cast<double>(batch) * static_cast<double>(heads) * static_cast<double>(seq_q) *
                       static_cast<double>(seq_kv) * static_cast<double>(head_dim);
  return causal ? flops / 2 : flops;
}

double GpuKernelFigures::gemm_time_us(ComputeDType dtype, const GemmShape& shape) const {
  const auto it = gemm_lattice.find(dtype);
  if (it == gemm_lattice.end()) {
    throw UserError(path + ": no " + to_string(dtype) + " GEMM figures for " + gpu + " (see docs/kernels.md)");
  }
  if (shape.m <= 0 || shape.n <= 0 || shape.k <= 0) return 0;
  const GemmLattice& lattice = it->second;
  const AxisPosition pm = locate(lattice.log_m, std::log(static_cast<double>(shape.m)));
  const AxisPosition pn = locate(lattice.log_n, std::log(static_cast<double>(shape.n)));
  const AxisPosition pk = locate(lattice.log_k, std::log(static_cast<double>(shape.k)));
  const std::size_t nn = lattice.log_n.size(), nk = lattice.log_k.size();
  double log_time = 0;
  for (int a = 0; a < 2; ++a) {
    for (int b = 0; b < 2; ++b) {
      for (int c = 0; c < 2; ++c) {
        const double w = (a ? pm.weight : 1 - pm.weight) * (b ? pn.weight : 1 - pn.weight) * (c ? pk.weight : 1 - pk.weight);
        if (w == 0) continue;
        log_time += w * lattice.log_time_s[((pm.lower + a) * nn + (pn.lower + b)) * nk + (pk.lower + c)];
      }
    }
  }
  log_time += pm.beyond + pn.beyond + pk.beyond;
  const double time_s = std::max(std::exp(log_time), shape.flops() / lattice.ceiling_flops_per_s);
  return time_s * 1e6 + launch_overhead_us;
}

double GpuKernelFigures::attention_time_us(ComputeDType dtype, const AttentionShape& shape, bool backward) const {
  const auto it = attention_curves.find(dtype);
  if (it == attention_curves.end()) {
    throw UserError(path + ": no " + to_string(dtype) + " attention figures for " + gpu +
                    " (Megatron-Core's fp8 recipes keep attention in bf16; see docs/kernels.md)");
  }
  const double flops = shape.forward_flops() * (backward ? 2.5 : 1.0);
  if (flops <= 0) return 0;
  // The nearest measured head dim for this mask and pass (log distance, the smaller on a tie).
  const AttentionCurve* best = nullptr;
  double best_distance = std::numeric_limits<double>::infinity();
  for (const AttentionCurve& curve : it->second) {
    if (curve.causal != shape.causal || curve.backward != backward) continue;
    const double distance = std::abs(std::log(static_cast<double>(curve.head_dim) / static_cast<double>(shape.head_dim)));
    if (distance < best_distance - 1e-12 || (std::abs(distance - best_distance) <= 1e-12 && curve.head_dim < best->head_dim)) {
      best_distance = distance;
      best = &curve;
    }
  }
  if (best == nullptr) {
    throw UserError(path + ": no " + to_string(dtype) + std::string(shape.causal ? " causal" : " non-causal") +
                    (backward ? " backward" : " forward") + " attention figures for " + gpu);
  }
  const std::vector<double>& xs = best->log_seq;
  const std::vector<double>& ys = best->achieved_flops_per_s;
  const double x = 0.5 * (std::log(static_cast<double>(shape.seq_q)) + std::log(static_cast<double>(shape.seq_kv)));
  double achieved = ys.front();
  if (x >= xs.back()) {
    achieved = ys.back();
  } else if (x > xs.front()) {
    const std::size_t upper = static_cast<std::size_t>(std::upper_bound(xs.begin(), xs.end(), x) - xs.begin());
    const double w = (x - xs[upper - 1]) / (xs[upper] - xs[upper - 1]);
    achieved = (1 - w) * ys[upper - 1] + w * ys[upper];
  }
  achieved = std::min(achieved, attention_peak_flops_per_s.at(dtype));
  return flops / achieved * 1e6 + launch_overhead_us;
}

double GpuKernelFigures::memory_bound_time_us(double bytes) const {
  if (bytes <= 0) return 0;
  return bytes / memory_bandwidth_bytes_per_s * 1e6 + launch_overhead_us;
}

std::string GpuKernelFigures::shown_path() const { return shown_data_path(path, ITERTIME_DEFAULT_KERNELS_DIR, "data/kernels"); }

std::string GpuKernelFigures::summary() const { return "kernel figures " + shown_path() + " (" + summary_text + ")"; }

std::string kernel_figures_dir() { return data_folder("ITERTIME_KERNELS_DIR", ITERTIME_DEFAULT_KERNELS_DIR); }

GpuKernelFigures load_gpu_kernel_figures(const HardwareSpec& hardware, const std::string& dir) {
  const std::string path = device_file(dir, hardware.name);
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    throw UserError("no published kernel figures for '" + hardware.name + "' in " + dir +
                    "; GPUs with figures: " + known_gpus(dir) + " (docs/kernels.md)");
  }
  const json doc = read_json_object_file(path, {"no such file", "is a directory, not kernel figures", "cannot be read"});
  GpuKernelFigures figures;
  figures.path = path;
  Reader reader(path, figures);
  reader.only_known(doc, "",
                    {"name", "description", "notes", "summary", "launch_overhead", "memory_bandwidth", "gemm", "attention"});
  figures.gpu = reader.text(doc, "name", "name");
  if (figures.gpu != hardware.name) {
    reader.fail("name", "'" + figures.gpu + "' differs from the hardware description's name '" + hardware.name + "'");
  }
  reader.text(doc, "description", "description");
  if (doc.contains("notes")) reader.text(doc, "notes", "notes");
  figures.summary_text = reader.text(doc, "summary", "summary");
  figures.launch_overhead_us = reader.figure(doc, "launch_overhead", "launch_overhead", Quantity::kTime);
  figures.memory_bandwidth_bytes_per_s = reader.figure(doc, "memory_bandwidth", "memory_bandwidth", Quantity::kBandwidth);
  if (figures.memory_bandwidth_bytes_per_s > hardware.memory_bandwidth_bytes_per_s * (1 + 1e-9)) {
    reader.fail("memory_bandwidth.value", "achieves more than the description's peak memory bandwidth");
  }
  read_gemm(reader, doc, hardware, figures);
  read_attention(reader, doc, hardware, figures);
  return figures;
}

}  // namespace itertime::predict::framework

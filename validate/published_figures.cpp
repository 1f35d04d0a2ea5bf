// published_figures.cpp: reading data/published/*.json (published_figures.hpp; format in docs/framework.md).
#include "validate/published_figures.hpp"

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "common/errors.hpp"
#include "common/input_file.hpp"
#include "common/json_excerpt.hpp"
#include "common/json_fields.hpp"
#include "common/precision.hpp"
#include "common/training_techniques.hpp"
#include "predict/framework/megatron_layout_rules.hpp"

#ifndef ITERTIME_DEFAULT_PUBLISHED_DIR
#define ITERTIME_DEFAULT_PUBLISHED_DIR "data/published"
#endif

namespace itertime::validate {
namespace {

using nlohmann::json;
namespace fw = predict::framework;

struct UnitText {
  const char* text;
  MeasuredUnit unit;
};
constexpr UnitText kUnits[] = {
    {"TFLOP/s per GPU", MeasuredUnit::kTflopsPerGpu},
    {"s per iteration", MeasuredUnit::kSecondsPerIteration},
    {"tokens/s", MeasuredUnit::kTokensPerSecond},
    {"tokens/s per GPU", MeasuredUnit::kTokensPerSecondPerGpu},
};

// Reads one file; every failure names the file, the row and the field.
class Reader : public JsonFieldReader {
 public:
  explicit Reader(std::string source) : JsonFieldReader(std::move(source)) {}

  const json& object(const json& parent, const std::string& key, const std::string& path) const {
    if (!parent.contains(key)) fail(path, "missing");
    const json& value = parent.at(key);
    if (!value.is_object()) fail(path, "must be an object, got " + json_excerpt(value));
    return value;
  }

  std::string text(const json& parent, const std::string& key, const std::string& path, bool required = true) const {
    if (!parent.contains(key)) {
      if (required) fail(path, "missing");
      return "";
    }
    const json& value = parent.at(key);
    if (!value.is_string() || (required && value.get<std::string>().empty()))
      fail(path, "must be a non-empty string, got " + json_excerpt(value));
    return value.get<std::string>();
  }

  // A positive integer (a JSON integer, or a number with no fraction).
  int64_t count(const json& parent, const std::string& key, const std::string& path, int64_t minimum = 1) const {
    if (!parent.contains(key)) fail(path, "missing");
    const json& value = parent.at(key);
    if (!value.is_number()) fail(path, "must be an integer, got " + json_excerpt(value));
    const double number = value.get<double>();
    if (!std::isfinite(number) || std::floor(number) != number || number < static_cast<double>(minimum) || number > 1e15)
      fail(path, "must be an integer >= " + std::to_string(minimum) + ", got " + json_excerpt(value));
    return static_cast<int64_t>(number);
  }

  double positive(const json& parent, const std::string& key, const std::string& path) const {
    if (!parent.contains(key)) fail(path, "missing");
    const json& value = parent.at(key);
    if (!value.is_number()) fail(path, "must be a number, got " + json_excerpt(value));
    const double number = value.get<double>();
    if (!std::isfinite(number) || number <= 0) fail(path, "must be a positive number, got " + json_excerpt(value));
    return number;
  }

  bool flag(const json& parent, const std::string& key, const std::string& path) const {
    if (!parent.contains(key)) fail(path, "missing (write true or false: what the source states)");
    const json& value = parent.at(key);
    if (!value.is_boolean()) fail(path, "must be true or false, got " + json_excerpt(value));
    return value.get<bool>();
  }

  // One of `choices` (the text), refused otherwise with the choices named.
  std::string choice(const json& parent, const std::string& key, const std::string& path,
                     const std::vector<std::string>& choices) const {
    const std::string value = text(parent, key, path);
    for (const auto& c : choices)
      if (c == value) return value;
    std::string list;
    for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
    fail(path, "'" + value + "' is not one of " + list);
  }
};

fw::TransformerShape read_model(const Reader& r, const json& row) {
  const json& m = r.object(row, "model", "model");
  r.only_known(m, "model",
               {"name", "hidden", "ffn", "layers", "heads", "kv_heads", "head_dim", "vocab", "mlp", "norm", "positions",
                "learned_positions", "linear_bias", "tied_embeddings", "notes"});
  fw::TransformerShape s;
  s.name = r.text(m, "name", "model.name");
  s.hidden = r.count(m, "hidden", "model.hidden");
  s.ffn = r.count(m, "ffn", "model.ffn");
  s.layers = r.count(m, "layers", "model.layers");
  s.heads = r.count(m, "heads", "model.heads");
  s.kv_heads = r.count(m, "kv_heads", "model.kv_heads");
  s.head_dim = r.count(m, "head_dim", "model.head_dim");
  s.vocab = r.count(m, "vocab", "model.vocab");
  const std::string mlp = r.choice(m, "mlp", "model.mlp", {"gelu", "swiglu", "squared-relu"});
  s.mlp = mlp == "gelu" ? fw::MlpKind::kGelu : mlp == "squared-relu" ? fw::MlpKind::kSquaredRelu : fw::MlpKind::kSwiGlu;
  s.norm = r.choice(m, "norm", "model.norm", {"layernorm", "rmsnorm"}) == "layernorm" ? fw::NormKind::kLayerNorm
                                                                                      : fw::NormKind::kRmsNorm;
  // "none": no position embedding in the stack's input (ALiBi adds a bias to the attention scores instead).
  const std::string positions = r.choice(m, "positions", "model.positions", {"rotary", "learned", "none"});
  s.rotary = positions == "rotary";
  if (positions == "learned") {
    s.learned_positions = r.count(m, "learned_positions", "model.learned_positions");
  } else if (m.contains("learned_positions")) {
    r.fail("model.learned_positions", "only with \"positions\": \"learned\"");
  }
  s.linear_bias = r.flag(m, "linear_bias", "model.linear_bias");
  s.tied_embeddings = r.flag(m, "tied_embeddings", "model.tied_embeddings");
  if (s.heads % s.kv_heads != 0)
    r.fail("model.kv_heads", std::to_string(s.kv_heads) + " does not divide the " + std::to_string(s.heads) + " heads");
  return s;
}

ParallelConfig read_layout(const Reader& r, const json& row, const fw::TransformerShape& shape, int gpus) {
  const json& l = r.object(row, "layout", "layout");
  r.only_known(l, "layout", {"dp", "tp", "pp", "cp", "vp", "micro_batch", "global_batch", "seq_len"});
  ParallelConfig c;
  c.dp = static_cast<int>(r.count(l, "dp", "layout.dp"));
  c.tp = static_cast<int>(r.count(l, "tp", "layout.tp"));
  c.pp = static_cast<int>(r.count(l, "pp", "layout.pp"));
  c.cp = static_cast<int>(r.count(l, "cp", "layout.cp"));
  c.vp = static_cast<int>(r.count(l, "vp", "layout.vp"));
  c.micro_batch = static_cast<int>(r.count(l, "micro_batch", "layout.micro_batch"));
  c.global_batch = static_cast<int>(r.count(l, "global_batch", "layout.global_batch"));
  c.seq_len = static_cast<int>(r.count(l, "seq_len", "layout.seq_len"));
  if (int64_t{c.dp} * c.tp * c.pp * c.cp != gpus)
    r.fail("layout", "dp x tp x pp x cp = " + std::to_string(int64_t{c.dp} * c.tp * c.pp * c.cp) + " ranks, but gpus is " +
                         std::to_string(gpus));
  // The one rule set (predict/framework/megatron_layout_rules.hpp): what Megatron-LM runs, with the split
  // it would take (the plain one, else the embedding and loss counted as layers).
  const std::vector<fw::LayoutRuleBreak> broken = fw::layout_rule_breaks(shape, c);
  if (!broken.empty()) r.fail("layout." + broken.front().field, broken.front().text);
  return c;
}

fw::FrameworkRecipe read_recipe(const Reader& r, const json& row, const ParallelConfig& config) {
  fw::FrameworkRecipe recipe;
  const std::string precision = r.choice(row, "precision", "precision", {"amp-bf16", "amp-fp16", "fp8"});
  recipe.precision = parse_precision(precision).name;
  const json& t = r.object(row, "techniques", "techniques");
  r.only_known(t, "techniques",
               {"sequence_parallel", "distributed_optimizer", "recompute", "overlap_gradient_reduction",
                "overlap_parameter_gather", "tp_comm_overlap", "fp8_recipe", "fp8_param_gather", "attention", "dropout"});
  TrainingTechniques& k = recipe.techniques;
  k.sequence_parallel = r.flag(t, "sequence_parallel", "techniques.sequence_parallel");
  k.distributed_optimizer = r.flag(t, "distributed_optimizer", "techniques.distributed_optimizer");
  k.recompute = parse_recompute(r.choice(t, "recompute", "techniques.recompute", {"none", "selective", "full"}));
  k.overlap_gradient_reduction = r.flag(t, "overlap_gradient_reduction", "techniques.overlap_gradient_reduction");
  k.overlap_parameter_gather = r.flag(t, "overlap_parameter_gather", "techniques.overlap_parameter_gather");
  k.vocab_parallel = config.tp > 1;  // Megatron's embedding, head and loss are vocabulary-parallel wherever tp > 1
  recipe.tp_comm_overlap = r.flag(t, "tp_comm_overlap", "techniques.tp_comm_overlap");
  // The stack's attention core (TE's fused kernel, or Megatron-LM's before TE) and dropout, as the source runs them.
  recipe.unfused_attention = r.choice(t, "attention", "techniques.attention", {"fused", "unfused"}) == "unfused";
  recipe.dropout = r.flag(t, "dropout", "techniques.dropout");
  if (k.sequence_parallel && config.tp == 1) r.fail("techniques.sequence_parallel", "needs tp > 1");
  if (recipe.tp_comm_overlap && !k.sequence_parallel) r.fail("techniques.tp_comm_overlap", "needs sequence_parallel");
  if (k.overlap_parameter_gather && !(k.distributed_optimizer && k.overlap_gradient_reduction))
    r.fail("techniques.overlap_parameter_gather", "needs distributed_optimizer and overlap_gradient_reduction");
  if (recipe.precision == PrecisionName::kFp8) {
    recipe.fp8_recipe =
        predict::framework::parse_fp8_recipe(r.choice(t, "fp8_recipe", "techniques.fp8_recipe", {"delayed", "current"}));
    if (t.contains("fp8_param_gather")) recipe.fp8_param_gather = r.flag(t, "fp8_param_gather", "techniques.fp8_param_gather");
  } else {
    for (const char* key : {"fp8_recipe", "fp8_param_gather"})
      if (t.contains(key)) r.fail(std::string("techniques.") + key, "only with \"precision\": \"fp8\"");
  }
  return recipe;
}

void read_measured(const Reader& r, const json& row, PublishedRow& out) {
  const json& m = r.object(row, "measured", "measured");
  r.only_known(m, "measured", {"value", "unit", "flop_formula"});
  out.measured_value = r.positive(m, "value", "measured.value");
  std::vector<std::string> units;
  for (const auto& u : kUnits) units.emplace_back(u.text);
  const std::string unit = r.choice(m, "unit", "measured.unit", units);
  for (const auto& u : kUnits)
    if (unit == u.text) out.unit = u.unit;
  if (out.unit == MeasuredUnit::kTflopsPerGpu) {
    r.choice(m, "flop_formula", "measured.flop_formula", {"narayanan2021"});
    out.formula = FlopFormula::kNarayanan2021;
  } else if (m.contains("flop_formula")) {
    r.fail("measured.flop_formula", "only with the unit \"TFLOP/s per GPU\"");
  }
}

void read_fabric(const Reader& r, const json& row, PublishedRow& out) {
  if (!row.contains("fabric")) return;
  const json& f = r.object(row, "fabric", "fabric");
  r.only_known(f, "fabric", {"nics_per_node", "nic_gbit_per_s", "source"});
  if (f.contains("nics_per_node"))
    out.fabric.nics_per_node = static_cast<int>(r.count(f, "nics_per_node", "fabric.nics_per_node"));
  if (f.contains("nic_gbit_per_s"))
    out.fabric.nic_bandwidth_bytes_per_s = r.positive(f, "nic_gbit_per_s", "fabric.nic_gbit_per_s") * 1e9 / 8.0;
  out.fabric.source = r.text(f, "source", "fabric.source");
}

PublishedRow read_row(Reader& r, const json& row, std::size_t index) {
  if (!row.is_object()) {
    r.at_row("row " + std::to_string(index));
    r.fail("rows[" + std::to_string(index) + "]", "must be an object, got " + json_excerpt(row));
  }
  std::string id = "row " + std::to_string(index);
  if (row.contains("id") && row.at("id").is_string())
    id = "row '" + row.at("id").get<std::string>() + "' (index " + std::to_string(index) + ")";
  r.at_row(id);
  r.only_known(row, "",
               {"id", "where", "hardware", "host_cpu", "fabric", "gpus", "model", "layout", "precision", "techniques", "measured",
                "notes"});
  PublishedRow out;
  out.id = r.text(row, "id", "id");
  out.where = r.text(row, "where", "where");
  out.hardware = r.text(row, "hardware", "hardware");
  out.amd_host_cpu = r.choice(row, "host_cpu", "host_cpu", {"amd", "intel"}) == "amd";
  read_fabric(r, row, out);
  out.gpus = static_cast<int>(r.count(row, "gpus", "gpus"));
  out.shape = read_model(r, row);
  out.config = read_layout(r, row, out.shape, out.gpus);
  out.recipe = read_recipe(r, row, out.config);
  read_measured(r, row, out);
  out.notes = r.text(row, "notes", "notes", /*required=*/false);
  return out;
}

}  // namespace

std::string to_string(MeasuredUnit unit) {
  for (const auto& u : kUnits)
    if (u.unit == unit) return u.text;
  return "?";
}

std::string to_string(FlopFormula formula) { return formula == FlopFormula::kNarayanan2021 ? "narayanan2021" : ""; }

PublishedSource parse_published_figures(const std::string& json_text, const std::string& source_name) {
  const json doc = parse_json_text(json_text, source_name);
  Reader r(source_name);
  if (!doc.is_object()) r.fail("", "the file must hold an object {\"source\": ..., \"rows\": [...]}");
  r.only_known(doc, "", {"source", "rows"});
  PublishedSource out;
  out.path = source_name;
  const json& s = r.object(doc, "source", "source");
  r.only_known(s, "source", {"id", "title", "reference", "framework", "notes"});
  out.id = r.text(s, "id", "source.id");
  out.title = r.text(s, "title", "source.title");
  out.reference = r.text(s, "reference", "source.reference");
  out.framework = r.text(s, "framework", "source.framework");
  out.notes = r.text(s, "notes", "source.notes", /*required=*/false);
  if (!doc.contains("rows")) r.fail("rows", "missing");
  const json& rows = doc.at("rows");
  if (!rows.is_array() || rows.empty()) r.fail("rows", "must be a non-empty array of rows, got " + json_excerpt(rows));
  std::set<std::string> ids;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    PublishedRow row = read_row(r, rows.at(i), i);
    if (!ids.insert(row.id).second) r.fail("id", "'" + row.id + "' appears twice in the file");
    out.rows.push_back(std::move(row));
  }
  return out;
}

PublishedSource load_published_figures(const std::string& path) {
  const std::string text = read_input_file(path, {"no such file of published figures; see data/published/",
                                                  "is a directory; pass a data/published/*.json file", "cannot be read"});
  return parse_published_figures(text, path);
}

double formula_flops_per_iteration(FlopFormula formula, const PublishedRow& row) {
  if (formula != FlopFormula::kNarayanan2021) return 0;
  const double B = row.config.global_batch, s = row.config.seq_len, l = static_cast<double>(row.shape.layers),
               h = static_cast<double>(row.shape.hidden), V = static_cast<double>(row.shape.vocab);
  return 96.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h));
}

double measured_seconds_per_iteration(const PublishedRow& row) {
  const double tokens = static_cast<double>(row.config.global_batch) * row.config.seq_len;
  switch (row.unit) {
    case MeasuredUnit::kSecondsPerIteration: return row.measured_value;
    case MeasuredUnit::kTflopsPerGpu:
      return formula_flops_per_iteration(row.formula, row) / (row.measured_value * 1e12 * row.gpus);
    case MeasuredUnit::kTokensPerSecond: return tokens / row.measured_value;
    case MeasuredUnit::kTokensPerSecondPerGpu: return tokens / (row.measured_value * row.gpus);
  }
  return 0;
}

std::string published_figures_dir() { return ITERTIME_DEFAULT_PUBLISHED_DIR; }

}  // namespace itertime::validate

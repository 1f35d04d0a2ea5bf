// test_published_figures.cpp: the reader of data/published/*.json (validate/published_figures.hpp): the
// shipped files parse, their sizes agree with what the sources print, the FLOP-rate conversion follows the
// source's formula, and a bad row is refused in one line naming the file, the row and the field.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "common/errors.hpp"
#include "validate/published_figures.hpp"

namespace itertime::validate {
namespace {

using nlohmann::json;

const std::string kDir = std::string(ITERTIME_SOURCE_DIR) + "/data/published/";

// One valid row (a GPT on A100s, measured as a FLOP rate) to break field by field.
json good_row() {
  return json::parse(R"({
    "id": "small", "where": "Table 1, row small", "hardware": "a100-sxm-80gb", "host_cpu": "amd", "gpus": 16,
    "model": {"name": "GPT small", "hidden": 1024, "ffn": 4096, "layers": 8, "heads": 16, "kv_heads": 16, "head_dim": 64,
              "vocab": 51200, "mlp": "gelu", "norm": "layernorm", "positions": "learned", "learned_positions": 2048,
              "linear_bias": true, "tied_embeddings": true},
    "layout": {"dp": 4, "tp": 2, "pp": 2, "cp": 1, "vp": 2, "micro_batch": 2, "global_batch": 64, "seq_len": 2048},
    "precision": "amp-fp16",
    "techniques": {"attention": "unfused", "dropout": true, "sequence_parallel": false, "distributed_optimizer": false,
                   "recompute": "full", "overlap_gradient_reduction": true, "overlap_parameter_gather": false,
                   "tp_comm_overlap": false},
    "measured": {"value": 100, "unit": "TFLOP/s per GPU", "flop_formula": "narayanan2021"}
  })");
}

std::string file_with(const json& row) {
  json doc;
  doc["source"] = {{"id", "test"}, {"title", "a test"}, {"reference", "none"}, {"framework", "Megatron-LM"}};
  doc["rows"] = json::array({row});
  return doc.dump();
}

// The UserError's text for `text`, or "" when it parses.
std::string refusal(const std::string& text) {
  try {
    parse_published_figures(text, "bad.json");
  } catch (const UserError& error) {
    return error.what();
  }
  return "";
}

// Refused, on one line naming the file, the row and the field.
void expect_refused(const json& row, const std::string& field) {
  const std::string message = refusal(file_with(row));
  ASSERT_FALSE(message.empty()) << "accepted a row with a bad " << field;
  EXPECT_NE(message.find("bad.json: "), std::string::npos) << message;
  EXPECT_NE(message.find("row 'small' (index 0)"), std::string::npos) << message;
  EXPECT_NE(message.find("field '" + field + "'"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

// good_row() with `edit` applied is refused, as expect_refused says.
template <class Edit>
void refused_after(const Edit& edit, const std::string& field) {
  json row = good_row();
  edit(row);
  expect_refused(row, field);
}

TEST(PublishedFigures, GoodRowParses) {
  const PublishedSource source = parse_published_figures(file_with(good_row()), "good.json");
  ASSERT_EQ(source.rows.size(), 1u);
  const PublishedRow& row = source.rows[0];
  EXPECT_EQ(row.config.layout_text(), "dp4-tp2-pp2-cp1-vp2");
  EXPECT_EQ(row.shape.mlp, predict::framework::MlpKind::kGelu);
  EXPECT_FALSE(row.shape.rotary);
  EXPECT_EQ(row.shape.learned_positions, 2048);
  EXPECT_TRUE(row.recipe.techniques.vocab_parallel);  // tp > 1
  EXPECT_EQ(row.recipe.techniques.recompute, Recompute::kFull);
  EXPECT_TRUE(row.recipe.unfused_attention);
  EXPECT_TRUE(row.recipe.dropout);
  EXPECT_EQ(row.recipe.precision, PrecisionName::kAmpFp16);
  EXPECT_TRUE(row.amd_host_cpu);
  // 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) / (rate x GPUs).
  const double flops = 96.0 * 64 * 2048 * 8 * 1024.0 * 1024.0 * (1 + 2048.0 / (6 * 1024) + 51200.0 / (16 * 8 * 1024));
  EXPECT_DOUBLE_EQ(formula_flops_per_iteration(FlopFormula::kNarayanan2021, row), flops);
  EXPECT_NEAR(measured_seconds_per_iteration(row), flops / (100e12 * 16), 1e-12);
}

TEST(PublishedFigures, Fp8RowParses) {
  json row = good_row();
  row["precision"] = "fp8";
  row["techniques"]["fp8_recipe"] = "current";
  row["techniques"]["fp8_param_gather"] = true;
  const PublishedRow parsed = parse_published_figures(file_with(row), "fp8.json").rows[0];
  EXPECT_EQ(parsed.recipe.precision, PrecisionName::kFp8);
  EXPECT_EQ(parsed.recipe.fp8_recipe, predict::framework::Fp8Recipe::kCurrent);
  EXPECT_TRUE(parsed.recipe.fp8_param_gather);
}

TEST(PublishedFigures, OtherUnitsConvert) {
  json row = good_row();
  row["measured"] = {{"value", 2.5}, {"unit", "s per iteration"}};
  EXPECT_DOUBLE_EQ(measured_seconds_per_iteration(parse_published_figures(file_with(row), "t.json").rows[0]), 2.5);
  row["measured"] = {{"value", 65536}, {"unit", "tokens/s"}};
  EXPECT_DOUBLE_EQ(measured_seconds_per_iteration(parse_published_figures(file_with(row), "t.json").rows[0]),
                   64.0 * 2048 / 65536);
  row["measured"] = {{"value", 4096}, {"unit", "tokens/s per GPU"}};
  EXPECT_DOUBLE_EQ(measured_seconds_per_iteration(parse_published_figures(file_with(row), "t.json").rows[0]),
                   64.0 * 2048 / (4096 * 16));
}

TEST(PublishedFigures, BadRowsAreRefusedNamingRowAndField) {
  refused_after([](json& r) { r["layout"].erase("tp"); }, "layout.tp");
  // 4 x 2 x 2 x 1 = 16 ranks
  refused_after([](json& r) { r["gpus"] = 32; }, "layout");
  // not a multiple of dp x micro-batch = 8
  refused_after([](json& r) { r["layout"]["global_batch"] = 60; }, "layout.global_batch");
  // tp 3 does not divide the 16 heads
  refused_after(
      [](json& r) {
        r["layout"]["tp"] = 3;
        r["gpus"] = 24;
      },
      "layout.tp");
  // 8 layers over pp 2 x vp 3
  refused_after([](json& r) { r["layout"]["vp"] = 3; }, "layout.vp");
  refused_after([](json& r) { r["model"]["hidden"] = -1024; }, "model.hidden");
  refused_after([](json& r) { r["model"]["layers"] = 8.5; }, "model.layers");
  refused_after([](json& r) { r["model"]["mlp"] = "relu"; }, "model.mlp");
  refused_after([](json& r) { r["model"]["kv_heads"] = 3; }, "model.kv_heads");
  // with learned_positions still there
  refused_after([](json& r) { r["model"]["positions"] = "rotary"; }, "model.learned_positions");
  // Megatron's framework model runs amp-bf16, amp-fp16 or fp8
  refused_after([](json& r) { r["precision"] = "fp32"; }, "precision");
  refused_after([](json& r) { r["techniques"].erase("recompute"); }, "techniques.recompute");
  // the stack's attention is stated, never a default
  refused_after([](json& r) { r["techniques"].erase("attention"); }, "techniques.attention");
  refused_after([](json& r) { r["techniques"]["attention"] = "flash"; }, "techniques.attention");
  refused_after([](json& r) { r["techniques"].erase("dropout"); }, "techniques.dropout");
  // without sequence parallelism
  refused_after([](json& r) { r["techniques"]["tp_comm_overlap"] = true; }, "techniques.tp_comm_overlap");
  // without the distributed optimizer
  refused_after([](json& r) { r["techniques"]["overlap_parameter_gather"] = true; }, "techniques.overlap_parameter_gather");
  // with amp-fp16
  refused_after([](json& r) { r["techniques"]["fp8_param_gather"] = true; }, "techniques.fp8_param_gather");
  // without its scaling recipe
  refused_after([](json& r) { r["precision"] = "fp8"; }, "techniques.fp8_recipe");
  // a FLOP rate without the source's formula
  refused_after([](json& r) { r["measured"].erase("flop_formula"); }, "measured.flop_formula");
  refused_after([](json& r) { r["measured"]["unit"] = "samples/s"; }, "measured.unit");
  refused_after([](json& r) { r["measured"]["value"] = 0; }, "measured.value");
  // a misspelt field is not ignored
  refused_after([](json& r) { r["hardwar"] = "a100-sxm-80gb"; }, "hardwar");
  // without its source
  refused_after([](json& r) { r["fabric"] = {{"nics_per_node", 4}}; }, "fabric.source");
}

TEST(PublishedFigures, BadFilesAreRefused) {
  EXPECT_NE(refusal("{"), "");
  // A number JSON cannot hold is refused as text that is not JSON (it escaped as json::out_of_range).
  EXPECT_NE(refusal(R"({"rows": [1e999]})").find("bad.json: not valid JSON"), std::string::npos);
  EXPECT_NE(refusal("[]").find("bad.json"), std::string::npos);
  json doc = json::parse(file_with(good_row()));
  doc["rows"] = json::array();
  EXPECT_NE(refusal(doc.dump()).find("field 'rows'"), std::string::npos);
  doc["rows"] = json::array({good_row(), good_row()});
  EXPECT_NE(refusal(doc.dump()).find("appears twice"), std::string::npos);
  doc["rows"] = json::array({good_row(), 7});
  EXPECT_NE(refusal(doc.dump()).find("row 1"), std::string::npos);
  doc = json::parse(file_with(good_row()));
  doc["source"].erase("reference");
  EXPECT_NE(refusal(doc.dump()).find("field 'source.reference'"), std::string::npos);
  EXPECT_THROW(load_published_figures(kDir + "no-such-file.json"), UserError);
}

// The shipped files: Table 1 of Narayanan et al. 2021, whose "Number of parameters (billion)" column the
// shapes must reproduce, and the BLOOM 176B log line.
TEST(PublishedFigures, ShippedNarayananTable) {
  const PublishedSource source = load_published_figures(kDir + "narayanan2021-table1.json");
  ASSERT_EQ(source.rows.size(), 10u);
  const double billions[] = {1.7, 3.6, 7.5, 18.4, 39.1, 76.1, 145.6, 310.1, 529.6, 1008.0};
  for (std::size_t i = 0; i < source.rows.size(); ++i) {
    const PublishedRow& row = source.rows[i];
    EXPECT_NEAR(static_cast<double>(row.shape.total_params()) / 1e9, billions[i], 0.051) << row.id;  // printed to 0.1 B
    EXPECT_EQ(row.config.seq_len, 2048) << row.id;
    EXPECT_EQ(row.unit, MeasuredUnit::kTflopsPerGpu) << row.id;
  }
  // 1T: 163 TFLOP/s per GPU on 3072 GPUs is 502 PFLOP/s ("Achieved aggregate petaFLOPs" 502.0), ~102.6 s.
  const PublishedRow& trillion = source.rows.back();
  EXPECT_EQ(trillion.id, "1T");
  EXPECT_NEAR(measured_seconds_per_iteration(trillion), 102.6, 0.2);
  EXPECT_NEAR(formula_flops_per_iteration(trillion.formula, trillion) / measured_seconds_per_iteration(trillion) / 1e15,
              163.0 * 3072 / 1000, 1e-9);
}

TEST(PublishedFigures, ShippedBloom) {
  const PublishedSource source = load_published_figures(kDir + "bigscience-bloom176b.json");
  ASSERT_EQ(source.rows.size(), 1u);
  const PublishedRow& row = source.rows[0];
  EXPECT_DOUBLE_EQ(measured_seconds_per_iteration(row), 104.70);
  // README: one layer 12h^2 + 13h = 2,466,437,120 parameters; 176B in all.
  EXPECT_EQ(row.shape.layer_params(), 2'466'437'120);
  EXPECT_NEAR(static_cast<double>(row.shape.total_params()) / 1e9, 176.2, 0.5);
  ASSERT_TRUE(row.fabric.nics_per_node.has_value());
  EXPECT_EQ(*row.fabric.nics_per_node, 4);
  EXPECT_DOUBLE_EQ(*row.fabric.nic_bandwidth_bytes_per_s, 12.5e9);
}

}  // namespace
}  // namespace itertime::validate

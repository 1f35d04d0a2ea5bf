// test_megatron_launch_lines.cpp: the launch lines `plan --emit megatron-args` prints start (issue 44): for a
// sample of a large plan's candidates (LLaMA 3.1 405B on 2,048 nodes of h100-sxm) each line passes a
// transcription, in this file, of Megatron-LM's own start-up checks on the words of the line (arguments.py
// validate_args, transformer_config.py, schedules.py at d98e8a64ddf34856e74b24714e3bedb2f5a39553: written
// here apart from predict/framework/megatron_layout_rules.cpp so that the two can disagree), reads back
// (formats' Megatron-LM reader) to the same candidate, and predicts the same time.
// Invariants: no file is written; the plan's space is small enough for a unit test (seconds).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "common/model_spec.hpp"
#include "formats/megatron_args.hpp"
#include "formats/megatron_emit.hpp"
#include "predict/framework/framework_predictor.hpp"
#include "predict/framework_plan.hpp"

namespace itertime::formats {
namespace {

const std::string kSource = ITERTIME_SOURCE_DIR;

int64_t value(const MegatronArguments& a, const std::string& key, int64_t otherwise) {
  const auto it = a.values.find(key);
  return it == a.values.end() ? otherwise : std::stoll(it->second);
}
bool flag(const MegatronArguments& a, const std::string& key) {
  const auto it = a.values.find(key);
  return it != a.values.end() && it->second == "true";
}

// Megatron-LM's checks on a launch line's arguments, as its start-up runs them; each failure named.
std::vector<std::string> megatron_start_checks(const MegatronArguments& a) {
  std::vector<std::string> failed;
  const auto check = [&failed](bool ok, const std::string& what) {
    if (!ok) failed.push_back(what);
  };
  const int64_t layers = value(a, "num_layers", 0), heads = value(a, "num_attention_heads", 0);
  const int64_t tp = value(a, "tensor_model_parallel_size", 1), pp = value(a, "pipeline_model_parallel_size", 1);
  const int64_t cp = value(a, "context_parallel_size", 1), seq = value(a, "seq_length", 0);
  const int64_t mbs = value(a, "micro_batch_size", 1), gbs = value(a, "global_batch_size", 0);
  const int64_t world = a.world_size;
  check(world % (tp * pp * cp) == 0, "arguments.py: world size divisible by tp x pp x cp");
  const int64_t dp = world / (tp * pp * cp);
  // arguments.py: the layer split (with --account-for-* the embedding and the loss count as layers).
  const int64_t accounted = layers + (flag(a, "account_for_embedding_in_pipeline_split") ? 1 : 0) +
                            (flag(a, "account_for_loss_in_pipeline_split") ? 1 : 0);
  int64_t vp = 1;
  if (a.values.count("num_layers_per_virtual_pipeline_stage")) {
    const int64_t per_stage = value(a, "num_layers_per_virtual_pipeline_stage", 1);
    check(accounted % pp == 0, "arguments.py: number of layers of the model must be divisible pipeline model parallel size");
    check(accounted % pp == 0 && (accounted / pp) % per_stage == 0,
          "arguments.py: number of layers per pipeline stage must be divisible number of layers per virtual pipeline stage");
    if (accounted % pp == 0) vp = accounted / pp / per_stage;
    check(pp > 1 || vp == 1, "arguments.py: interleaved schedule needs pp > 1");
  } else if (!a.values.count("decoder_first_pipeline_num_layers") && !a.values.count("decoder_last_pipeline_num_layers")) {
    check(accounted % pp == 0, "arguments.py: Number of layers should be divisible by the pipeline-model-parallel size");
  }
  // transformer_config.py: heads and query groups over tp.
  const int64_t groups = flag(a, "group_query_attention") ? value(a, "num_query_groups", 1) : heads;
  check(heads % tp == 0, "transformer_config.py: num_attention_heads must be a multiple of tp");
  check(groups % tp == 0 || tp % groups == 0, "transformer_config.py: num_query_groups a multiple or divisor of tp");
  check(value(a, "ffn_hidden_size", 0) % tp == 0, "layers.py: ffn_hidden_size divisible by tp");
  // arguments.py: CP's two chunks per rank.
  check(cp == 1 || seq % (2 * cp) == 0, "arguments.py: seq-length should be a multiple of 2 * context-parallel-size");
  // num_microbatches_calculator.py and schedules.py (interleaved: m a multiple of pp).
  check(gbs % (mbs * dp) == 0, "num_microbatches_calculator.py: global batch divisible by micro batch x dp");
  if (vp > 1) check((gbs / (mbs * dp)) % pp == 0, "schedules.py: micro-batches a multiple of pp when interleaved");
  // model_parallel_config.py, arguments.py: SP with tp > 1; TP comm overlap with SP; param gather overlap.
  check(!flag(a, "sequence_parallel") || tp > 1, "model_parallel_config.py: sequence parallelism without tensor parallelism");
  check(!flag(a, "tp_comm_overlap") || flag(a, "sequence_parallel"), "arguments.py: tp comm overlap needs sequence parallelism");
  check(!flag(a, "overlap_param_gather") || (flag(a, "use_distributed_optimizer") && flag(a, "overlap_grad_reduce")),
        "arguments.py: --overlap-param-gather needs the distributed optimizer and --overlap-grad-reduce");
  check(!flag(a, "sequence_parallel") || (seq / cp) % tp == 0, "mappings.py: tokens per CP rank divisible by tp");
  return failed;
}

TEST(MegatronLaunchLines, A405bPlanOn2048NodesStartsAndReadsBack) {
  predict::PlanOptions options;
  options.model = load_llama_config(kSource + "/data/models/llama3.1-405b.json");
  const predict::framework::FrameworkTarget target = predict::framework_target("h100-sxm", kSource + "/data/hardware");
  options.hardware = target.hardware;
  options.gpus = 2048 * 8;
  options.global_batch = 2048;
  options.seq_len = 8192;
  options.micro_batches = {1};
  options.virtual_stages = {1, 2, 8};
  options.context_parallel = {1, 2};
  options.precisions = {PrecisionName::kAmpBf16, PrecisionName::kFp8};
  options.recipes = {parse_recipe_text("sp+vp+dopt+ovl+opg")};
  predict::FrameworkPlanSpace space;
  space.tp_comm_overlap = {true};
  const predict::PlanResult plan = predict::plan_framework_search(options, target, space);
  std::vector<const predict::PlanEntry*> sample;
  int feasible = 0;
  for (const predict::PlanEntry& e : plan.entries) {
    if (!e.feasible) continue;
    ++feasible;
    if (sample.size() < 24 && (feasible % 3 == 1 || e.config.vp > 1)) sample.push_back(&e);
  }
  ASSERT_GE(sample.size(), 8u) << feasible << " feasible of " << plan.entries.size();
  bool accounted_seen = false, interleaved_seen = false;
  for (const predict::PlanEntry* e : sample) {
    ASSERT_TRUE(e->framework_recipe.has_value());
    const std::string line = megatron_command_line(options.model, e->config, *e->framework_recipe, 8);
    SCOPED_TRACE(line);
    const MegatronArguments arguments = megatron_arguments_from_command_line(line);
    const std::vector<std::string> failed = megatron_start_checks(arguments);
    EXPECT_TRUE(failed.empty()) << failed.front();
    accounted_seen = accounted_seen || line.find("--account-for-embedding-in-pipeline-split") != std::string::npos;
    interleaved_seen = interleaved_seen || e->config.vp > 1;
    const UserRun run = user_run_from_megatron(arguments);
    EXPECT_TRUE(run.not_understood.empty());
    EXPECT_EQ(run.config.to_string(), e->config.to_string());
    EXPECT_EQ(recipe_text(run.recipe.techniques), recipe_text(e->framework_recipe->techniques));
    EXPECT_EQ(run.recipe.precision, e->framework_recipe->precision);
    EXPECT_EQ(run.recipe.pipeline_split, e->framework_recipe->pipeline_split);
    EXPECT_EQ(run.recipe.fp8_param_gather, e->framework_recipe->fp8_param_gather);
    EXPECT_EQ(run.recipe.tp_comm_overlap, e->framework_recipe->tp_comm_overlap);
    const predict::framework::FrameworkOutcome again =
        predict::framework::predict_framework(target, {predict::framework::shape_of(run.model), run.config, run.recipe});
    ASSERT_TRUE(again.ok()) << again.reason;
    EXPECT_EQ(again.prediction->total_us, e->iteration_us);
  }
  EXPECT_TRUE(accounted_seen);  // 126 layers: pp 2 is the only plain split among pp 2..16 here
  EXPECT_TRUE(interleaved_seen);
}

// The docs' 405B example's first candidate of before (issue 44): pp 16 without the accounting options is what
// Megatron-LM refuses; the emitted line now carries them, and 126 layers over pp8 vp8 give 2 per chunk.
TEST(MegatronLaunchLines, AccountedSplitIsEmitted) {
  const LlamaSpec model = load_llama_config(kSource + "/data/models/llama3.1-405b.json");
  predict::framework::FrameworkRecipe recipe;
  recipe.pipeline_split = predict::framework::resolve_pipeline_split(126, 8, 8, {});
  recipe.pipeline_split.given = true;
  const std::string line = megatron_command_line(model, ParallelConfig{16, 8, 8, 1, 1024, 8192, 2, 8}, recipe, 8);
  EXPECT_NE(line.find("--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split"), std::string::npos)
      << line;
  EXPECT_NE(line.find("--num-layers-per-virtual-pipeline-stage 2"), std::string::npos) << line;
  const UserRun run = user_run_from_megatron(megatron_arguments_from_command_line(line));
  EXPECT_EQ(run.config.vp, 8);
  // The same arguments without the accounting options: Megatron-LM's refusal, in one line.
  std::string plain = line;
  plain.erase(plain.find(" --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split"),
              std::string(" --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split").size());
  EXPECT_THROW(user_run_from_megatron(megatron_arguments_from_command_line(plain)), UserError);
}

}  // namespace
}  // namespace itertime::formats

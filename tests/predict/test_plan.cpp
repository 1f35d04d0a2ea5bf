// test_plan.cpp: plan()'s recipes: modelled_recipes() and where plan() skips a recipe that equals another
// at the layout, with overlapped parameter gather (opg) searched wherever dopt+ovl is.
// Invariants: the plan runs on a described device (data/hardware/h100-sxm.json, the default efficiencies),
// no calibration; the model is data/models/tiny-llama-gqa.json; counts are derived by hand in comments.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/model_spec.hpp"
#include "common/training_techniques.hpp"
#include "predict/model/fitted_model.hpp"
#include "predict/plan.hpp"
#include "predict/resolver/target_device.hpp"

namespace itertime::predict {
namespace {

// 3 recompute modes x 8 (sp, vp, dopt) x (without, with ovl) = 48, and with dopt+ovl also opg: 3 x 4 = 12 more.
TEST(Plan, ModelledRecipesSearchOpgWhereverDoptAndOvlAre) {
  const std::vector<TrainingTechniques> recipes = modelled_recipes();
  ASSERT_EQ(recipes.size(), 60u);
  EXPECT_TRUE(recipes.front() == TrainingTechniques{});  // plain first
  std::set<std::string> texts;
  int opg = 0, dopt_ovl = 0;
  for (const TrainingTechniques& t : recipes) {
    texts.insert(recipe_text(t));
    EXPECT_EQ(parse_recipe_text(recipe_text(t)), t) << recipe_text(t);  // a recipe the parser accepts
    if (t.overlap_parameter_gather) ++opg;
    if (t.distributed_optimizer && t.overlap_gradient_reduction && !t.overlap_parameter_gather) ++dopt_ovl;
  }
  EXPECT_EQ(texts.size(), 60u);
  EXPECT_EQ(opg, 12);
  EXPECT_EQ(dopt_ovl, 12);
  EXPECT_EQ(texts.count("sp+vp+dopt+rc-full+ovl+opg"), 1u);
}

// tiny on 2 GPUs, every recipe: (2,1,1) 15 recipes (tp 1: dopt, rc, ovl and with dopt+ovl opg: 2*3*2 + 3),
// (1,2,1) 24 (no ovl, so no opg, at dp 1), (1,1,2) 6: 45 entries, opg only at dp 2. There the opg
// prediction is never slower than its dopt+ovl one (the all-gathers' wait is at most their chain).
TEST(Plan, OpgIsPlannedOnlyWhereOvlIs) {
  const HardwareChoice choice = choose_hardware(nullptr, "h100-sxm", "");
  ASSERT_TRUE(choice.target.has_value());
  PlanOptions options;
  options.model = load_llama_config(std::string(ITERTIME_SOURCE_DIR) + "/data/models/tiny-llama-gqa.json");
  options.gpus = 2;
  options.global_batch = 8;
  options.seq_len = 32;
  options.micro_batches = {1};
  options.precisions = {PrecisionName::kAmpBf16};
  options.recipes = modelled_recipes();
  options.hardware = choice.hardware;
  options.target = &*choice.target;
  const FittedModel no_calibration;
  const std::vector<PlanEntry> entries = plan(no_calibration, options);
  EXPECT_EQ(entries.size(), 45u);
  std::map<std::string, double> at_dp2;  // recipe -> iteration, at (2,1,1)
  int opg = 0;
  for (const PlanEntry& entry : entries) {
    if (!entry.techniques.overlap_parameter_gather) {
      if (entry.config.dp == 2 && entry.feasible) at_dp2[recipe_text(entry.techniques)] = entry.iteration_us;
      continue;
    }
    ++opg;
    EXPECT_EQ(entry.config.dp, 2) << entry.config.to_string();
    EXPECT_TRUE(entry.feasible) << entry.reason;
  }
  EXPECT_EQ(opg, 3);
  for (const PlanEntry& entry : entries) {
    if (!entry.techniques.overlap_parameter_gather || !entry.feasible) continue;
    TrainingTechniques without = entry.techniques;
    without.overlap_parameter_gather = false;
    ASSERT_EQ(at_dp2.count(recipe_text(without)), 1u) << recipe_text(without);
    EXPECT_LE(entry.iteration_us, at_dp2[recipe_text(without)] * (1 + 1e-12)) << recipe_text(entry.techniques);
  }
}

}  // namespace
}  // namespace itertime::predict

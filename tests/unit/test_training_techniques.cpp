// Tests of common/training_techniques: the canonical recipe text and its parser.
#include "common/training_techniques.hpp"

#include <gtest/gtest.h>

#include "common/errors.hpp"

namespace itertime {
namespace {

TrainingTechniques all_on() {
  TrainingTechniques t;
  t.sequence_parallel = true;
  t.vocab_parallel = true;
  t.distributed_optimizer = true;
  t.recompute = Recompute::kFull;
  t.overlap_gradient_reduction = true;
  t.overlap_parameter_gather = true;
  return t;
}

TEST(RecipeText, PlainIsEmptyAndLabelledPlain) {
  EXPECT_EQ(recipe_text({}), "");
  EXPECT_EQ(recipe_label({}), "plain");
  EXPECT_FALSE(TrainingTechniques{}.any());
  EXPECT_EQ(parse_recipe_text(""), TrainingTechniques{});
}

TEST(RecipeText, TokensComeInTheFixedOrder) {
  EXPECT_EQ(recipe_text(all_on()), "sp+vp+dopt+rc-full+ovl+opg");
  TrainingTechniques t;
  t.recompute = Recompute::kSelective;
  t.overlap_gradient_reduction = true;
  t.gradient_bucket_bytes = int64_t{4} << 20;
  EXPECT_EQ(recipe_text(t), "rc-sel+ovl-4M");
  t.gradient_bucket_bytes = 1000;
  EXPECT_EQ(recipe_text(t), "rc-sel+ovl-1000");
  t.gradient_bucket_bytes = int64_t{3} << 30;
  EXPECT_EQ(recipe_text(t), "rc-sel+ovl-3G");
  EXPECT_TRUE(t.any());
}

TEST(RecipeText, ParsesWhatItWrites) {
  std::vector<TrainingTechniques> cases{{}, all_on()};
  for (int mask = 1; mask < 64; ++mask) {
    if ((mask & 32) && (mask & 20) != 20) continue;  // opg needs dopt and ovl
    TrainingTechniques t;
    t.sequence_parallel = mask & 1;
    t.vocab_parallel = mask & 2;
    t.distributed_optimizer = mask & 4;
    t.recompute = (mask & 8) ? Recompute::kSelective : Recompute::kNone;
    t.overlap_gradient_reduction = mask & 16;
    if (mask & 16) t.gradient_bucket_bytes = 64 << 10;
    t.overlap_parameter_gather = mask & 32;
    cases.push_back(t);
  }
  for (const TrainingTechniques& t : cases) {
    const TrainingTechniques back = parse_recipe_text(recipe_text(t));
    EXPECT_EQ(back, t) << recipe_text(t);
    EXPECT_EQ(back.gradient_bucket_bytes, t.gradient_bucket_bytes) << recipe_text(t);
  }
}

TEST(RecipeText, BucketSizeOnlyMattersWithOverlap) {
  TrainingTechniques a, b;
  b.gradient_bucket_bytes = 1 << 20;
  EXPECT_EQ(a, b);
  a.overlap_gradient_reduction = b.overlap_gradient_reduction = true;
  EXPECT_NE(a, b);
}

TEST(RecipeText, OverlappedParameterGatherNeedsTheBucketedDistributedOptimizer) {
  EXPECT_EQ(recipe_text(parse_recipe_text("dopt+ovl-64K+opg")), "dopt+ovl-64K+opg");
  for (const char* alone : {"opg", "dopt+opg", "ovl+opg", "sp+rc-full+ovl-1M+opg"}) {
    try {
      parse_recipe_text(alone);
      FAIL() << alone;
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("needs dopt and ovl"), std::string::npos) << e.what();
    }
  }
  TrainingTechniques t = parse_recipe_text("dopt+ovl+opg");
  EXPECT_NE(t, parse_recipe_text("dopt+ovl"));
  EXPECT_EQ(at_dp(t, 2), t);
  EXPECT_EQ(recipe_text(at_dp(t, 1)), "dopt");  // nothing to reduce or gather at dp 1
}

TEST(RecipeText, RefusesWhatIsNotARecipe) {
  for (const char* bad : {"dopt+ovl+opg+opg", "zero", "sp+sp", "rc-sel+rc-full", "ovl+ovl-4M", "ovl-0", "ovl-", "ovl-4X",
                          "ovl-25M", "ovl-9999999999G", "sp+", "+sp", "SP", "sp + vp", "ovl-00004M", "dopt+opg"}) {
    EXPECT_THROW(parse_recipe_text(bad), UserError) << bad;
  }
  try {
    parse_recipe_text("ovl-25M");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("write it as 'ovl'"), std::string::npos) << e.what();
  }
}

// Issue 33: the tokens may come in any order; the canonical text (keys, rows, reports) keeps its order.
TEST(RecipeText, TakesTheTokensInAnyOrder) {
  EXPECT_EQ(recipe_text(parse_recipe_text("dopt+sp")), "sp+dopt");
  EXPECT_EQ(recipe_text(parse_recipe_text("vp+sp")), "sp+vp");
  // `vocab` is the clearer name of the vocabulary-parallel head (issue 34); the stored form stays `vp`.
  EXPECT_EQ(recipe_text(parse_recipe_text("sp+vocab+dopt")), "sp+vp+dopt");
  EXPECT_THROW(parse_recipe_text("vp+vocab"), UserError);
  EXPECT_EQ(recipe_text(parse_recipe_text("opg+ovl-64K+dopt")), "dopt+ovl-64K+opg");
  EXPECT_EQ(recipe_label(parse_recipe_text("opg+rc-full+ovl+vp+dopt+sp")), "sp+vp+dopt+rc-full+ovl+opg");
  EXPECT_EQ(parse_recipe_text("rc-sel+sp"), parse_recipe_text("sp+rc-sel"));
}

// A technique given twice is refused with a line that says so, in any order.
TEST(RecipeText, RefusesATechniqueGivenTwice) {
  const auto message = [](const char* text) {
    try {
      parse_recipe_text(text);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_NE(message("sp+dopt+sp").find("'sp' given twice"), std::string::npos) << message("sp+dopt+sp");
  EXPECT_NE(message("rc-full+sp+rc-sel").find("'rc-full' and 'rc-sel' set the same technique"), std::string::npos)
      << message("rc-full+sp+rc-sel");
  EXPECT_NE(message("ovl-4M+ovl").find("'ovl-4M' and 'ovl' set the same technique"), std::string::npos) << message("ovl-4M+ovl");
  EXPECT_NE(message("sp+sp").find("'sp+sp'"), std::string::npos) << message("sp+sp");  // the whole text named
  EXPECT_EQ(message("sp+sp").find('\n'), std::string::npos);
}

TEST(Recompute, NamesRoundTrip) {
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) EXPECT_EQ(parse_recompute(to_string(r)), r);
  EXPECT_THROW(parse_recompute("partial"), UserError);
}

}  // namespace
}  // namespace itertime

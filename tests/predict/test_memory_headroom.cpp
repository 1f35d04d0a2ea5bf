// test_memory_headroom.cpp: memory with headroom (issue 44): the runtime reserve (CUDA context, TE's cuBLAS
// workspace, NCCL's buffers) by hand from its documented figures, the answer check that refuses a predict
// whose layout does not fit, plan's stated margin, and the framework a GPU question gets.
// Invariants: figures by hand beside each expectation; data/hardware and data/models only.
#include <gtest/gtest.h>

#include <string>

#include "common/model_spec.hpp"
#include "predict/answer_check.hpp"
#include "predict/framework/megatron_memory.hpp"
#include "predict/framework_plan.hpp"

namespace itertime::predict {
namespace {

const std::string kSource = ITERTIME_SOURCE_DIR;
constexpr int64_t kMiB = int64_t{1} << 20;

TEST(MemoryHeadroom, RuntimeReserveByHand) {
  // dp8 tp8 pp8 cp2: tp, cp, dp x cp = 16 and pp communicators: 4 x 16 channels x 2 x 4 MiB = 512 MiB;
  // + the context 400 MiB + TE's Hopper workspace 32 MiB = 944 MiB.
  framework::RuntimeReserve r = framework::megatron_runtime_reserve(ParallelConfig{8, 8, 8, 1, 64, 8192, 2, 1}, true);
  EXPECT_EQ(r.communicators, 4);
  EXPECT_EQ(r.nccl_bytes, 512 * kMiB);
  EXPECT_EQ(r.total_bytes(), 944 * kMiB);
  // One GPU: no communicator; Ampere's workspace 4 MiB: 404 MiB.
  r = framework::megatron_runtime_reserve(ParallelConfig{1, 1, 1, 1, 1, 128, 1, 1}, false);
  EXPECT_EQ(r.communicators, 0);
  EXPECT_EQ(r.total_bytes(), 404 * kMiB);
  // dp 4, cp 1: only the dp x cp group: 400 + 32 + 128 = 560 MiB.
  EXPECT_EQ(framework::megatron_runtime_reserve(ParallelConfig{4, 1, 1, 1, 4, 128, 1, 1}, true).total_bytes(), 560 * kMiB);
}

// H100 SXM: 81559 MiB. A peak of 80000 MiB + 944 MiB = 80944 MiB fits; 81000 + 944 = 81944 does not.
TEST(MemoryHeadroom, AnAnswerThatDoesNotFitIsRefused) {
  AnswerFacts facts;
  facts.device_memory_bytes = static_cast<double>(81559 * kMiB);
  facts.memory_reserve_bytes = 944 * kMiB;
  facts.peak_memory_bytes = 80000 * kMiB;
  EXPECT_TRUE(check_answer(facts).empty());
  facts.peak_memory_bytes = 81000 * kMiB;
  const std::vector<Finding> findings = check_answer(facts);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].code, "exceeds_device_memory");
  EXPECT_TRUE(findings[0].refuse);
  EXPECT_NE(findings[0].message.find("80.02 GiB per GPU"), std::string::npos) << findings[0].message;  // 81944 / 1024
  EXPECT_NE(findings[0].hint.find("--tp"), std::string::npos);
  facts.device_memory_bytes = 0;  // no limit known: nothing to check
  EXPECT_TRUE(check_answer(facts).empty());
}

// A candidate that fits with the reserve but not with the plan's 1 GiB margin on top: over memory by
// default, feasible with the margin 0.
TEST(MemoryHeadroom, PlanKeepsItsMargin) {
  PlanOptions options;
  options.model = load_llama_config(kSource + "/data/models/llama3.1-8b.json");
  const framework::FrameworkTarget target = framework_target("h100-sxm", kSource + "/data/hardware");
  options.hardware = target.hardware;
  options.gpus = 8;
  options.global_batch = 64;
  options.seq_len = 8192;
  options.micro_batches = {1};
  options.recipes = {parse_recipe_text("sp+vp+dopt+ovl+opg")};
  FrameworkPlanSpace space;
  space.tp_comm_overlap = {false};
  const PlanResult free = plan_framework_search(options, target, space);
  ASSERT_FALSE(free.entries.empty());
  const PlanEntry& first = free.entries.front();
  ASSERT_TRUE(first.feasible);
  const double needed = first.peak_memory_bytes + static_cast<double>(runtime_reserve(target, first.config).total_bytes());
  options.device_memory_bytes = needed + 0.5 * 1024 * kMiB;
  const auto find = [&](const PlanResult& result) {
    for (const PlanEntry& e : result.entries)
      if (e.config.to_string() == first.config.to_string() && e.framework_switches == first.framework_switches &&
          recipe_text(e.techniques) == recipe_text(first.techniques))
        return e;
    return PlanEntry{};
  };
  const PlanEntry kept = find(plan_framework_search(options, target, space));
  EXPECT_TRUE(kept.over_memory);
  EXPECT_NE(kept.reason.find("margin"), std::string::npos) << kept.reason;
  space.memory_margin_bytes = 0;
  EXPECT_TRUE(find(plan_framework_search(options, target, space)).feasible);
}

TEST(MemoryHeadroom, AGpuQuestionGetsTheGpusFramework) {
  const std::string dir = kSource + "/data/hardware";
  EXPECT_EQ(default_framework("h100-sxm", false, dir), framework::Framework::kMegatronTe);
  EXPECT_EQ(default_framework("h100-sxm", true, dir), framework::Framework::kItertime);  // a calibration given
  EXPECT_EQ(default_framework("cpu-node-local", false, dir), framework::Framework::kItertime);
  EXPECT_EQ(default_framework("", false, dir), framework::Framework::kItertime);
  EXPECT_EQ(default_framework("no-such-gpu", false, dir), framework::Framework::kItertime);  // the caller names it
}

}  // namespace
}  // namespace itertime::predict

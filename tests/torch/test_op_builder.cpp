// test_op_builder.cpp: the predictor's stage builder (predict/builder/op_builder.hpp, no LibTorch) against the
// tracer: for each case the stage is traced with LibTorch (calibrate::trace_stage_info) and built from the
// model, and the two must agree exactly.
// Invariants:
//  - Equality is on what /ops stores for a traced stage: the (phase, signature) -> count sequence in order
//    of first appearance, each signature's input dtypes and output dtype, the aggregated comm operations
//    (phase, kind, dtype, bytes, count; in order) and the local parameter count.
//  - A mismatch names every signature that is missing, extra or counted differently (set
//    ITERTIME_PRINT_TRACE=1 to print the raw traced sequence of the failing case too).
//  - The builder follows the dialect of the LibTorch the test runs on (predict::torch_dialect of its
//    version): the same cases check the 1.13 sequences on Debian 12 and the 2.x ones on Debian 13.
//    sdpa and fp16 cases skip on a LibTorch without them (1.x).
//  - Cases with training techniques (common/training_techniques.hpp) trace the stage as the trainer runs
//    it with them and build it with StageRecipe::techniques; their names end in the recipe text, and
//    with the distributed optimizer or overlapped gradient reduction in the DP degree both are given
//    (".../dopt/dp4", ".../ovl-64K/dp2"): those stages depend on it (ovl is dropped at dp 1).
//  - Every rank runs every case (tracing is local); nothing is written.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "calibrate/ops_calibration.hpp"
#include "calibrate/torch_info.hpp"
#include "common/collective.hpp"
#include "common/dtype.hpp"
#include "common/errors.hpp"
#include "common/model_spec.hpp"
#include "common/phase.hpp"
#include "common/training_techniques.hpp"
#include "predict/builder/op_builder.hpp"
#include "tests/torch/torch_features.hpp"

namespace itertime {
namespace {

struct BuilderCase {
  const char* model;
  int tp, pp, stage, micro_batch, seq_len;
  PrecisionName precision;
  AttentionKernel attention = AttentionKernel::kEager;
  TrainingTechniques techniques = {};
  int dp = 1;  // only the distributed optimizer's and overlapped reduction's stages depend on it
  int cp = 1;  // context parallelism: traced and built as CP rank 0 runs it, reducing over dp*cp ranks
};

std::string case_name(const BuilderCase& c) {
  return std::string(c.model) + "/tp" + std::to_string(c.tp) + "/pp" + std::to_string(c.pp) + "/s" + std::to_string(c.stage) +
         "/mbs" + std::to_string(c.micro_batch) + "/seq" + std::to_string(c.seq_len) + "/" + to_string(c.precision) + "/" +
         to_string(c.attention) + (c.techniques.any() ? "/" + recipe_text(c.techniques) : "") +
         (c.techniques.distributed_optimizer || c.techniques.overlap_gradient_reduction ? "/dp" + std::to_string(c.dp) : "") +
         (c.cp > 1 ? "/cp" + std::to_string(c.cp) : "");
}

// gtest prints a failing case by its name.
void PrintTo(const BuilderCase& c, std::ostream* out) { *out << case_name(c); }

LlamaSpec load(const char* model) {
  return load_llama_config(std::string(ITERTIME_SOURCE_DIR) + "/data/models/" + model + ".json");
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + items[i];
  return out;
}

struct Entry {
  std::string phase, signature, input_dtypes, output_dtype;
  int64_t count = 0;
};

// The traced stage aggregated as calibrate_ops aggregates it into /ops/sequences.
std::vector<Entry> aggregate(const calibrate::StageTraceInfo& trace) {
  std::vector<Entry> out;
  std::map<std::pair<std::string, std::string>, std::size_t> position;
  for (const auto& op : trace.ops) {
    const auto key = std::make_pair(op.phase, op.signature);
    const auto found = position.find(key);
    if (found != position.end()) {
      out[found->second].count += 1;
      continue;
    }
    position[key] = out.size();
    out.push_back(Entry{op.phase, op.signature, join(op.input_dtypes), op.output_dtype, 1});
  }
  return out;
}

std::vector<predict::CommOp> aggregate_comms(const calibrate::StageTraceInfo& trace) {
  std::vector<predict::CommOp> out;
  std::map<std::string, std::size_t> position;
  for (const auto& comm : trace.comms) {
    const std::string key = comm.phase + "/" + to_string(comm.kind) + "/" + comm.dtype + "/" + std::to_string(comm.bytes);
    const auto found = position.find(key);
    if (found != position.end()) {
      out[found->second].count += 1;
      continue;
    }
    position[key] = out.size();
    out.push_back(predict::CommOp{parse_phase(comm.phase), comm.kind, parse_dtype(comm.dtype), comm.bytes, 1});
  }
  return out;
}

class OpBuilder : public ::testing::TestWithParam<BuilderCase> {};

TEST_P(OpBuilder, ReproducesTheTracedStage) {
  const BuilderCase& c = GetParam();
  const std::string lacking = calibrate::lacks_on_cpu(c.precision, c.attention);
  if (!lacking.empty()) GTEST_SKIP() << lacking;
  const LlamaSpec spec = load(c.model);
  const calibrate::StageTraceInfo trace = calibrate::trace_stage_info(
      spec, c.tp, c.pp, c.stage, c.micro_batch, c.seq_len, c.precision, c.attention, Backend::kCpu, c.techniques, c.dp, c.cp);
  const predict::StageRecipe recipe{c.attention, predict::torch_dialect(calibrate::query_torch().version), c.techniques,
                                    c.dp * c.cp, c.cp};
  const predict::BuiltStage built =
      predict::build_stage_ops(spec, c.tp, c.pp, c.stage, c.micro_batch, c.seq_len, c.precision, recipe);
  if (std::getenv("ITERTIME_PRINT_TRACE") != nullptr) {
    for (const auto& op : trace.ops) std::printf("T %-10s %s\n", op.phase.c_str(), op.signature.c_str());
    for (const auto& op : built.ops)
      std::printf("B %-10s %4lld %s\n", to_string(op.phase).c_str(), static_cast<long long>(op.count), op.signature.c_str());
  }
  const std::vector<Entry> traced = aggregate(trace);

  // 1. The multiset of (phase, signature) with counts, and each signature's dtypes.
  std::map<std::pair<std::string, std::string>, const Entry*> traced_by_key;
  for (const Entry& e : traced) traced_by_key[{e.phase, e.signature}] = &e;
  std::map<std::pair<std::string, std::string>, const predict::BuiltOp*> built_by_key;
  for (const auto& op : built.ops) {
    EXPECT_TRUE(built_by_key.emplace(std::make_pair(to_string(op.phase), op.signature), &op).second)
        << "built twice: " << to_string(op.phase) << " " << op.signature;
  }
  int mismatches = 0;
  for (const Entry& e : traced) {
    const auto found = built_by_key.find({e.phase, e.signature});
    if (found == built_by_key.end()) {
      ++mismatches;
      ADD_FAILURE() << case_name(c) << ": traced, not built: " << e.phase << " x" << e.count << " " << e.signature;
      continue;
    }
    const predict::BuiltOp& op = *found->second;
    if (op.count != e.count) {
      ++mismatches;
      ADD_FAILURE() << case_name(c) << ": count " << op.count << " built, " << e.count << " traced: " << e.phase << " "
                    << e.signature;
    }
    EXPECT_EQ(op.input_dtypes, e.input_dtypes) << e.signature;
    EXPECT_EQ(op.output_dtype, e.output_dtype) << e.signature;
  }
  for (const auto& op : built.ops) {
    if (!traced_by_key.count({to_string(op.phase), op.signature})) {
      ++mismatches;
      ADD_FAILURE() << case_name(c) << ": built, not traced: " << to_string(op.phase) << " x" << op.count << " " << op.signature;
    }
  }
  // 2. The order of first appearance (what /ops/sequences holds), once the multisets agree.
  if (mismatches == 0) {
    ASSERT_EQ(built.ops.size(), traced.size());
    for (std::size_t i = 0; i < traced.size(); ++i) {
      EXPECT_EQ(to_string(built.ops[i].phase) + " " + built.ops[i].signature, traced[i].phase + " " + traced[i].signature)
          << case_name(c) << ": order differs at entry " << i;
      if (built.ops[i].signature != traced[i].signature) break;
    }
  }

  // 3. Communication operations and the parameter count.
  const std::vector<predict::CommOp> comms = aggregate_comms(trace);
  ASSERT_EQ(built.comms.size(), comms.size()) << case_name(c);
  for (std::size_t i = 0; i < comms.size(); ++i) {
    EXPECT_EQ(to_string(built.comms[i].phase), to_string(comms[i].phase)) << case_name(c) << " comm " << i;
    EXPECT_EQ(to_string(built.comms[i].kind), to_string(comms[i].kind)) << case_name(c) << " comm " << i;
    EXPECT_EQ(to_string(built.comms[i].dtype), to_string(comms[i].dtype)) << case_name(c) << " comm " << i;
    EXPECT_EQ(built.comms[i].bytes, comms[i].bytes) << case_name(c) << " comm " << i;
    EXPECT_EQ(built.comms[i].count, comms[i].count) << case_name(c) << " comm " << i;
  }
  EXPECT_EQ(built.local_params, trace.local_params) << case_name(c);
}

std::string test_name(const ::testing::TestParamInfo<BuilderCase>& param) {
  std::string name = case_name(param.param);
  for (char& ch : name) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return name;
}

constexpr PrecisionName kFp32 = PrecisionName::kFp32;
constexpr PrecisionName kBf16 = PrecisionName::kBf16;
constexpr PrecisionName kAmp = PrecisionName::kAmpBf16;
constexpr PrecisionName kFp16 = PrecisionName::kFp16;
constexpr PrecisionName kAmp16 = PrecisionName::kAmpFp16;
constexpr AttentionKernel kSdpa = AttentionKernel::kSdpa;

INSTANTIATE_TEST_SUITE_P(
    TinyLlamaGqa, OpBuilder,
    ::testing::Values(BuilderCase{"tiny-llama-gqa", 1, 1, 0, 1, 16, kFp32}, BuilderCase{"tiny-llama-gqa", 1, 1, 0, 2, 32, kBf16},
                      BuilderCase{"tiny-llama-gqa", 1, 1, 0, 1, 32, kAmp}, BuilderCase{"tiny-llama-gqa", 2, 2, 0, 2, 16, kFp32},
                      BuilderCase{"tiny-llama-gqa", 2, 2, 1, 1, 16, kAmp}, BuilderCase{"tiny-llama-gqa", 4, 1, 0, 2, 32, kAmp},
                      BuilderCase{"tiny-llama-gqa", 2, 4, 1, 1, 32, kBf16}, BuilderCase{"tiny-llama-gqa", 1, 4, 3, 2, 16, kBf16},
                      BuilderCase{"tiny-llama-gqa", 1, 2, 1, 2, 32, kFp32}, BuilderCase{"tiny-llama-gqa", 4, 2, 0, 1, 16, kAmp}),
    test_name);

// Other shapes: multi-head attention without KV groups (no repeat_interleave), and a wider model.
INSTANTIATE_TEST_SUITE_P(
    OtherModels, OpBuilder,
    ::testing::Values(BuilderCase{"tiny-llama", 2, 1, 0, 1, 16, kAmp}, BuilderCase{"tiny-llama", 1, 2, 1, 2, 16, kBf16},
                      BuilderCase{"small-llama", 2, 2, 0, 1, 32, kAmp},
                      BuilderCase{"tiny-llama", 4, 1, 0, 1, 16, kBf16}),  // one head per rank: size-1 head dimensions
    test_name);

// LibTorch 2.x: fp16 policies on cpu, and the fused attention kernel under every kind of policy.
INSTANTIATE_TEST_SUITE_P(Torch2, OpBuilder,
                         ::testing::Values(BuilderCase{"tiny-llama-gqa", 1, 1, 0, 1, 16, kFp16},
                                           BuilderCase{"tiny-llama-gqa", 2, 2, 1, 1, 16, kAmp16},
                                           BuilderCase{"tiny-llama-gqa", 1, 1, 0, 1, 16, kFp32, kSdpa},
                                           BuilderCase{"tiny-llama-gqa", 2, 2, 0, 2, 16, kBf16, kSdpa},
                                           BuilderCase{"tiny-llama-gqa", 1, 2, 1, 1, 32, kAmp, kSdpa},
                                           BuilderCase{"tiny-llama-gqa", 4, 1, 0, 1, 16, kAmp16, kSdpa},
                                           BuilderCase{"tiny-llama", 2, 1, 0, 1, 16, kFp16, kSdpa}),
                         test_name);

// Megatron-LM's techniques (issue 16): sequence parallelism, selective and full recompute, the
// vocabulary-parallel head, and some combinations, at tp 2 and 4, pp 1 and 2 (and a middle stage of 4),
// fp32 and amp-bf16, eager attention.
TrainingTechniques recipe(const char* text) { return parse_recipe_text(text); }
constexpr AttentionKernel kEager = AttentionKernel::kEager;

INSTANTIATE_TEST_SUITE_P(Techniques, OpBuilder,
                         ::testing::Values(
                             // sequence parallelism (tp 1: no shards, the plain stage)
                             BuilderCase{"tiny-llama-gqa", 2, 1, 0, 1, 16, kFp32, kEager, recipe("sp")},
                             BuilderCase{"tiny-llama-gqa", 2, 2, 0, 2, 16, kAmp, kEager, recipe("sp")},
                             BuilderCase{"tiny-llama-gqa", 4, 2, 1, 1, 32, kFp32, kEager, recipe("sp")},
                             BuilderCase{"tiny-llama-gqa", 2, 4, 1, 2, 16, kAmp, kEager, recipe("sp")},
                             BuilderCase{"tiny-llama", 2, 1, 0, 1, 16, kBf16, kEager, recipe("sp")},
                             BuilderCase{"tiny-llama", 4, 1, 0, 1, 16, kBf16, kEager, recipe("sp")},  // one head per rank
                             BuilderCase{"tiny-llama-gqa", 1, 2, 1, 1, 16, kAmp, kEager, recipe("sp")},
                             // selective recompute
                             BuilderCase{"tiny-llama-gqa", 1, 1, 0, 1, 16, kFp32, kEager, recipe("rc-sel")},
                             BuilderCase{"tiny-llama-gqa", 2, 2, 1, 2, 16, kAmp, kEager, recipe("rc-sel")},
                             BuilderCase{"tiny-llama-gqa", 4, 4, 2, 1, 16, kFp32, kEager, recipe("rc-sel")},
                             BuilderCase{"tiny-llama", 2, 2, 0, 1, 16, kAmp, kEager, recipe("rc-sel")},
                             // full recompute
                             BuilderCase{"tiny-llama-gqa", 1, 1, 0, 1, 16, kAmp, kEager, recipe("rc-full")},
                             BuilderCase{"tiny-llama-gqa", 2, 2, 0, 1, 16, kFp32, kEager, recipe("rc-full")},
                             BuilderCase{"tiny-llama-gqa", 4, 4, 3, 2, 16, kAmp, kEager, recipe("rc-full")},
                             BuilderCase{"tiny-llama-gqa", 2, 4, 1, 1, 16, kBf16, kEager, recipe("rc-full")},
                             // vocabulary-parallel head
                             BuilderCase{"tiny-llama-gqa", 2, 1, 0, 1, 16, kFp32, kEager, recipe("vp")},
                             BuilderCase{"tiny-llama-gqa", 4, 2, 1, 2, 16, kAmp, kEager, recipe("vp")},
                             BuilderCase{"tiny-llama-gqa", 2, 2, 0, 1, 16, kAmp, kEager, recipe("vp")},
                             // combinations
                             BuilderCase{"tiny-llama-gqa", 2, 2, 1, 1, 16, kAmp, kEager, recipe("sp+vp")},
                             BuilderCase{"tiny-llama-gqa", 4, 2, 0, 2, 32, kFp32, kEager, recipe("sp+vp+rc-full")},
                             BuilderCase{"tiny-llama-gqa", 2, 4, 1, 1, 16, kAmp, kEager, recipe("sp+rc-sel")},
                             BuilderCase{"tiny-llama-gqa", 2, 1, 0, 1, 16, kAmp, kEager, recipe("sp+vp+rc-sel")}),
                         test_name);

// The distributed optimizer (ZeRO-1) at dp 1 (sharded over one rank, as the trainer does), 2, 3 and 4:
// the padded gradient buffer, its reduce-scatter, AdamW on one flat shard, the all-gather and the copies
// back; dp 3 pads (local parameters not a multiple of 3). tp 1 and 2, pp 1 and 2 (first and last stage),
// fp32, bf16 and amp-bf16, and with sp+vp+rc-full.
INSTANTIATE_TEST_SUITE_P(DistributedOptimizer, OpBuilder,
                         ::testing::Values(BuilderCase{"tiny-llama-gqa", 1, 1, 0, 1, 16, kFp32, kEager, recipe("dopt"), 1},
                                           BuilderCase{"tiny-llama-gqa", 1, 1, 0, 1, 16, kAmp, kEager, recipe("dopt"), 2},
                                           BuilderCase{"tiny-llama-gqa", 2, 1, 0, 1, 16, kFp32, kEager, recipe("dopt"), 4},
                                           BuilderCase{"tiny-llama-gqa", 1, 2, 0, 2, 16, kAmp, kEager, recipe("dopt"), 4},
                                           BuilderCase{"tiny-llama-gqa", 2, 2, 0, 1, 16, kAmp, kEager, recipe("dopt"), 2},
                                           BuilderCase{"tiny-llama-gqa", 2, 2, 1, 1, 16, kBf16, kEager, recipe("dopt"),
                                                       3},  // padded: 250,496 parameters
                                           BuilderCase{"tiny-llama", 1, 2, 1, 1, 16, kFp32, kEager, recipe("dopt"), 1},
                                           BuilderCase{"tiny-llama-gqa", 2, 2, 1, 1, 16, kAmp, kEager,
                                                       recipe("sp+vp+dopt+rc-full"), 2}),
                         test_name);

// The techniques on LibTorch 2.x: the fused attention kernel (recomputed selectively too) and fp16.
INSTANTIATE_TEST_SUITE_P(Torch2Techniques, OpBuilder,
                         ::testing::Values(BuilderCase{"tiny-llama-gqa", 2, 2, 1, 1, 16, kAmp, kSdpa, recipe("sp+vp+rc-sel")},
                                           BuilderCase{"tiny-llama-gqa", 1, 1, 0, 1, 16, kFp32, kSdpa, recipe("rc-sel")},
                                           BuilderCase{"tiny-llama-gqa", 2, 1, 0, 1, 16, kFp16, kEager, recipe("sp+rc-full")},
                                           BuilderCase{"tiny-llama-gqa", 4, 2, 0, 1, 16, kAmp16, kSdpa, recipe("vp+rc-full")},
                                           BuilderCase{"tiny-llama-gqa", 2, 2, 1, 1, 16, kAmp16, kSdpa, recipe("sp+dopt+rc-sel"),
                                                       4}),
                         test_name);

// Overlapped gradient reduction (ovl, gradient_buckets.hpp): every gradient a view of one flat buffer
// zeroed at step start, each backward adding into it (add_), and each bucket, once its gradients are
// final, divided (dp_buffer) and all-reduced (a comm of phase backward); no blocking reduction after the
// backward. Buckets of 64K (several per stage), the 25M default (one bucket, larger than the stage) and
// 1K (about one per parameter); fp32, bf16 and amp-bf16; first, last and only stages; with sp+vp+rc-full;
// a model without KV groups; and at dp 1, where overlap is dropped (the plain stage).
INSTANTIATE_TEST_SUITE_P(
    OverlappedReduction, OpBuilder,
    ::testing::Values(BuilderCase{"tiny-llama-gqa", 1, 1, 0, 1, 16, kFp32, kEager, recipe("ovl-64K"), 2},
                      BuilderCase{"tiny-llama-gqa", 2, 2, 0, 1, 16, kAmp, kEager, recipe("ovl-64K"), 2},
                      BuilderCase{"tiny-llama-gqa", 2, 2, 1, 1, 16, kAmp, kEager, recipe("ovl-64K"), 2},
                      BuilderCase{"tiny-llama-gqa", 1, 2, 1, 2, 16, kBf16, kEager, recipe("ovl-64K"), 2},
                      BuilderCase{"tiny-llama-gqa", 2, 1, 0, 1, 16, kFp32, kEager, recipe("ovl"), 4},    // one bucket
                      BuilderCase{"tiny-llama-gqa", 1, 2, 0, 1, 16, kAmp, kEager, recipe("ovl-1K"), 2},  // ~1 per parameter
                      BuilderCase{"tiny-llama-gqa", 2, 2, 1, 1, 16, kAmp, kEager, recipe("sp+vp+rc-full+ovl-64K"), 2},
                      BuilderCase{"tiny-llama", 2, 2, 0, 1, 16, kBf16, kEager, recipe("ovl-64K"), 2},
                      BuilderCase{"tiny-llama-gqa", 2, 2, 1, 1, 16, kAmp, kEager, recipe("ovl-64K"), 1}),  // dropped: plain
    test_name);

// Overlapped reduction without tracing, on a real model's stages (llama3.1-8b, 16 layers at pp 2, first
// and last stage) in both dialects and with recompute and SP: every parameter reduced exactly once, in
// buckets of at least the bucket size but the last, and the layers' backward, emitted layer by layer under
// overlap, counting as the plain stage's one-for-all layers do (each AccumulateGrad's detach an add_).
TEST(OpBuilderOverlap, ReducesEveryParameterOnceAndKeepsThePlainBackward) {
  const LlamaSpec spec = load("llama3.1-8b");
  for (const predict::TorchDialect dialect : {predict::TorchDialect::kTorch1, predict::TorchDialect::kTorch2}) {
    for (const std::string techniques : {"", "rc-full", "sp+vp+rc-sel"}) {
      for (const int stage : {0, 1}) {
        SCOPED_TRACE("dialect " + std::to_string(static_cast<int>(dialect)) + " recipe '" + techniques + "' stage " +
                     std::to_string(stage));
        const std::string with_overlap = techniques.empty() ? "ovl-64M" : techniques + "+ovl-64M";
        const predict::StageRecipe plain{AttentionKernel::kEager, dialect, recipe(techniques.c_str()), 8};
        const predict::StageRecipe overlapped{AttentionKernel::kEager, dialect, recipe(with_overlap.c_str()), 8};
        const predict::BuiltStage a = predict::build_stage_ops(spec, 2, 2, stage, 1, 64, kAmp, plain);
        const predict::BuiltStage b = predict::build_stage_ops(spec, 2, 2, stage, 1, 64, kAmp, overlapped);
        ASSERT_EQ(a.local_params, b.local_params);
        int64_t reduced_bytes = 0;
        int buckets = 0;
        for (const predict::CommOp& comm : b.comms) {
          EXPECT_NE(comm.phase, Phase::kDpBuffer) << "a blocking DP comm with overlap";
          if (comm.kind != CommKind::kDpAllReduce) continue;
          EXPECT_EQ(comm.phase, Phase::kBackward);
          EXPECT_EQ(comm.dtype, DType::kFloat32);  // the parameters' dtype under amp-bf16
          reduced_bytes += comm.bytes * comm.count;
          buckets += static_cast<int>(comm.count);
        }
        EXPECT_EQ(reduced_bytes, b.local_params * 4);
        EXPECT_GT(buckets, 3);
        EXPECT_LE(buckets, static_cast<int>(reduced_bytes / (int64_t{64} << 20)) + 1);
        const int64_t parameters = 16 * 9 + (stage == 0 ? 1 : 2);  // the layers', and the embedding or final norm and head
        std::map<std::pair<Phase, std::string>, int64_t> overlapped_backward;
        int64_t zeroed = 0, added = 0;
        for (const auto& op : b.ops) {
          if (op.name == "aten::zero_") zeroed += op.count;
          if (op.phase != Phase::kBackward) continue;
          overlapped_backward[{op.phase, op.signature}] = op.count;
          if (op.signature.rfind("aten::add_.Tensor", 0) == 0) added += op.count;
        }
        EXPECT_EQ(zeroed, 1);
        int64_t kept = 0;  // the plain stage's AccumulateGrad detaches
        for (const auto& op : a.ops) {
          if (op.phase != Phase::kBackward) continue;
          const auto found = overlapped_backward.find({op.phase, op.signature});
          if (found == overlapped_backward.end()) {
            EXPECT_EQ(op.name, "aten::detach") << "not in the overlapped backward: " << op.signature;
            kept += op.count;
          } else if (op.signature.rfind("aten::add_.Tensor", 0) != 0) {
            EXPECT_EQ(found->second, op.count) << op.signature;
          }
        }
        EXPECT_EQ(kept, parameters);
        if (dialect == predict::TorchDialect::kTorch1) {
          EXPECT_EQ(added, parameters);  // 2.x adds in place elsewhere too
        }
      }
    }
  }
}

// The distributed optimizer with overlapped reduction (dopt+ovl, trainer.cpp's make_bucketed_shard),
// built without tracing on a real model's stage: the buckets padded to multiples of dp, each
// reduce-scattered in the backward as one rank's slice and all-gathered after the step (phase optimizer)
// likewise, the shard (the one tensor AdamW updates) 1/dp of the padded buffer; no blocking DP comm.
TEST(OpBuilderOverlap, BuildsTheDistributedOptimizerInBuckets) {
  const LlamaSpec spec = load("llama3.1-8b");
  for (const predict::TorchDialect dialect : {predict::TorchDialect::kTorch1, predict::TorchDialect::kTorch2}) {
    for (const int dp : {2, 3, 8}) {
      SCOPED_TRACE("dialect " + std::to_string(static_cast<int>(dialect)) + " dp " + std::to_string(dp));
      const predict::StageRecipe both{AttentionKernel::kEager, dialect, recipe("sp+dopt+ovl-64M"), dp};
      const predict::BuiltStage b = predict::build_stage_ops(spec, 2, 2, 1, 1, 64, kAmp, both);
      int64_t scattered = 0, gathered = 0, scatters = 0, gathers = 0;
      for (const predict::CommOp& comm : b.comms) {
        EXPECT_NE(comm.phase, Phase::kDpBuffer) << "a blocking DP comm with overlap";
        EXPECT_NE(comm.kind, CommKind::kDpAllReduce);
        if (comm.kind == CommKind::kDpReduceScatter) {
          EXPECT_EQ(comm.phase, Phase::kBackward);
          scattered += comm.bytes * comm.count;
          scatters += comm.count;
        }
        if (comm.kind == CommKind::kDpAllGather) {
          EXPECT_EQ(comm.phase, Phase::kOptimizer);
          gathered += comm.bytes * comm.count;
          gathers += comm.count;
        }
      }
      EXPECT_GT(scatters, 3);
      EXPECT_EQ(scatters, gathers);
      EXPECT_EQ(scattered, gathered);
      // One rank's slices: at least its 1/dp of the parameters, at most dp - 1 padding elements per bucket more.
      EXPECT_GE(scattered * dp, b.local_params * 4);
      EXPECT_LE(scattered * dp, (b.local_params + scatters * (dp - 1)) * 4);
      int64_t zeroed = 0;
      for (const auto& op : b.ops) {
        if (op.name == "aten::zero_") zeroed += op.count;
      }
      EXPECT_EQ(zeroed, 1);
    }
  }
}

// Overlapped reduction on LibTorch 2.x: fp16 (its buffer in fp16) and the fused attention kernel.
INSTANTIATE_TEST_SUITE_P(Torch2OverlappedReduction, OpBuilder,
                         ::testing::Values(BuilderCase{"tiny-llama-gqa", 2, 2, 1, 1, 16, kFp16, kEager, recipe("ovl-64K"), 2},
                                           BuilderCase{"tiny-llama-gqa", 2, 2, 0, 1, 16, kAmp16, kSdpa,
                                                       recipe("sp+rc-sel+ovl-64K"), 2}),
                         test_name);

// The distributed optimizer with overlapped reduction (dopt+ovl, trainer.cpp's make_bucketed_shard, as DP
// rank 0 runs it): the bucket buffer padded to multiples of dp and zeroed at step start (dp_buffer), each
// bucket divided (dp_buffer) and reduce-scattered into the shard's gradient as it completes in the
// backward (one rank's slice), with SP the shard's norm elements summed over TP (sp_grads), AdamW on the
// shard, and each bucket's slice all-gathered and the parameters copied back (optimizer). fp32, bf16 and
// amp-bf16; first and last stages; dp 2, 3 (padding) and 4; 64K, 1K (many) and 25M (one) buckets; with
// SP (one, a partial and four norm ranges in the shard), sp+vp+rc-full; a model without KV groups; and at
// dp 1, where overlap is dropped (the plain distributed optimizer).
INSTANTIATE_TEST_SUITE_P(
    DistributedOptimizerWithOverlap, OpBuilder,
    ::testing::Values(BuilderCase{"tiny-llama-gqa", 1, 1, 0, 1, 16, kFp32, kEager, recipe("dopt+ovl-64K"), 2},
                      BuilderCase{"tiny-llama-gqa", 2, 2, 0, 1, 16, kAmp, kEager, recipe("dopt+ovl-64K"), 2},
                      BuilderCase{"tiny-llama-gqa", 2, 2, 1, 1, 16, kAmp, kEager, recipe("dopt+ovl-64K"), 2},
                      BuilderCase{"tiny-llama-gqa", 2, 2, 1, 1, 16, kFp32, kEager, recipe("dopt+ovl-64K"), 3},  // padded
                      BuilderCase{"tiny-llama-gqa", 1, 2, 1, 2, 16, kBf16, kEager, recipe("dopt+ovl-64K"), 4},
                      BuilderCase{"tiny-llama-gqa", 1, 2, 0, 1, 16, kAmp, kEager, recipe("dopt+ovl-1K"), 3},  // ~1 per parameter
                      BuilderCase{"tiny-llama-gqa", 2, 2, 1, 1, 16, kAmp, kEager, recipe("sp+vp+dopt+rc-full+ovl-64K"), 2},
                      // SP: a norm split by rank 0's slice boundary (43 of its 128 elements), and one bucket (25M)
                      // whose first half holds four norms
                      BuilderCase{"tiny-llama-gqa", 2, 2, 1, 1, 16, kFp32, kEager, recipe("sp+dopt+ovl-1K"), 3},
                      BuilderCase{"tiny-llama-gqa", 2, 2, 1, 2, 16, kAmp, kEager, recipe("sp+vp+dopt+ovl"), 2},
                      BuilderCase{"tiny-llama", 2, 2, 0, 1, 16, kBf16, kEager, recipe("dopt+ovl-64K"), 2},
                      BuilderCase{"tiny-llama-gqa", 2, 2, 1, 1, 16, kAmp, kEager, recipe("dopt+ovl-64K"), 1}),  // plain dopt
    test_name);

// dopt+ovl on LibTorch 2.x: fp16 (its buffer and shard in fp16) and the fused attention kernel.
INSTANTIATE_TEST_SUITE_P(
    Torch2DistributedOptimizerWithOverlap, OpBuilder,
    ::testing::Values(BuilderCase{"tiny-llama-gqa", 2, 2, 1, 1, 16, kFp16, kEager, recipe("dopt+ovl-64K"), 2},
                      BuilderCase{"tiny-llama-gqa", 2, 2, 0, 1, 16, kAmp16, kSdpa, recipe("sp+dopt+rc-sel+ovl-64K"), 3},
                      BuilderCase{"tiny-llama-gqa", 2, 2, 1, 1, 16, kFp16, kEager, recipe("dopt+ovl-64K+opg"), 2}),
    test_name);

// dopt+ovl+opg (Megatron-LM's overlap_param_gather): the parameters are views of the padded parameter
// buffer, so after AdamW the buckets' slices are all-gathered last bucket first (the next forward's order)
// and nothing is copied back; the rest is dopt+ovl's. fp32, amp-bf16 and bf16; first and last stages; dp
// 2, 3 (padding) and 4; 64K and 1K buckets; every technique at once; and dp 1, where opg and ovl drop.
INSTANTIATE_TEST_SUITE_P(
    OverlappedParameterGather, OpBuilder,
    ::testing::Values(BuilderCase{"tiny-llama-gqa", 1, 1, 0, 1, 16, kFp32, kEager, recipe("dopt+ovl-64K+opg"), 2},
                      BuilderCase{"tiny-llama-gqa", 2, 2, 1, 1, 16, kAmp, kEager, recipe("dopt+ovl-64K+opg"), 3},  // padded
                      BuilderCase{"tiny-llama-gqa", 1, 2, 0, 2, 16, kBf16, kEager, recipe("dopt+ovl-1K+opg"), 4},
                      BuilderCase{"tiny-llama-gqa", 2, 2, 1, 1, 16, kAmp, kEager, recipe("sp+vp+dopt+rc-full+ovl-64K+opg"), 2},
                      BuilderCase{"tiny-llama-gqa", 2, 2, 1, 1, 16, kAmp, kEager, recipe("dopt+ovl-64K+opg"), 1}),  // plain dopt
    test_name);

// Interleaving with overlapped reduction (vp 2 at pp 2 on the 4-layer model): each model chunk is a stage
// of the pp*vp = 4 pipeline with its own buckets (calibrate/gradient_sync.hpp, buckets per chunk), so the
// builder's bucket plan over that stage's parameters is the trainer's for that chunk: the embedding chunk
// (virtual stage 0), a middle one (2, rank 0's second chunk) and the head chunk (3), ovl and dopt+ovl+opg.
INSTANTIATE_TEST_SUITE_P(
    InterleavedChunkWithOverlap, OpBuilder,
    ::testing::Values(BuilderCase{"tiny-llama-gqa", 1, 4, 0, 1, 16, kFp32, kEager, recipe("ovl-64K"), 2},
                      BuilderCase{"tiny-llama-gqa", 1, 4, 2, 1, 16, kAmp, kEager, recipe("ovl-64K"), 2},
                      BuilderCase{"tiny-llama-gqa", 1, 4, 3, 1, 16, kFp32, kEager, recipe("dopt+ovl-64K+opg"), 2},
                      BuilderCase{"tiny-llama-gqa", 1, 4, 2, 1, 16, kAmp, kEager, recipe("dopt+ovl-64K+opg"), 3}),  // padded
    test_name);

// Context parallelism (issue 17, cp 2 and 4): the stage as CP rank 0 runs it, seq_len/cp tokens; the rotary
// tables index_select-ed at the global positions, keys and values all-gathered over CP (cp_all_gather in
// the forward, its gradients reduce-scattered in the backward: cp_reduce_scatter), the causal mask of the
// global positions (eager masked_fill), the rest at seq_len/cp; the reduction over dp*cp ranks. fp32, bf16,
// amp-bf16; tp 2, with sp; rc-sel and rc-full (its rerun gathering in the backward); dopt at dp 2 (reduction
// size 4) and dopt+ovl; first, middle and last stages; with and without KV groups.
INSTANTIATE_TEST_SUITE_P(
    ContextParallel, OpBuilder,
    ::testing::Values(BuilderCase{"tiny-llama-gqa", 1, 1, 0, 1, 16, kFp32, kEager, {}, 1, 2},
                      BuilderCase{"tiny-llama-gqa", 1, 1, 0, 2, 32, kBf16, kEager, {}, 1, 2},
                      BuilderCase{"tiny-llama-gqa", 1, 1, 0, 1, 32, kAmp, kEager, {}, 1, 4},
                      BuilderCase{"tiny-llama-gqa", 2, 2, 0, 1, 16, kAmp, kEager, {}, 1, 2},
                      BuilderCase{"tiny-llama-gqa", 2, 2, 1, 2, 16, kFp32, kEager, {}, 1, 2},
                      BuilderCase{"tiny-llama-gqa", 1, 3, 1, 1, 16, kBf16, kEager, {}, 1, 4},
                      BuilderCase{"tiny-llama", 2, 1, 0, 1, 16, kAmp, kEager, {}, 1, 2},
                      BuilderCase{"tiny-llama-gqa", 2, 2, 0, 1, 16, kAmp, kEager, recipe("sp"), 1, 2},
                      BuilderCase{"tiny-llama-gqa", 2, 2, 1, 1, 32, kFp32, kEager, recipe("sp+vp"), 1, 4},
                      BuilderCase{"tiny-llama-gqa", 1, 2, 1, 1, 16, kAmp, kEager, recipe("rc-sel"), 1, 2},
                      BuilderCase{"tiny-llama-gqa", 2, 2, 0, 1, 16, kFp32, kEager, recipe("rc-full"), 1, 2},
                      BuilderCase{"tiny-llama-gqa", 2, 3, 2, 1, 32, kAmp, kEager, recipe("sp+rc-full"), 1, 4},
                      BuilderCase{"tiny-llama-gqa", 2, 2, 1, 1, 16, kAmp, kEager, recipe("dopt"), 2, 2},
                      BuilderCase{"tiny-llama-gqa", 1, 2, 0, 1, 16, kBf16, kEager, recipe("dopt"), 1, 2},
                      BuilderCase{"tiny-llama-gqa", 2, 2, 1, 1, 16, kAmp, kEager, recipe("ovl-64K"), 1, 2},
                      BuilderCase{"tiny-llama-gqa", 2, 2, 0, 1, 16, kAmp, kEager, recipe("sp+dopt+ovl-64K"), 2, 2}),
    test_name);

// Context parallelism without tracing, on a real model's first stage (llama3.1-8b at tp 2, pp 2, seq 64,
// amp-bf16) in both dialects: per layer two all-gathers (keys and values, forward, one rank's bf16 part
// [1, 4 KV heads, 64/cp, 128]) and two reduce-scatters (backward); full recompute gathers again in the
// backward; the P2P activation is CP rank 0's 64/cp tokens; the parameters are the cp-1 stage's; and the
// builder refuses what the trainer refuses (seq % 2cp, SP with (seq/cp) % tp).
TEST(OpBuilderContextParallel, GathersEachLayersKeysAndValuesAndRefusesWhatItCannotBuild) {
  const LlamaSpec spec = load("llama3.1-8b");
  const int64_t layers = 16;
  for (const predict::TorchDialect dialect : {predict::TorchDialect::kTorch1, predict::TorchDialect::kTorch2}) {
    const predict::BuiltStage whole = predict::build_stage_ops(spec, 2, 2, 0, 1, 64, kAmp, {kEager, dialect});
    for (const int cp : {2, 4}) {
      for (const char* techniques : {"", "rc-full"}) {
        SCOPED_TRACE("dialect " + std::to_string(static_cast<int>(dialect)) + " cp " + std::to_string(cp) + " '" + techniques +
                     "'");
        const predict::StageRecipe with_cp{kEager, dialect, recipe(techniques), cp, cp};
        const predict::BuiltStage b = predict::build_stage_ops(spec, 2, 2, 0, 1, 64, kAmp, with_cp);
        EXPECT_EQ(b.local_params, whole.local_params);
        const int64_t part_bytes = 1 * 4 * (64 / cp) * 128 * 2;
        std::map<std::string, int64_t> counts;
        for (const predict::CommOp& comm : b.comms) {
          if (comm.kind == CommKind::kCpAllGather || comm.kind == CommKind::kCpReduceScatter) {
            EXPECT_EQ(comm.bytes, part_bytes);
            EXPECT_EQ(comm.dtype, DType::kBFloat16);
            counts[to_string(comm.phase) + " " + to_string(comm.kind)] += comm.count;
          }
          if (comm.kind == CommKind::kPpSendForward) {
            EXPECT_EQ(comm.bytes, 64 / cp * spec.hidden_size * 4);  // fp32 activations
          }
        }
        EXPECT_EQ(counts["forward cp_all_gather"], 2 * layers);
        EXPECT_EQ(counts["backward cp_reduce_scatter"], 2 * layers);
        EXPECT_EQ(counts["backward cp_all_gather"], std::string(techniques) == "rc-full" ? 2 * layers : 0);
      }
    }
  }
  const auto build = [&](int tp, int seq, const char* techniques, int dp, int cp) {
    return predict::build_stage_ops(spec, tp, 2, 0, 1, seq, kAmp,
                                    {kEager, predict::TorchDialect::kTorch1, recipe(techniques), dp, cp});
  };
  EXPECT_THROW(build(2, 60, "", 4, 4), UserError);    // 60 % 8
  EXPECT_THROW(build(4, 24, "sp", 4, 4), UserError);  // 24 / 4 = 6 tokens, not a multiple of tp 4
  EXPECT_THROW(build(2, 64, "", 2, 0), UserError);
  EXPECT_NO_THROW(build(4, 32, "sp", 4, 2));
  EXPECT_NO_THROW(build(2, 64, "", 1, 2));  // a plain stage does not depend on the reduction size
}

// Context parallelism on LibTorch 2.x: the fused kernel with an explicit mask, and fp16.
INSTANTIATE_TEST_SUITE_P(Torch2ContextParallel, OpBuilder,
                         ::testing::Values(BuilderCase{"tiny-llama-gqa", 2, 2, 1, 1, 16, kAmp, kSdpa, {}, 1, 2},
                                           BuilderCase{"tiny-llama-gqa", 1, 2, 0, 1, 32, kFp16, kSdpa, recipe("rc-sel"), 1, 4},
                                           BuilderCase{"tiny-llama-gqa", 2, 1, 0, 1, 16, kFp16, kEager, recipe("sp+rc-full"), 1,
                                                       2}),
                         test_name);

}  // namespace
}  // namespace itertime

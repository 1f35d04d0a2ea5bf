// Operator traces pin what LibTorch really runs under each precision policy on a small model.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "calibrate/ops_calibration.hpp"
#include "common/model_spec.hpp"
#include "common/training_techniques.hpp"

namespace itertime::calibrate {
namespace {

LlamaSpec model() { return load_llama_config(std::string(ITERTIME_SOURCE_DIR) + "/data/models/tiny-llama-gqa.json"); }

// A real cast: aten::to / aten::_to_copy whose output dtype differs from its input's (x.to(fp32) on an fp32
// tensor is recorded too, but returns its input).
bool is_cast(const TracedOpInfo& op) {
  // Python-number scalars (0-dim fp64 tensors such as a division's divisor) are not precision casts.
  const bool scalar = op.signature.find("fp64[]") != std::string::npos;
  return (op.name == "aten::to" || op.name == "aten::_to_copy") && !op.input_dtypes.empty() && !scalar &&
         op.output_dtype != op.input_dtypes.front();
}
bool is_matmul(const TracedOpInfo& op) {
  return op.name == "aten::linear" || op.name == "aten::mm" || op.name == "aten::matmul" || op.name == "aten::bmm" ||
         op.name == "aten::addmm";
}
bool all_inputs(const TracedOpInfo& op, const std::string& dtype) {
  return !op.input_dtypes.empty() &&
         std::all_of(op.input_dtypes.begin(), op.input_dtypes.end(), [&](const std::string& d) { return d == dtype; });
}

void print(const StageTraceInfo& trace) {
  if (std::getenv("ITERTIME_PRINT_TRACE") == nullptr) return;
  for (const auto& op : trace.ops) std::printf("%-10s %s\n", op.phase.c_str(), op.signature.c_str());
}

TEST(OpTrace, Fp32HasNoCastsAndOnlyFp32MatrixProducts) {
  const StageTraceInfo trace =
      trace_stage_info(model(), 1, 1, 0, 1, 16, PrecisionName::kFp32, AttentionKernel::kEager, Backend::kCpu);
  print(trace);
  ASSERT_FALSE(trace.ops.empty());
  int matmuls = 0;
  for (const auto& op : trace.ops) {
    if (op.phase == "forward" || op.phase == "backward") {
      EXPECT_FALSE(is_cast(op)) << op.signature;
    }
    if (is_matmul(op)) {
      ++matmuls;
      EXPECT_TRUE(all_inputs(op, "fp32")) << op.signature;
    }
  }
  // 7 projections per layer x 4 layers + LM head, forward and backward.
  EXPECT_GE(matmuls, 2 * (7 * 4 + 1));
}

TEST(OpTrace, AmpBf16RunsMatrixProductsInBf16WithCastsAndFp32Islands) {
  const StageTraceInfo trace =
      trace_stage_info(model(), 1, 1, 0, 1, 16, PrecisionName::kAmpBf16, AttentionKernel::kEager, Backend::kCpu);
  print(trace);
  int bf16_linear = 0;
  int casts_to_bf16 = 0;
  int fp32_softmax = 0;
  int fp32_norm_ops = 0;
  for (const auto& op : trace.ops) {
    if (op.phase != "forward") continue;
    // The C++ frontend's Linear is t() + matmul; the projections are the matmuls with a 2-D weight.
    const bool projection = op.name == "aten::matmul" && op.signature.find("]{1,") != std::string::npos;
    if (projection && all_inputs(op, "bf16")) ++bf16_linear;
    if (op.name == "aten::matmul") {
      EXPECT_TRUE(all_inputs(op, "bf16")) << "autocast leaves a matrix product in fp32: " << op.signature;
    }
    if (is_cast(op) && op.output_dtype == "bf16") ++casts_to_bf16;
    if ((op.name == "aten::softmax" || op.name == "aten::_softmax") && op.output_dtype == "fp32") ++fp32_softmax;
    if ((op.name == "aten::rsqrt" || op.name == "aten::pow" || op.name == "aten::mean") && all_inputs(op, "fp32"))
      ++fp32_norm_ops;
  }
  EXPECT_EQ(bf16_linear, 7 * 4 + 1);          // every projection (transposed weight) and the LM head
  EXPECT_GT(casts_to_bf16, 0);                // autocast's casts of activations and weights
  EXPECT_EQ(fp32_softmax, 4);                 // attention softmax in fp32 (as HF's eager attention asks)
  EXPECT_GE(fp32_norm_ops, 3 * (2 * 4 + 1));  // RMSNorm statistics stay fp32
  // The optimizer updates the fp32 master weights.
  bool optimizer_fp32 = false;
  for (const auto& op : trace.ops) {
    if (op.phase == "optimizer" && !op.input_dtypes.empty() && op.input_dtypes.front() == "fp32") optimizer_fp32 = true;
  }
  EXPECT_TRUE(optimizer_fp32);
}

TEST(OpTrace, Bf16HasNoFp32MatrixProducts) {
  const StageTraceInfo trace =
      trace_stage_info(model(), 1, 1, 0, 1, 16, PrecisionName::kBf16, AttentionKernel::kEager, Backend::kCpu);
  print(trace);
  for (const auto& op : trace.ops) {
    if (is_matmul(op)) {
      EXPECT_EQ(std::count(op.input_dtypes.begin(), op.input_dtypes.end(), "fp32"), 0) << op.signature;
    }
  }
}

TEST(OpTrace, TensorParallelShardsShapesAndRecordsAllReduces) {
  const LlamaSpec spec = model();
  const StageTraceInfo full =
      trace_stage_info(spec, 1, 2, 1, 1, 16, PrecisionName::kFp32, AttentionKernel::kEager, Backend::kCpu);
  const StageTraceInfo sharded =
      trace_stage_info(spec, 2, 2, 1, 1, 16, PrecisionName::kFp32, AttentionKernel::kEager, Backend::kCpu);
  int tp_forward = 0;
  int tp_backward = 0;
  for (const auto& comm : sharded.comms) {
    if (comm.kind == CommKind::kTpAllReduce && comm.phase == "forward") ++tp_forward;
    if (comm.kind == CommKind::kTpAllReduce && comm.phase == "backward") ++tp_backward;
  }
  // Last stage of pp=2 holds 2 layers: one all-reduce per attention and per MLP block, each way.
  EXPECT_EQ(tp_forward, 2 * 2);
  EXPECT_EQ(tp_backward, 2 * 2);
  for (const auto& comm : full.comms) EXPECT_NE(comm.kind, CommKind::kTpAllReduce);
  // Sharding: the stage holds fewer parameters (projections halved, norms/head replicated).
  EXPECT_LT(sharded.local_params, full.local_params);
  // The last stage sends gradients backward to stage 0, and all-reduces its gradients over DP.
  bool pp_backward = false;
  bool dp = false;
  for (const auto& comm : sharded.comms) {
    pp_backward = pp_backward || comm.kind == CommKind::kPpSendBackward;
    dp = dp || comm.kind == CommKind::kDpAllReduce;
  }
  EXPECT_TRUE(pp_backward);
  EXPECT_TRUE(dp);
}

// Context parallelism (cp 2) as CP rank 0 runs it: seq_len / cp tokens, per layer the keys' and values'
// all-gathers (forward, one rank's part) and their gradients' reduce-scatters (backward); full recompute
// gathers again in the backward; the reduction over dp*cp (the distributed optimizer's shard of 1/4).
TEST(OpTrace, ContextParallelGathersKeysAndValuesPerLayer) {
  const LlamaSpec spec = model();  // 4 KV heads of 16, 2 layers per stage at pp 2
  const int64_t part_bytes = 1 * spec.num_kv_heads * (32 / 2) * spec.head_dim * 4;  // fp32 [1, kv heads, 16, hd]
  const auto count = [](const StageTraceInfo& trace, CommKind kind, const std::string& phase, int64_t bytes) {
    int n = 0;
    for (const auto& comm : trace.comms) n += comm.kind == kind && comm.phase == phase && comm.bytes == bytes;
    return n;
  };
  const StageTraceInfo plain =
      trace_stage_info(spec, 1, 2, 1, 1, 32, PrecisionName::kFp32, AttentionKernel::kEager, Backend::kCpu, {}, 1, 2);
  print(plain);
  EXPECT_EQ(count(plain, CommKind::kCpAllGather, "forward", part_bytes), 2 * 2);
  EXPECT_EQ(count(plain, CommKind::kCpReduceScatter, "backward", part_bytes), 2 * 2);
  EXPECT_EQ(count(plain, CommKind::kCpAllGather, "backward", part_bytes), 0);
  bool local_tokens = false;  // the loss sees 16 of the 32 tokens
  for (const auto& op : plain.ops) {
    local_tokens = local_tokens || op.signature.find("fp32[16," + std::to_string(spec.vocab_size) + "]") != std::string::npos;
  }
  EXPECT_TRUE(local_tokens);
  const StageTraceInfo full = trace_stage_info(spec, 1, 2, 1, 1, 32, PrecisionName::kFp32, AttentionKernel::kEager, Backend::kCpu,
                                               parse_recipe_text("rc-full"), 1, 2);
  EXPECT_EQ(count(full, CommKind::kCpAllGather, "forward", part_bytes), 2 * 2);
  EXPECT_EQ(count(full, CommKind::kCpAllGather, "backward", part_bytes), 2 * 2);
  EXPECT_EQ(count(full, CommKind::kCpReduceScatter, "backward", part_bytes), 2 * 2);
  const StageTraceInfo sharded = trace_stage_info(spec, 1, 2, 1, 1, 32, PrecisionName::kFp32, AttentionKernel::kEager,
                                                  Backend::kCpu, parse_recipe_text("dopt"), 2, 2);
  int scatters = 0;
  for (const auto& comm : sharded.comms) {
    if (comm.kind != CommKind::kDpReduceScatter) continue;
    ++scatters;
    EXPECT_EQ(comm.bytes, (sharded.local_params + 3) / 4 * 4);  // ceil(local / (dp*cp)) fp32 elements
  }
  EXPECT_EQ(scatters, 1);
}

}  // namespace
}  // namespace itertime::calibrate

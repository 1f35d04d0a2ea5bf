// attention.hpp: how a layer computes its attention core, softmax(q k^T / sqrt(d) + causal mask) v.
// Invariants:
//  - kEager is the explicit form of calibrate/llama_model.cpp (matmul, scale, masked_fill, fp32 softmax,
//    matmul): it materializes the [b, heads, s, s] scores and keeps them for the backward.
//  - kSdpa is LibTorch's fused scaled_dot_product_attention (LibTorch >= 2.0), causal, with the KV heads
//    repeated for GQA as the eager form does. Which kernel it dispatches to decides what it saves: the
//    math kernel materializes the scores like kEager; the flash and memory-efficient kernels (CUDA, and
//    flash on CPU since 2.2) save only the output and the [b, heads, s] log-sum-exp.
//  - kAuto is what a job file says when it names none: calibration resolves it (sdpa where the LibTorch
//    has it, else eager) and stores the resolved kind; stores never hold kAuto.
//  - to_string / parse_attention are inverses on the canonical names "eager", "sdpa", "auto".
#pragma once

#include <string>
#include <string_view>

namespace itertime {

enum class AttentionKernel { kAuto, kEager, kSdpa };

std::string to_string(AttentionKernel kernel);
// Throws UserError naming the text and the accepted names.
AttentionKernel parse_attention(std::string_view text);

}  // namespace itertime

// pipeline_schedules.hpp: the order in which one pipeline rank runs its micro-batches' forwards and
// backwards and exchanges their activations and gradients with its neighbours (Megatron-Core's
// schedules): 1F1B, and interleaved 1F1B over virtual pipeline stages.
// Invariants:
//  - run_1f1b (chunks == 1): warm-up forwards (pp - rank - 1 of them, at most m), then one forward and
//    one backward at a time, then the cool-down backwards, with blocking transfers (PipelineP2p's send,
//    recv, send_recv); the first rank receives no activation, the last no gradient.
//  - run_interleaved (chunks = v > 1): common/pipeline_order's interleaved order; chunk c of rank r is
//    virtual stage c*pp + r, the first virtual stage has no input, the last no output gradient; tagged
//    transfers (non-blocking sends, blocking receives), every send finished before it returns
//    (pipeline_schedules.cpp argues why it cannot deadlock). A job abort (JobAborted) keeps the
//    unfinished sends' buffers (PipelineP2p::keep_unfinished_sends) and goes on.
//  - The steps run a micro-batch on a chunk: forward(micro_batch, input, chunk) (input undefined on the
//    first virtual stage) and backward(flight, output_grad, chunk) (output_grad undefined on the last;
//    returns the input's gradient, undefined on the first), each micro-batch's backward after its forward,
//    a chunk's forwards and backwards each in increasing micro-batch order.
#pragma once

#include <torch/torch.h>

#include <functional>

#include "calibrate/pipeline_p2p.hpp"

namespace itertime::calibrate {

// A micro-batch between its forward and its backward.
struct InFlight {
  torch::Tensor input;   // received activation (requires grad), undefined on the first virtual stage
  torch::Tensor output;  // the chunk's output, or the scaled loss on the last virtual stage
};

struct MicroBatchSteps {
  std::function<InFlight(int micro_batch, torch::Tensor input, int chunk)> forward;
  std::function<torch::Tensor(InFlight& flight, const torch::Tensor& output_grad, int chunk)> backward;
};

struct PipelinePlace {
  int stages = 1;         // pp
  int rank = 0;           // this rank's pp index
  int micro_batches = 1;  // m
  int chunks = 1;         // v
};

void run_1f1b(const PipelinePlace& place, const MicroBatchSteps& steps, PipelineP2p& p2p);
void run_interleaved(const PipelinePlace& place, const MicroBatchSteps& steps, PipelineP2p& p2p);

}  // namespace itertime::calibrate

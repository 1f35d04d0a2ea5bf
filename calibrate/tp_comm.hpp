// tp_comm.hpp: Megatron's two tensor-parallel autograd functions over itertime's Communicator, and the
// context-parallel all-gather of keys and values.
// Invariants:
//  - copy_to_tp (Megatron's "f"): forward identity, backward all-reduce (sum) of the gradient over TP;
//    reduce_from_tp ("g"): forward all-reduce (sum) over TP, backward identity.
//  - With tp == 1 (no communicator) both are the identity and record no time.
//  - Every all-reduce runs on a contiguous tensor in its own dtype (the compute dtype: bf16 under
//    amp-bf16 for matmul outputs), and its duration is added to the CommTimer given (forward or
//    backward bucket), so the trainer can report TP communication separately from compute.
//  - Sequence parallelism (Megatron SP; TpContext::sequence_parallel): hidden states outside the TP
//    regions are [batch, seq/tp, hidden] shards of the sequence (TP rank r holds positions
//    [r*seq/tp, (r+1)*seq/tp)). gather_from_sp enters a TP region (forward all-gather along the sequence,
//    backward reduce-scatter), reduce_scatter_to_sp leaves it (forward reduce-scatter, backward
//    all-gather); scatter_to_sp (forward own shard, backward all-gather) and gather_from_sp_replicated
//    (forward all-gather, backward own shard) bridge the replicated embedding and LM head, whose
//    gradients are the same on every TP rank. The collectives run on [tp, batch, seq/tp, hidden]
//    buffers; the sequence dimension is 1, so a batch above 1 costs a copy each way.
//  - The parallel cross-entropy's small TP collectives (per-row maxima, sums) count as forward TP
//    communication too.
//  - Context parallelism (CpContext, cp ranks; Megatron-LM's load balancing): a sample's seq tokens are
//    cut into 2*cp chunks of seq/(2*cp); CP rank i holds chunks i and 2*cp-1-i, in that order
//    (context_parallel_positions). cp_all_gather_sequence concatenates every CP rank's keys or values
//    along the sequence, CP rank 0's first (not in global position order: the attention mask follows
//    the positions, context_parallel_key_positions); its backward reduce-scatters (sums) their gradients
//    back to each rank's part. Blocking, not overlapped with compute (Transformer Engine's cp_comm_type
//    "all_gather"); its time goes to the CpContext's timer. With cp == 1 it is the identity.
#pragma once

#include <torch/torch.h>

#include "runtime/comm.hpp"

namespace itertime::calibrate {

struct CommTimer {
  double forward_us = 0.0;
  double backward_us = 0.0;
  int64_t calls = 0;
  int64_t bytes = 0;
  void reset() { *this = CommTimer{}; }
};

// One communication group of the model's layers (TP or CP): its communicator (null when size == 1), its
// size and this rank's place in it, whether tensors are on CUDA, and where to add its communication time.
struct GroupContext {
  Communicator* comm = nullptr;
  int size = 1;
  int rank = 0;
  bool cuda = false;
  CommTimer* timer = nullptr;
};

// What the model's TP layers need: the TP group, and which of its techniques are on. Owned by the
// trainer; layers hold a plain pointer (it outlives them).
struct TpContext : GroupContext {
  bool sequence_parallel = false;  // Megatron SP (see above); only meaningful with size > 1
  bool vocab_parallel = false;     // vocabulary-parallel embedding and LM head (llama_model.hpp)
  bool sp() const { return sequence_parallel && size > 1; }
  bool vp() const { return vocab_parallel && size > 1; }
};

torch::Tensor copy_to_tp(const torch::Tensor& x, TpContext* context);
torch::Tensor reduce_from_tp(const torch::Tensor& x, TpContext* context);
// Sequence parallelism (x: [batch, seq or seq/tp, hidden]); all identities when !context->sp().
torch::Tensor gather_from_sp(const torch::Tensor& x, TpContext* context);
torch::Tensor reduce_scatter_to_sp(const torch::Tensor& x, TpContext* context);
torch::Tensor scatter_to_sp(const torch::Tensor& x, TpContext* context);
torch::Tensor gather_from_sp_replicated(const torch::Tensor& x, TpContext* context);
// Megatron's parallel cross-entropy: the mean over rows of -log softmax(logits)[target], where each TP
// rank holds the fp32 logits of vocabulary ids [first_id, first_id + local_logits.size(1)) and every rank
// the same int64 targets; a row's maximum (all-gather of the local maxima), its sum of exponentials and
// its target logit (sums over TP) are the only communication. Backward: softmax minus one-hot, local.
torch::Tensor vocab_parallel_cross_entropy(const torch::Tensor& local_logits, const torch::Tensor& targets, int64_t first_id,
                                           TpContext* context);
// Into and out of a TP region (attention, MLP): copy_to_tp / reduce_from_tp, or with SP gather_from_sp /
// reduce_scatter_to_sp.
torch::Tensor enter_tp_region(const torch::Tensor& x, TpContext* context);
torch::Tensor leave_tp_region(const torch::Tensor& x, TpContext* context);

// Context parallelism (see above): the CP group. Owned by the trainer; attention layers hold a plain
// pointer.
struct CpContext : GroupContext {
  bool active() const { return size > 1 && comm != nullptr; }
};

// The global positions of the seq / cp tokens CP rank `rank` of `cp` holds: chunks rank and 2*cp-1-rank
// of seq / (2*cp) tokens each, in that order (int64, on the CPU). Needs seq % (2*cp) == 0.
torch::Tensor context_parallel_positions(int64_t seq, int cp, int rank);
// The positions of cp_all_gather_sequence's output: every CP rank's, rank 0's first ([seq], int64, CPU).
torch::Tensor context_parallel_key_positions(int64_t seq, int cp);
// x: [batch, heads, seq/cp, head_dim] -> [batch, heads, seq, head_dim], every CP rank's part in CP-rank
// order (forward all-gather, backward reduce-scatter of the gradient); identity when !context->active().
torch::Tensor cp_all_gather_sequence(const torch::Tensor& x, CpContext* context);

// Flat buffers: every parameter's elements in registration order, in one 1-D tensor of the parameters'
// dtype (make_flat_buffer: zeros, as many elements as the parameters). The data-parallel gradient buffer
// is one, allocated once per trainer and reused every step (as Megatron-LM's contiguous gradient buffer),
// so the all-reduce runs on memory that stays mapped; the distributed optimizer's flat parameters are
// another. flatten_into() fills a buffer (or a prefix of a padded one) from the parameters' gradients or
// values (aten::cat.out), unflatten_from() copies it back (narrow, view_as, copy_; values: under
// NoGradGuard).
enum class FlatPart { kGradient, kValue };
torch::Tensor make_flat_buffer(const std::vector<torch::Tensor>& parameters);
void flatten_into(torch::Tensor& buffer, const std::vector<torch::Tensor>& parameters, FlatPart part);
void unflatten_from(const torch::Tensor& flat, std::vector<torch::Tensor>& parameters, FlatPart part);

// The distributed optimizer's buffers (ZeRO-1, Megatron-LM's), as DP rank dp_index of dp holds them: the
// flat parameters and gradients padded to dp shards of shard_count = ceil(flat_count / dp) elements (the
// padding stays zero), and this rank's shard of the parameters (a leaf: the one tensor AdamW updates) with
// its reduced gradient. The trainer runs them; the tracer (ops_calibration.cpp) traces them as rank 0.
struct ShardedBuffers {
  int64_t flat_count = 0, shard_count = 0;
  torch::Tensor parameter_buffer;  // [shard_count * dp]: the parameters' values, then zeros
  torch::Tensor shard;             // [shard_count]: a copy of this rank's part of parameter_buffer
  torch::Tensor shard_gradient;    // [shard_count]: the reduce-scatter's result
  torch::Tensor gradient_buffer;   // [shard_count * dp]: what is reduce-scattered
};
ShardedBuffers make_sharded_buffers(const std::vector<torch::Tensor>& parameters, int dp, int dp_index);
// The reduce-scatter's input: every gradient into gradient_buffer's prefix, the whole buffer divided by dp.
void fill_gradient_buffer(ShardedBuffers& buffers, const std::vector<torch::Tensor>& parameters, int dp);

// In-place all-reduce (sum) of a contiguous tensor; the device work before it is complete when it starts.
void all_reduce_tensor(Communicator& comm, torch::Tensor& tensor, bool cuda);

}  // namespace itertime::calibrate

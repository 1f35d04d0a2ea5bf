// tp_comm.cpp: Megatron's tensor-parallel autograd functions and the DP gradient buffer (tp_comm.hpp).
#include "calibrate/tp_comm.hpp"

#include <chrono>

#include "calibrate/torch_compat.hpp"

namespace itertime::calibrate {
namespace {

using Clock = std::chrono::steady_clock;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

TpContext* context_of(AutogradContext* ctx) {
  return reinterpret_cast<TpContext*>(static_cast<intptr_t>(ctx->saved_data["tp"].toInt()));
}

// Adds one collective's time (to the forward or backward bucket), call and bytes to the context's timer.
void add_time(GroupContext* context, bool backward, Clock::time_point start, const torch::Tensor& moved) {
  if (!context->timer) return;
  const double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  (backward ? context->timer->backward_us : context->timer->forward_us) += us;
  context->timer->calls += 1;
  context->timer->bytes += static_cast<int64_t>(moved.numel() * moved.element_size());
}

torch::Tensor timed_all_reduce(const torch::Tensor& x, TpContext* context, bool backward) {
  torch::Tensor out = x.contiguous().clone();
  const auto start = Clock::now();
  all_reduce_tensor(*context->comm, out, context->cuda);
  add_time(context, backward, start, out);
  return out;
}

// Every TP rank's `part` stacked: [tp, part's sizes...].
torch::Tensor timed_all_gather(const torch::Tensor& part, TpContext* context, bool backward) {
  const torch::Tensor input = part.contiguous();
  std::vector<int64_t> sizes{context->size};
  sizes.insert(sizes.end(), input.sizes().begin(), input.sizes().end());
  torch::Tensor gathered = torch::empty(sizes, input.options());
  const auto start = Clock::now();
  if (context->cuda) torch::cuda::synchronize();
  context->comm->all_gather(input.data_ptr(), gathered.data_ptr(), static_cast<std::size_t>(input.numel()),
                            from_torch(input.scalar_type()));
  context->comm->synchronize();
  add_time(context, backward, start, gathered);
  return gathered;
}

// [batch, seq/tp, hidden] shards of every TP rank -> [batch, seq, hidden] (all-gather along the sequence).
torch::Tensor timed_all_gather_sequence(const torch::Tensor& shard, TpContext* context, bool backward) {
  const torch::Tensor gathered = timed_all_gather(shard, context, backward);  // [tp, batch, seq/tp, hidden]
  return gathered.transpose(0, 1).reshape({shard.size(0), context->size * shard.size(1), shard.size(2)});
}

// [batch, seq, hidden] partial sums -> this rank's [batch, seq/tp, hidden] shard of their sum.
torch::Tensor timed_reduce_scatter_sequence(const torch::Tensor& full, TpContext* context, bool backward) {
  const int tp = context->size;
  const int64_t batch = full.size(0), seq = full.size(1), hidden = full.size(2);
  const torch::Tensor chunks = full.reshape({batch, tp, seq / tp, hidden}).transpose(0, 1).contiguous();
  torch::Tensor shard = torch::empty({batch, seq / tp, hidden}, full.options());
  const auto start = Clock::now();
  if (context->cuda) torch::cuda::synchronize();
  context->comm->reduce_scatter_sum(chunks.data_ptr(), shard.data_ptr(), static_cast<std::size_t>(shard.numel()),
                                    from_torch(shard.scalar_type()));
  context->comm->synchronize();
  add_time(context, backward, start, chunks);
  return shard;
}

// This rank's [batch, seq/tp, hidden] shard of a full [batch, seq, hidden] tensor (no communication).
torch::Tensor own_sequence_shard(const torch::Tensor& full, TpContext* context, bool /*backward*/) {
  const int64_t shard = full.size(1) / context->size;
  return full.narrow(1, context->rank * shard, shard).contiguous();
}

torch::Tensor clone_tensor(const torch::Tensor& x, TpContext*, bool) { return x.clone(); }
torch::Tensor same_tensor(const torch::Tensor& x, TpContext*, bool) { return x; }

// Megatron's TP region functions, each a forward and a backward of one tensor (tp_comm.hpp): the context
// travels as an address in saved_data (an IValue).
using RegionStep = torch::Tensor (*)(const torch::Tensor&, TpContext*, bool backward);

template <RegionStep Forward, RegionStep Backward>
struct TpRegionFunction : public torch::autograd::Function<TpRegionFunction<Forward, Backward>> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, int64_t context_address) {
    ctx->saved_data["tp"] = context_address;
    return Forward(x, context_of(ctx), /*backward=*/false);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {Backward(grads[0], context_of(ctx), /*backward=*/true), torch::Tensor()};
  }
};

using CopyToTp = TpRegionFunction<clone_tensor, timed_all_reduce>;                                // Megatron's f
using ReduceFromTp = TpRegionFunction<timed_all_reduce, same_tensor>;                             // g
using GatherFromSp = TpRegionFunction<timed_all_gather_sequence, timed_reduce_scatter_sequence>;  // SP's g-bar
using ReduceScatterToSp = TpRegionFunction<timed_reduce_scatter_sequence, timed_all_gather_sequence>;
using ScatterToSp = TpRegionFunction<own_sequence_shard, timed_all_gather_sequence>;
using GatherFromSpReplicated = TpRegionFunction<timed_all_gather_sequence, own_sequence_shard>;

struct VocabParallelCrossEntropy : public torch::autograd::Function<VocabParallelCrossEntropy> {
  // logits [rows, local_vocab] fp32, targets [rows] int64.
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& logits, const torch::Tensor& targets, int64_t first_id,
                               int64_t context_address) {
    TpContext* context = reinterpret_cast<TpContext*>(static_cast<intptr_t>(context_address));
    torch::NoGradGuard no_grad;
    const int64_t local_vocab = logits.size(1);
    const torch::Tensor row_max = std::get<0>(timed_all_gather(std::get<0>(logits.max(1)), context, false).max(0));
    const torch::Tensor shifted = logits - row_max.unsqueeze(1);
    const torch::Tensor exponentials = shifted.exp();
    const torch::Tensor sum_exp = timed_all_reduce(exponentials.sum(1), context, false);
    const torch::Tensor outside = (targets < first_id).logical_or(targets >= first_id + local_vocab);
    const torch::Tensor local_targets = (targets - first_id).masked_fill(outside, 0);
    const torch::Tensor target_logit =
        timed_all_reduce(shifted.gather(1, local_targets.unsqueeze(1)).squeeze(1).masked_fill(outside, 0.0), context, false);
    ctx->save_for_backward({exponentials / sum_exp.unsqueeze(1), local_targets, outside});
    return (sum_exp.log() - target_logit).mean();
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& softmax = saved[0];
    const torch::Tensor& local_targets = saved[1];
    const torch::Tensor& outside = saved[2];
    torch::Tensor grad = softmax.clone();
    grad.scatter_add_(1, local_targets.unsqueeze(1), outside.logical_not().to(grad.scalar_type()).unsqueeze(1).neg());
    grad.mul_(grads[0] / static_cast<double>(softmax.size(0)));
    return {grad, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

// Context parallelism's all-gather of keys or values along the sequence (tp_comm.hpp).
struct CpAllGatherSequence : public torch::autograd::Function<CpAllGatherSequence> {
  static CpContext* cp_of(AutogradContext* ctx) {
    return reinterpret_cast<CpContext*>(static_cast<intptr_t>(ctx->saved_data["cp"].toInt()));
  }
  // x: [batch, heads, seq/cp, head_dim]
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, int64_t context_address) {
    ctx->saved_data["cp"] = context_address;
    CpContext* context = cp_of(ctx);
    const torch::Tensor input = x.contiguous();
    std::vector<int64_t> sizes{context->size};
    sizes.insert(sizes.end(), input.sizes().begin(), input.sizes().end());
    torch::Tensor gathered = torch::empty(sizes, input.options());  // [cp, batch, heads, seq/cp, head_dim]
    const auto start = Clock::now();
    if (context->cuda) torch::cuda::synchronize();
    context->comm->all_gather(input.data_ptr(), gathered.data_ptr(), static_cast<std::size_t>(input.numel()),
                              from_torch(input.scalar_type()));
    context->comm->synchronize();
    add_time(context, false, start, gathered);
    return gathered.permute({1, 2, 0, 3, 4}).reshape({x.size(0), x.size(1), context->size * x.size(2), x.size(3)});
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    CpContext* context = cp_of(ctx);
    const torch::Tensor& grad = grads[0];  // [batch, heads, seq, head_dim]
    const int64_t batch = grad.size(0), heads = grad.size(1), local = grad.size(2) / context->size, dim = grad.size(3);
    const torch::Tensor parts = grad.reshape({batch, heads, context->size, local, dim}).permute({2, 0, 1, 3, 4}).contiguous();
    torch::Tensor mine = torch::empty({batch, heads, local, dim}, grad.options());
    const auto start = Clock::now();
    if (context->cuda) torch::cuda::synchronize();
    context->comm->reduce_scatter_sum(parts.data_ptr(), mine.data_ptr(), static_cast<std::size_t>(mine.numel()),
                                      from_torch(mine.scalar_type()));
    context->comm->synchronize();
    add_time(context, true, start, parts);
    return {mine, torch::Tensor()};
  }
};

int64_t address_of(TpContext* context) { return static_cast<int64_t>(reinterpret_cast<intptr_t>(context)); }

}  // namespace

void all_reduce_tensor(Communicator& comm, torch::Tensor& tensor, bool cuda) {
  ITERTIME_CHECK(tensor.is_contiguous(), "all-reduce of a non-contiguous tensor");
  if (cuda) torch::cuda::synchronize();
  comm.all_reduce_sum(tensor.data_ptr(), tensor.data_ptr(), static_cast<std::size_t>(tensor.numel()),
                      from_torch(tensor.scalar_type()));
  comm.synchronize();
}

ShardedBuffers make_sharded_buffers(const std::vector<torch::Tensor>& parameters, int dp, int dp_index) {
  ITERTIME_CHECK(!parameters.empty() && dp >= 1 && dp_index >= 0 && dp_index < dp,
                 "sharded buffers need parameters and a DP rank");
  ShardedBuffers b;
  for (const auto& p : parameters) b.flat_count += p.numel();
  b.shard_count = (b.flat_count + dp - 1) / dp;
  const auto flat_options = parameters.front().options().requires_grad(false);
  b.parameter_buffer = torch::zeros({b.shard_count * dp}, flat_options);
  {
    torch::NoGradGuard no_grad;
    torch::Tensor head = b.parameter_buffer.narrow(0, 0, b.flat_count);
    flatten_into(head, parameters, FlatPart::kValue);
  }
  b.shard = b.parameter_buffer.narrow(0, dp_index * b.shard_count, b.shard_count).clone().requires_grad_(true);
  b.shard_gradient = torch::zeros({b.shard_count}, flat_options);
  b.gradient_buffer = torch::zeros({b.shard_count * dp}, flat_options);
  return b;
}

void fill_gradient_buffer(ShardedBuffers& buffers, const std::vector<torch::Tensor>& parameters, int dp) {
  torch::Tensor head = buffers.gradient_buffer.narrow(0, 0, buffers.flat_count);
  flatten_into(head, parameters, FlatPart::kGradient);
  buffers.gradient_buffer.div_(static_cast<double>(dp));
}

torch::Tensor make_flat_buffer(const std::vector<torch::Tensor>& parameters) {
  int64_t count = 0;
  for (const auto& p : parameters) count += p.numel();
  ITERTIME_CHECK(!parameters.empty(), "a flat buffer for no parameters");
  return torch::zeros({count}, parameters.front().options().requires_grad(false));
}

void flatten_into(torch::Tensor& buffer, const std::vector<torch::Tensor>& parameters, FlatPart part) {
  std::vector<torch::Tensor> parts;
  parts.reserve(parameters.size());
  for (const auto& p : parameters) parts.push_back((part == FlatPart::kGradient ? p.grad() : p).reshape({-1}));
  torch::cat_out(buffer, parts, 0);
}

void unflatten_from(const torch::Tensor& flat, std::vector<torch::Tensor>& parameters, FlatPart part) {
  int64_t offset = 0;
  for (auto& p : parameters) {
    const int64_t n = p.numel();
    (part == FlatPart::kGradient ? p.grad() : p).copy_(flat.narrow(0, offset, n).view_as(p));
    offset += n;
  }
}

torch::Tensor copy_to_tp(const torch::Tensor& x, TpContext* context) {
  if (context == nullptr || context->size == 1) return x;
  return CopyToTp::apply(x, address_of(context));
}

torch::Tensor reduce_from_tp(const torch::Tensor& x, TpContext* context) {
  if (context == nullptr || context->size == 1) return x;
  return ReduceFromTp::apply(x, address_of(context));
}

torch::Tensor gather_from_sp(const torch::Tensor& x, TpContext* context) {
  if (context == nullptr || !context->sp()) return x;
  return GatherFromSp::apply(x, address_of(context));
}

torch::Tensor reduce_scatter_to_sp(const torch::Tensor& x, TpContext* context) {
  if (context == nullptr || !context->sp()) return x;
  return ReduceScatterToSp::apply(x, address_of(context));
}

torch::Tensor scatter_to_sp(const torch::Tensor& x, TpContext* context) {
  if (context == nullptr || !context->sp()) return x;
  return ScatterToSp::apply(x, address_of(context));
}

torch::Tensor gather_from_sp_replicated(const torch::Tensor& x, TpContext* context) {
  if (context == nullptr || !context->sp()) return x;
  return GatherFromSpReplicated::apply(x, address_of(context));
}

torch::Tensor vocab_parallel_cross_entropy(const torch::Tensor& local_logits, const torch::Tensor& targets, int64_t first_id,
                                           TpContext* context) {
  return VocabParallelCrossEntropy::apply(local_logits, targets, first_id, address_of(context));
}

torch::Tensor context_parallel_positions(int64_t seq, int cp, int rank) {
  ITERTIME_CHECK(cp >= 1 && rank >= 0 && rank < cp && seq % (2 * cp) == 0, "context-parallel chunks need seq % (2*cp) == 0");
  const int64_t chunk = seq / (2 * cp);
  return torch::cat({torch::arange(rank * chunk, (rank + 1) * chunk, torch::kInt64),
                     torch::arange((2 * cp - 1 - rank) * chunk, (2 * cp - rank) * chunk, torch::kInt64)});
}

torch::Tensor context_parallel_key_positions(int64_t seq, int cp) {
  std::vector<torch::Tensor> parts;
  for (int rank = 0; rank < cp; ++rank) parts.push_back(context_parallel_positions(seq, cp, rank));
  return torch::cat(parts);
}

torch::Tensor cp_all_gather_sequence(const torch::Tensor& x, CpContext* context) {
  if (context == nullptr || !context->active()) return x;
  return CpAllGatherSequence::apply(x, static_cast<int64_t>(reinterpret_cast<intptr_t>(context)));
}

torch::Tensor enter_tp_region(const torch::Tensor& x, TpContext* context) {
  return (context != nullptr && context->sp()) ? gather_from_sp(x, context) : copy_to_tp(x, context);
}

torch::Tensor leave_tp_region(const torch::Tensor& x, TpContext* context) {
  return (context != nullptr && context->sp()) ? reduce_scatter_to_sp(x, context) : reduce_from_tp(x, context);
}

}  // namespace itertime::calibrate

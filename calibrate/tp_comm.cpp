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

torch::Tensor timed_all_reduce(const torch::Tensor& x, TpContext* context, bool backward) {
  torch::Tensor out = x.contiguous().clone();
  const auto start = Clock::now();
  all_reduce_tensor(*context->comm, out, context->cuda);
  const double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  if (context->timer) {
    (backward ? context->timer->backward_us : context->timer->forward_us) += us;
    context->timer->calls += 1;
    context->timer->bytes += static_cast<int64_t>(out.numel() * out.element_size());
  }
  return out;
}

struct CopyToTp : public torch::autograd::Function<CopyToTp> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, int64_t context_address) {
    ctx->saved_data["tp"] = context_address;
    return x.clone();
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {timed_all_reduce(grads[0], context_of(ctx), /*backward=*/true), torch::Tensor()};
  }
};

struct ReduceFromTp : public torch::autograd::Function<ReduceFromTp> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, int64_t context_address) {
    ctx->saved_data["tp"] = context_address;
    return timed_all_reduce(x, reinterpret_cast<TpContext*>(static_cast<intptr_t>(context_address)), false);
  }
  static variable_list backward(AutogradContext*, variable_list grads) { return {grads[0], torch::Tensor()}; }
};

}  // namespace

void all_reduce_tensor(Communicator& comm, torch::Tensor& tensor, bool cuda) {
  ITERTIME_CHECK(tensor.is_contiguous(), "all-reduce of a non-contiguous tensor");
  if (cuda) torch::cuda::synchronize();
  comm.all_reduce_sum(tensor.data_ptr(), tensor.data_ptr(), static_cast<std::size_t>(tensor.numel()),
                      from_torch(tensor.scalar_type()));
  comm.synchronize();
}

torch::Tensor make_gradient_buffer(const std::vector<torch::Tensor>& parameters) {
  int64_t count = 0;
  for (const auto& p : parameters) count += p.numel();
  ITERTIME_CHECK(!parameters.empty(), "a gradient buffer for no parameters");
  return torch::zeros({count}, parameters.front().options().requires_grad(false));
}

void flatten_gradients_into(torch::Tensor& buffer, const std::vector<torch::Tensor>& parameters) {
  std::vector<torch::Tensor> parts;
  parts.reserve(parameters.size());
  for (const auto& p : parameters) parts.push_back(p.grad().reshape({-1}));
  torch::cat_out(buffer, parts, 0);
}

void unflatten_gradients(const torch::Tensor& flat, std::vector<torch::Tensor>& parameters) {
  int64_t offset = 0;
  for (auto& p : parameters) {
    const int64_t n = p.numel();
    p.grad().copy_(flat.narrow(0, offset, n).view_as(p));
    offset += n;
  }
}

torch::Tensor copy_to_tp(const torch::Tensor& x, TpContext* context) {
  if (context == nullptr || context->size == 1) return x;
  return CopyToTp::apply(x, static_cast<int64_t>(reinterpret_cast<intptr_t>(context)));
}

torch::Tensor reduce_from_tp(const torch::Tensor& x, TpContext* context) {
  if (context == nullptr || context->size == 1) return x;
  return ReduceFromTp::apply(x, static_cast<int64_t>(reinterpret_cast<intptr_t>(context)));
}

}  // namespace itertime::calibrate

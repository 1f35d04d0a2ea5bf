// pipeline_schedules.cpp: 1F1B and interleaved 1F1B (pipeline_schedules.hpp).
#include "calibrate/pipeline_schedules.hpp"

#include <algorithm>
#include <deque>
#include <utility>
#include <vector>

#include "common/errors.hpp"
#include "common/pipeline_order.hpp"

namespace itertime::calibrate {

void run_1f1b(const PipelinePlace& place, const MicroBatchSteps& steps, PipelineP2p& p2p) {
  const int m = place.micro_batches;
  const bool first_stage = place.rank == 0, last_stage = place.rank == place.stages - 1;
  const int prev = place.rank - 1;
  const int next = place.rank + 1;
  const int warmup = std::min(place.stages - place.rank - 1, m);
  const int remaining = m - warmup;
  std::deque<InFlight> in_flight;
  int forward_index = 0;

  auto recv_forward = [&]() { return first_stage ? torch::Tensor() : p2p.recv(prev); };
  for (int i = 0; i < warmup; ++i) {
    torch::Tensor input = recv_forward();
    in_flight.push_back(steps.forward(forward_index++, input, 0));
    if (!last_stage) p2p.send(in_flight.back().output.detach(), next);
  }
  torch::Tensor input;
  if (remaining > 0) input = recv_forward();
  for (int i = 0; i < remaining; ++i) {
    in_flight.push_back(steps.forward(forward_index++, input, 0));
    torch::Tensor output_grad;
    if (!last_stage) output_grad = p2p.send_recv(in_flight.back().output.detach(), next);
    torch::Tensor input_grad = steps.backward(in_flight.front(), output_grad, 0);
    in_flight.pop_front();
    const bool last_iteration = (i == remaining - 1);
    if (last_iteration) {
      if (!first_stage) p2p.send(input_grad, prev);
    } else {
      input = first_stage ? torch::Tensor() : p2p.send_recv(input_grad, prev);
    }
  }
  for (int i = 0; i < warmup; ++i) {
    const torch::Tensor output_grad = last_stage ? torch::Tensor() : p2p.recv(next);
    torch::Tensor input_grad = steps.backward(in_flight.front(), output_grad, 0);
    in_flight.pop_front();
    if (!first_stage) p2p.send(input_grad, prev);
  }
}

// ---- interleaved 1F1B (Megatron-LM's virtual pipeline stages) ----
// Rank r runs common/pipeline_order's interleaved order. Virtual stage c*pp + r (its chunk c) takes its
// input from virtual stage c*pp + r - 1: rank r-1's chunk c, or for r = 0 rank pp-1's chunk c-1; its
// output goes to rank r+1's chunk c, or for r = pp-1 rank 0's chunk c+1; gradients go the other way.
//
// Sends are non-blocking (MPI_Isend), receives blocking, so a rank waits only in a receive, for the
// pass on a neighbour that produces it. That is exactly the dependency graph of predict/schedule's
// simulation of the same orders (forward (vs, i) after forward (vs-1, i), backward (vs, i) after backward
// (vs+1, i)), which completes for every valid (pp, m, v) (its no-progress sweep is an ITERTIME_CHECK;
// tests/torch/test_layout_equivalence.cpp replays the orders too), so no cycle of waits can form; a send
// never waits for its receiver. MPI progresses the sends inside the sender's later MPI calls (each pass
// is followed by MPI_Test on the pending sends, and the step ends waiting for all of them).
//
// Matching: a message's tag names its direction and the receiver's chunk (kFirstTag + 2*chunk +
// direction). Between one source and one receiver chunk, in one direction, every payload belongs to the
// same virtual-stage boundary, and both ends enumerate that boundary's micro-batches in increasing order
// (the order runs each chunk's forwards, and its backwards, in increasing micro-batch); MPI does not
// reorder messages of one (source, tag, communicator), so the n-th receive gets the n-th send: the right
// micro-batch. (With pp = 2 the previous and next rank coincide; the tags keep the directions and chunks
// apart.)
namespace {

int interleaved_tag(PipelinePassKind direction, int receiver_chunk) {
  return PipelineP2p::kFirstTag + 2 * receiver_chunk + (direction == PipelinePassKind::kForward ? 0 : 1);
}

}  // namespace

void run_interleaved(const PipelinePlace& place, const MicroBatchSteps& steps, PipelineP2p& p2p) {
  const int pp = place.stages, v = place.chunks, r = place.rank;
  const int prev = (r + pp - 1) % pp;
  const int next = (r + 1) % pp;
  // Per chunk, its forwards awaiting their backward, oldest first (micro-batch, activations).
  std::vector<std::deque<std::pair<int, InFlight>>> in_flight(static_cast<std::size_t>(v));
  try {
    for (const PipelinePass& pass : interleaved_passes(pp, r, place.micro_batches, v)) {
      const int c = pass.chunk;
      const bool first_virtual = c == 0 && r == 0, last_virtual = c == v - 1 && r == pp - 1;
      auto& flights = in_flight[static_cast<std::size_t>(c)];
      if (pass.kind == PipelinePassKind::kForward) {
        const torch::Tensor input =
            first_virtual ? torch::Tensor() : p2p.recv_tagged(prev, interleaved_tag(PipelinePassKind::kForward, c));
        InFlight flight = steps.forward(pass.micro_batch, input, c);
        if (!last_virtual) {
          p2p.start_send(flight.output.detach(), next, interleaved_tag(PipelinePassKind::kForward, r == pp - 1 ? c + 1 : c));
        }
        flights.emplace_back(pass.micro_batch, std::move(flight));
      } else {
        ITERTIME_CHECK(!flights.empty() && flights.front().first == pass.micro_batch,
                       "the interleaved order runs a backward before its forward");
        const torch::Tensor output_grad =
            last_virtual ? torch::Tensor() : p2p.recv_tagged(next, interleaved_tag(PipelinePassKind::kBackward, c));
        const torch::Tensor input_grad = steps.backward(flights.front().second, output_grad, c);
        flights.pop_front();
        if (!first_virtual) p2p.start_send(input_grad, prev, interleaved_tag(PipelinePassKind::kBackward, r == 0 ? c - 1 : c));
      }
      p2p.reap_sends();
    }
    p2p.finish_sends();
  } catch (const JobAborted&) {
    p2p.keep_unfinished_sends();  // sends an MPI request may still read: kept as long as the trainer
    throw;
  }
}

}  // namespace itertime::calibrate

// collective.hpp: the communication vocabulary every layer shares: the collectives (with their
// nccl-tests bus-bandwidth factors and ring step counts), the rank layouts of a group, the timing
// modes of the comm sweep, and the kinds of communication a training stage performs.
// Invariants:
//  - Each term has exactly one canonical name (the one /comm and /ops store, the CLI accepts and
//    to_string prints); parse_*(to_string(x)) == x, and parsing any other text is a UserError naming it.
//  - busbw = algbw * busbw_factor: all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all (n-1)/n;
//    broadcast, send and sendrecv 1. Ring latency steps: all_reduce 2(n-1); all_gather, reduce_scatter,
//    all_to_all n-1; broadcast, send, sendrecv 1 (independent of n).
//  - A CommKind names one communication of a training stage; collective_of() says which collective the
//    comm model times it with (TP and DP all-reduces: all_reduce; pipeline sends: send; sequence
//    parallelism's and the vocabulary-parallel loss's TP all-gathers and reduce-scatters: all_gather,
//    reduce_scatter, their bytes one rank's part; the distributed optimizer's DP reduce-scatter of the
//    gradients and all-gather of the updated parameters: reduce_scatter, all_gather, their bytes one
//    rank's shard).
//  - Pure: torch-, MPI- and CUDA-free, no state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace itertime {

enum class Collective { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kAllToAll, kSend, kSendRecv };

std::string to_string(Collective collective);  // "all_reduce", ..., "sendrecv"
Collective parse_collective(std::string_view text);
const std::vector<Collective>& all_collectives();
bool is_point_to_point(Collective collective);  // send, sendrecv: groups of exactly 2
double busbw_factor(Collective collective, int64_t group_size);
double latency_steps(Collective collective, int64_t group_size);

// How a group's ranks sit in the world: consecutive {k*g .. k*g+g-1} (TP groups) or strided
// {k, k + world/g, ...} (DP and PP groups).
enum class GroupLayout { kConsecutive, kStrided };
std::string to_string(GroupLayout layout);  // "consecutive" | "strided"
GroupLayout parse_group_layout(std::string_view text);

// How the comm sweep timed a point: barrier-separated calls (what a training step sees) or
// back-to-back calls.
enum class TimingMode { kLatency, kPipelined };
std::string to_string(TimingMode mode);  // "latency" | "pipelined"
TimingMode parse_timing_mode(std::string_view text);

// The communication a traced or built training stage performs.
enum class CommKind {
  kTpAllReduce,
  kPpSendForward,
  kPpSendBackward,
  kDpAllReduce,
  kTpAllGather,
  kTpReduceScatter,
  kDpReduceScatter,
  kDpAllGather,
  kCpAllGather,     // context parallelism: keys and values gathered over the CP group (forward; one rank's part)
  kCpReduceScatter  // their gradients reduce-scattered back (backward; one rank's part)
};
// "tp_all_reduce", "pp_send_forward", "pp_send_backward", "dp_all_reduce", "tp_all_gather", "tp_reduce_scatter",
// "dp_reduce_scatter", "dp_all_gather", "cp_all_gather", "cp_reduce_scatter"
std::string to_string(CommKind kind);
CommKind parse_comm_kind(std::string_view text);
const std::vector<CommKind>& all_comm_kinds();
Collective collective_of(CommKind kind);

}  // namespace itertime

// described_comm.hpp: collective and point-to-point times computed from a hardware description alone
// (common/hardware_spec.hpp), with NCCL's own cost model (src/graph/tuning.cc of NVIDIA/nccl, its
// constants read, not copied as code), for clusters nobody has calibrated. docs/hardware.md, section
// "Communication from a description", gives every formula, parameter, default and its NCCL source.
// Invariants:
//  - time_us = latency_us(algorithm, protocol) + bytes / algorithmic bandwidth, minimized over the
//    (algorithm, protocol) pairs NCCL would consider for the collective and placement: ring always (LL,
//    LL128, Simple); tree for all_reduce across nodes; NVLS (Simple) for all_reduce, all_gather,
//    reduce_scatter inside one node of an NVLink-SHARP device; NVLS+tree (Simple) for all_reduce across
//    nodes of such devices. Sizes follow nccl-tests (all_gather / reduce_scatter: the whole gathered
//    buffer), as predict/device/comm_model.hpp does.
//  - bus_bandwidth_bytes_per_s = bytes * busbw_factor(collective, n) / time, nccl-tests' definition
//    (latency included), so it is directly comparable to a measured busbw column.
//  - group_size <= 1 or bytes <= 0: 0 us (any description). Otherwise nullopt, never a guess, when the
//    description lacks what the placement needs: a CPU node; NVLink bandwidth when ranks share a node;
//    GPUs per node, NICs per node and NIC bandwidth when the group spans nodes.
//  - A placement that cannot exist (ranks_per_node < 1, group_size not a multiple of it, more ranks per
//    node than the description's GPUs per node) is a UserError naming the numbers.
//  - Times are non-decreasing in bytes for a fixed placement (each candidate is affine in bytes with a
//    non-negative slope, except the tree's size-dependent correction, which NCCL applies per power of two
//    and which the model smooths to stay monotone: see docs).
//  - Pure: no state, no I/O, torch-, MPI- and CUDA-free.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/collective.hpp"
#include "common/hardware_spec.hpp"
#include "common/rank_groups.hpp"

namespace itertime::predict {

// NCCL's algorithms that the model times. kNvls: NVLink SHARP (NVSwitch multicast/reduction) inside one
// node; kNvlsTree: NVLS inside each node and a tree across nodes (all_reduce only).
enum class NcclAlgorithm { kRing, kTree, kNvls, kNvlsTree };
std::string to_string(NcclAlgorithm algorithm);  // "ring", "tree", "nvls", "nvls_tree"

// NCCL's protocols: LL (8-byte flag+data stores, lowest latency), LL128 (128-byte lines, 120 of data),
// Simple (bulk copies with fences, full bandwidth).
enum class NcclProtocol { kLL, kLL128, kSimple };
std::string to_string(NcclProtocol protocol);  // "LL", "LL128", "Simple"

// NCCL's per-architecture tables are indexed by compute capability; a description has none, so the
// generation is inferred (infer_nccl_generation) or given in NcclTuning.
enum class NcclGeneration { kAmpere, kHopper, kBlackwell };
std::string to_string(NcclGeneration generation);  // "ampere", "hopper", "blackwell"
// No fp8 peak: Ampere; fp8 and NVLink >= 800 GB/s per direction (NVLink 5): Blackwell; else Hopper.
NcclGeneration infer_nccl_generation(const HardwareSpec& hw);

// How a communicator's ranks sit on nodes: common/rank_groups.hpp's (the comm model keys by it too).
using itertime::GroupPlacement;

// Ranks laid out node by node (gpus_per_node consecutive world ranks per node); a group of group_size
// ranks whose consecutive members are stride_ranks apart (TP groups: 1; the predictor's strided groups:
// tp, tp*cp, ...): how many of its members share a node. Assumes aligned groups (the group's first
// member is a multiple of stride_ranks * group_size within its block, and stride_ranks divides
// gpus_per_node or is a multiple of it), as Megatron-style layouts are: then
// ranks_per_node = min(group_size, max(1, gpus_per_node / stride_ranks)). For other strides it returns
// the largest divisor of group_size not above that bound (every node then holds at most that many).
// Arguments < 1: UserError.
GroupPlacement place_group(int64_t group_size, int64_t stride_ranks, int64_t gpus_per_node);

// The knobs of the model. Every default is NCCL's (docs/hardware.md names the constant of each).
struct NcclTuning {
  // NCCL's tables by compute capability; unset: infer_nccl_generation(hw).
  std::optional<NcclGeneration> generation;
  // Host CPU vendor of the nodes: NCCL's getNetOverhead (Intel 1 us, AMD 2 us per network step) and the
  // LL bandwidth cap across nodes (llMaxBws rows Intel / AMD). DGX H100/H200/B200: Intel (default);
  // DGX A100: AMD EPYC.
  bool amd_host_cpu = false;
  // Extra network latency per inter-node step, graph->latencyInter in NCCL (the net plugin's reported
  // latency; 0 for InfiniBand verbs).
  double net_latency_us = 0.0;
  // Which algorithms and protocols NCCL may use (NCCL_ALGO / NCCL_PROTO); all on by default.
  bool enable_tree = true;
  bool enable_nvls = true;  // NVLS and NVLS+tree; also requires Hopper or later (NVSwitch with SHARP)
  bool enable_ll = true;
  bool enable_ll128 = true;
  // treeCorrectionFactor of ncclTopoGetAlgoTime (tree all_reduce bandwidth scaled by 0.4-1.0 by size).
  bool tree_size_correction = true;
};

// One call's time and how NCCL's model reached it, as typed values (describe() renders them for reports;
// a plan evaluates thousands of calls and renders none).
struct DescribedCommTime {
  double time_us = 0;  // latency_us + bytes / algorithmic bandwidth; 0 for no communication
  NcclAlgorithm algorithm = NcclAlgorithm::kRing;
  NcclProtocol protocol = NcclProtocol::kSimple;
  double bus_bandwidth_bytes_per_s = 0;          // bytes * busbw_factor / time (0 when time is 0)
  double latency_us = 0;                         // the chosen (algorithm, protocol)'s latency
  double algorithmic_bandwidth_bytes_per_s = 0;  // its bandwidth for the whole buffer (0: no communication)
  int64_t bytes = 0;
  GroupPlacement placement;  // as timed (a two-rank group for send / sendrecv)
  NcclGeneration generation = NcclGeneration::kHopper;
};

// "nvls/Simple: 25.0 us + 1073741824 B / 272.0 GB/s algbw (1 node x 8 ranks, hopper)", or
// "no communication (one rank or no bytes)".
std::string describe(const DescribedCommTime& time);

// Time of one call of `collective` moving `bytes` (nccl-tests convention) over `placement` on devices
// described by `hw`: the fastest (algorithm, protocol) NCCL's model would pick (see the file comment).
// Intra-node: NVLink of one GPU (as NCCL rates its links); across nodes: the NICs of the group's GPUs
// (rail-aligned share nics_per_node / gpus_per_node per GPU), one ring channel per NIC, NVLink carrying
// the hops inside each node (hierarchical, as NCCL's rings through NICs are). send / sendrecv: one link,
// NVLink when the two ranks share a node (ranks_per_node 2), else the sender's NIC share. all_to_all:
// not in NCCL's tuning model; each rank's off-node part over its NIC share, its on-node part over NVLink.
std::optional<DescribedCommTime> described_comm_us(const HardwareSpec& hw, Collective collective, GroupPlacement placement,
                                                   int64_t bytes, const NcclTuning& tuning = {});

// The same for one (algorithm, protocol), or nullopt when NCCL's model does not offer it for this
// collective, placement and device (or the description lacks what it needs). For tests and reports.
std::optional<DescribedCommTime> described_comm_us_with(const HardwareSpec& hw, Collective collective, GroupPlacement placement,
                                                        int64_t bytes, NcclAlgorithm algorithm, NcclProtocol protocol,
                                                        const NcclTuning& tuning = {});

}  // namespace itertime::predict

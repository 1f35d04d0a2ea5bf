// described_comm.cpp: the NCCL-style cost model of described_comm.hpp.
// Invariants: bandwidths inside are in GB/s (1e9 B/s, NCCL's unit: bytes / (1000 * GB/s) = us) and
// latencies in us; every constant below names the NCCL table or macro it was read from (NVIDIA/nccl,
// master of 2026-06, src/graph/tuning.cc unless said otherwise); no state.
#include "predict/device/described_comm.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <sstream>
#include <vector>

#include "common/enum_names.hpp"
#include "common/errors.hpp"

namespace itertime::predict {
namespace {

constexpr int kLL = 0, kLL128 = 1, kSimple = 2;  // NCCL_PROTO_LL, NCCL_PROTO_LL128, NCCL_PROTO_SIMPLE
constexpr int kMaxChannels = 32;                 // MAXCHANNELS / 2: the channels a ring or tree graph may use
constexpr int kMaxNvlsArity = 32;                // NCCL_MAX_NVLS_ARITY (src/include/device.h)

// Index of a generation in NCCL's per-compute-capability tables (NCCL_AMPERE/HOPPER/BLACKWELL_COMPCAP_IDX
// are 1, 2, 3; Volta, 0, is not modeled).
int gen_index(NcclGeneration g) {
  switch (g) {
    case NcclGeneration::kAmpere: return 0;
    case NcclGeneration::kHopper: return 1;
    case NcclGeneration::kBlackwell: return 2;
  }
  return 1;
}

// nvlsEfficiency (Ampere has no NVLS).
constexpr std::array<double, 3> kNvlsEfficiency = {0.0, 0.85, 0.74};
// ncclTunerConstantsDefaults.llMaxBws: single node, by generation, [nodes index 1, 2, >2].
constexpr std::array<std::array<double, 3>, 3> kLlMaxBwSingleNode = {
    {{87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282.0, 90.0, 70.0}}};
// llMaxBws rows used across nodes by host CPU: Intel (row 0) and AMD (row 1).
constexpr std::array<double, 3> kLlMaxBwIntelHosts = {39.0, 39.0, 20.4};
constexpr std::array<double, 3> kLlMaxBwAmdHosts = {87.7, 22.5, 19.0};
// perChMaxRingLL128Bws, perChMaxTreeLL128Bws, perChMaxTreeBws, perChMaxNVLSTreeBws: [generation][nodes index].
constexpr std::array<std::array<double, 3>, 3> kPerChMaxRingLL128 = {
    {{20.0, 20.0, 20.0}, {36.7, 36.7, 36.7}, {40.0, 40.0, 40.0}}};
constexpr std::array<std::array<double, 3>, 3> kPerChMaxTreeLL128 = {
    {{20.0, 20.0, 20.0}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}}};
constexpr std::array<std::array<double, 3>, 3> kPerChMaxTree = {{{24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}}};
constexpr std::array<std::array<double, 3>, 3> kPerChMaxNvlsTree = {{{24.0, 23.6, 17.8}, {0.0, 57.7, 45.5}, {0.0, 96.0, 80.0}}};

// baseLatencies [LL, LL128, Simple] (us).
constexpr std::array<double, 3> kBaseLatTree = {6.8, 14.0, 8.4};
constexpr std::array<double, 3> kBaseLatRing = {6.6, 14.0, 8.4};
// hwLatencies, NVLINK rows and NET rows (us); NVLS and NVLS tree are Simple only.
constexpr std::array<double, 3> kNvlinkLatTree = {0.6, 1.25, 4.0};
constexpr std::array<double, 3> kNvlinkLatRing = {0.6, 1.9, 3.4};
constexpr double kNvlinkLatNvls = 25.0;
constexpr double kNvlinkLatNvlsTree = 25.0;
constexpr std::array<double, 3> kNetLatTree = {5.0, 8.5, 14.0};
constexpr std::array<double, 3> kNetLatRing = {2.7, 4.0, 14.0};
constexpr double kNetLatNvlsTree = 20.9;

// treeCorrectionFactor [protocol][log2(bytes / 64)], 64 B .. 256 MiB (ncclTopoGetAlgoTime).
constexpr std::array<std::array<double, 24>, 3> kTreeCorrection = {{
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9},
}};

// src/graph/topo.h: NCCL's rate of one NVLink (SM80_NVLINK_BW, SM90_NVLINK_BW, SM100_NVLINK_BW), and the
// line rate of one link per direction it corresponds to (NVLink 3 and 4: 25 GB/s, NVLink 5: 50 GB/s).
constexpr std::array<double, 3> kNcclNvlinkBw = {20.0, 20.6, 40.1};
constexpr std::array<double, 3> kNvlinkLineRate = {25.0, 25.0, 50.0};

// src/graph/search.cc: the per-channel speeds the graph search tries, fastest first.
const std::vector<double>& speeds_intra(int g) {
  static const std::array<std::vector<double>, 3> kSpeeds = {
      std::vector<double>{40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0},   // speedArrayIntra
      std::vector<double>{60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0},           // sm90SpeedArrayIntra
      std::vector<double>{90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0}};  // sm100...
  return kSpeeds[static_cast<std::size_t>(g)];
}
const std::vector<double>& speeds_inter(int g) {
  static const std::array<std::vector<double>, 3> kSpeeds = {
      std::vector<double>{48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2, 0.24,
                          0.12},  // speedArrayInter
      std::vector<double>{48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24,
                          0.12},  // sm90SpeedArrayInter
      std::vector<double>{96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0,
                          20.0, 17.5, 15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12}};  // sm100SpeedArrayInter
  return kSpeeds[static_cast<std::size_t>(g)];
}

// The fastest speed of `speeds` that is <= limit (the slowest one when none is).
double fastest_at_most(const std::vector<double>& speeds, double limit) {
  for (double s : speeds)
    if (s <= limit * (1.0 + 1e-9)) return s;
  return speeds.back();
}

// A graph as NCCL's search leaves it: channels and per-channel speeds (GB/s).
struct Graph {
  int channels = 0;
  double speed_intra = 0;  // bwIntra
  double speed_inter = 0;  // bwInter
  double bus() const { return channels * speed_intra; }
};

// ncclTopoDupChannels: a fast graph is split into twice the channels at half the speed (unless the speed
// is < 25, or, after Ampere, < 50 with more than 4 channels); the total stays.
Graph dup_channels(Graph g, int gen) {
  if (g.speed_intra < 25.0) return g;
  if (gen > 0 && g.speed_intra < 50.0 && g.channels > 4) return g;
  const int doubled = std::min(2 * g.channels, kMaxChannels);
  const double factor = std::ceil(static_cast<double>(doubled) / g.channels);
  g.speed_intra /= factor;
  g.speed_inter /= factor;
  g.channels = doubled;
  return g;
}

struct Context {
  const HardwareSpec* hw = nullptr;
  Collective collective = Collective::kAllReduce;
  int64_t n = 1;      // ranks
  int64_t ppn = 1;    // ranks per node
  int64_t nodes = 1;  // nodes
  int gen = 1;
  int nodes_index = 0;       // NCCL's index2: nNodes <= 2 ? nNodes - 1 : 2
  double nvlink_total = 0;   // NCCL-rated NVLink of one GPU (GB/s), 0 when absent
  double nics_of_group = 0;  // NICs per node the group's ranks use (rail-aligned share), 0 when absent
  double nic_line_rate = 0;  // GB/s per NIC, 0 when absent
  NcclTuning tuning;
};

double llmax(const Context& c) {
  if (c.nodes == 1) return kLlMaxBwSingleNode[static_cast<std::size_t>(c.gen)][0];
  const auto& row = c.tuning.amd_host_cpu ? kLlMaxBwAmdHosts : kLlMaxBwIntelHosts;
  return row[static_cast<std::size_t>(c.nodes_index)];
}
std::size_t gi(const Context& c) { return static_cast<std::size_t>(c.gen); }
std::size_t ni(const Context& c) { return static_cast<std::size_t>(c.nodes_index); }

// Ring (and tree) graph: inside one node, as many channels as NVLink carries at the fastest speed; across
// nodes, one channel per NIC the group uses at the fastest speed a NIC carries, with NVLink carrying the
// (ppn-1)/ppn of the channels that stay inside each node. Channels counted after ncclTopoDupChannels.
Graph ring_graph(const Context& c) {
  Graph g;
  if (c.nodes == 1) {
    const double s = fastest_at_most(speeds_intra(c.gen), c.nvlink_total);
    g.channels = std::clamp(static_cast<int>(std::floor(c.nvlink_total / s + 1e-9)), 1, kMaxChannels);
    g.speed_intra = g.speed_inter = s;
  } else {
    const int channels = std::max(1, static_cast<int>(std::floor(c.nics_of_group + 1e-9)));
    const double per_channel_nic = c.nic_line_rate * c.nics_of_group / channels;
    double limit = per_channel_nic;
    if (c.ppn > 1) {
      const double nvlink_share = static_cast<double>(c.ppn - 1) / static_cast<double>(c.ppn);
      limit = std::min(limit, c.nvlink_total / (channels * nvlink_share));
    }
    const double s = fastest_at_most(speeds_inter(c.gen), limit);
    g.channels = channels;
    g.speed_intra = g.speed_inter = s;
  }
  return dup_channels(g, c.gen);
}

// NVLS graph (ncclTopoSearchTryNvls): one channel per GPU of the node (at most NCCL_MAX_NVLS_ARITY); each
// GPU heads one channel (2x the speed on its NVLink) and takes part in the others: (channels + 1) x speed
// <= NVLink. Pass 2 of the search then raises bwInter to the fastest speed below twice bwIntra (inside one
// node: the fastest intra speed; across nodes: what a NIC carries). Across nodes: one head per NIC.
Graph nvls_graph(const Context& c) {
  Graph g;
  if (c.nodes == 1) {
    g.channels = static_cast<int>(std::min<int64_t>(c.ppn, kMaxNvlsArity));
    const auto& speeds = speeds_intra(c.gen);
    g.speed_intra = fastest_at_most(speeds, c.nvlink_total / (g.channels + 1));
    g.speed_inter = speeds.front();
    for (double s : speeds)
      if (s < 2 * g.speed_intra) {
        g.speed_inter = std::max(g.speed_intra, s);
        break;
      }
  } else {
    g.channels = std::max(1, static_cast<int>(std::min<double>(std::floor(c.nics_of_group + 1e-9), c.ppn)));
    const auto& speeds = speeds_inter(c.gen);
    g.speed_intra = fastest_at_most(speeds, c.nvlink_total / (g.channels + 1));
    const double nic = c.nic_line_rate * c.nics_of_group / g.channels;
    g.speed_inter = g.speed_intra;
    for (double s : speeds)
      if (s <= nic && s < 2 * g.speed_intra) {
        g.speed_inter = std::max(g.speed_intra, s);
        break;
      }
  }
  return g;
}

// NCCL's ring step counts (ncclTopoTuneModel's nsteps): all_reduce 2(n-1), all_gather / reduce_scatter
// n-1, everything else n.
double nccl_steps(Collective coll, int64_t n) {
  switch (coll) {
    case Collective::kAllReduce: return 2.0 * static_cast<double>(n - 1);
    case Collective::kAllGather:
    case Collective::kReduceScatter: return static_cast<double>(n - 1);
    default: return static_cast<double>(n);
  }
}

int log2_floor(int64_t v) {
  int r = 0;
  while (v > 1) {
    v >>= 1;
    ++r;
  }
  return r;
}

struct Candidate {
  double latency_us = 0;
  double algbw_gbps = 0;  // bytes / (1000 * algbw) = us
  bool ok = false;
};

double net_overhead_us(const Context& c, int proto) {
  const double base = c.tuning.amd_host_cpu ? 2.0 : 1.0;  // getNetOverhead: Intel 1 us, AMD 2 us
  return proto == kSimple ? 3.0 * base : base;
}

// Ring, for every collective but all_to_all (NCCL's tuning model has none). send / sendrecv: the
// broadcast ring over the two ranks (one step over one link).
Candidate ring(const Context& c, int proto, int64_t bytes) {
  Candidate out;
  const Graph g = ring_graph(c);
  // nNodes <= 2 (or one node): channels x bwIntra; more nodes: channels x bwInter (equal in this graph).
  double bus = c.nodes <= 2 ? g.channels * g.speed_intra : g.channels * g.speed_inter;
  if (proto == kLL) bus = std::min(llmax(c), bus * 0.5);
  if (proto == kLL128) bus = std::min(bus * 0.92, g.channels * kPerChMaxRingLL128[gi(c)][ni(c)]);
  const double steps = nccl_steps(c.collective, c.n);
  out.algbw_gbps = bus * static_cast<double>(c.n) / steps;

  const bool one_shot =
      c.collective == Collective::kBroadcast || c.collective == Collective::kSend || c.collective == Collective::kSendRecv;
  const double intra_lat = kNvlinkLatRing[static_cast<std::size_t>(proto)];
  double inter_lat = (c.ppn == 1 ? kNetLatTree : kNetLatRing)[static_cast<std::size_t>(proto)] + c.tuning.net_latency_us;
  if (proto == kSimple) inter_lat += c.tuning.net_latency_us;  // the flush
  double lat = kBaseLatRing[static_cast<std::size_t>(proto)];
  if (one_shot) {
    // Broadcast (sameChannels graphs): one hop latency of the hardware the ring crosses.
    lat += c.nodes == 1 ? intra_lat : kNetLatRing[static_cast<std::size_t>(proto)];
  } else {
    const double step_lat = c.nodes > 1 ? std::max(intra_lat, net_overhead_us(c, proto)) : intra_lat;
    const double inter_steps =
        c.nodes == 1 ? 0.0 : (c.collective == Collective::kAllReduce ? 2.0 : 1.0) * static_cast<double>(c.nodes - 1);
    lat += (steps - inter_steps) * step_lat + inter_steps * inter_lat;
    // "Plateau effect of ring": Simple all_reduce across nodes, once every channel's share of every rank
    // is >= 64 bytes, costs 1.4x its latency (compute capability >= 80).
    if (proto == kSimple && c.nodes > 1 && c.collective == Collective::kAllReduce &&
        bytes / (static_cast<int64_t>(g.channels) * c.n) >= 64)
      lat *= 1.4;
  }
  out.latency_us = lat;
  out.ok = out.algbw_gbps > 0;
  return out;
}

// treeCorrectionFactor, linearly interpolated in log2(bytes) between its power-of-two points (NCCL steps
// at each power of two; the interpolation keeps the time monotone in bytes, see the header).
double tree_correction(int proto, int64_t bytes) {
  const double x = std::log2(static_cast<double>(bytes) / 64.0);
  const auto& row = kTreeCorrection[static_cast<std::size_t>(proto)];
  if (x <= 0) return row[0];
  if (x >= 23) return 1.0;  // NCCL corrects log sizes 0..22 only
  const auto i = static_cast<std::size_t>(std::floor(x));
  const double next = i + 1 <= 22 ? row[i + 1] : 1.0;
  return row[i] + (next - row[i]) * (x - static_cast<double>(i));
}

// Tree all_reduce across nodes: a chain inside each node, a double binary tree across nodes.
Candidate tree(const Context& c, int proto, int64_t bytes) {
  Candidate out;
  const Graph g = ring_graph(c);
  double bus = c.nodes <= 2 ? g.channels * g.speed_intra : g.channels * g.speed_inter;
  bus = std::min(bus * 0.92, g.channels * kPerChMaxTree[gi(c)][ni(c)]);
  if (proto == kLL) bus = std::min(bus / 3.8, llmax(c));
  if (proto == kLL128)
    bus = std::min(bus * (c.nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0), g.channels * kPerChMaxTreeLL128[gi(c)][ni(c)]);
  double algbw = bus * 0.5;
  if (c.tuning.tree_size_correction) algbw *= tree_correction(proto, bytes);
  out.algbw_gbps = algbw;
  const double intra_lat = kNvlinkLatTree[static_cast<std::size_t>(proto)];
  double inter_lat = kNetLatTree[static_cast<std::size_t>(proto)] + c.tuning.net_latency_us;
  if (proto == kSimple) inter_lat += c.tuning.net_latency_us;
  out.latency_us = kBaseLatTree[static_cast<std::size_t>(proto)] +
                   2.0 * (static_cast<double>(c.ppn - 1) * intra_lat + log2_floor(c.nodes) * inter_lat);
  out.ok = algbw > 0;
  return out;
}

// NVLS inside one node (all_reduce, all_gather, reduce_scatter) or NVLS+tree across nodes (all_reduce).
Candidate nvls(const Context& c, bool across_nodes) {
  Candidate out;
  const Graph g = nvls_graph(c);
  if (g.channels < 2) return out;  // "NVLS/NVLSTree needs at least 2 channels"
  const double eff = kNvlsEfficiency[gi(c)];
  double intra = g.speed_intra * eff * (g.channels - 1) / g.channels;
  const bool allreduce = c.collective == Collective::kAllReduce;
  if (allreduce) {
    intra *= 2.0;  // all_reduce pipelines two operations
  } else {
    intra *= static_cast<double>(c.ppn - 1) / static_cast<double>(c.ppn);
  }
  const double inter = g.speed_inter * ((across_nodes && c.nodes <= 2) ? 2.0 : 1.0);
  double bw = std::min(intra, inter);
  if (across_nodes) bw = std::min(bw, kPerChMaxNvlsTree[gi(c)][ni(c)]);
  double bus = g.channels * bw;
  // Bus to algorithmic bandwidth: n / nsteps for all_reduce; none for all_gather / reduce_scatter.
  out.algbw_gbps = allreduce ? bus * static_cast<double>(c.n) / nccl_steps(c.collective, c.n) : bus;
  if (!across_nodes) {
    out.latency_us = kNvlinkLatNvls;  // NVLS: intraLat only (base latency 0)
  } else {
    const double inter_lat = kNetLatNvlsTree + 2.0 * c.tuning.net_latency_us;
    out.latency_us = kNvlinkLatNvlsTree + 2.0 * log2_floor(c.nodes) * inter_lat;
  }
  out.ok = out.algbw_gbps > 0;
  return out;
}

// all_to_all (not in NCCL's tuning model): each rank's (ppn-1)/n share over NVLink and (n-ppn)/n share over
// its NIC share, concurrently; latency of one Simple ring step of the slower link.
Candidate all_to_all(const Context& c, int64_t bytes) {
  Candidate out;
  const double b = static_cast<double>(bytes);
  const double n = static_cast<double>(c.n);
  double t_bw_us = 0;
  if (c.ppn > 1) {
    Context node = c;  // the ranks of one node, as a one-node ring
    node.n = c.ppn;
    node.nodes = 1;
    node.nodes_index = 0;
    const Graph g = ring_graph(node);
    t_bw_us = std::max(t_bw_us, b * static_cast<double>(c.ppn - 1) / n / (1000.0 * g.bus()));
  }
  if (c.nodes > 1) {
    const double per_gpu = c.nic_line_rate * c.nics_of_group / static_cast<double>(c.ppn);
    const double s = fastest_at_most(speeds_inter(c.gen), per_gpu);
    t_bw_us = std::max(t_bw_us, b * (n - static_cast<double>(c.ppn)) / n / (1000.0 * s));
  }
  out.latency_us = kBaseLatRing[kSimple] + (c.nodes > 1 ? kNetLatRing[kSimple] : kNvlinkLatRing[kSimple]);
  out.algbw_gbps = t_bw_us > 0 ? b / (1000.0 * t_bw_us) : 0;
  out.ok = out.algbw_gbps > 0;
  return out;
}

void check_placement(const GroupPlacement& p) {
  if (p.group_size < 1 || p.ranks_per_node < 1 || p.group_size % p.ranks_per_node != 0)
    throw UserError("group placement of " + std::to_string(p.group_size) + " ranks with " + std::to_string(p.ranks_per_node) +
                    " per node is impossible: ranks per node must be >= 1 and divide the group size");
}

// Context for a non-trivial call, or nullopt when the description lacks what the placement needs.
std::optional<Context> make_context(const HardwareSpec& hw, Collective collective, const GroupPlacement& p,
                                    const NcclTuning& tuning) {
  if (hw.kind != DeviceKind::kGpu) return std::nullopt;
  Context c;
  c.hw = &hw;
  c.collective = collective;
  c.n = p.group_size;
  c.ppn = p.ranks_per_node;
  c.nodes = p.nodes();
  c.tuning = tuning;
  c.gen = gen_index(tuning.generation ? *tuning.generation : infer_nccl_generation(hw));
  c.nodes_index = c.nodes <= 2 ? static_cast<int>(c.nodes - 1) : 2;
  if (hw.gpus_per_node && p.ranks_per_node > *hw.gpus_per_node)
    throw UserError("group placement of " + std::to_string(p.ranks_per_node) + " ranks per node exceeds " + hw.name + "'s " +
                    std::to_string(*hw.gpus_per_node) + " GPUs per node");
  if (hw.nvlink_bandwidth_bytes_per_s) {
    c.nvlink_total = *hw.nvlink_bandwidth_bytes_per_s / 1e9 * kNcclNvlinkBw[gi(c)] / kNvlinkLineRate[gi(c)];
  } else if (c.ppn > 1) {
    return std::nullopt;
  }
  if (c.nodes > 1) {
    if (!hw.gpus_per_node || !hw.nics_per_node || !hw.nic_bandwidth_bytes_per_s) return std::nullopt;
    c.nics_of_group =
        static_cast<double>(c.ppn) * static_cast<double>(*hw.nics_per_node) / static_cast<double>(*hw.gpus_per_node);
    c.nic_line_rate = *hw.nic_bandwidth_bytes_per_s / 1e9;
  }
  return c;
}

// One (algorithm, protocol) for a context; !ok when NCCL's model does not offer it.
Candidate evaluate(const Context& c, NcclAlgorithm a, int proto, int64_t bytes) {
  const NcclTuning& t = c.tuning;
  if (proto == kLL && !t.enable_ll) return {};
  if (proto == kLL128 && !t.enable_ll128) return {};
  const Collective coll = c.collective;
  if (coll == Collective::kAllToAll) return a == NcclAlgorithm::kRing && proto == kSimple ? all_to_all(c, bytes) : Candidate{};
  const bool nvls_device = t.enable_nvls && c.gen >= 1 && kNvlsEfficiency[gi(c)] > 0;
  switch (a) {
    case NcclAlgorithm::kRing: return ring(c, proto, bytes);
    case NcclAlgorithm::kTree:
      if (!t.enable_tree || coll != Collective::kAllReduce || c.nodes == 1) return {};
      return tree(c, proto, bytes);
    case NcclAlgorithm::kNvls:
      if (!nvls_device || proto != kSimple || c.nodes != 1 || c.ppn < 2) return {};
      if (coll != Collective::kAllReduce && coll != Collective::kAllGather && coll != Collective::kReduceScatter) return {};
      return nvls(c, false);
    case NcclAlgorithm::kNvlsTree:
      if (!nvls_device || proto != kSimple || c.nodes == 1 || c.ppn < 2 || coll != Collective::kAllReduce) return {};
      return nvls(c, true);
  }
  return {};
}

DescribedCommTime to_result(const Context& c, NcclAlgorithm a, int proto, const Candidate& k, int64_t bytes) {
  DescribedCommTime r;
  r.algorithm = a;
  r.protocol = static_cast<NcclProtocol>(proto);
  r.time_us = k.latency_us + static_cast<double>(bytes) / (1000.0 * k.algbw_gbps);
  r.bus_bandwidth_bytes_per_s = static_cast<double>(bytes) * busbw_factor(c.collective, c.n) / (r.time_us * 1e-6);
  r.latency_us = k.latency_us;
  r.algorithmic_bandwidth_bytes_per_s = k.algbw_gbps * 1e9;
  r.bytes = bytes;
  r.placement = GroupPlacement{c.n, c.ppn};
  r.generation = static_cast<NcclGeneration>(c.gen);
  return r;
}

DescribedCommTime zero_result() { return DescribedCommTime{}; }

// send / sendrecv: a two-rank group, inside a node when ranks_per_node >= 2.
GroupPlacement p2p_placement(const GroupPlacement& p) { return GroupPlacement{2, p.ranks_per_node >= 2 ? 2 : 1}; }

// NCCL's own names (NCCL_ALGO, NCCL_PROTO); the generations as its tuning tables name them.
constexpr EnumName<NcclAlgorithm> kAlgorithmNames[] = {{NcclAlgorithm::kRing, "ring"},
                                                       {NcclAlgorithm::kTree, "tree"},
                                                       {NcclAlgorithm::kNvls, "nvls"},
                                                       {NcclAlgorithm::kNvlsTree, "nvls_tree"}};
constexpr EnumName<NcclProtocol> kProtocolNames[] = {
    {NcclProtocol::kLL, "LL"}, {NcclProtocol::kLL128, "LL128"}, {NcclProtocol::kSimple, "Simple"}};
constexpr EnumName<NcclGeneration> kGenerationNames[] = {
    {NcclGeneration::kAmpere, "ampere"}, {NcclGeneration::kHopper, "hopper"}, {NcclGeneration::kBlackwell, "blackwell"}};
static_assert(enum_names_one_to_one(kAlgorithmNames) && enum_names_one_to_one(kProtocolNames) &&
              enum_names_one_to_one(kGenerationNames));

}  // namespace

std::string to_string(NcclAlgorithm algorithm) { return name_of(kAlgorithmNames, algorithm, "NCCL algorithm"); }

std::string to_string(NcclProtocol protocol) { return name_of(kProtocolNames, protocol, "NCCL protocol"); }

std::string to_string(NcclGeneration generation) { return name_of(kGenerationNames, generation, "NCCL generation"); }

NcclGeneration infer_nccl_generation(const HardwareSpec& hw) {
  if (!hw.peak(ComputeDType::kFp8)) return NcclGeneration::kAmpere;
  if (hw.nvlink_bandwidth_bytes_per_s && *hw.nvlink_bandwidth_bytes_per_s >= 800e9) return NcclGeneration::kBlackwell;
  return NcclGeneration::kHopper;
}

std::string describe(const DescribedCommTime& time) {
  if (time.algorithmic_bandwidth_bytes_per_s <= 0) return "no communication (one rank or no bytes)";
  const int64_t nodes = time.placement.nodes();
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(1);
  s << to_string(time.algorithm) << "/" << to_string(time.protocol) << ": " << time.latency_us << " us + " << time.bytes
    << " B / " << time.algorithmic_bandwidth_bytes_per_s / 1e9 << " GB/s algbw (" << nodes << " node" << (nodes == 1 ? "" : "s")
    << " x " << time.placement.ranks_per_node << " ranks, " << to_string(time.generation) << ")";
  return s.str();
}

GroupPlacement place_group(int64_t group_size, int64_t stride_ranks, int64_t gpus_per_node) {
  if (group_size < 1 || stride_ranks < 1 || gpus_per_node < 1)
    throw UserError("place_group needs a group size, stride and GPUs per node >= 1 (got " + std::to_string(group_size) + ", " +
                    std::to_string(stride_ranks) + ", " + std::to_string(gpus_per_node) + ")");
  const int64_t bound = std::min(group_size, std::max<int64_t>(1, gpus_per_node / stride_ranks));
  int64_t per_node = bound;
  while (group_size % per_node != 0) --per_node;
  return GroupPlacement{group_size, per_node};
}

std::optional<DescribedCommTime> described_comm_us_with(const HardwareSpec& hw, Collective collective, GroupPlacement placement,
                                                        int64_t bytes, NcclAlgorithm algorithm, NcclProtocol protocol,
                                                        const NcclTuning& tuning) {
  check_placement(placement);
  if (placement.group_size <= 1 || bytes <= 0) return zero_result();
  if (is_point_to_point(collective)) placement = p2p_placement(placement);
  const auto c = make_context(hw, collective, placement, tuning);
  if (!c) return std::nullopt;
  const int proto = static_cast<int>(protocol);
  const Candidate k = evaluate(*c, algorithm, proto, bytes);
  if (!k.ok) return std::nullopt;
  return to_result(*c, algorithm, proto, k, bytes);
}

std::optional<DescribedCommTime> described_comm_us(const HardwareSpec& hw, Collective collective, GroupPlacement placement,
                                                   int64_t bytes, const NcclTuning& tuning) {
  check_placement(placement);
  if (placement.group_size <= 1 || bytes <= 0) return zero_result();
  if (is_point_to_point(collective)) placement = p2p_placement(placement);
  const auto c = make_context(hw, collective, placement, tuning);
  if (!c) return std::nullopt;
  std::optional<DescribedCommTime> best;
  for (NcclAlgorithm a : {NcclAlgorithm::kRing, NcclAlgorithm::kTree, NcclAlgorithm::kNvls, NcclAlgorithm::kNvlsTree}) {
    for (int proto : {kLL, kLL128, kSimple}) {
      const Candidate k = evaluate(*c, a, proto, bytes);
      if (!k.ok) continue;
      DescribedCommTime r = to_result(*c, a, proto, k, bytes);
      if (!best || r.time_us < best->time_us) best = std::move(r);
    }
  }
  if (!best) return std::nullopt;
  return best;
}

}  // namespace itertime::predict

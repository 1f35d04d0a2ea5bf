// collective.cpp: names, parsing and factors of the communication vocabulary (collective.hpp).
#include "common/collective.hpp"

#include "common/errors.hpp"

namespace itertime {

std::string to_string(Collective collective) {
  switch (collective) {
    case Collective::kAllReduce: return "all_reduce";
    case Collective::kAllGather: return "all_gather";
    case Collective::kReduceScatter: return "reduce_scatter";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kAllToAll: return "all_to_all";
    case Collective::kSend: return "send";
    case Collective::kSendRecv: return "sendrecv";
  }
  throw InternalError("unknown collective", __FILE__, __LINE__);
}

const std::vector<Collective>& all_collectives() {
  static const std::vector<Collective> kAll = {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter,
                                               Collective::kBroadcast, Collective::kAllToAll,  Collective::kSend,
                                               Collective::kSendRecv};
  return kAll;
}

Collective parse_collective(std::string_view text) {
  for (Collective collective : all_collectives()) {
    if (to_string(collective) == text) return collective;
  }
  throw UserError("unknown collective '" + std::string(text) +
                  "': use all_reduce, all_gather, reduce_scatter, broadcast, all_to_all, send or sendrecv");
}

bool is_point_to_point(Collective collective) { return collective == Collective::kSend || collective == Collective::kSendRecv; }

double busbw_factor(Collective collective, int64_t group_size) {
  const double n = static_cast<double>(group_size);
  switch (collective) {
    case Collective::kAllReduce: return 2.0 * (n - 1.0) / n;
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kAllToAll: return (n - 1.0) / n;
    case Collective::kBroadcast:
    case Collective::kSend:
    case Collective::kSendRecv: return 1.0;
  }
  throw InternalError("unknown collective", __FILE__, __LINE__);
}

double latency_steps(Collective collective, int64_t group_size) {
  const double n = static_cast<double>(group_size);
  switch (collective) {
    case Collective::kAllReduce: return 2.0 * (n - 1.0);
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kAllToAll: return n - 1.0;
    case Collective::kBroadcast:
    case Collective::kSend:
    case Collective::kSendRecv: return 1.0;
  }
  throw InternalError("unknown collective", __FILE__, __LINE__);
}

std::string to_string(GroupLayout layout) { return layout == GroupLayout::kConsecutive ? "consecutive" : "strided"; }

GroupLayout parse_group_layout(std::string_view text) {
  if (text == "consecutive") return GroupLayout::kConsecutive;
  if (text == "strided") return GroupLayout::kStrided;
  throw UserError("unknown layout '" + std::string(text) + "': use consecutive or strided");
}

std::string to_string(TimingMode mode) { return mode == TimingMode::kLatency ? "latency" : "pipelined"; }

TimingMode parse_timing_mode(std::string_view text) {
  if (text == "latency") return TimingMode::kLatency;
  if (text == "pipelined") return TimingMode::kPipelined;
  throw UserError("unknown timing mode '" + std::string(text) + "': use latency or pipelined");
}

std::string to_string(CommKind kind) {
  switch (kind) {
    case CommKind::kTpAllReduce: return "tp_all_reduce";
    case CommKind::kPpSendForward: return "pp_send_forward";
    case CommKind::kPpSendBackward: return "pp_send_backward";
    case CommKind::kDpAllReduce: return "dp_all_reduce";
    case CommKind::kTpAllGather: return "tp_all_gather";
    case CommKind::kTpReduceScatter: return "tp_reduce_scatter";
    case CommKind::kDpReduceScatter: return "dp_reduce_scatter";
    case CommKind::kDpAllGather: return "dp_all_gather";
    case CommKind::kCpAllGather: return "cp_all_gather";
    case CommKind::kCpReduceScatter: return "cp_reduce_scatter";
  }
  throw InternalError("unknown comm kind", __FILE__, __LINE__);
}

const std::vector<CommKind>& all_comm_kinds() {
  static const std::vector<CommKind> kAll = {CommKind::kTpAllReduce,     CommKind::kPpSendForward, CommKind::kPpSendBackward,
                                             CommKind::kDpAllReduce,     CommKind::kTpAllGather,   CommKind::kTpReduceScatter,
                                             CommKind::kDpReduceScatter, CommKind::kDpAllGather,   CommKind::kCpAllGather,
                                             CommKind::kCpReduceScatter};
  return kAll;
}

CommKind parse_comm_kind(std::string_view text) {
  for (CommKind kind : all_comm_kinds()) {
    if (to_string(kind) == text) return kind;
  }
  throw UserError("unknown communication kind '" + std::string(text) +
                  "': use tp_all_reduce, pp_send_forward, pp_send_backward, dp_all_reduce, tp_all_gather, "
                  "tp_reduce_scatter, dp_reduce_scatter or dp_all_gather");
}

Collective collective_of(CommKind kind) {
  switch (kind) {
    case CommKind::kTpAllReduce:
    case CommKind::kDpAllReduce: return Collective::kAllReduce;
    case CommKind::kPpSendForward:
    case CommKind::kPpSendBackward: return Collective::kSend;
    case CommKind::kTpAllGather:
    case CommKind::kDpAllGather:
    case CommKind::kCpAllGather: return Collective::kAllGather;
    case CommKind::kTpReduceScatter:
    case CommKind::kDpReduceScatter:
    case CommKind::kCpReduceScatter: return Collective::kReduceScatter;
  }
  throw InternalError("unknown comm kind", __FILE__, __LINE__);
}

}  // namespace itertime

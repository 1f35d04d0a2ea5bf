// collective.cpp: names, parsing and factors of the communication vocabulary (collective.hpp).
#include "common/collective.hpp"

#include "common/enum_names.hpp"
#include "common/errors.hpp"

namespace itertime {

constexpr EnumName<Collective> kCollectiveNames[] = {{Collective::kAllReduce, "all_reduce"},
                                                     {Collective::kAllGather, "all_gather"},
                                                     {Collective::kReduceScatter, "reduce_scatter"},
                                                     {Collective::kBroadcast, "broadcast"},
                                                     {Collective::kAllToAll, "all_to_all"},
                                                     {Collective::kSend, "send"},
                                                     {Collective::kSendRecv, "sendrecv"}};
static_assert(enum_names_one_to_one(kCollectiveNames));

constexpr EnumName<CommKind> kCommKindNames[] = {
    {CommKind::kTpAllReduce, "tp_all_reduce"},         {CommKind::kPpSendForward, "pp_send_forward"},
    {CommKind::kPpSendBackward, "pp_send_backward"},   {CommKind::kDpAllReduce, "dp_all_reduce"},
    {CommKind::kTpAllGather, "tp_all_gather"},         {CommKind::kTpReduceScatter, "tp_reduce_scatter"},
    {CommKind::kDpReduceScatter, "dp_reduce_scatter"}, {CommKind::kDpAllGather, "dp_all_gather"},
    {CommKind::kCpAllGather, "cp_all_gather"},         {CommKind::kCpReduceScatter, "cp_reduce_scatter"}};
static_assert(enum_names_one_to_one(kCommKindNames));

std::string to_string(Collective collective) { return name_of(kCollectiveNames, collective, "collective"); }

const std::vector<Collective>& all_collectives() {
  static const std::vector<Collective> kAll = values_in(kCollectiveNames);
  return kAll;
}

Collective parse_collective(std::string_view text) { return parse_named(kCollectiveNames, text, "collective"); }

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

std::string to_string(CommKind kind) { return name_of(kCommKindNames, kind, "comm kind"); }

const std::vector<CommKind>& all_comm_kinds() {
  static const std::vector<CommKind> kAll = values_in(kCommKindNames);
  return kAll;
}

CommKind parse_comm_kind(std::string_view text) { return parse_named(kCommKindNames, text, "communication kind"); }

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

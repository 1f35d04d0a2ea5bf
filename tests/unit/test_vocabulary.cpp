// test_vocabulary.cpp: the shared terms of common/collective.hpp, phase.hpp and dtype_list.hpp: every name
// round-trips, unknown names are UserErrors that name the text, and the factors follow nccl-tests.
#include <gtest/gtest.h>

#include <string>

#include "common/collective.hpp"
#include "common/dtype_list.hpp"
#include "common/errors.hpp"
#include "common/phase.hpp"
#include "user_error.hpp"

namespace itertime {
namespace {

using itertime::testing::user_error_of;

TEST(Vocabulary, CollectivesRoundTripAndRefuseUnknownNames) {
  ASSERT_EQ(all_collectives().size(), 7u);
  for (Collective collective : all_collectives()) EXPECT_EQ(parse_collective(to_string(collective)), collective);
  EXPECT_EQ(to_string(Collective::kSendRecv), "sendrecv");
  EXPECT_NE(user_error_of([] {
              parse_collective("allreduce");
            }).find("'allreduce': use all_reduce, all_gather, reduce_scatter, broadcast, all_to_all, send or sendrecv"),
            std::string::npos);
}

TEST(Vocabulary, BusFactorsAndRingStepsFollowNcclTests) {
  // Per (collective, group size): nccl-tests' bus-bandwidth factor, and the ring's latency steps.
  struct Expected {
    Collective collective;
    int64_t group_size;
    double busbw_factor, latency_steps;
  };
  for (const Expected& e :
       {Expected{Collective::kAllReduce, 8, 2.0 * 7.0 / 8.0, 14.0}, Expected{Collective::kAllGather, 4, 0.75, 3.0},
        Expected{Collective::kAllToAll, 4, 0.75, 3.0}, Expected{Collective::kBroadcast, 16, 1.0, 1.0},
        Expected{Collective::kReduceScatter, 8, 7.0 / 8.0, 7.0}, Expected{Collective::kSend, 8, 1.0, 1.0}}) {
    EXPECT_DOUBLE_EQ(busbw_factor(e.collective, e.group_size), e.busbw_factor) << to_string(e.collective);
    EXPECT_DOUBLE_EQ(latency_steps(e.collective, e.group_size), e.latency_steps) << to_string(e.collective);
  }
  EXPECT_TRUE(is_point_to_point(Collective::kSend));
  EXPECT_FALSE(is_point_to_point(Collective::kAllToAll));
}

TEST(Vocabulary, LayoutsAndTimingModes) {
  for (GroupLayout layout : {GroupLayout::kConsecutive, GroupLayout::kStrided}) {
    EXPECT_EQ(parse_group_layout(to_string(layout)), layout);
  }
  for (TimingMode mode : {TimingMode::kLatency, TimingMode::kPipelined}) EXPECT_EQ(parse_timing_mode(to_string(mode)), mode);
  EXPECT_NE(user_error_of([] { parse_group_layout("ring"); }).find("'ring'"), std::string::npos);
  EXPECT_NE(user_error_of([] { parse_timing_mode("burst"); }).find("'burst'"), std::string::npos);
}

TEST(Vocabulary, CommKindsNameTheirCollective) {
  ASSERT_EQ(all_comm_kinds().size(), 10u);
  for (CommKind kind : all_comm_kinds()) EXPECT_EQ(parse_comm_kind(to_string(kind)), kind);
  EXPECT_EQ(to_string(CommKind::kPpSendBackward), "pp_send_backward");
  EXPECT_EQ(collective_of(CommKind::kTpAllReduce), Collective::kAllReduce);
  EXPECT_EQ(collective_of(CommKind::kDpAllReduce), Collective::kAllReduce);
  EXPECT_EQ(collective_of(CommKind::kPpSendForward), Collective::kSend);
  EXPECT_EQ(collective_of(CommKind::kTpAllGather), Collective::kAllGather);
  EXPECT_EQ(collective_of(CommKind::kTpReduceScatter), Collective::kReduceScatter);
  // The distributed optimizer's DP collectives.
  EXPECT_EQ(to_string(CommKind::kDpReduceScatter), "dp_reduce_scatter");
  EXPECT_EQ(to_string(CommKind::kDpAllGather), "dp_all_gather");
  EXPECT_EQ(collective_of(CommKind::kDpReduceScatter), Collective::kReduceScatter);
  EXPECT_EQ(collective_of(CommKind::kDpAllGather), Collective::kAllGather);
  // The refusal lists every kind (it once left out the two CP ones).
  EXPECT_NE(user_error_of([] { parse_comm_kind("tp_all_to_all"); })
                .find("'tp_all_to_all': use tp_all_reduce, pp_send_forward, pp_send_backward, dp_all_reduce, tp_all_gather, "
                      "tp_reduce_scatter, dp_reduce_scatter, dp_all_gather, cp_all_gather or cp_reduce_scatter"),
            std::string::npos);
}

TEST(Vocabulary, PhasesInExecutionOrder) {
  ASSERT_EQ(kAllPhases.size(), kPhaseCount);
  for (std::size_t i = 0; i < kPhaseCount; ++i) {
    EXPECT_EQ(phase_index(kAllPhases[i]), i);
    EXPECT_EQ(parse_phase(to_string(kAllPhases[i])), kAllPhases[i]);
  }
  EXPECT_EQ(to_string(Phase::kDpBuffer), "dp_buffer");
  EXPECT_TRUE(runs_per_micro_batch(Phase::kBackward));
  EXPECT_FALSE(runs_per_micro_batch(Phase::kOptimizer));
  EXPECT_FALSE(runs_per_micro_batch(Phase::kSpGradients));
  EXPECT_NE(
      user_error_of([] { parse_phase("update"); }).find("'update': use forward, backward, sp_grads, dp_buffer or optimizer"),
      std::string::npos);
}

TEST(Vocabulary, DTypeListsJoinWithCommas) {
  const DTypeList dtypes = {DType::kFloat32, DType::kBFloat16, DType::kInt64};
  EXPECT_EQ(to_string(dtypes), "fp32,bf16,int64");
  EXPECT_EQ(parse_dtype_list("fp32,bf16,int64"), dtypes);
  EXPECT_EQ(parse_dtype_list("float32,half"), (DTypeList{DType::kFloat32, DType::kFloat16}));
  EXPECT_EQ(to_string(DTypeList{}), "");
  EXPECT_TRUE(parse_dtype_list("").empty());
  EXPECT_NE(user_error_of([] { parse_dtype_list("fp32,fp3"); }).find("'fp3'"), std::string::npos);
}

}  // namespace
}  // namespace itertime

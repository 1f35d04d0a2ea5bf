// Unit tests of common/parallel_config: legality rules (every broken rule reported), micro-batch count,
// the rank layout of DESIGN.md §5 (TP fastest, then DP, then PP), its groups, and the split of layers
// over pipeline stages.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "common/errors.hpp"
#include "common/model_spec.hpp"
#include "common/parallel_config.hpp"

namespace itertime {
namespace {

LlamaSpec llama8b() { return load_llama_config(std::string(ITERTIME_SOURCE_DIR) + "/data/models/llama3.1-8b.json"); }
LlamaSpec tiny() { return load_llama_config(std::string(ITERTIME_SOURCE_DIR) + "/data/models/tiny-llama.json"); }

// ParallelConfig's first six members, in their order (cp and vp keep their defaults, 1).
ParallelConfig make(int dp, int tp, int pp, int mbs, int gbs, int seq = 1024) {
  return ParallelConfig{dp, tp, pp, /*micro_batch=*/mbs, /*global_batch=*/gbs, /*seq_len=*/seq};
}

bool has_message(const std::vector<std::string>& messages, const std::string& part) {
  return std::any_of(messages.begin(), messages.end(), [&](const std::string& m) { return m.find(part) != std::string::npos; });
}

std::string joined(const std::vector<std::string>& messages) {
  std::string out;
  for (const auto& m : messages) out += "[" + m + "] ";
  return out;
}

// ---- ParallelConfig ----------------------------------------------------------------------------

TEST(ParallelConfig, ValidConfigHasNoViolations) {
  const LlamaSpec model = llama8b();
  for (const auto& c :
       {make(8, 1, 1, 1, 8), make(2, 2, 2, 2, 16), make(1, 8, 1, 4, 4), make(1, 1, 8, 1, 32), make(2, 4, 1, 1, 2)}) {
    SCOPED_TRACE(c.to_string());
    EXPECT_TRUE(c.violations(model, c.world_size()).empty()) << joined(c.violations(model, c.world_size()));
    EXPECT_NO_THROW(c.require_valid(model, c.world_size()));
  }
}

TEST(ParallelConfig, ListsEveryBrokenRule) {
  // tp=3 breaks the 32 heads, the 8 KV heads and the FFN size 14336; dp*tp*pp = 6 is not the world
  // size 8; 7 sequences do not split over dp*mbs = 2. tp's three divisibility rules are one phrase.
  const auto broken = make(2, 3, 1, 1, 7).violations(llama8b(), 8);
  ASSERT_EQ(broken.size(), 3u) << joined(broken);
  EXPECT_TRUE(has_message(broken, "differs from the world size 8")) << joined(broken);
  EXPECT_TRUE(has_message(broken, "= 6")) << joined(broken);
  EXPECT_TRUE(
      has_message(broken, "tp=3 must divide the 32 attention heads, the 8 KV heads and the FFN size 14336: legal tp: 1, 2, 4, 8"))
      << joined(broken);
  EXPECT_TRUE(has_message(broken, "global_batch=7 is not divisible by dp*micro_batch = 2")) << joined(broken);
}

TEST(ParallelConfig, ThreeIndependentRulesGiveThreeMessages) {
  // A model where tp=3 breaks only the attention heads (KV heads and FFN size are multiples of 3).
  LlamaSpec model = llama8b();
  model.num_heads = 32;
  model.num_kv_heads = 6;  // not a consistent LLaMA, but isolates the heads rule
  model.intermediate_size = 12288;
  const auto broken = make(2, 3, 1, 1, 7).violations(model, 8);
  ASSERT_EQ(broken.size(), 3u) << joined(broken);
  EXPECT_TRUE(has_message(broken, "world size")) << joined(broken);
  EXPECT_TRUE(has_message(broken, "attention heads")) << joined(broken);
  EXPECT_TRUE(has_message(broken, "global_batch=7")) << joined(broken);
}

TEST(ParallelConfig, Tp3RefusedFor32HeadModel) {
  const LlamaSpec model = llama8b();
  const ParallelConfig c = make(1, 3, 1, 3, 4);  // and 4 sequences do not split into micro-batches of 3
  const auto broken = c.violations(model, 3);
  EXPECT_TRUE(has_message(broken, "tp=3 must divide the 32 attention heads")) << joined(broken);
  EXPECT_FALSE(has_message(broken, "world size")) << joined(broken);
  try {
    c.require_valid(model, 3);
    FAIL() << "tp=3 accepted for a 32-head model";
  } catch (const UserError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("llama3.1-8b"), std::string::npos) << message;
    EXPECT_NE(message.find("dp1-tp3-pp1"), std::string::npos) << message;
    // every rule, joined in the one message
    for (const auto& part : broken) EXPECT_NE(message.find(part), std::string::npos) << message;
    EXPECT_NE(message.find("; "), std::string::npos) << message;
  }
  // And tp=3 is not among the legal degrees the model offers.
  const auto legal = model.legal_tp_degrees();
  EXPECT_EQ(std::find(legal.begin(), legal.end(), 3), legal.end());
}

TEST(ParallelConfig, EveryLegalTpDegreeIsAcceptedAndOnlyThose) {
  const LlamaSpec model = llama8b();
  const auto legal = model.legal_tp_degrees();
  for (int tp = 1; tp <= 40; ++tp) {
    const bool is_legal = std::find(legal.begin(), legal.end(), tp) != legal.end();
    EXPECT_EQ(make(1, tp, 1, 1, 1).violations(model, 0).empty(), is_legal) << "tp=" << tp;
  }
}

TEST(ParallelConfig, PipelineDeeperThanTheLayers) {
  const auto broken = make(1, 1, 5, 1, 4, 128).violations(tiny(), 5);
  ASSERT_EQ(broken.size(), 1u) << joined(broken);
  EXPECT_TRUE(has_message(broken, "pp=5 exceeds the 4 layers: legal pp: 1..4")) << joined(broken);
  EXPECT_TRUE(make(1, 1, 4, 1, 4, 128).violations(tiny(), 4).empty());
}

TEST(ParallelConfig, SequenceLongerThanTheModelAllows) {
  const auto broken = make(1, 1, 1, 1, 1, 1024).violations(tiny(), 1);
  ASSERT_EQ(broken.size(), 1u) << joined(broken);
  EXPECT_TRUE(has_message(broken, "seq_len=1024 exceeds max_position_embeddings=512"));
  EXPECT_TRUE(make(1, 1, 1, 1, 1, 512).violations(tiny(), 1).empty());
}

TEST(ParallelConfig, NonPositiveValuesAreAllNamed) {
  const auto broken = make(0, -1, 1, 0, 8).violations(llama8b(), 8);
  ASSERT_EQ(broken.size(), 3u) << joined(broken);
  EXPECT_TRUE(has_message(broken, "dp=0 must be positive"));
  EXPECT_TRUE(has_message(broken, "tp=-1 must be positive"));
  EXPECT_TRUE(has_message(broken, "micro_batch=0 must be positive"));
  EXPECT_THROW(make(1, 1, 1, 1, 1, 0).require_valid(llama8b(), 1), UserError);
}

TEST(ParallelConfig, NonPositiveWorldSizeSkipsTheWorldCheck) {
  EXPECT_TRUE(make(2, 2, 2, 1, 8).violations(llama8b(), 0).empty());
  EXPECT_TRUE(make(2, 2, 2, 1, 8).violations(llama8b(), -1).empty());
  EXPECT_EQ(make(2, 2, 2, 1, 8).violations(llama8b(), 4).size(), 1u);
}

TEST(ParallelConfig, NumMicroBatches) {
  EXPECT_EQ(make(4, 1, 1, 2, 64).num_micro_batches(), 8);
  EXPECT_EQ(make(1, 8, 1, 1, 16).num_micro_batches(), 16);
  EXPECT_EQ(make(2, 2, 2, 4, 8).num_micro_batches(), 1);
  EXPECT_EQ(make(8, 1, 1, 1, 8).num_micro_batches(), 1);
  EXPECT_EQ(make(3, 1, 1, 2, 30).num_micro_batches(), 5);
}

TEST(ParallelConfig, Strings) {
  const ParallelConfig c = make(2, 1, 2, 1, 8, 128);
  EXPECT_EQ(c.to_string(), "dp2-tp1-pp2 mbs1 gbs8 seq128");
  EXPECT_EQ(c.tuple_string(), "(2,1,2)");
  EXPECT_EQ(c.world_size(), 4);
}

// cp and vp: a (DP,TP,PP) layout prints as before; any other with all five degrees.
TEST(ParallelConfig, ExtendedLayoutStrings) {
  ParallelConfig c = make(2, 1, 2, 1, 8, 128);
  c.vp = 2;
  EXPECT_TRUE(c.extended());
  EXPECT_EQ(c.layout_text(), "dp2-tp1-pp2-cp1-vp2");
  EXPECT_EQ(c.to_string(), "dp2-tp1-pp2-cp1-vp2 mbs1 gbs8 seq128");
  EXPECT_EQ(c.tuple_string(), "(2,1,2,1,2)");
  EXPECT_EQ(c.world_size(), 4);  // vp adds no rank
  c.vp = 1;
  c.cp = 2;
  EXPECT_EQ(c.tuple_string(), "(2,1,2,2,1)");
  EXPECT_EQ(c.world_size(), 8);  // cp does
  c.cp = 1;
  EXPECT_FALSE(c.extended());
  EXPECT_EQ(c.layout_text(), "dp2-tp1-pp2");
}

// Megatron-LM's rules for interleaving and context parallelism, each named.
TEST(ParallelConfig, VirtualStageAndContextParallelRules) {
  const LlamaSpec model = tiny();
  const auto broken = [&](ParallelConfig c, int world) {
    std::string all;
    for (const std::string& v : c.violations(model, world)) all += v + "; ";
    return all;
  };
  ParallelConfig c = make(1, 1, 2, 1, 8, 64);
  c.vp = 2;
  EXPECT_EQ(broken(c, 2), "");
  c.pp = 1;
  EXPECT_NE(broken(c, 1).find("needs a pipeline"), std::string::npos);
  c.pp = 2;
  c.vp = static_cast<int>(model.num_layers);  // pp*vp chunks > layers
  EXPECT_NE(broken(c, 2).find("model chunks exceed"), std::string::npos) << broken(c, 2);
  c.vp = 2;
  c.global_batch = 6;  // m = 6 is a multiple of pp 2
  EXPECT_EQ(broken(c, 2), "");
  c.global_batch = 3;  // m = 3 is not
  EXPECT_NE(broken(c, 2).find("multiple of pp=2"), std::string::npos);
  c.global_batch = 8;
  c.vp = 0;
  EXPECT_NE(broken(c, 2).find("vp=0 must be positive"), std::string::npos);
  c.vp = 1;
  c.cp = 2;
  EXPECT_EQ(broken(c, 4), "");
  EXPECT_NE(broken(c, 2).find("dp*cp*tp*pp = 1*2*1*2 = 4 differs from the world size 2"), std::string::npos) << broken(c, 2);
  c.seq_len = 66;  // not a multiple of 2*cp = 4
  EXPECT_NE(broken(c, 4).find("divisible by 2*cp = 4"), std::string::npos);
}

// Issue 33: each broken rule says what would be legal near it.
TEST(ParallelConfig, ViolationsNameTheLegalValues) {
  const LlamaSpec model = tiny();  // 4 layers, 4 heads, 4 KV heads, FFN 352
  const auto one = [&](const ParallelConfig& c, int world) {
    const auto broken = c.violations(model, world);
    return broken.size() == 1 ? broken.front() : "(" + std::to_string(broken.size()) + " violations) " + joined(broken);
  };
  EXPECT_EQ(one(make(1, 3, 1, 1, 1, 64), 0),
            "tp=3 must divide the 4 attention heads, the 4 KV heads and the FFN size 352: legal tp: 1, 2, 4");
  EXPECT_EQ(one(make(1, 8, 1, 1, 1, 64), 0), "tp=8 must divide the 4 attention heads and the 4 KV heads: legal tp: 1, 2, 4");
  EXPECT_EQ(one(make(2, 1, 1, 1, 7, 64), 0),
            "global_batch=7 is not divisible by dp*micro_batch = 2: nearest legal global_batch: 6 or 8");
  EXPECT_EQ(one(make(2, 1, 1, 3, 8, 64), 0),
            "global_batch=8 is not divisible by dp*micro_batch = 6: nearest legal global_batch: 6 or 12, or a micro_batch "
            "dividing 4: 1, 2, 4");
  EXPECT_EQ(one(make(3, 1, 1, 1, 12, 64), 4), "dp*tp*pp = 3*1*1 = 3 differs from the world size 4 (dp=4 fills it)");
  ParallelConfig c = make(1, 1, 1, 1, 1, 48);
  c.cp = 5;
  EXPECT_EQ(one(c, 0),
            "cp=5 needs seq_len divisible by 2*cp = 10 (each context-parallel rank holds two of 2*cp sequence chunks), got "
            "seq_len=48: legal cp at seq_len 48: 1, 2, 3, 4, 6, 8, 12, 24; nearest seq_len for cp=5: 40 or 50");
  c = make(1, 1, 2, 1, 8, 64);
  c.vp = 3;  // 6 chunks over 4 layers
  EXPECT_EQ(one(c, 0), "pp*vp = 6 model chunks exceed the 4 layers (each chunk needs a layer): legal vp at pp=2: 1, 2");
  c.vp = 2;
  c.global_batch = 3;
  EXPECT_EQ(one(c, 0),
            "vp=2 (interleaved 1F1B) needs the 3 micro-batches to be a multiple of pp=2, as Megatron-LM requires: nearest "
            "legal global_batch: 2 or 4");
  // A pipeline deeper than the layers is named once, not again as too many model chunks.
  c = make(1, 1, 5, 1, 10, 64);
  c.vp = 2;
  EXPECT_EQ(one(c, 0), "pp=5 exceeds the 4 layers: legal pp: 1..4");
}

// ---- RankLayout --------------------------------------------------------------------------------

using Layout = std::tuple<int, int, int>;  // dp, tp, pp

const std::vector<Layout> kLayouts = {{1, 1, 1}, {2, 1, 1}, {1, 2, 1}, {1, 1, 2}, {2, 2, 2}, {3, 2, 4},
                                      {4, 1, 2}, {2, 4, 1}, {1, 3, 5}, {5, 3, 1}, {2, 2, 3}, {8, 1, 1}};

TEST(RankLayout, CoordsAndRankOfRoundTripForEveryRank) {
  for (const auto& [dp, tp, pp] : kLayouts) {
    const RankLayout layout(dp, tp, pp);
    SCOPED_TRACE("dp" + std::to_string(dp) + " tp" + std::to_string(tp) + " pp" + std::to_string(pp));
    ASSERT_EQ(layout.world_size(), dp * tp * pp);
    std::set<std::tuple<int, int, int>> seen;
    for (int rank = 0; rank < layout.world_size(); ++rank) {
      const RankCoords c = layout.coords(rank);
      ASSERT_GE(c.dp_idx, 0);
      ASSERT_LT(c.dp_idx, dp);
      ASSERT_GE(c.tp_idx, 0);
      ASSERT_LT(c.tp_idx, tp);
      ASSERT_GE(c.pp_idx, 0);
      ASSERT_LT(c.pp_idx, pp);
      EXPECT_EQ(layout.rank_of(c), rank);
      // rank = pp_idx * (dp * tp) + dp_idx * tp + tp_idx
      EXPECT_EQ(c.pp_idx * (dp * tp) + c.dp_idx * tp + c.tp_idx, rank);
      seen.insert({c.dp_idx, c.tp_idx, c.pp_idx});
    }
    EXPECT_EQ(static_cast<int>(seen.size()), layout.world_size()) << "coords must be a bijection";
  }
}

TEST(RankLayout, ExplicitCoordinates) {
  const RankLayout layout(2, 2, 2);
  // rank 5 = 1*(2*2) + 0*2 + 1
  EXPECT_EQ(layout.coords(5), (RankCoords{0, 1, 1}));  // dp_idx, tp_idx, pp_idx
  EXPECT_EQ(layout.coords(2), (RankCoords{1, 0, 0}));
  EXPECT_EQ(layout.coords(7), (RankCoords{1, 1, 1}));
  const RankLayout wide(3, 2, 4);
  EXPECT_EQ(wide.rank_of(RankCoords{2, 1, 3}), 3 * 6 + 2 * 2 + 1);
  EXPECT_EQ(wide.coords(23), (RankCoords{2, 1, 3}));
  EXPECT_EQ(wide.coords(1), (RankCoords{0, 1, 0}));
  EXPECT_EQ(wide.coords(6), (RankCoords{0, 0, 1}));
}

TEST(RankLayout, ExplicitGroups) {
  const RankLayout layout(2, 2, 2);
  EXPECT_EQ(layout.tp_group(5), (std::vector<int>{4, 5}));
  EXPECT_EQ(layout.dp_group(5), (std::vector<int>{5, 7}));
  EXPECT_EQ(layout.pp_group(5), (std::vector<int>{1, 5}));
  const RankLayout wide(3, 2, 4);  // 24 ranks
  EXPECT_EQ(wide.tp_group(9), (std::vector<int>{8, 9}));
  EXPECT_EQ(wide.dp_group(9), (std::vector<int>{7, 9, 11}));
  EXPECT_EQ(wide.pp_group(9), (std::vector<int>{3, 9, 15, 21}));
}

// With context parallelism: rank = pp_idx*(dp*cp*tp) + dp_idx*(cp*tp) + cp_idx*tp + tp_idx (tp, cp, dp, pp).
using CpLayout = std::tuple<int, int, int, int>;  // dp, tp, pp, cp
const std::vector<CpLayout> kCpLayouts = {{1, 1, 1, 2}, {2, 1, 1, 2}, {1, 2, 1, 2}, {1, 1, 2, 2}, {1, 1, 1, 4},
                                          {2, 2, 2, 2}, {3, 2, 2, 3}, {2, 1, 3, 4}, {1, 3, 1, 1}};

TEST(RankLayout, CoordsAndRankOfRoundTripWithContextParallelism) {
  for (const auto& [dp, tp, pp, cp] : kCpLayouts) {
    const RankLayout layout(dp, tp, pp, cp);
    SCOPED_TRACE("dp" + std::to_string(dp) + " tp" + std::to_string(tp) + " pp" + std::to_string(pp) + " cp" +
                 std::to_string(cp));
    ASSERT_EQ(layout.world_size(), dp * cp * tp * pp);
    EXPECT_EQ(layout.cp(), cp);
    std::set<std::tuple<int, int, int, int>> seen;
    for (int rank = 0; rank < layout.world_size(); ++rank) {
      const RankCoords c = layout.coords(rank);
      ASSERT_TRUE(c.dp_idx >= 0 && c.dp_idx < dp && c.tp_idx >= 0 && c.tp_idx < tp && c.pp_idx >= 0 && c.pp_idx < pp &&
                  c.cp_idx >= 0 && c.cp_idx < cp);
      EXPECT_EQ(layout.rank_of(c), rank);
      EXPECT_EQ(c.pp_idx * (dp * cp * tp) + c.dp_idx * (cp * tp) + c.cp_idx * tp + c.tp_idx, rank);
      seen.insert({c.dp_idx, c.tp_idx, c.pp_idx, c.cp_idx});
      // Groups: each varies its own coordinates only, holds the rank at its own index, and agrees
      // between its members; dp_cp is dp*cp ranks in rank order, group rank dp_idx*cp + cp_idx.
      const auto cpg = layout.cp_group(rank);
      const auto dpg = layout.dp_group(rank);
      const auto dpcpg = layout.dp_cp_group(rank);
      ASSERT_EQ(static_cast<int>(cpg.size()), cp);
      ASSERT_EQ(static_cast<int>(dpg.size()), dp);
      ASSERT_EQ(static_cast<int>(dpcpg.size()), dp * cp);
      EXPECT_EQ(cpg[static_cast<std::size_t>(c.cp_idx)], rank);
      EXPECT_EQ(dpg[static_cast<std::size_t>(c.dp_idx)], rank);
      EXPECT_EQ(dpcpg[static_cast<std::size_t>(c.dp_idx * cp + c.cp_idx)], rank);
      EXPECT_TRUE(std::is_sorted(dpcpg.begin(), dpcpg.end()));
      for (int member : cpg) {
        const RankCoords m = layout.coords(member);
        EXPECT_TRUE(m.dp_idx == c.dp_idx && m.tp_idx == c.tp_idx && m.pp_idx == c.pp_idx);
        EXPECT_EQ(layout.cp_group(member), cpg);
      }
      for (int member : dpg) {
        const RankCoords m = layout.coords(member);
        EXPECT_TRUE(m.cp_idx == c.cp_idx && m.tp_idx == c.tp_idx && m.pp_idx == c.pp_idx);
      }
      for (int member : dpcpg) {
        const RankCoords m = layout.coords(member);
        EXPECT_TRUE(m.tp_idx == c.tp_idx && m.pp_idx == c.pp_idx);
        EXPECT_EQ(layout.dp_cp_group(member), dpcpg);
      }
    }
    EXPECT_EQ(static_cast<int>(seen.size()), layout.world_size()) << "coords must be a bijection";
  }
}

TEST(RankLayout, ExplicitGroupsWithContextParallelism) {
  // dp 2, tp 2, pp 2, cp 2: 16 ranks; rank 13 = 1*8 + 1*4 + 0*2 + 1.
  const RankLayout layout(2, 2, 2, 2);
  EXPECT_EQ(layout.coords(13), (RankCoords{1, 1, 1, 0}));  // dp_idx, tp_idx, pp_idx, cp_idx
  EXPECT_EQ(layout.coords(6), (RankCoords{1, 0, 0, 1}));
  EXPECT_EQ(layout.rank_of(RankCoords{0, 1, 0, 1}), 3);
  EXPECT_EQ(layout.tp_group(13), (std::vector<int>{12, 13}));
  EXPECT_EQ(layout.cp_group(13), (std::vector<int>{13, 15}));
  EXPECT_EQ(layout.dp_group(13), (std::vector<int>{9, 13}));
  EXPECT_EQ(layout.pp_group(13), (std::vector<int>{5, 13}));
  EXPECT_EQ(layout.dp_cp_group(13), (std::vector<int>{9, 11, 13, 15}));
  // cp 4 alone: one CP group of the whole world, which is also the dp_cp group.
  const RankLayout cp4(1, 1, 1, 4);
  EXPECT_EQ(cp4.cp_group(2), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(cp4.dp_cp_group(2), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(cp4.dp_group(2), (std::vector<int>{2}));
  // cp 1: dp_cp is the dp group, and cp_idx is 0 everywhere.
  const RankLayout plain(3, 2, 4);
  EXPECT_EQ(plain.dp_cp_group(9), plain.dp_group(9));
  EXPECT_EQ(plain.cp_group(9), (std::vector<int>{9}));
  EXPECT_THROW(RankLayout(1, 1, 1, 0), UserError);
  EXPECT_THROW(layout.rank_of(RankCoords{0, 0, 0, 2}), InternalError);
}

TEST(RankLayout, GroupsAreStridedAndOrderedByIndex) {
  for (const auto& [dp, tp, pp] : kLayouts) {
    const RankLayout layout(dp, tp, pp);
    SCOPED_TRACE("dp" + std::to_string(dp) + " tp" + std::to_string(tp) + " pp" + std::to_string(pp));
    std::vector<int> tp_membership(static_cast<std::size_t>(layout.world_size()), 0);
    for (int rank = 0; rank < layout.world_size(); ++rank) {
      const RankCoords c = layout.coords(rank);
      const auto tpg = layout.tp_group(rank);
      const auto dpg = layout.dp_group(rank);
      const auto ppg = layout.pp_group(rank);
      ASSERT_EQ(static_cast<int>(tpg.size()), tp);
      ASSERT_EQ(static_cast<int>(dpg.size()), dp);
      ASSERT_EQ(static_cast<int>(ppg.size()), pp);
      // TP: consecutive ranks; DP: stride tp; PP: stride dp*tp.
      for (int i = 0; i < tp; ++i) EXPECT_EQ(tpg[static_cast<std::size_t>(i)], tpg[0] + i);
      for (int i = 0; i < dp; ++i) EXPECT_EQ(dpg[static_cast<std::size_t>(i)], dpg[0] + i * tp);
      for (int i = 0; i < pp; ++i) EXPECT_EQ(ppg[static_cast<std::size_t>(i)], ppg[0] + i * dp * tp);
      // A rank sits in its groups at the position of its own index.
      EXPECT_EQ(tpg[static_cast<std::size_t>(c.tp_idx)], rank);
      EXPECT_EQ(dpg[static_cast<std::size_t>(c.dp_idx)], rank);
      EXPECT_EQ(ppg[static_cast<std::size_t>(c.pp_idx)], rank);
      // Members of a group differ from the rank only in that group's coordinate.
      for (int member : tpg) {
        const RankCoords m = layout.coords(member);
        EXPECT_TRUE(m.dp_idx == c.dp_idx && m.pp_idx == c.pp_idx);
        EXPECT_EQ(layout.tp_group(member), tpg) << "groups must agree between their members";
      }
      for (int member : dpg) {
        const RankCoords m = layout.coords(member);
        EXPECT_TRUE(m.tp_idx == c.tp_idx && m.pp_idx == c.pp_idx);
        EXPECT_EQ(layout.dp_group(member), dpg);
      }
      for (int member : ppg) {
        const RankCoords m = layout.coords(member);
        EXPECT_TRUE(m.tp_idx == c.tp_idx && m.dp_idx == c.dp_idx);
        EXPECT_EQ(layout.pp_group(member), ppg);
      }
      if (tpg[0] == rank) {
        for (int member : tpg) ++tp_membership[static_cast<std::size_t>(member)];
      }
    }
    for (int count : tp_membership) EXPECT_EQ(count, 1) << "TP groups must partition the world";
  }
}

TEST(RankLayout, InvalidLayoutsAndRanks) {
  EXPECT_THROW(RankLayout(0, 1, 1), UserError);
  EXPECT_THROW(RankLayout(1, -2, 1), UserError);
  EXPECT_THROW(RankLayout(1, 1, 0), UserError);
  const RankLayout layout(2, 2, 1);
  EXPECT_THROW(layout.coords(4), InternalError);
  EXPECT_THROW(layout.coords(-1), InternalError);
  EXPECT_THROW(layout.rank_of(RankCoords{2, 0, 0}), InternalError);
  EXPECT_THROW(layout.rank_of(RankCoords{0, 0, 1}), InternalError);
  EXPECT_THROW(layout.tp_group(7), InternalError);
}

// ---- stage_layers ------------------------------------------------------------------------------

TEST(StageLayers, TenLayersOverFourStages) {
  const auto stages = stage_layers(10, 4);
  ASSERT_EQ(stages.size(), 4u);
  const int expected_layers[] = {3, 3, 2, 2};
  const int expected_first[] = {0, 3, 6, 8};
  for (std::size_t s = 0; s < 4; ++s) {
    EXPECT_EQ(stages[s].num_layers, expected_layers[s]) << "stage " << s;
    EXPECT_EQ(stages[s].first_layer, expected_first[s]) << "stage " << s;
    EXPECT_EQ(stages[s].has_embedding, s == 0) << "stage " << s;
    EXPECT_EQ(stages[s].has_head, s == 3) << "stage " << s;
  }
}

TEST(StageLayers, SingleStageHoldsEverything) {
  const auto stages = stage_layers(32, 1);
  ASSERT_EQ(stages.size(), 1u);
  EXPECT_EQ(stages[0].num_layers, 32);
  EXPECT_EQ(stages[0].first_layer, 0);
  EXPECT_TRUE(stages[0].has_embedding);
  EXPECT_TRUE(stages[0].has_head);
}

TEST(StageLayers, SplitsAreContiguousBalancedAndFrontLoaded) {
  for (int layers : {1, 4, 10, 32, 80, 126}) {
    for (int pp = 1; pp <= std::min(layers, 40); ++pp) {
      SCOPED_TRACE(std::to_string(layers) + " layers over pp=" + std::to_string(pp));
      const auto stages = stage_layers(layers, pp);
      ASSERT_EQ(static_cast<int>(stages.size()), pp);
      int next = 0;
      for (int s = 0; s < pp; ++s) {
        const auto& stage = stages[static_cast<std::size_t>(s)];
        EXPECT_EQ(stage.first_layer, next);
        EXPECT_EQ(stage.num_layers, layers / pp + (s < layers % pp ? 1 : 0));
        EXPECT_EQ(stage.has_embedding, s == 0);
        EXPECT_EQ(stage.has_head, s == pp - 1);
        next += stage.num_layers;
      }
      EXPECT_EQ(next, layers);
    }
  }
  const auto stages = stage_layers(32, 3);
  EXPECT_EQ(stages[0].num_layers, 11);
  EXPECT_EQ(stages[1].num_layers, 11);
  EXPECT_EQ(stages[2].num_layers, 10);
}

TEST(StageLayers, ImpossibleSplitsThrowUserError) {
  EXPECT_THROW(stage_layers(4, 5), UserError);
  EXPECT_THROW(stage_layers(10, 0), UserError);
  EXPECT_THROW(stage_layers(10, -1), UserError);
  try {
    stage_layers(32, 33);
    FAIL() << "pp > layers accepted";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("32 layers"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("pp=33"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace itertime

// plan_report.hpp: the reporters of `itertime plan` (console table and JSON), beside prediction_report.hpp.
// They present what predict/plan computed (entries, counts, ties, guidance); they compute nothing.
// Invariants:
//  - Both open with the question (model, GPUs, hardware, framework, batch, sequence, the spaces searched),
//    the funnel counts, the peak MFU is against and the tie rule; both show the first `top` choices
//    (predict/plan_ranking.hpp: each its fastest recipe, with why it ranks there and its other recipes),
//    then infeasible candidates up to `top` (JSON: "candidates", with "candidates_total" and
//    "choices_total").
//  - Layouts are written as ParallelConfig::layout_text() (as predict writes them).
//  - With no candidate fitting the memory, the table is replaced by the guidance (JSON: "guidance").
//  - With question.launch_line (plan --emit megatron-args), each shown feasible candidate is followed by
//    its launch line (JSON: "megatron_args", null for an infeasible one); the reporters compute none.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "predict/plan.hpp"

namespace itertime::validate {

// What the question was, beyond PlanOptions.
struct PlanQuestion {
  std::string framework = "itertime";
  std::string source;                    // the calibration or model file; "" when planned on a description
  int nodes = 0;                         // --nodes; 0 when --gpus was given
  std::vector<std::string> fp8_recipes;  // megatron-te's fp8 scaling recipes searched
  // plan --emit megatron-args: the command line that launches a candidate (formats/megatron_emit.hpp).
  std::function<std::string(const predict::PlanEntry&)> launch_line;
};

// One line of a running plan's progress (no newline): "plan: 41,200 of about 112,500 candidates (layouts
// 120 of 330), 2.1 s; fastest so far: dp64-tp8-pp4-cp1-vp2 mbs1 amp-bf16 sp+dopt+ovl+opg 3.21 s". The
// expected total is the candidates so far scaled by layouts_total / layouts_done (layouts differ in how
// many candidates they give, so "about"); exact once every layout is done.
std::string plan_progress_line(const predict::PlanProgress& progress, double elapsed_s);

void print_plan(const predict::PlanOptions& options, const PlanQuestion& question, const predict::PlanResult& result, int top);
std::string plan_json(const predict::PlanOptions& options, const PlanQuestion& question, const predict::PlanResult& result,
                      int top);

}  // namespace itertime::validate

// plan_report.hpp: the reporters of `itertime plan` (console table and JSON), beside prediction_report.hpp.
// They present the entries predict/plan computed; they compute nothing.
#pragma once

#include <string>
#include <vector>

#include "predict/plan.hpp"

namespace itertime::validate {

// `itertime plan`: the first `top` entries (in the order given) as a table, or all of them as JSON.
void print_plan(const predict::PlanOptions& options, const std::vector<predict::PlanEntry>& entries, int top);
std::string plan_json(const std::vector<predict::PlanEntry>& entries);

}  // namespace itertime::validate

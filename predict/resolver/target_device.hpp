// target_device.hpp: a device predicted from its description alone (issue 18): what the stage resolver
// and the predictor need to time a configuration on hardware nobody calibrated.
// Invariants:
//  - Operator times come from the operator roofline (operator_roofline.hpp) with efficiencies carried
//    (carry_to) from a GPU's published kernel figures, a calibration fitted on a GPU, or an efficiency
//    file the user names (data/efficiency/*.json, written by `itertime fit CAL --efficiency-out FILE`);
//    see choose_hardware below.
//  - Communication comes from the description (described_comm.hpp), never from a calibration's /comm,
//    which measured another device. Ground-truth factors of a calibration are not applied either.
//  - GPU targets train as GPU users do: fused attention (sdpa), LibTorch 2.x's operator sequence.
//  - Plain data; built once per command.
#pragma once

#include <optional>
#include <string>

#include "common/attention.hpp"
#include "common/hardware_spec.hpp"
#include "predict/model/fitted_model.hpp"
#include "predict/builder/op_builder.hpp"
#include "predict/device/operator_roofline.hpp"

namespace itertime::predict {

struct TargetDevice {
  HardwareSpec hardware;
  OperatorRoofline operators;  // carried to `hardware`
  AttentionKernel attention = AttentionKernel::kSdpa;
  TorchDialect dialect = TorchDialect::kTorch2;
};

// <source dir>/data/efficiency/default.json (the efficiencies fitted on this repository's CPU node).
std::string default_efficiency_path();
// Reads an efficiency file; a UserError naming it when it is missing or malformed.
OperatorRoofline load_efficiency_file(const std::string& path);

// `fitted`: efficiencies fitted on a calibrated device (FittedModel::roofline, or an efficiency file).
// Throws UserError when `fitted` is empty.
TargetDevice make_target_device(const HardwareSpec& hardware, const OperatorRoofline& fitted);

// What `predict` and `plan` run on, from SOURCE (a calibration or fitted model; null when none is given),
// --hardware (`requested`, "" when not given) and --efficiency (`efficiency_path`, "" when not given):
//  - a calibration alone, or with --hardware naming the description its devices matched: the calibration's
//    own times, that description for MFU and memory (none when the calibration names none this build ships);
//  - --hardware naming another description, or no calibration: a TargetDevice with the efficiencies of
//    --efficiency; else, on a GPU description, those of a calibration fitted on a GPU, or the GPU's
//    published kernel figures (framework/kernel_roofline.hpp: never a CPU's efficiencies unless named,
//    issue 32); on a CPU description, the calibration's roofline, else default_efficiency_path().
// A calibration that names no description cannot tell whether --hardware is its own device: it is taken
// as another one. Errors are UserErrors naming the option.
struct HardwareChoice {
  std::optional<HardwareSpec> hardware;  // MFU and the default device memory
  std::optional<TargetDevice> target;    // set when predicting from the description
};
HardwareChoice choose_hardware(const FittedModel* calibration, const std::string& requested, const std::string& efficiency_path,
                               const std::string& dir = hardware_dir());

}  // namespace itertime::predict

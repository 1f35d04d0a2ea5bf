// target_device.cpp: a described device's efficiencies and floors (target_device.hpp).
#include "predict/resolver/target_device.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/errors.hpp"
#include "predict/framework/gpu_kernels.hpp"
#include "predict/framework/kernel_roofline.hpp"

namespace itertime::predict {

std::string default_efficiency_path() {
  return (std::filesystem::path(hardware_dir()).parent_path() / "efficiency" / "default.json").string();
}

OperatorRoofline load_efficiency_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UserError(path + ": no such efficiency file; write one with `itertime fit CAL --efficiency-out FILE`");
  std::stringstream buffer;
  buffer << in.rdbuf();
  return roofline_from_json(buffer.str(), path);
}

TargetDevice make_target_device(const HardwareSpec& hardware, const OperatorRoofline& fitted) {
  if (fitted.empty()) {
    throw UserError("no operator efficiencies to carry to " + hardware.name +
                    ": the calibration names no hardware description this build ships; pass --efficiency FILE");
  }
  TargetDevice target;
  target.hardware = hardware;
  target.operators = carry_to(fitted, hardware);
  if (hardware.kind == DeviceKind::kCpu) {
    target.attention = AttentionKernel::kEager;
    target.dialect = TorchDialect::kTorch1;
  }
  return target;
}

namespace {

// Whether the calibration's efficiencies were fitted on a GPU description (the GPU kit's calibration),
// the only ones carried to a described GPU without --efficiency.
bool fitted_on_a_gpu(const FittedModel* calibration, const std::string& dir) {
  if (calibration == nullptr || calibration->roofline.empty() || calibration->roofline.fitted_on.empty()) return false;
  try {
    return find_hardware_spec(calibration->roofline.fitted_on, dir).kind == DeviceKind::kGpu;
  } catch (const UserError&) {
    return false;
  }
}

}  // namespace

HardwareChoice choose_hardware(const FittedModel* calibration, const std::string& requested, const std::string& efficiency_path,
                               const std::string& dir) {
  HardwareChoice choice;
  if (calibration == nullptr && requested.empty()) {
    throw UserError(
        "nothing to predict on: pass a calibration (or a model from `itertime fit`), or --hardware NAME (see data/hardware)");
  }
  if (requested.empty() && !efficiency_path.empty()) {
    throw UserError("--efficiency " + efficiency_path +
                    ": efficiencies are carried to a described device; name it with --hardware NAME");
  }
  if (requested.empty()) {
    // The calibration's own device: its own times.
    if (calibration->hardware.empty()) return choice;
    try {
      choice.hardware = find_hardware_spec(calibration->hardware, dir);
    } catch (const UserError&) {
      // a description this build does not ship: no MFU, as for none
    }
    return choice;
  }
  const HardwareSpec spec = find_hardware_spec(requested, dir);
  if (calibration != nullptr && spec.name == calibration->hardware && efficiency_path.empty()) {
    choice.hardware = spec;  // the calibration's own device, named: its own times
    return choice;
  }
  OperatorRoofline fitted;
  if (!efficiency_path.empty()) {
    fitted = load_efficiency_file(efficiency_path);
  } else if (spec.kind == DeviceKind::kGpu && !fitted_on_a_gpu(calibration, dir)) {
    // A GPU takes its published kernel figures; a CPU's efficiencies are carried to it only when named.
    fitted = framework::roofline_from_kernel_figures(framework::load_gpu_kernel_figures(spec), spec);
  } else if (calibration != nullptr) {
    if (calibration->roofline.empty()) {
      throw UserError("--hardware " + requested + ": " + calibration->source_file +
                      " has no operator efficiencies to carry to it (its devices match no hardware description this build "
                      "ships); pass --efficiency FILE, or omit --hardware");
    }
    fitted = calibration->roofline;
  } else {
    fitted = load_efficiency_file(default_efficiency_path());
  }
  choice.hardware = spec;
  choice.target = make_target_device(spec, fitted);
  return choice;
}

}  // namespace itertime::predict

// fitted_model_io.cpp: save_model and load_model (fitted_model.hpp): the text archive of
// fitted_model_archive.hpp behind a "itertime-fitted-model <version>" line. The only file of predict/
// that compiles Boost.Serialization (the model room links it privately).
#include <boost/archive/text_iarchive.hpp>
#include <boost/archive/text_oarchive.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/errors.hpp"
#include "predict/model/fitted_model.hpp"
#include "predict/model/fitted_model_archive.hpp"

namespace itertime::predict {
namespace {

constexpr const char* kFormatName = "itertime-fitted-model";

}  // namespace

void save_model(const FittedModel& model, const std::string& path, bool force) {
  std::error_code error;
  if (std::filesystem::exists(path, error) && !force) {
    throw UserError(path + ": file exists; pass --force to overwrite it");
  }
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary);
    if (!out) throw UserError(path + ": cannot be written; check the folder and permissions");
    out << kFormatName << " " << kFittedModelVersion << "\n";
    boost::archive::text_oarchive archive(out);
    archive << model;
  }
  std::filesystem::rename(temporary, path);  // never leave a half-written model under the real name
}

FittedModel load_model(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error))
    throw UserError(path + ": no such file; pass a model written by `itertime fit` or a calibration .h5");
  std::ifstream in(path);
  std::string format;
  int version = 0;
  in >> format >> version;
  if (!in || format != kFormatName) {
    throw UserError(path + ": not an itertime fitted model (written by `itertime fit`) nor an HDF5 calibration file");
  }
  if (version != kFittedModelVersion) {
    throw UserError(path + ": fitted model version " + std::to_string(version) + ", this itertime reads version " +
                    std::to_string(kFittedModelVersion) + "; fit it again with `itertime fit`");
  }
  FittedModel model;
  try {
    boost::archive::text_iarchive archive(in);
    archive >> model;
  } catch (const std::exception& e) {
    throw UserError(path + ": damaged fitted model (" + e.what() + "); fit it again with `itertime fit`");
  }
  return model;
}

}  // namespace itertime::predict

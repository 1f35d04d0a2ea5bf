// Unit tests of common/dtype and common/precision: names, aliases, sizes, the policy table and which
// backend may run which policy.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "common/dtype.hpp"
#include "common/errors.hpp"
#include "common/half.hpp"
#include "common/precision.hpp"

namespace itertime {
namespace {

// ---- DType -------------------------------------------------------------------------------------

TEST(DType, CanonicalNamesRoundTrip) {
  std::set<std::string> names;
  for (DType dtype : all_dtypes()) {
    const std::string name = to_string(dtype);
    EXPECT_EQ(parse_dtype(name), dtype) << name;
    names.insert(name);
  }
  EXPECT_EQ(names.size(), all_dtypes().size()) << "two dtypes share a canonical name";
  EXPECT_EQ(all_dtypes().size(), 8u);
}

TEST(DType, CanonicalNamesAreTheDocumentedOnes) {
  EXPECT_EQ(to_string(DType::kFloat32), "fp32");
  EXPECT_EQ(to_string(DType::kFloat16), "fp16");
  EXPECT_EQ(to_string(DType::kBFloat16), "bf16");
  EXPECT_EQ(to_string(DType::kFloat64), "fp64");
  EXPECT_EQ(to_string(DType::kInt8), "int8");
  EXPECT_EQ(to_string(DType::kInt32), "int32");
  EXPECT_EQ(to_string(DType::kInt64), "int64");
  EXPECT_EQ(to_string(DType::kBool), "bool");
}

TEST(DType, AliasesAndCaseInsensitivity) {
  EXPECT_EQ(parse_dtype("float32"), DType::kFloat32);
  EXPECT_EQ(parse_dtype("float"), DType::kFloat32);
  EXPECT_EQ(parse_dtype("FP32"), DType::kFloat32);
  EXPECT_EQ(parse_dtype("float16"), DType::kFloat16);
  EXPECT_EQ(parse_dtype("half"), DType::kFloat16);
  EXPECT_EQ(parse_dtype("bfloat16"), DType::kBFloat16);
  EXPECT_EQ(parse_dtype("BF16"), DType::kBFloat16);
  EXPECT_EQ(parse_dtype("BFloat16"), DType::kBFloat16);
  EXPECT_EQ(parse_dtype("float64"), DType::kFloat64);
  EXPECT_EQ(parse_dtype("double"), DType::kFloat64);
  EXPECT_EQ(parse_dtype("int"), DType::kInt32);
  EXPECT_EQ(parse_dtype("long"), DType::kInt64);
  EXPECT_EQ(parse_dtype("char"), DType::kInt8);
  EXPECT_EQ(parse_dtype("Bool"), DType::kBool);
}

TEST(DType, BytesPerElement) {
  EXPECT_EQ(dtype_bytes(DType::kFloat32), 4u);
  EXPECT_EQ(dtype_bytes(DType::kFloat16), 2u);
  EXPECT_EQ(dtype_bytes(DType::kBFloat16), 2u);
  EXPECT_EQ(dtype_bytes(DType::kFloat64), 8u);
  EXPECT_EQ(dtype_bytes(DType::kInt8), 1u);
  EXPECT_EQ(dtype_bytes(DType::kInt32), 4u);
  EXPECT_EQ(dtype_bytes(DType::kInt64), 8u);
  EXPECT_EQ(dtype_bytes(DType::kBool), 1u);
}

TEST(DType, IsFloating) {
  EXPECT_TRUE(is_floating(DType::kFloat32));
  EXPECT_TRUE(is_floating(DType::kFloat16));
  EXPECT_TRUE(is_floating(DType::kBFloat16));
  EXPECT_TRUE(is_floating(DType::kFloat64));
  EXPECT_FALSE(is_floating(DType::kInt8));
  EXPECT_FALSE(is_floating(DType::kInt32));
  EXPECT_FALSE(is_floating(DType::kInt64));
  EXPECT_FALSE(is_floating(DType::kBool));
}

TEST(DType, UnknownNameThrowsUserErrorNamingTheText) {
  for (const char* bad : {"fp8", "", "float 32", "bf", "tf32", "fp32 "}) {
    try {
      parse_dtype(bad);
      ADD_FAILURE() << "parse_dtype('" << bad << "') did not throw";
    } catch (const UserError& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find("'" + std::string(bad) + "'"), std::string::npos) << message;
      EXPECT_NE(message.find("fp32"), std::string::npos) << "should list accepted names: " << message;
    }
  }
}

TEST(Backend, NamesAndAliases) {
  EXPECT_EQ(to_string(Backend::kCpu), "cpu");
  EXPECT_EQ(to_string(Backend::kCuda), "cuda");
  EXPECT_EQ(parse_backend("cpu"), Backend::kCpu);
  EXPECT_EQ(parse_backend("CPU"), Backend::kCpu);
  EXPECT_EQ(parse_backend("cuda"), Backend::kCuda);
  EXPECT_EQ(parse_backend("gpu"), Backend::kCuda);
  EXPECT_THROW(parse_backend("tpu"), UserError);
  EXPECT_THROW(parse_backend(""), UserError);
}

// ---- Precision policies --------------------------------------------------------------------------

TEST(Precision, CanonicalNamesRoundTrip) {
  const std::set<std::string> expected = {"fp32", "tf32", "bf16", "fp16", "amp-bf16", "amp-fp16", "fp8"};
  std::set<std::string> seen;
  for (PrecisionName name : all_precisions()) {
    const std::string text = to_string(name);
    seen.insert(text);
    const PrecisionPolicy& policy = parse_precision(text);
    EXPECT_EQ(policy.name, name) << text;
    EXPECT_EQ(precision_policy(name).name, name) << text;
    EXPECT_EQ(&policy, &precision_policy(name)) << "parse and lookup should give the one table entry";
  }
  EXPECT_EQ(seen, expected);
}

TEST(Precision, UnderscoreSpellingAccepted) {
  EXPECT_EQ(parse_precision("amp_bf16").name, PrecisionName::kAmpBf16);
  EXPECT_EQ(parse_precision("amp_fp16").name, PrecisionName::kAmpFp16);
}

TEST(Precision, Fp8IsPredictedOnlyAndEveryBackendRefusesItWithTheReason) {
  const PrecisionPolicy& fp8 = parse_precision("fp8");
  EXPECT_TRUE(fp8.fp8_matmul);
  for (Backend backend : {Backend::kCpu, Backend::kCuda}) {
    try {
      require_supported(fp8, backend, BackendCapabilities{true});
      ADD_FAILURE() << "fp8 accepted on " << to_string(backend);
    } catch (const UserError& error) {
      EXPECT_NE(std::string(error.what()).find("fp8 is predicted only"), std::string::npos) << error.what();
    }
  }
  for (PrecisionName name : all_precisions()) EXPECT_EQ(precision_policy(name).fp8_matmul, name == PrecisionName::kFp8);
  // Job files and stored ground truth name what a trainer ran: fp8 is refused there, with the reason.
  try {
    (void)parse_trainable_precision("fp8");
    ADD_FAILURE() << "fp8 accepted as a trainable precision";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("'fp8' is predicted only"), std::string::npos) << error.what();
  }
  EXPECT_EQ(parse_trainable_precision("amp_bf16").name, PrecisionName::kAmpBf16);
}

TEST(Precision, UnknownNameThrowsUserError) {
  for (const char* bad : {"fp8-e4m3", "amp", "ampbf16", "", "amp-tf32", "float32"}) {
    try {
      parse_precision(bad);
      ADD_FAILURE() << "parse_precision('" << bad << "') did not throw";
    } catch (const UserError& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find("'" + std::string(bad) + "'"), std::string::npos) << message;
      EXPECT_NE(message.find("amp-bf16"), std::string::npos) << "should list the policies: " << message;
    }
  }
}

struct PolicyRow {
  const char* name;
  DType params, compute, grads, optimizer, activations;
  bool autocast, tf32_math, loss_scaling, cpu, cuda;
};

// DESIGN.md §4, written out independently of common/precision.cpp.
const PolicyRow kExpected[] = {
    {"fp32", DType::kFloat32, DType::kFloat32, DType::kFloat32, DType::kFloat32, DType::kFloat32, false, false, false, true,
     true},
    {"tf32", DType::kFloat32, DType::kFloat32, DType::kFloat32, DType::kFloat32, DType::kFloat32, false, true, false, false,
     true},
    {"bf16", DType::kBFloat16, DType::kBFloat16, DType::kBFloat16, DType::kBFloat16, DType::kBFloat16, false, false, false, true,
     true},
    {"fp16", DType::kFloat16, DType::kFloat16, DType::kFloat16, DType::kFloat16, DType::kFloat16, false, false, true, true, true},
    {"amp-bf16", DType::kFloat32, DType::kBFloat16, DType::kFloat32, DType::kFloat32, DType::kFloat32, true, false, false, true,
     true},
    {"amp-fp16", DType::kFloat32, DType::kFloat16, DType::kFloat32, DType::kFloat32, DType::kFloat32, true, false, true, true,
     true},
    // fp8: amp-bf16's stage with fp8 products; predicted only, so no backend runs it.
    {"fp8", DType::kFloat32, DType::kBFloat16, DType::kFloat32, DType::kFloat32, DType::kFloat32, true, false, false, false,
     false},
};

TEST(Precision, PolicyTableMatchesDesign) {
  for (const PolicyRow& row : kExpected) {
    SCOPED_TRACE(row.name);
    const PrecisionPolicy& p = parse_precision(row.name);
    EXPECT_EQ(p.param_dtype, row.params);
    EXPECT_EQ(p.compute_dtype, row.compute);
    EXPECT_EQ(p.grad_dtype, row.grads);
    EXPECT_EQ(p.optimizer_dtype, row.optimizer);
    EXPECT_EQ(p.activation_dtype, row.activations);
    EXPECT_EQ(p.autocast, row.autocast);
    EXPECT_EQ(p.tf32_math, row.tf32_math);
    EXPECT_EQ(p.loss_scaling, row.loss_scaling);
    EXPECT_EQ(p.supports_cpu, row.cpu);
    EXPECT_EQ(p.supports_cuda, row.cuda);
    // fp16 matrix products on cpu: refused unless the LibTorch has them (2.x), accepted when it does.
    EXPECT_EQ(p.supports(Backend::kCpu), row.cpu && !p.needs_fp16_matmul);
    EXPECT_EQ(p.supports(Backend::kCpu, BackendCapabilities{true}), row.cpu);
    EXPECT_EQ(p.supports(Backend::kCuda), row.cuda);
    EXPECT_EQ(p.needs_fp16_matmul, p.compute_dtype == DType::kFloat16);
  }
}

TEST(Precision, AmpBf16Fields) {
  const PrecisionPolicy& p = parse_precision("amp-bf16");
  EXPECT_EQ(p.param_dtype, DType::kFloat32);
  EXPECT_EQ(p.compute_dtype, DType::kBFloat16);
  EXPECT_EQ(p.grad_dtype, DType::kFloat32);
  EXPECT_EQ(p.optimizer_dtype, DType::kFloat32);
  EXPECT_TRUE(p.autocast);
  EXPECT_FALSE(p.loss_scaling);
}

TEST(Precision, CpuRefusesFp16Amp16WithoutFp16MatmulAndTf32Always) {
  for (const char* name : {"fp16", "amp-fp16", "tf32"}) {
    SCOPED_TRACE(name);
    const PrecisionPolicy& p = parse_precision(name);
    try {
      require_supported(p, Backend::kCpu);
      ADD_FAILURE() << name << " accepted on cpu";
    } catch (const UserError& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find(name), std::string::npos) << message;
      EXPECT_NE(message.find("cpu"), std::string::npos) << message;
      const bool tf32 = std::string(name) == "tf32";
      EXPECT_NE(message.find(tf32 ? "cuda only" : "no fp16 matrix product"), std::string::npos) << message;
    }
    EXPECT_NO_THROW(require_supported(p, Backend::kCuda));
  }
  EXPECT_NO_THROW(require_supported(parse_precision("fp16"), Backend::kCpu, BackendCapabilities{true}));
  EXPECT_NO_THROW(require_supported(parse_precision("amp-fp16"), Backend::kCpu, BackendCapabilities{true}));
  EXPECT_THROW(require_supported(parse_precision("tf32"), Backend::kCpu, BackendCapabilities{true}), UserError);
}

TEST(Precision, CpuAcceptsBf16AmpBf16Fp32) {
  for (const char* name : {"bf16", "amp-bf16", "fp32"}) {
    SCOPED_TRACE(name);
    EXPECT_NO_THROW(require_supported(parse_precision(name), Backend::kCpu));
    EXPECT_NO_THROW(require_supported(parse_precision(name), Backend::kCuda));
  }
}

TEST(Precision, Fp16RefusalSuggestsACpuAlternative) {
  try {
    require_supported(parse_precision("amp-fp16"), Backend::kCpu);
    FAIL() << "amp-fp16 accepted on cpu";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("amp-bf16"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace itertime

namespace itertime {
namespace {

TEST(Precision, AdamWEpsilonSurvivesTheOptimizerDtype) {
  for (PrecisionName name : all_precisions()) {
    const PrecisionPolicy& p = precision_policy(name);
    const double eps = adamw_eps(p);
    SCOPED_TRACE(to_string(name));
    // Nonzero once stored in the optimizer dtype (fp16: 1e-8 rounds to zero, which is the NaN).
    if (p.optimizer_dtype == DType::kFloat16) {
      EXPECT_EQ(float_to_fp16(1e-8f), 0) << "the reason for the exception";
      EXPECT_NE(float_to_fp16(static_cast<float>(eps)), 0);
      EXPECT_LE(eps, 1e-4);
    } else {
      EXPECT_EQ(eps, 1e-8);  // LibTorch's default where it is representable
    }
  }
}

}  // namespace
}  // namespace itertime

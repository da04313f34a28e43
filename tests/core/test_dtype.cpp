#include <cmath>
#include <limits>

#include "test_util.h"

namespace ember::testing {

// Bit patterns from the IEEE 754 binary16 and bfloat16 formats.
TEST(Half, ConvertsExactValuesBothWays) {
  EXPECT_EQ(Half(1.0f).x, 0x3c00);
  EXPECT_EQ(Half(-2.0f).x, 0xc000);
  EXPECT_EQ(Half(65504.0f).x, 0x7bff);                 // largest finite half
  EXPECT_EQ(Half(6.103515625e-05f).x, 0x0400);         // smallest normal, 2^-14
  EXPECT_EQ(Half(5.9604644775390625e-08f).x, 0x0001);  // smallest subnormal, 2^-24
  EXPECT_EQ(static_cast<float>(Half::from_bits(0x0001)), 5.9604644775390625e-08f);
  EXPECT_EQ(static_cast<float>(Half::from_bits(0x03ff)), 6.097555160522461e-05f);  // largest subnormal
  EXPECT_EQ(static_cast<float>(Half::from_bits(0x3555)), 0.333251953125f);
}

TEST(Half, RoundsToNearestEven) {
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to the even mantissa (1.0).
  EXPECT_EQ(Half(1.0f + 0x1p-11f).x, 0x3c00);
  // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even): rounds up.
  EXPECT_EQ(Half(1.0f + 3 * 0x1p-11f).x, 0x3c02);
  EXPECT_EQ(Half(1.0f + 0x1p-11f + 0x1p-20f).x, 0x3c01);  // just above halfway
  EXPECT_EQ(Half(65520.0f).x, 0x7c00);                    // halfway to the next binade: ties to even = inf
  EXPECT_EQ(Half(65519.0f).x, 0x7bff);
  EXPECT_EQ(Half(0x1p-25f).x, 0x0000);  // half the smallest subnormal: ties to zero
  EXPECT_EQ(Half(0x1.8p-25f).x, 0x0001);
  EXPECT_EQ(Half(3 * 0x1p-25f).x, 0x0002);  // 1.5 subnormal ulps: ties to even (2)
}

TEST(Half, SpecialValues) {
  EXPECT_EQ(Half(INFINITY).x, 0x7c00);
  EXPECT_EQ(Half(-INFINITY).x, 0xfc00);
  EXPECT_TRUE(std::isnan(static_cast<float>(Half(NAN))));
  EXPECT_EQ(Half(-0.0f).x, 0x8000);
  EXPECT_TRUE(std::isinf(static_cast<float>(Half::from_bits(0x7c00))));
}

TEST(Half, EveryHalfRoundTripsThroughFloat) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    Half h = Half::from_bits(static_cast<uint16_t>(b));
    float f = h;
    if (std::isnan(f)) continue;
    ASSERT_EQ(Half(f).x, b) << "bits " << b;
  }
}

TEST(BFloat16, RoundsToNearestEven) {
  EXPECT_EQ(BFloat16(1.0f).x, 0x3f80);
  EXPECT_EQ(BFloat16(1.0f + 0x1p-8f).x, 0x3f80);      // tie, even stays
  EXPECT_EQ(BFloat16(1.0f + 3 * 0x1p-8f).x, 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(BFloat16(1.0f + 0x1p-8f + 0x1p-20f).x, 0x3f81);
  EXPECT_EQ(static_cast<float>(BFloat16::from_bits(0x4049)), 3.140625f);
  EXPECT_TRUE(std::isnan(static_cast<float>(BFloat16(NAN))));
  EXPECT_EQ(BFloat16(std::numeric_limits<float>::max()).x, 0x7f80);  // rounds to inf
}

TEST(Dtype, PromotionTable) {
  EXPECT_EQ(promote_types(kBool, kUInt8), kUInt8);
  EXPECT_EQ(promote_types(kUInt8, kInt32), kInt32);
  EXPECT_EQ(promote_types(kInt32, kInt64), kInt64);
  EXPECT_EQ(promote_types(kInt64, kFloat16), kFloat16);
  EXPECT_EQ(promote_types(kFloat16, kBFloat16), kFloat32);
  EXPECT_EQ(promote_types(kBFloat16, kFloat32), kFloat32);
  EXPECT_EQ(promote_types(kFloat32, kFloat64), kFloat64);
  EXPECT_EQ(element_size(kBFloat16), 2u);
  EXPECT_EQ(to_string(kBFloat16), "bfloat16");
}

// Cases from PyTorch's type promotion documentation (torch.result_type examples).
TEST(TypePromotion, ResultTypeFollowsPyTorch) {
  Tensor f32 = ones({2}), f64 = ones({2}, kFloat64), i32 = ones({2}, kInt32), i64 = ones({2}, kInt64);
  Tensor b = ones({2}, kBool), f16 = ones({2}, kFloat16), u8 = ones({2}, kUInt8);
  EXPECT_EQ(result_type(f32, f64), kFloat64);
  EXPECT_EQ(result_type(i32, f16), kFloat16);
  EXPECT_EQ(result_type(i32, Scalar(5)), kInt32);      // int scalar keeps the tensor's int type
  EXPECT_EQ(result_type(i32, Scalar(2.5)), kFloat32);  // float scalar: default float dtype
  EXPECT_EQ(result_type(f16, Scalar(2.5)), kFloat16);  // same category: tensor wins
  EXPECT_EQ(result_type(b, Scalar(3)), kInt64);
  EXPECT_EQ(result_type(u8, Scalar(1000)), kUInt8);
  // A 0-dim tensor counts less than a dimensioned one of the same category...
  EXPECT_EQ(result_type(f32, ones({}, kFloat64)), kFloat32);
  EXPECT_EQ(result_type(i32, ones({}, kInt64)), kInt32);
  // ...but more when its category is higher.
  EXPECT_EQ(result_type(i64, ones({}, kFloat64)), kFloat64);
  EXPECT_EQ((i32 + ones({}, kFloat16)).dtype(), kFloat16);
  EXPECT_EQ((i32 * 2.5).dtype(), kFloat32);
  EXPECT_EQ((i32 / i32).dtype(), kFloat32);  // true division
  EXPECT_EQ((b + b).dtype(), kBool);
}

// torch.finfo / torch.iinfo's figures (PyTorch 2.x prints them), and each float's limits survive a
// round trip through the dtype.
TEST(Dtype, FinfoAndIinfoAreTorchs) {
  EXPECT_EQ(finfo(kFloat16).eps, 0.0009765625);
  EXPECT_EQ(finfo(kFloat16).max, 65504.0);
  EXPECT_EQ(finfo(kFloat16).tiny, 6.103515625e-05);
  EXPECT_EQ(finfo(kFloat16).resolution, 0.001);
  EXPECT_EQ(finfo(kBFloat16).eps, 0.0078125);
  EXPECT_EQ(finfo(kBFloat16).max, 3.3895313892515355e+38);
  EXPECT_EQ(finfo(kBFloat16).tiny, 1.1754943508222875e-38);
  EXPECT_EQ(finfo(kFloat32).eps, 1.1920928955078125e-07);
  EXPECT_EQ(finfo(kFloat32).max, 3.4028234663852886e+38);
  EXPECT_EQ(finfo(kFloat64).eps, 2.220446049250313e-16);
  EXPECT_EQ(finfo(kFloat64).tiny, 2.2250738585072014e-308);
  for (ScalarType t : {kFloat16, kBFloat16, kFloat32, kFloat64}) {
    SCOPED_TRACE(std::string(to_string(t)));
    const FInfo f = finfo(t);
    EXPECT_EQ(f.min, -f.max);
    EXPECT_EQ(f.bits, static_cast<int>(element_size(t) * 8));
    EXPECT_EQ(full({}, f.max, t).to(kFloat64).item<double>(), f.max);
    EXPECT_EQ(full({}, f.tiny, t).to(kFloat64).item<double>(), f.tiny);
    EXPECT_GT((ones({}, t) + f.eps).to(kFloat64).item<double>(), 1.0);
  }
  EXPECT_EQ(iinfo(kUInt8).max, 255);
  EXPECT_EQ(iinfo(kInt32).min, -2147483648LL);
  EXPECT_EQ(iinfo(kInt64).max, 9223372036854775807LL);
  EXPECT_EQ(iinfo(kInt64).bits, 64);
  EXPECT_EMBER_ERROR(finfo(kInt64), "finfo", "int64");
  EXPECT_EMBER_ERROR(iinfo(kBool), "iinfo", "bool");
  EXPECT_EMBER_ERROR(iinfo(kFloat32), "iinfo", "float32", "finfo");
}

}  // namespace ember::testing

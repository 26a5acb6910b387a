// The model with f16, int8 and bf16 weight storage (LoadOptions::dtype): forward_batch still
// equals each session's forward() bit for bit (for F16 the batch of 3 takes the kernels' scratch
// path, a single row the fused decode path; int8 rows never depend on their neighbours, on the
// amx set neither between tiles and GEMV; bf16 runs every row count the same way), and the
// logits stay near the F32 model's. bf16 is skipped, naming why, where it cannot run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kael/core/error.hpp"
#include "kael/model/gpt2.hpp"
#include "model_testing.hpp"

using namespace kael;
using namespace kael::model;
using namespace kael::model::testing;

namespace {

class Narrow : public ::testing::TestWithParam<WeightDType> {
 protected:
  Config config = tiny_config();
  std::map<std::string, Tensor> tensors = tiny_checkpoint(config);
};

std::string name(const ::testing::TestParamInfo<WeightDType>& info) { return weight_dtype_name(info.param); }

}  // namespace

TEST_P(Narrow, BatchEqualsForwardAndStaysNearF32) {
  if (GetParam() == WeightDType::bf16) {
    try {
      (void)GPT2::from_tensors(config, share(tensors), "tiny", GetParam());
    } catch (const ValueError& e) {
      GTEST_SKIP() << e.what();
    }
  }
  const GPT2 narrow = GPT2::from_tensors(config, share(tensors), "tiny", GetParam());
  const GPT2 wide = GPT2::from_tensors(config, share(tensors), "tiny");
  const std::vector<std::int32_t> prompt = {1, 7, 3, 9, 4};
  std::vector<Session> batched, alone;
  for (int i = 0; i < 3; ++i) {
    batched.push_back(narrow.new_session());
    alone.push_back(narrow.new_session());
    narrow.forward(batched.back(), std::span(prompt).first(static_cast<std::size_t>(2 + i)));
    narrow.forward(alone.back(), std::span(prompt).first(static_cast<std::size_t>(2 + i)));
  }
  std::vector<Session*> pointers;
  for (auto& s : batched) pointers.push_back(&s);
  std::vector<std::int32_t> next = {2, 5, 8};
  const auto got = narrow.forward_batch(pointers, next);
  for (std::size_t i = 0; i < 3; ++i) {
    const auto expected = narrow.forward(alone[i], std::span(&next[i], 1));
    ASSERT_TRUE(std::equal(got[i].begin(), got[i].end(), expected.begin())) << "session " << i;
  }

  auto s_narrow = narrow.new_session(), s_wide = wide.new_session();
  const auto a = narrow.forward(s_narrow, prompt);
  const std::vector<float> narrow_logits(a.begin(), a.end());
  const auto b = wide.forward(s_wide, prompt);
  double worst = 0.0, spread = 0.0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(narrow_logits[i]) - b[i]));
    spread = std::max(spread, std::abs(static_cast<double>(b[i])));
  }
  EXPECT_GT(spread, 0.0);
  // int8 steps are 1/254 of each group's range, for weights and activations; F16's 1/2048 of
  // each value.
  // BF16 keeps 8 significant bits of weights and activations: 1/256 of each value.
  const double tolerance = GetParam() == WeightDType::int8 ? 0.05 : GetParam() == WeightDType::bf16 ? 0.02 : 0.005;
  EXPECT_LT(worst, tolerance * spread);
}

TEST(NarrowLoad, NonFiniteWeightIsRefusedNamingTheTensor) {
  const Config config = tiny_config();
  auto tensors = tiny_checkpoint(config);
  const std::string name = "h.0.mlp.c_fc.weight";
  ASSERT_TRUE(tensors.count(name)) << "tiny_checkpoint's names changed";
  tensors[name].at<float>({1, 2}) = std::numeric_limits<float>::quiet_NaN();
  try {
    GPT2::from_tensors(config, tensors, "tiny", WeightDType::int8);
    FAIL() << "a NaN weight was quantized";
  } catch (const ValueError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("tensor '" + name + "'"), std::string::npos) << message;
    EXPECT_NE(message.find("(1, 2)"), std::string::npos) << message;
  }
}

TEST(NarrowNames, ParseAndList) {
  EXPECT_EQ(parse_weight_dtype("int8"), WeightDType::int8);
  EXPECT_EQ(parse_weight_dtype("f16"), WeightDType::f16);
  EXPECT_EQ(parse_weight_dtype("f32"), WeightDType::f32);
  EXPECT_EQ(parse_weight_dtype("bf16"), WeightDType::bf16);
  EXPECT_THROW(parse_weight_dtype("int4"), ValueError);
  EXPECT_FALSE(weight_dtype_from_name("INT8").has_value());
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Narrow, ::testing::Values(WeightDType::f16, WeightDType::int8, WeightDType::bf16),
                         name);

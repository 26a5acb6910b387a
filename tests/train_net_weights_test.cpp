// GptNet's starting weights and layout: the names, shapes and weight-decay flags a checkpoint
// keeps, transformers' seeded initialization (its statistics, and every value the counter-based
// normal it is defined by), a checkpoint loaded bit for bit and an incomplete one refused, and the
// copies between Hugging Face's layout and nn::GPT's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kael/core/error.hpp"
#include "kael/io/safetensors.hpp"
#include "kernels/random.hpp"
#include "train/net/gpt_net.hpp"
#include "train_testing.hpp"

namespace kael::train {
namespace {

model::Config small_config(bool tied) { return train_testing::gpt2_config(4, 4, 96, 2000, tied); }

// p's value in the stored (Hugging Face) layout.
std::vector<float> stored_values(const NetParameter& p) {
  const Tensor s = GptNet::stored(p, p.tensor).contiguous();
  EXPECT_EQ(s.shape(), p.shape) << p.name;
  return std::vector<float>(s.data<float>(), s.data<float>() + s.numel());
}

TEST(TrainNetWeights, NamesShapesAndTransformersInitialization) {
  const model::Config c = small_config(false);
  const std::uint64_t seed = 1;
  GptNet net = GptNet::init(c, seed, 0.0);
  const auto& params = net.parameters();
  ASSERT_EQ(params.size(), 2u + 12u * 4 + 2 + 1);
  EXPECT_EQ(params.front().name, "transformer.wte.weight");
  EXPECT_EQ(params[2].name, "transformer.h.0.ln_1.weight");
  EXPECT_EQ(params[4].name, "transformer.h.0.attn.c_attn.weight");
  EXPECT_EQ(params[4].shape, (Shape{96, 288}));  // Conv1D (in, out)
  EXPECT_EQ(params.back().name, "lm_head.weight");
  std::int64_t total = 0;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const NetParameter& p = params[i];
    const std::vector<float> v = stored_values(p);
    total += static_cast<std::int64_t>(v.size());
    EXPECT_EQ(p.weight_decay, p.shape.size() >= 2) << p.name;
    double sum = 0, sq = 0;
    for (const float x : v) {
      sum += x;
      sq += double{x} * x;
    }
    const double n = static_cast<double>(v.size()), mean = sum / n, std = std::sqrt(sq / n - mean * mean);
    if (p.shape.size() >= 2) {
      const double want = p.name.ends_with("c_proj.weight") ? 0.02 / std::sqrt(8.0) : 0.02;
      EXPECT_NEAR(std, want, 0.1 * want) << p.name;
      EXPECT_NEAR(mean, 0.0, 0.05 * want) << p.name;
      // The definition the seed promises (so a run from scratch starts where earlier builds did):
      // element j of parameter i in the stored layout is want * standard_normal(seed, i, j).
      std::size_t differ = 0;
      for (std::size_t j = 0; j < v.size(); ++j)
        differ += v[j] != static_cast<float>(want * kernels::standard_normal(seed, i, j));
      EXPECT_EQ(differ, 0u) << p.name;
    } else {
      const bool ln_weight = p.name.find("ln_") != std::string::npos && p.name.ends_with(".weight");
      EXPECT_EQ(mean, ln_weight ? 1.0 : 0.0) << p.name;
      EXPECT_EQ(std, 0.0) << p.name;
    }
  }
  EXPECT_EQ(total, net.parameter_count());
  // Seeded: the same seed draws the same weights, another seed others.
  EXPECT_EQ(GptNet::init(c, seed, 0.0).parameters()[0].tensor.data<float>()[5], params[0].tensor.data<float>()[5]);
  EXPECT_NE(GptNet::init(c, 2, 0.0).parameters()[0].tensor.data<float>()[5], params[0].tensor.data<float>()[5]);
}

TEST(TrainNetWeights, LoadsACheckpointBitForBitAndRefusesAnIncompleteOne) {
  for (const bool tied : {true, false}) {
    const model::Config c = small_config(tied);
    GptNet source = GptNet::init(c, 7, 0.0);
    io::TensorMap tensors;
    for (const NetParameter& p : source.parameters()) tensors.emplace(p.name, GptNet::stored(p, p.tensor).contiguous());
    const train_testing::TempDir dir;
    train_testing::write_file(dir.path() / "config.json", c.to_json("float32"));
    io::save_safetensors(dir.path() / "model.safetensors", tensors);
    GptNet loaded = GptNet::load(dir.path(), 0.1);
    ASSERT_EQ(loaded.parameters().size(), source.parameters().size());
    for (std::size_t i = 0; i < loaded.parameters().size(); ++i) {
      const Tensor& a = loaded.parameters()[i].tensor;
      const Tensor& b = source.parameters()[i].tensor;
      ASSERT_EQ(a.shape(), b.shape());
      EXPECT_TRUE(std::equal(a.data<float>(), a.data<float>() + a.numel(), b.data<float>()))
          << loaded.parameters()[i].name;
    }
    tensors.erase("transformer.h.1.mlp.c_fc.bias");
    io::save_safetensors(dir.path() / "model.safetensors", tensors);
    EXPECT_THROW(GptNet::load(dir.path(), 0.0), Error) << "tied " << tied;
  }
  const train_testing::TempDir empty;
  EXPECT_THROW(GptNet::load(empty.path(), 0.0), Error);
}

TEST(TrainNetWeights, CopiesRoundTripAndTransposeTheConv1DWeights) {
  GptNet net = GptNet::init(small_config(true), 2, 0.0);
  for (const NetParameter& p : net.parameters()) {
    const std::vector<float> hf = stored_values(p);
    std::vector<float> back(hf.size());
    GptNet::copy_in(p, hf.data(), back.data());
    const float* data = p.tensor.data<float>();
    EXPECT_TRUE(std::equal(back.begin(), back.end(), data)) << p.name;
    EXPECT_EQ(p.transposed, p.name.find("c_attn.weight") != std::string::npos ||
                                p.name.find("c_proj.weight") != std::string::npos ||
                                p.name.find("c_fc.weight") != std::string::npos)
        << p.name;
    if (p.transposed) {
      EXPECT_EQ(p.tensor.shape(), (Shape{p.shape[1], p.shape[0]})) << p.name;
    }
  }
  model::Config wide = small_config(true);
  wide.n_inner = 40;
  EXPECT_THROW(GptNet::init(wide, 1, 0.0), ValueError);
}

}  // namespace
}  // namespace kael::train

// kael::nn: modules and their state, the layers, the book's GPT with its GPT-2 weight mapping,
// the KV cache and generate. The comparison with transformers' logits is in
// tests/python/test_nn_gpt.py.
#include <gtest/gtest.h>

#include <filesystem>

#include "kael/core/error.hpp"
#include "kael/generate/sampling.hpp"
#include "kael/io/safetensors.hpp"
#include "kael/nn/generate.hpp"
#include "kael/nn/gpt.hpp"
#include "kael/nn/gpt2_config.hpp"
#include "kael/nn/gpt2_weights.hpp"
#include "kael/nn/layers.hpp"
#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"
#include "model/weight_names.hpp"

namespace kael::nn {
namespace {

GptConfig tiny_config(std::int64_t n_layer = 2) {
  return GptConfig{.vocab_size = 37, .n_positions = 24, .n_layer = n_layer, .n_head = 2, .n_embd = 8};
}

bool same_values(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.to(DType::F32).contiguous().to_vector<float>() == b.to(DType::F32).contiguous().to_vector<float>();
}

TEST(Module, NamesFollowRegistrationOrderAndDots) {
  Sequential net{std::make_shared<Linear>(3, 4), std::make_shared<GELU>(), std::make_shared<Linear>(4, 2, false)};
  std::vector<std::string> names;
  for (const auto& [name, tensor] : net.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "2.weight"}));
  EXPECT_EQ(net.state_dict().size(), 3u);
  for (const Tensor& p : net.parameters()) EXPECT_TRUE(p.requires_grad());
  EXPECT_EQ(net.forward(ones({5, 3})).shape(), (Shape{5, 2}));
}

TEST(Module, LinearInitIsWithinTorchsBound) {
  manual_seed(3);
  Linear layer(100, 50);
  const double bound = 0.1;  // 1 / sqrt(100)
  EXPECT_LE(max(abs(layer.weight)).item<float>(), bound);
  EXPECT_LE(max(abs(layer.bias)).item<float>(), bound);
  EXPECT_GT(max(abs(layer.weight)).item<float>(), 0.9 * bound);
}

TEST(Module, StateDictHasTheBooks148EntriesForGpt2sLayout) {
  // 12 per block, plus both embeddings and ln_final's two: GPT-2 small's 160 stored entries
  // without the 12 attn.bias masks; the head is tied, so no lm_head.
  GPT model(GptConfig{.vocab_size = 11, .n_positions = 8, .n_layer = 12, .n_head = 2, .n_embd = 4});
  const StateDict state = model.state_dict();
  EXPECT_EQ(state.size(), 148u);
  EXPECT_TRUE(state.contains("blocks.11.attn.qkv.weight"));
  EXPECT_EQ(state.at("blocks.0.mlp.fc1.weight").shape(), (Shape{16, 4}));
  EXPECT_FALSE(state.contains("lm_head.weight"));
}

TEST(Module, MissingEntriesAreReported) {
  GPT model(tiny_config());
  StateDict state = model.state_dict();
  for (auto& [name, t] : state) state[name] = full_like(t, 0.5);
  state.erase("blocks.1.ln2.bias");
  const StateDict before = model.state_dict();
  StateDict before_copy;
  for (const auto& [name, t] : before) before_copy.emplace(name, t.clone());
  try {
    model.load_state_dict(state);
    FAIL() << "no error";
  } catch (const ValueError&) {
    FAIL() << "a missing entry is an Error, not a ValueError";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("state dict is missing parameter blocks.1.ln2.bias"), std::string::npos) << e.what();
  }
  for (const auto& [name, t] : model.state_dict()) EXPECT_TRUE(same_values(t, before_copy.at(name))) << name;
}

TEST(Module, AShapeMismatchIsAValueErrorAndChangesNothing) {
  GPT model(tiny_config());
  StateDict state = model.state_dict();
  StateDict before;
  for (const auto& [name, t] : state) {
    before.emplace(name, t.clone());
    state[name] = zeros_like(t);
  }
  state["token_embedding.weight"] = zeros({36, 8});
  try {
    model.load_state_dict(state);
    FAIL() << "no error";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("parameter token_embedding.weight has shape [37, 8] but the state dict has [36, 8]"),
              std::string::npos)
        << e.what();
  }
  for (const auto& [name, t] : model.state_dict()) EXPECT_TRUE(same_values(t, before.at(name))) << name;
}

// Through save_safetensors and load_safetensors, bit for bit.
TEST(Module, StateDictRoundTrip) {
  GPT model(tiny_config());
  const auto path = std::filesystem::temp_directory_path() / "kael_nn_state.safetensors";
  io::save_safetensors(path, model.state_dict());
  GPT fresh(tiny_config());
  fresh.load_state_dict(io::load_safetensors(path));
  for (const auto& [name, t] : model.state_dict()) EXPECT_TRUE(same_values(t, fresh.state_dict().at(name))) << name;
  std::filesystem::remove(path);
}

TEST(Gpt2Weights, NamesTranslateAsTheBookTraces) {
  EXPECT_EQ(translated_gpt2_name("transformer.h.7.mlp.c_proj.weight"), "blocks.7.mlp.fc2.weight");
  EXPECT_EQ(translated_gpt2_name("h.0.attn.c_attn.bias"), "blocks.0.attn.qkv.bias");
  EXPECT_EQ(translated_gpt2_name("h.3.attn.c_proj.weight"), "blocks.3.attn.proj.weight");
  EXPECT_EQ(translated_gpt2_name("h.11.ln_2.weight"), "blocks.11.ln2.weight");
  EXPECT_EQ(translated_gpt2_name("wte.weight"), "token_embedding.weight");
  EXPECT_EQ(translated_gpt2_name("transformer.wpe.weight"), "position_embedding.weight");
  EXPECT_EQ(translated_gpt2_name("ln_f.bias"), "ln_final.bias");
  EXPECT_EQ(translated_gpt2_name("h.0.attn.bias"), "blocks.0.attn.bias");  // matches no parameter
  EXPECT_TRUE(stored_transposed("blocks.7.mlp.fc2.weight"));
  EXPECT_TRUE(stored_transposed("blocks.0.attn.qkv.weight"));
  EXPECT_FALSE(stored_transposed("blocks.0.attn.qkv.bias"));
  EXPECT_FALSE(stored_transposed("token_embedding.weight"));
}

TEST(Gpt2Weights, Conv1DWeightsAreTransposed) {
  // A checkpoint in GPT-2's names and layout, every value distinct, with the entries kael
  // ignores (the attn.bias masks, lm_head).
  GPT model(tiny_config());
  io::TensorMap stored;
  manual_seed(9);
  for (const auto& [name, t] : model.state_dict()) {
    std::string gpt2 = name;
    const auto rename = [&](const std::string& from, const std::string& to) {
      const auto at = gpt2.find(from);
      if (at != std::string::npos) gpt2.replace(at, from.size(), to);
    };
    rename("token_embedding.", "wte.");
    rename("position_embedding.", "wpe.");
    rename("ln_final.", "ln_f.");
    rename("blocks.", "h.");
    rename(".ln1.", ".ln_1.");
    rename(".ln2.", ".ln_2.");
    rename(".attn.qkv.", ".attn.c_attn.");
    rename(".attn.proj.", ".attn.c_proj.");
    rename(".mlp.fc1.", ".mlp.c_fc.");
    rename(".mlp.fc2.", ".mlp.c_proj.");
    const Tensor values = randn(t.shape());
    stored.emplace("transformer." + gpt2, stored_transposed(name) ? values.T().contiguous() : values);
  }
  stored.emplace("transformer.h.0.attn.bias", ones({1, 1, 24, 24}));
  stored.emplace("lm_head.weight", zeros({37, 8}));
  const auto path = std::filesystem::temp_directory_path() / "kael_nn_gpt2.safetensors";
  io::save_safetensors(path, stored);
  load_gpt2_weights(model, path);
  std::size_t checked = 0;
  for (const auto& [name, t] : stored) {
    const std::string kael_name = translated_gpt2_name(name);
    if (!model.state_dict().contains(kael_name)) continue;
    const Tensor expected = stored_transposed(kael_name) ? t.T() : t;
    EXPECT_TRUE(same_values(model.state_dict().at(kael_name), expected)) << kael_name;
    ++checked;
  }
  EXPECT_EQ(checked, model.state_dict().size());
  std::filesystem::remove(path);
}

// What nn writes in GPT-2's names and layout is, name for name and shape for shape, what the
// engine's loader reads (model::parameter_specs): both sides follow one table.
TEST(Gpt2Weights, NamesAndShapesAreTheEnginesOwn) {
  for (const bool tied : {true, false}) {
    GptConfig config = tiny_config();
    config.tied_embeddings = tied;
    const io::TensorMap stored = gpt2_state_dict(GPT(config));
    const model::Config engine{.n_layer = 2, .n_head = 2, .n_embd = 8, .n_positions = 24, .vocab_size = 37,
                               .tie_word_embeddings = tied};
    const std::vector<model::ParameterSpec> specs = model::parameter_specs(engine);
    EXPECT_EQ(stored.size(), specs.size()) << "tied " << tied;
    for (const model::ParameterSpec& spec : specs) {
      const std::string name = spec.name == model::kHeadName ? spec.name : "transformer." + spec.name;
      ASSERT_TRUE(stored.contains(name)) << name;
      EXPECT_EQ(stored.at(name).shape(), spec.shape) << name;
    }
  }
}

TEST(Gpt2Weights, SavedInGpt2sLayoutTheyLoadBackBitForBit) {
  manual_seed(4);
  GptConfig config = tiny_config();
  config.tied_embeddings = false;
  GPT source(config);
  const io::TensorMap stored = gpt2_state_dict(source);
  // transformers' names (as GPT2LMHeadModel.save_pretrained writes them) and Conv1D's (in, out).
  EXPECT_EQ(stored.size(), source.state_dict().size());
  EXPECT_EQ(stored.at("transformer.h.1.mlp.c_fc.weight").shape(), (Shape{8, 32}));
  EXPECT_EQ(stored.at("transformer.h.0.attn.c_attn.bias").shape(), (Shape{24}));
  EXPECT_EQ(stored.at("transformer.wte.weight").shape(), (Shape{37, 8}));
  EXPECT_TRUE(stored.contains("transformer.ln_f.weight") && stored.contains("lm_head.weight"));
  for (const auto& [name, t] : source.state_dict()) EXPECT_EQ(translated_gpt2_name(gpt2_name(name)), name);

  const auto path = std::filesystem::temp_directory_path() / "kael_nn_saved_gpt2.safetensors";
  save_gpt2_weights(source, path);
  GPT loaded(config);
  load_gpt2_weights(loaded, path);
  for (const auto& [name, t] : source.state_dict()) EXPECT_TRUE(same_values(loaded.state_dict().at(name), t)) << name;
  EXPECT_EQ(io::read_safetensors(path).metadata.at("format"), "pt");
  std::filesystem::remove(path);

  GptConfig no_bias = tiny_config();
  no_bias.bias = false;
  EXPECT_THROW(gpt2_state_dict(GPT(no_bias)), ValueError);
}

TEST(Gpt2Config, TheEnginesConfigAndTheBooksConvertBothWays) {
  // config.json -> model::Config -> GptConfig -> model::Config -> config.json: the same shape.
  const model::Config stored = model::Config::from_json(
      R"({"n_layer": 3, "n_head": 4, "n_embd": 32, "n_positions": 40, "vocab_size": 99,
          "layer_norm_epsilon": 1e-6, "tie_word_embeddings": false})");
  const GptConfig book = gpt_config(stored);
  EXPECT_EQ(book.n_layer, 3);
  EXPECT_EQ(book.n_head, 4);
  EXPECT_EQ(book.n_embd, 32);
  EXPECT_EQ(book.n_positions, 40);
  EXPECT_EQ(book.vocab_size, 99);
  EXPECT_FALSE(book.tied_embeddings);
  EXPECT_FLOAT_EQ(static_cast<float>(book.layer_norm_eps), 1e-6f);
  EXPECT_EQ(model::Config::from_json(model_config(book).to_json("float32")).to_json("float32"),
            stored.to_json("float32"));

  model::Config wide = stored;
  wide.n_inner = 100;  // nn::GPT's MLP is 4 * n_embd
  EXPECT_THROW(gpt_config(wide), ValueError);
  GptConfig exact_gelu = book;
  exact_gelu.tanh_gelu = false;
  EXPECT_THROW(model_config(exact_gelu), ValueError);
}

TEST(Gpt, TheKvCacheGivesTheLogitsOfTheFullPass) {
  manual_seed(1);
  GPT model(tiny_config(3));
  model.eval();
  const autograd::NoGradGuard guard;
  const Tensor ids = randint(0, 37, {2, 9});
  const Tensor full_logits = model.forward(ids);  // (2, 9, 37)
  KVCache cache;
  std::vector<Tensor> parts{model.forward(ids.narrow(1, 0, 4), &cache)};
  parts.push_back(model.forward(ids.narrow(1, 4, 1), &cache));
  parts.push_back(model.forward(ids.narrow(1, 5, 4), &cache));  // several new positions at once
  EXPECT_EQ(cache.length(), 9);
  EXPECT_TRUE(allclose(cat(parts, 1), full_logits, 1e-5, 1e-5));
}

TEST(Gpt, TheKvCacheGrowsByDoublingNotByTheStep) {
  // 70 positions one at a time: the cache's room doubles 4 times (16, 32, 64, 128) where a
  // cache that grew with each step would change 70 times, and every step's logits are the full
  // pass's at that position.
  manual_seed(3);
  GPT model(GptConfig{.vocab_size = 37, .n_positions = 80, .n_layer = 2, .n_head = 2, .n_embd = 8});
  model.eval();
  const autograd::NoGradGuard guard;
  const Tensor ids = randint(0, 37, {1, 70});
  const Tensor full_logits = model.forward(ids);
  KVCache cache;
  std::vector<std::int64_t> capacities;
  std::vector<Tensor> parts;
  for (std::int64_t t = 0; t < 70; ++t) {
    parts.push_back(model.forward(ids.narrow(1, t, 1), &cache));
    if (capacities.empty() || capacities.back() != cache.capacity()) capacities.push_back(cache.capacity());
  }
  EXPECT_EQ(capacities, (std::vector<std::int64_t>{16, 32, 64, 128}));
  EXPECT_EQ(cache.length(), 70);
  EXPECT_TRUE(allclose(cat(parts, 1), full_logits, 1e-5, 1e-5));
}

TEST(Gpt, AReservedKvCacheNeverGrows) {
  manual_seed(4);
  GPT model(tiny_config());
  model.eval();
  const autograd::NoGradGuard guard;
  const Tensor ids = randint(0, 37, {2, 21});
  KVCache cache;
  cache.reserve(21);  // before the first forward: the layers are made with the room
  std::vector<Tensor> parts{model.forward(ids.narrow(1, 0, 3), &cache)};
  EXPECT_EQ(cache.capacity(), 32);  // 21 rounded up to the layout's 16 positions
  for (std::int64_t t = 3; t < 21; ++t) {
    parts.push_back(model.forward(ids.narrow(1, t, 1), &cache));
    EXPECT_EQ(cache.capacity(), 32);
  }
  EXPECT_TRUE(allclose(cat(parts, 1), model.forward(ids), 1e-5, 1e-5));
  cache.clear();
  EXPECT_EQ(cache.length(), 0);
  EXPECT_EQ(cache.capacity(), 0);
  EXPECT_THROW(cache.reserve(-1), ValueError);
}

TEST(Gpt, TheKvCacheWithAGradientGivesTheSameLogitsAndGradients) {
  // With grad mode on and parameters that require one, the cached positions are constants
  // before the new ones (the composed attention, not the inference kernel): the same logits,
  // and a gradient for every parameter the new positions reach.
  manual_seed(6);
  GPT model(tiny_config());
  model.eval();
  const Tensor ids = randint(0, 37, {2, 7});
  Tensor inference;
  {
    const autograd::NoGradGuard guard;
    KVCache cache;
    model.forward(ids.narrow(1, 0, 4), &cache);
    inference = model.forward(ids.narrow(1, 4, 3), &cache);
  }
  KVCache cache;
  model.forward(ids.narrow(1, 0, 4), &cache);
  const Tensor logits = model.forward(ids.narrow(1, 4, 3), &cache);
  EXPECT_TRUE(logits.requires_grad());
  EXPECT_TRUE(allclose(logits, inference, 1e-5, 1e-5));
  EXPECT_EQ(cache.length(), 7);
  logits.sum().backward();
  EXPECT_TRUE(model.token_embedding->weight.grad().defined());
  EXPECT_TRUE(model.blocks->operator[](0).attn->qkv->weight.grad().defined());
}

TEST(Gpt, AKvCacheRefusesAnotherBatchAndKeepsItsPositions) {
  manual_seed(7);
  GPT model(tiny_config());
  model.eval();
  const autograd::NoGradGuard guard;
  KVCache cache;
  model.forward(randint(0, 37, {2, 5}), &cache);
  EXPECT_THROW(model.forward(randint(0, 37, {1, 1}), &cache), ValueError);
  EXPECT_EQ(cache.length(), 5);
  model.forward(randint(0, 37, {2, 1}), &cache);
  EXPECT_EQ(cache.length(), 6);
}

TEST(Gpt, GreedyGenerateTakesTheArgmaxOfTheFullPass) {
  manual_seed(2);
  GPT model(tiny_config());
  model.eval();
  const Tensor prompt = from_vector<std::int64_t>({3, 1, 4, 1, 5}, {1, 5});
  const Tensor out = generate(model, prompt, {.max_new_tokens = 6, .temperature = 0});
  ASSERT_EQ(out.shape(), (Shape{1, 11}));
  const autograd::NoGradGuard guard;
  Tensor ids = prompt;
  for (int i = 0; i < 6; ++i) {
    const Tensor next = argmax(model.forward(ids).select(1, ids.size(1) - 1), -1, true);
    ids = cat({ids, next}, 1);
  }
  EXPECT_EQ(out.to_vector<std::int64_t>(), ids.to_vector<std::int64_t>());
}

TEST(Gpt, SampledGenerateIsReproducibleAndStaysInTheTopK) {
  GPT model(tiny_config());
  model.eval();
  const Tensor prompt = from_vector<std::int64_t>({7, 7}, {1, 2});
  manual_seed(5);
  const auto first = generate(model, prompt, {.max_new_tokens = 8, .temperature = 0.9, .top_k = 1}).to_vector<std::int64_t>();
  manual_seed(5);
  const auto greedy = generate(model, prompt, {.max_new_tokens = 8, .temperature = 0}).to_vector<std::int64_t>();
  EXPECT_EQ(first, greedy);  // top_k = 1 leaves only the argmax
  manual_seed(6);
  const auto a = generate(model, prompt, {.max_new_tokens = 8, .temperature = 1.5, .top_k = 5}).to_vector<std::int64_t>();
  manual_seed(6);
  const auto b = generate(model, prompt, {.max_new_tokens = 8, .temperature = 1.5, .top_k = 5}).to_vector<std::int64_t>();
  EXPECT_EQ(a, b);
}

TEST(Gpt, SampledGenerateIsTheEnginesSamplerOnTheFullPass) {
  // nn::generate draws with kael::generate's Sampler, seeded from the process-wide generator:
  // the same sampler over full passes (no cache) picks the same tokens.
  GPT model(tiny_config());
  model.eval();
  const Tensor prompt = from_vector<std::int64_t>({2, 9, 4}, {1, 3});
  manual_seed(11);
  const auto out = generate(model, prompt, {.max_new_tokens = 10, .temperature = 1.3, .top_k = 6}).to_vector<std::int64_t>();
  manual_seed(11);
  generate::SamplingParams params;
  params.temperature = 1.3f;
  params.top_k = 6;
  params.seed = static_cast<std::uint64_t>(randint(0, std::int64_t{1} << 62, {1}).to_vector<std::int64_t>()[0]);
  generate::Sampler sampler(params);
  sampler.add_prompt(std::vector<std::int32_t>{2, 9, 4});
  const autograd::NoGradGuard guard;
  Tensor ids = prompt;
  for (int i = 0; i < 10; ++i) {
    std::vector<float> logits = model.forward(ids).select(1, ids.size(1) - 1).contiguous().to_vector<float>();
    const std::int32_t id = sampler.sample(logits);
    sampler.add_generated(id);
    ids = cat({ids, from_vector<std::int64_t>({id}, {1, 1})}, 1);
  }
  EXPECT_EQ(out, ids.to_vector<std::int64_t>());
}

TEST(Gpt, BadInputIsAValueError) {
  GPT model(tiny_config());
  EXPECT_THROW(generate(model, zeros({1, 0}, DType::I64)), ValueError);
  EXPECT_THROW(generate(model, zeros({1, 20}, DType::I64), {.max_new_tokens = 5}), ValueError);  // 25 > 24
  EXPECT_THROW(model.forward(zeros({1, 25}, DType::I64)), ValueError);
  EXPECT_THROW(model.forward(zeros({3}, DType::I64)), ValueError);
  EXPECT_THROW(model.forward(zeros({1, 3})), TypeError);
  EXPECT_THROW(model.forward(full({1, 2}, 37, DType::I64)), IndexError);
  EXPECT_THROW(GPT(GptConfig{.n_head = 5}), ValueError);
  EXPECT_THROW(model.to("cuda"), Error);
}

TEST(Gpt, TrainingLowersTheLossOfASmallSequence) {
  manual_seed(4);
  GPT model(tiny_config());
  const Tensor ids = from_vector<std::int64_t>({1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4}, {1, 12});
  const Tensor inputs = ids.narrow(1, 0, 11), targets = ids.narrow(1, 1, 11).reshape({-1});
  float first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    const Tensor loss = cross_entropy(model.forward(inputs).reshape({-1, 37}), targets);
    if (step == 0) first = loss.item<float>();
    last = loss.item<float>();
    model.zero_grad();
    loss.backward();
    const autograd::NoGradGuard guard;
    for (Tensor p : model.parameters()) p.add_(p.grad(), -0.5);
  }
  EXPECT_LT(last, 0.5 * first);
}

TEST(Layers, DropoutIsTheIdentityInEval) {
  Sequential net{std::make_shared<Dropout>(0.5)};
  const Tensor x = ones({1000});
  EXPECT_LT(sum(eq(net.forward(x), 0.0)).item<std::int64_t>(), 700);
  EXPECT_GT(sum(eq(net.forward(x), 0.0)).item<std::int64_t>(), 300);
  net.eval();
  EXPECT_TRUE(allclose(net.forward(x), x));
  EXPECT_THROW(Dropout(1.5), ValueError);
  EXPECT_THROW(GELU("fast"), ValueError);
}

}  // namespace
}  // namespace kael::nn

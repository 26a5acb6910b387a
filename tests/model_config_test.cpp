// Config from config.json (docs/behaviour.md, "The GPT-2 checkpoint"): the GPT-2 family, defaults,
// and refusals.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "kael/core/error.hpp"
#include "kael/model/gpt2.hpp"

using kael::model::Config;

namespace {

// The published config.json of a GPT-2 family member, trimmed to the keys that matter plus
// some that kael ignores.
std::string family_json(int layers, int heads, int embd) {
  return R"({"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
             "bos_token_id": 50256, "eos_token_id": 50256, "initializer_range": 0.02,
             "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024, "n_embd": )" +
         std::to_string(embd) + R"(, "n_head": )" + std::to_string(heads) + R"(, "n_layer": )" +
         std::to_string(layers) + R"(, "n_positions": 1024, "n_inner": null, "resid_pdrop": 0.1,
             "scale_attn_weights": true, "reorder_and_upcast_attn": false, "tie_word_embeddings": true,
             "task_specific_params": {"text-generation": {"do_sample": true, "max_length": 50}},
             "vocab_size": 50257})";
}

void expect_value_error(const std::string& json, const std::string& fragment) {
  try {
    Config::from_json(json);
    ADD_FAILURE() << "no error for " << json;
  } catch (const kael::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(Config, DefaultsAreGpt2Small) {
  const Config c;
  EXPECT_EQ(c.n_layer, 12);
  EXPECT_EQ(c.n_head, 12);
  EXPECT_EQ(c.n_embd, 768);
  EXPECT_EQ(c.n_positions, 1024);
  EXPECT_EQ(c.vocab_size, 50257);
  EXPECT_FLOAT_EQ(c.layer_norm_epsilon, 1e-5f);
  EXPECT_EQ(c.head_dim(), 64);
  EXPECT_EQ(c.mlp_dim(), 3072);
  const Config empty = Config::from_json("{}");
  EXPECT_EQ(empty.n_layer, 12);
  EXPECT_EQ(empty.n_embd, 768);
}

TEST(Config, ParsesTheFamily) {
  struct Member {
    const char* name;
    int layers, heads, embd;
  };
  for (const Member& m : {Member{"gpt2", 12, 12, 768}, Member{"gpt2-medium", 24, 16, 1024},
                          Member{"gpt2-large", 36, 20, 1280}, Member{"gpt2-xl", 48, 25, 1600},
                          Member{"distilgpt2", 6, 12, 768}}) {
    const Config c = Config::from_json(family_json(m.layers, m.heads, m.embd));
    EXPECT_EQ(c.n_layer, m.layers) << m.name;
    EXPECT_EQ(c.n_head, m.heads) << m.name;
    EXPECT_EQ(c.n_embd, m.embd) << m.name;
    EXPECT_EQ(c.n_positions, 1024) << m.name;
    EXPECT_EQ(c.vocab_size, 50257) << m.name;
    EXPECT_EQ(c.mlp_dim(), 4 * m.embd) << m.name;
    EXPECT_EQ(c.head_dim(), 64) << m.name;
  }
}

TEST(Config, OptionalKeys) {
  const Config c = Config::from_json(R"({"n_ctx": 256, "n_inner": 100, "layer_norm_epsilon": 1e-6,
                                         "activation_function": "gelu_pytorch_tanh", "tie_word_embeddings": false})");
  EXPECT_EQ(c.n_positions, 256);  // n_ctx stands in for a missing n_positions
  EXPECT_EQ(c.mlp_dim(), 100);
  EXPECT_FLOAT_EQ(c.layer_norm_epsilon, 1e-6f);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(Config::from_json(R"({"n_ctx": 256, "n_positions": 512})").n_positions, 512);
}

TEST(Config, RefusesBadValues) {
  expect_value_error("{", "not valid JSON");
  expect_value_error("[1, 2]", "expected an object");
  expect_value_error(R"({"n_layer": "12"})", "n_layer");
  expect_value_error(R"({"n_layer": 0})", "n_layer is 0");
  expect_value_error(R"({"n_head": -1})", "n_head");
  expect_value_error(R"({"n_embd": 2.5})", "n_embd");
  expect_value_error(R"({"n_embd": 770})", "not divisible by n_head 12");
  expect_value_error(R"({"vocab_size": 1e12})", "vocab_size");
  expect_value_error(R"({"n_positions": 99999999999})", "n_positions");
  expect_value_error(R"({"layer_norm_epsilon": -1})", "layer_norm_epsilon");
  expect_value_error(R"({"layer_norm_epsilon": "small"})", "layer_norm_epsilon");
  expect_value_error(R"({"tie_word_embeddings": 1})", "tie_word_embeddings");
}

TEST(Config, DeepNestingIsRefusedBeforeAnyMessageQuotesIt) {
  // The value's message would dump() it, recursively: 100,000 levels would overflow the stack.
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  expect_value_error(R"({"n_layer": )" + deep + "}", "nests deeper than 64 levels");
  expect_value_error(R"({"unread": )" + deep + "}", "nests deeper");
}

TEST(Config, AConfigFileIsARegularFileOfBoundedSize) {
  const auto dir = std::filesystem::temp_directory_path() / ("kael_config_size_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  { std::ofstream create(dir / "config.json"); }
  std::filesystem::resize_file(dir / "config.json", kael::model::kMaxConfigBytes + 1);  // sparse
  try {
    Config::from_directory(dir);
    ADD_FAILURE() << "a config.json past the limit was read";
  } catch (const kael::Error& e) {
    EXPECT_NE(std::string(e.what()).find("larger than the limit of 1048576 bytes"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(Config, RefusesWhatKaelDoesNotImplement) {
  expect_value_error(R"({"activation_function": "relu"})", "activation_function");
  expect_value_error(R"({"model_type": "llama"})", "model_type");
  expect_value_error(R"({"scale_attn_weights": false})", "scale_attn_weights");
  expect_value_error(R"({"scale_attn_by_inverse_layer_idx": true})", "scale_attn_by_inverse_layer_idx");
  expect_value_error(R"({"add_cross_attention": true})", "add_cross_attention");
}

TEST(Config, FromDirectory) {
  const auto dir = std::filesystem::temp_directory_path() / ("kael_config_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  EXPECT_EQ(Config::from_directory(dir).n_layer, 12);  // no config.json: GPT-2 small
  {
    std::ofstream(dir / "config.json") << family_json(24, 16, 1024);
  }
  EXPECT_EQ(Config::from_directory(dir).n_layer, 24);
  {
    std::ofstream(dir / "config.json") << R"({"n_head": 7})";
  }
  try {
    Config::from_directory(dir);
    ADD_FAILURE();
  } catch (const kael::ValueError& e) {
    // The message names the file.
    EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
  EXPECT_THROW(Config::from_json_file(dir / "config.json"), kael::Error);
}

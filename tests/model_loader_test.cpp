// Loading GPT-2 weights: Hugging Face names with and without the prefix, ignored buffers, the tied
// head, dtype conversion, and one test per loader error (docs/behaviour.md, "The GPT-2
// checkpoint").
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "kael/core/error.hpp"
#include "kael/io/safetensors.hpp"
#include "kael/model/gpt2.hpp"
#include "model_testing.hpp"

using namespace kael;
using namespace kael::model;
using namespace kael::model::testing;

namespace {

const std::vector<std::int32_t> kIds = {5, 0, 36, 7, 7, 12};

std::vector<float> last_logits(const GPT2& model, const std::vector<std::int32_t>& ids = kIds) {
  Session session = model.new_session();
  const auto logits = model.forward(session, ids);
  return {logits.begin(), logits.end()};
}

std::map<std::string, Tensor> with_prefix(const std::map<std::string, Tensor>& tensors) {
  std::map<std::string, Tensor> out;
  for (const auto& [name, tensor] : tensors) out.emplace("transformer." + name, tensor);
  return out;
}

Tensor converted(const Tensor& t, DType dtype) {
  Tensor out = Tensor::zeros(dtype, t.shape());
  auto* bits = reinterpret_cast<std::uint16_t*>(out.raw_data());
  const float* src = t.data<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i) bits[i] = dtype == DType::F16 ? f32_to_f16(src[i]) : f32_to_bf16(src[i]);
  return out;
}

// Runs `load` and checks that it throws E with every fragment in its message.
template <class E, class F>
void expect_error(F&& load, std::initializer_list<std::string> fragments) {
  try {
    load();
    ADD_FAILURE() << "no error";
  } catch (const E& e) {
    for (const auto& fragment : fragments)
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << "'" << fragment << "' not in: " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kael_model_XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

void write_config(const std::filesystem::path& dir, const Config& c) {
  std::ofstream(dir / "config.json") << "{\"n_layer\": " << c.n_layer << ", \"n_head\": " << c.n_head
                                     << ", \"n_embd\": " << c.n_embd << ", \"n_positions\": " << c.n_positions
                                     << ", \"vocab_size\": " << c.vocab_size << "}";
}

}  // namespace

TEST(Loader, LoadsInMemoryCheckpoint) {
  const Config c = tiny_config();
  const GPT2 model = GPT2::from_tensors(c, tiny_checkpoint(c));
  EXPECT_EQ(model.config().n_layer, 2);
  const std::int64_t C = 12, H = 48, V = 37, P = 80;
  const std::int64_t per_layer = 2 * C + C * 3 * C + 3 * C + C * C + C + 2 * C + C * H + H + H * C + C;
  EXPECT_EQ(model.parameter_count(), V * C + P * C + 2 * per_layer + 2 * C);
}

TEST(Loader, Gpt2SmallParameterCountFromSpecs) {
  // The published figure (docs/behaviour.md, "The GPT-2 checkpoint"), from shapes alone: load zero
  // tensors of every shape.
  const Config small;
  std::map<std::string, Tensor> tensors;
  for (int l = 0; l < 12; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    const std::int64_t C = 768;
    tensors[h + "ln_1.weight"] = Tensor::zeros(DType::F16, {C});
    tensors[h + "ln_1.bias"] = Tensor::zeros(DType::F16, {C});
    tensors[h + "attn.c_attn.weight"] = Tensor::zeros(DType::F16, {C, 3 * C});
    tensors[h + "attn.c_attn.bias"] = Tensor::zeros(DType::F16, {3 * C});
    tensors[h + "attn.c_proj.weight"] = Tensor::zeros(DType::F16, {C, C});
    tensors[h + "attn.c_proj.bias"] = Tensor::zeros(DType::F16, {C});
    tensors[h + "ln_2.weight"] = Tensor::zeros(DType::F16, {C});
    tensors[h + "ln_2.bias"] = Tensor::zeros(DType::F16, {C});
    tensors[h + "mlp.c_fc.weight"] = Tensor::zeros(DType::F16, {C, 4 * C});
    tensors[h + "mlp.c_fc.bias"] = Tensor::zeros(DType::F16, {4 * C});
    tensors[h + "mlp.c_proj.weight"] = Tensor::zeros(DType::F16, {4 * C, C});
    tensors[h + "mlp.c_proj.bias"] = Tensor::zeros(DType::F16, {C});
    tensors[h + "attn.bias"] = Tensor::zeros(DType::F16, {1, 1, 1024, 1024});
  }
  tensors["wte.weight"] = Tensor::zeros(DType::F16, {50257, 768});
  tensors["wpe.weight"] = Tensor::zeros(DType::F16, {1024, 768});
  tensors["ln_f.weight"] = Tensor::zeros(DType::F16, {768});
  tensors["ln_f.bias"] = Tensor::zeros(DType::F16, {768});
  EXPECT_EQ(tensors.size(), 160u);  // the published file's tensor count
  EXPECT_EQ(GPT2::from_tensors(small, std::move(tensors)).parameter_count(), 124'439'808);
}

TEST(Loader, PrefixBuffersAndTiedHeadGiveTheSameModel) {
  const Config c = tiny_config();
  const auto base = tiny_checkpoint(c);
  const auto expected = last_logits(GPT2::from_tensors(c, share(base)));

  // save_pretrained's layout: "transformer." prefix, plus a tied lm_head.weight.
  auto prefixed = with_prefix(base);
  prefixed["lm_head.weight"] = base.at("wte.weight");
  EXPECT_EQ(last_logits(GPT2::from_tensors(c, std::move(prefixed))), expected);

  // The published file's layout: no prefix, causal-mask buffers of any dtype.
  auto published = share(base);
  for (int l = 0; l < c.n_layer; ++l) {
    published["h." + std::to_string(l) + ".attn.bias"] = Tensor::zeros(DType::F32, {1, 1, 80, 80});
    published["h." + std::to_string(l) + ".attn.masked_bias"] = Tensor::zeros(DType::BOOL, {});
  }
  EXPECT_EQ(last_logits(GPT2::from_tensors(c, std::move(published))), expected);
}

TEST(Loader, MissingTensorIsAnErrorNamingIt) {
  const Config c = tiny_config();
  auto tensors = tiny_checkpoint(c);
  tensors.erase("h.1.mlp.c_fc.bias");
  expect_error<Error>([&] { GPT2::from_tensors(c, std::move(tensors), "model.safetensors"); },
                      {"model.safetensors", "missing tensor 'h.1.mlp.c_fc.bias'", "expected shape [48]"});
}

TEST(Loader, WrongShapeNamesExpectedAndFound) {
  const Config c = tiny_config();
  auto tensors = with_prefix(tiny_checkpoint(c));
  tensors["transformer.h.0.attn.c_proj.bias"] = Tensor::zeros(DType::F32, {13});
  expect_error<ValueError>([&] { GPT2::from_tensors(c, std::move(tensors)); },
                           {"'transformer.h.0.attn.c_proj.bias'", "shape [13]", "expected [12]"});

  // A Conv1D weight stored [out, in] gets a hint.
  auto transposed = tiny_checkpoint(c);
  transposed["h.1.attn.c_attn.weight"] = transposed.at("h.1.attn.c_attn.weight").transpose().packed_copy();
  expect_error<ValueError>([&] { GPT2::from_tensors(c, std::move(transposed)); },
                           {"shape [36, 12]", "expected [12, 36]", "[in, out]"});

  // A config that disagrees with the weights.
  Config wider = c;
  wider.vocab_size = 38;
  expect_error<ValueError>([&] { GPT2::from_tensors(wider, tiny_checkpoint(c)); },
                           {"'wte.weight'", "shape [37, 12]", "expected [38, 12]"});
}

TEST(Loader, NonFloatingDtypeIsATypeError) {
  const Config c = tiny_config();
  auto tensors = tiny_checkpoint(c);
  tensors["ln_f.bias"] = Tensor::zeros(DType::I32, {12});
  expect_error<TypeError>([&] { GPT2::from_tensors(c, std::move(tensors)); }, {"'ln_f.bias'", "I32"});
}

TEST(Loader, UnexpectedTensorsAreErrors) {
  const Config c = tiny_config();
  auto extra = tiny_checkpoint(c);
  extra["score.weight"] = Tensor::zeros(DType::F32, {2, 12});
  expect_error<ValueError>([&] { GPT2::from_tensors(c, std::move(extra)); }, {"unexpected tensor 'score.weight'"});

  // Weights of more blocks than config.json declares.
  Config fewer = c;
  fewer.n_layer = 1;
  expect_error<ValueError>([&] { GPT2::from_tensors(fewer, tiny_checkpoint(c)); }, {"h.1.", "n_layer 1"});

  // The same parameter twice, with and without the prefix.
  auto twice = tiny_checkpoint(c);
  twice["transformer.wpe.weight"] = twice.at("wpe.weight");
  expect_error<ValueError>([&] { GPT2::from_tensors(c, std::move(twice)); }, {"'transformer.wpe.weight'", "'wpe.weight'"});

  // A tied head whose shape disagrees with wte.
  auto bad_head = tiny_checkpoint(c);
  bad_head["lm_head.weight"] = Tensor::zeros(DType::F32, {36, 12});
  expect_error<ValueError>([&] { GPT2::from_tensors(c, std::move(bad_head)); }, {"lm_head.weight", "[36, 12]"});
}

TEST(Loader, UntiedHeadIsUsed) {
  Config c = tiny_config();
  c.tie_word_embeddings = false;
  auto tensors = tiny_checkpoint(c);
  expect_error<Error>([&] { GPT2::from_tensors(c, share(tensors)); }, {"missing tensor 'lm_head.weight'"});
  // With the head equal to wte, the logits equal the tied model's.
  tensors["lm_head.weight"] = tensors.at("wte.weight").packed_copy();
  const auto tied = last_logits(GPT2::from_tensors(tiny_config(), tiny_checkpoint(c)));
  EXPECT_EQ(last_logits(GPT2::from_tensors(c, share(tensors))), tied);
  // Changing only the head changes the logits.
  tensors["lm_head.weight"].data<float>()[3] += 1.0f;
  EXPECT_NE(last_logits(GPT2::from_tensors(c, share(tensors))), tied);
}

TEST(Loader, HalfPrecisionIsConvertedExactly) {
  // F16 and BF16 values are exactly representable in F32, so a converted checkpoint must give
  // the same logits as the F32 checkpoint holding the rounded values.
  const Config c = tiny_config();
  for (DType dtype : {DType::F16, DType::BF16}) {
    std::map<std::string, Tensor> half, rounded;
    for (const auto& [name, tensor] : tiny_checkpoint(c)) {
      half[name] = converted(tensor, dtype);
      rounded[name] = half[name].to_f32();
    }
    // The mask buffer may be any dtype too.
    half["h.0.attn.bias"] = Tensor::zeros(dtype, {1, 1, 80, 80});
    EXPECT_EQ(last_logits(GPT2::from_tensors(c, std::move(half))), last_logits(GPT2::from_tensors(c, std::move(rounded))))
        << dtype_name(dtype);
  }
}

TEST(Loader, LoadsADirectoryWithAndWithoutMapping) {
  const Config c = tiny_config();
  const auto base = tiny_checkpoint(c);
  const auto expected = last_logits(GPT2::from_tensors(c, share(base)));
  TempDir dir;
  write_config(dir.path(), c);
  io::save_safetensors(dir.path() / "model.safetensors", with_prefix(base), {{"format", "pt"}});
  for (bool mmap : {true, false}) {
    LoadOptions options;
    options.mmap = mmap;
    const GPT2 model = GPT2::load(dir.path(), options);
    EXPECT_EQ(model.config().n_positions, 80);
    EXPECT_EQ(last_logits(model), expected) << "mmap " << mmap;
  }
}

TEST(Loader, DirectoryErrors) {
  TempDir dir;
  expect_error<Error>([&] { GPT2::load(dir.path()); }, {"model.safetensors", dir.path().string()});

  // A checkpoint without config.json is GPT-2 small: the tiny weights do not fit it.
  const Config c = tiny_config();
  io::save_safetensors(dir.path() / "model.safetensors", tiny_checkpoint(c));
  expect_error<ValueError>([&] { GPT2::load(dir.path()); }, {"'wte.weight'", "expected [50257, 768]"});

  // A bad config.json fails the load.
  std::ofstream(dir.path() / "config.json") << R"({"n_layer": 2, "activation_function": "relu"})";
  expect_error<ValueError>([&] { GPT2::load(dir.path()); }, {"activation_function"});
}

TEST(Loader, UnknownDtypeInTheFileIsATypeError) {
  // save_safetensors cannot write F8, so the file is made by hand: one F8_E4M3 tensor.
  TempDir dir;
  const std::string header = R"({"wte.weight":{"dtype":"F8_E4M3","shape":[2,4],"data_offsets":[0,8]}})";
  std::string bytes(8, '\0');
  const std::uint64_t n = header.size();
  std::memcpy(bytes.data(), &n, 8);  // little-endian on every platform kael targets
  bytes += header + std::string(8, '\0');
  std::ofstream(dir.path() / "model.safetensors", std::ios::binary) << bytes;
  expect_error<TypeError>([&] { GPT2::load(dir.path()); }, {"F8_E4M3"});
}

// GptNet's starting weights: transformers' GPT-2 initialization drawn from the kernels' seeded
// counter-based normals, or a checkpoint matched and checked by the model layer. Both produce
// each parameter in Hugging Face's layout and copy it in (copy_in transposes the Conv1D weights).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kael/core/error.hpp"
#include "kael/io/safetensors.hpp"
#include "kernels/infra/thread_pool.hpp"
#include "kernels/random.hpp"
#include "model/weight_names.hpp"
#include "model/weights.hpp"
#include "train/net/gpt_net.hpp"

namespace kael::train {

namespace {

bool is_residual_projection(const std::string& name) { return name.ends_with("c_proj.weight"); }
bool is_layer_norm(const std::string& name) { return name.find("ln_") != std::string::npos; }

// Parameter `index` (checkpoint order) in Hugging Face's layout: biases 0, LayerNorm weights 1,
// every matrix N(0, 0.02) with the residual projections N(0, 0.02 / sqrt(2 n_layer)). Element j
// is std * standard_normal(seed, index, j), a pure function, so the thread count changes nothing.
void draw(const NetParameter& p, std::size_t index, int n_layer, std::uint64_t seed, float* out) {
  const std::int64_t n = shape_numel(p.shape);
  if (p.shape.size() < 2) {
    std::fill_n(out, n, is_layer_norm(p.name) && p.name.ends_with(".weight") ? 1.0f : 0.0f);
    return;
  }
  constexpr double kStd = 0.02;  // transformers' initializer_range default
  const double std = is_residual_projection(p.name) ? kStd / std::sqrt(2.0 * n_layer) : kStd;
  kernels::parallel_for(n, 1 << 16, [&](std::int64_t j0, std::int64_t j1) {
    for (std::int64_t j = j0; j < j1; ++j)
      out[j] = static_cast<float>(std * kernels::standard_normal(seed, index, static_cast<std::uint64_t>(j)));
  });
}

}  // namespace

GptNet GptNet::init(const model::Config& config, std::uint64_t seed, double dropout) {
  GptNet net(config, dropout);
  std::vector<float> scratch;  // a Conv1D weight in Hugging Face's layout, before its transpose
  for (std::size_t i = 0; i < net.parameters_.size(); ++i) {
    NetParameter& p = net.parameters_[i];
    if (p.transposed) {
      scratch.resize(static_cast<std::size_t>(shape_numel(p.shape)));
      draw(p, i, config.n_layer, seed, scratch.data());
      copy_in(p, scratch.data(), p.tensor.data<float>());
    } else {
      draw(p, i, config.n_layer, seed, p.tensor.data<float>());
    }
    p.tensor.bump_version();
  }
  return net;
}

GptNet GptNet::load(const std::filesystem::path& dir, double dropout) {
  const auto file = dir / "model.safetensors";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec))
    throw Error(str("no model.safetensors in '", dir.string(), "' (looked for '", file.string(), "')"));
  const model::Config config = model::Config::from_directory(dir);
  GptNet net(config, dropout);
  io::SafetensorsFile checkpoint = io::read_safetensors(file, io::LoadMode::Mapped);
  // Every name, shape and dtype is checked before anything is copied (model::GPT2::load's errors).
  std::vector<model::CheckpointTensor> found = model::match_parameters(
      config, model::parameter_specs(config), std::move(checkpoint.tensors), str("'", file.string(), "'"));
  for (std::size_t i = 0; i < found.size(); ++i) {
    Tensor& tensor = found[i].tensor;
    const Tensor f32 = tensor.dtype() == DType::F32 ? (tensor.is_contiguous() ? tensor : tensor.packed_copy()) : tensor.to_f32();
    NetParameter& p = net.parameters_[i];
    copy_in(p, f32.data<float>(), p.tensor.data<float>());
    p.tensor.bump_version();
    io::release_mapped_pages(tensor);  // each tensor's mapped pages go once copied
    tensor = Tensor();
  }
  return net;
}

}  // namespace kael::train

#include "train/run/checkpoint.hpp"

#include <cmath>
#include <nlohmann/json.hpp>

#include "kael/core/error.hpp"
#include "kael/io/safetensors.hpp"
#include "train/run/directory_swap.hpp"

namespace kael::train {

namespace fs = std::filesystem;

namespace {

// A tensor over memory the caller keeps alive while it is used.
Tensor view_of(float* data, const Shape& shape) {
  return Tensor::borrow(DType::F32, shape, reinterpret_cast<std::byte*>(data), nullptr);
}

std::span<const std::byte> bytes_of(const std::string& text) { return std::as_bytes(std::span(text.data(), text.size())); }

void check_finite(const Parameter& parameter) {
  for (std::int64_t i = 0; i < parameter.numel; ++i)
    if (!std::isfinite(parameter.data[i]))
      throw ValueError(str("parameter ", parameter.name, " holds ", parameter.data[i], " at element ", i));
}

}  // namespace

OutKind inspect_out(const fs::path& out) {
  std::error_code error;
  const auto status = fs::status(out, error);
  if (!fs::exists(status)) return OutKind::absent;
  if (!fs::is_directory(status)) return OutKind::other;
  if (fs::exists(out / kStateFile)) return OutKind::run;
  if (fs::exists(out / "model.safetensors") || fs::exists(out / "config.json")) return OutKind::model;
  for (const auto& entry : fs::directory_iterator(out, error))
    if (entry.path().filename() != kCacheDir) return OutKind::other;
  return OutKind::empty;
}

void save_checkpoint(const fs::path& out, const TrainableGPT2& model, AdamW& adamw, const CheckpointText& text) {
  const auto parameters = model.parameters();
  for (const Parameter& parameter : parameters) check_finite(parameter);

  std::map<std::string, Tensor> weights, moments;
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    const Parameter& parameter = parameters[i];
    weights.emplace(parameter.name, view_of(parameter.data, parameter.shape));
    const Moments m = adamw.moments(i);
    moments.emplace("exp_avg." + parameter.name, view_of(m.m.data(), parameter.shape));
    moments.emplace("exp_avg_sq." + parameter.name, view_of(m.v.data(), parameter.shape));
  }

  StagingDirectory staging(out);
  io::save_safetensors(staging.path() / "model.safetensors", weights, {{"format", "pt"}});
  io::save_safetensors(staging.path() / kOptimizerFile, moments, {{"format", "kael-adamw"}});
  staging.write_file("config.json", bytes_of(text.config_json));
  staging.write_file("vocab.json", bytes_of(text.vocab_json));
  staging.write_file("merges.txt", bytes_of(text.merges_txt));
  staging.write_file(kStateFile, bytes_of(text.state_json));
  const std::string_view carried[] = {kCacheDir};
  staging.commit(carried);
}

void load_optimizer(const fs::path& out, const TrainableGPT2& model, AdamW& adamw) {
  const fs::path path = out / kOptimizerFile;
  io::LoadOptions options;
  options.mmap = false;
  const auto file = io::read_safetensors(path, options);
  const auto parameters = model.parameters();
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    const Parameter& parameter = parameters[i];
    const Moments m = adamw.moments(i);
    for (const auto& [prefix, target] : {std::pair{"exp_avg.", m.m}, std::pair{"exp_avg_sq.", m.v}}) {
      const std::string name = prefix + parameter.name;
      const auto found = file.tensors.find(name);
      if (found == file.tensors.end()) throw ValueError(str("'", path.string(), "' has no tensor ", name));
      const Tensor& tensor = found->second;
      if (tensor.dtype() != DType::F32 || tensor.shape() != parameter.shape)
        throw ValueError(str("'", path.string(), "': ", name, " is ", dtype_name(tensor.dtype()), " ",
                             shape_to_string(tensor.shape()), ", expected F32 ", shape_to_string(parameter.shape)));
      std::copy_n(tensor.data<float>(), parameter.numel, target.data());
    }
  }
}

}  // namespace kael::train

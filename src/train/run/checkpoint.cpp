#include "train/run/checkpoint.hpp"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "kael/core/error.hpp"
#include "kael/io/safetensors.hpp"
#include "train/run/directory_swap.hpp"

namespace kael::train {

namespace fs = std::filesystem;

namespace {

std::span<const std::byte> bytes_of(const std::string& text) { return std::as_bytes(std::span(text.data(), text.size())); }

void check_finite(const NetParameter& parameter) {
  const float* data = parameter.tensor.data<float>();
  for (std::int64_t i = 0; i < parameter.tensor.numel(); ++i)
    if (!std::isfinite(data[i]))
      throw ValueError(str("parameter ", parameter.name, " holds ", data[i], " at element ", i));
}

// Each parameter's index among the optimizer's (its groups reorder them).
std::vector<std::size_t> optimizer_indices(const GptNet& model, const optim::AdamW& adamw) {
  std::vector<std::size_t> out;
  const std::vector<Tensor>& params = adamw.params();
  for (const NetParameter& p : model.parameters()) {
    const auto found = std::find_if(params.begin(), params.end(),
                                    [&](const Tensor& t) { return t.raw_data() == p.tensor.raw_data(); });
    if (found == params.end()) throw Error(str("AdamW does not hold parameter ", p.name));
    out.push_back(static_cast<std::size_t>(found - params.begin()));
  }
  return out;
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

void save_checkpoint(const fs::path& out, GptNet& model, const optim::AdamW& adamw, const CheckpointText& text) {
  const auto& parameters = model.parameters();
  for (const NetParameter& parameter : parameters) check_finite(parameter);

  const optim::StateDict state = adamw.state_dict();
  const std::vector<std::size_t> index = optimizer_indices(model, adamw);
  StagingDirectory staging(out);
  // The weights in the checkpoint's layout, written and their transposed copies freed before the
  // moments are laid out: copies of both at once were 1.5 GB on top of a GPT-2 small run's peak.
  {
    std::map<std::string, Tensor> weights;
    for (const NetParameter& p : parameters) weights.emplace(p.name, GptNet::stored(p, p.tensor));
    io::save_safetensors(staging.path() / "model.safetensors", weights, {{"format", "pt"}});
  }
  {
    std::map<std::string, Tensor> moments;
    for (std::size_t i = 0; i < parameters.size(); ++i) {
      const NetParameter& p = parameters[i];
      for (const char* buffer : {"exp_avg", "exp_avg_sq"}) {
        const auto found = state.find(str("state.", index[i], ".", buffer));
        const Tensor moment =
            found == state.end() ? Tensor::zeros(DType::F32, p.shape) : GptNet::stored(p, found->second);
        moments.emplace(str(buffer, ".", p.name), moment);
      }
    }
    io::save_safetensors(staging.path() / kOptimizerFile, moments, {{"format", "kael-adamw"}});
  }
  staging.write_file("config.json", bytes_of(text.config_json));
  staging.write_file("vocab.json", bytes_of(text.vocab_json));
  staging.write_file("merges.txt", bytes_of(text.merges_txt));
  staging.write_file(kStateFile, bytes_of(text.state_json));
  const std::string_view carried[] = {kCacheDir};
  staging.commit(carried);
}

std::vector<ParameterMoments> zero_moments(const GptNet& model) {
  std::vector<ParameterMoments> out;
  for (const NetParameter& p : model.parameters())
    out.push_back({Tensor::zeros(DType::F32, p.tensor.shape()), Tensor::zeros(DType::F32, p.tensor.shape())});
  return out;
}

std::vector<ParameterMoments> load_moments(const fs::path& out, const GptNet& model) {
  const fs::path path = out / kOptimizerFile;
  io::LoadOptions options;
  options.mmap = false;
  const auto file = io::read_safetensors(path, options);
  std::vector<ParameterMoments> moments = zero_moments(model);
  const auto& parameters = model.parameters();
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    const NetParameter& parameter = parameters[i];
    for (const auto& [prefix, target] :
         {std::pair{"exp_avg.", moments[i].exp_avg}, std::pair{"exp_avg_sq.", moments[i].exp_avg_sq}}) {
      const std::string name = prefix + parameter.name;
      const auto found = file.tensors.find(name);
      if (found == file.tensors.end()) throw ValueError(str("'", path.string(), "' has no tensor ", name));
      const Tensor& tensor = found->second;
      if (tensor.dtype() != DType::F32 || tensor.shape() != parameter.shape)
        throw ValueError(str("'", path.string(), "': ", name, " is ", dtype_name(tensor.dtype()), " ",
                             shape_to_string(tensor.shape()), ", expected F32 ", shape_to_string(parameter.shape)));
      const Tensor dense = tensor.is_contiguous() ? tensor : tensor.packed_copy();
      Tensor into = target;  // a handle on the moment's storage
      GptNet::copy_in(parameter, dense.data<float>(), into.data<float>());
    }
  }
  return moments;
}

void set_adamw_state(optim::AdamW& adamw, const GptNet& model, const std::vector<ParameterMoments>& moments,
                     std::int64_t steps) {
  if (steps <= 0) return;  // torch's state before the first step: none
  optim::StateDict state = adamw.state_dict();
  const std::vector<std::size_t> index = optimizer_indices(model, adamw);
  for (std::size_t i = 0; i < index.size(); ++i) {
    Tensor step = Tensor::empty(DType::I64, {});
    *step.data<std::int64_t>() = steps;
    state[str("state.", index[i], ".step")] = step;
    state[str("state.", index[i], ".exp_avg")] = moments[i].exp_avg;
    state[str("state.", index[i], ".exp_avg_sq")] = moments[i].exp_avg_sq;
  }
  adamw.load_state_dict(state);
}

}  // namespace kael::train

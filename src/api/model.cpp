// kael::Model, the facade of kael.hpp: loading and the whole-sequence calls.
#include "kael/kael.hpp"

namespace kael {

void require_device(std::string_view device) {
  const Device parsed = parse_device(device);  // a device this machine cannot use is an Error naming why
  if (parsed.type != Device::Type::cpu)
    throw Error(str("device ", parsed.str(), ": kael's models (the engine, nn) run on the CPU only so far"));
}

Model Model::load(const std::filesystem::path& dir, const LoadOptions& options) {
  require_device(options.device);
  if (options.threads < 0) throw ValueError(str("threads must be 0 (keep the current setting) or more, got ", options.threads));
  if (options.threads > 0) model::set_num_threads(options.threads);
  model::LoadOptions load;
  load.dtype = options.dtype;
  load.mmap = options.mmap;
  Model m;
  m.tokenizer_ = std::make_shared<const text::Tokenizer>(text::Tokenizer::from_directory(dir));
  m.gpt2_ = std::make_shared<const model::GPT2>(model::GPT2::load(dir, load));
  return m;
}

const model::Config& Model::config() const { return gpt2_->config(); }
const text::Tokenizer& Model::tokenizer() const { return *tokenizer_; }
const model::GPT2& Model::gpt2() const { return *gpt2_; }

std::vector<std::int32_t> Model::tokenize(std::string_view text, bool allow_special) const {
  return tokenizer_->encode(text, allow_special);
}

std::string Model::detokenize(std::span<const std::int32_t> ids) const { return tokenizer_->decode(ids); }

GenerateResult Model::generate(std::string_view prompt, const GenerateOptions& options,
                               const PieceCallback& on_piece) const {
  if (prompt.empty()) throw ValueError("the prompt is empty");
  return generate(std::span<const std::int32_t>(tokenize(prompt)), options, on_piece);
}

GenerateResult Model::generate(std::span<const std::int32_t> prompt_ids, const GenerateOptions& options,
                               const PieceCallback& on_piece) const {
  return generate::generate(*gpt2_, *tokenizer_, prompt_ids, options, on_piece);
}

std::vector<float> Model::logits(std::span<const std::int32_t> ids) const {
  Session s = session();
  const auto last = s.feed(ids);
  return {last.begin(), last.end()};
}

std::vector<float> Model::logits_all(std::span<const std::int32_t> ids) const { return session().feed_all(ids); }

Session Model::session() const { return Session(gpt2_, gpt2_->new_session()); }

}  // namespace kael

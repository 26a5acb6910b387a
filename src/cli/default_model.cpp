// The default model rule of kael generate, logits, bench and serve (docs/behaviour.md, "The bundled model").
#include "cli/default_model.hpp"

#include <cstdio>
#include <system_error>

#include "cli/command.hpp"
#include "kael/core/error.hpp"
#include "kael/io/checksums.hpp"

namespace kael::cli {
namespace fs = std::filesystem;

fs::path bundled_model_dir() {
  std::error_code error;
  const fs::path exe = fs::read_symlink("/proc/self/exe", error);
  // Installed: the path from <prefix>/bin to <prefix>/share/kael/models/NAME (src/CMakeLists.txt).
  const fs::path installed =
      error ? fs::path() : (exe.parent_path() / KAEL_BUNDLED_MODEL_FROM_BINDIR).lexically_normal();
  if (!installed.empty() && fs::is_directory(installed)) return installed;
  const fs::path source = KAEL_BUNDLED_MODEL_SOURCE_DIR;  // a kael run from its build tree
  if (fs::is_directory(source)) return source;
  throw Error(str("the bundled model is missing (looked in '", installed.string(), "' and '", source.string(),
                  "'); pass --model DIR"));
}

namespace {

// `given`, or data/gpt2 when it holds `needed`, else the bundled model; one stderr line names the
// default chosen.
fs::path default_dir(const std::string& given, const char* needed) {
  if (!given.empty()) return given;
  if (fs::is_regular_file(fs::path(kDefaultModelDir) / needed)) {
    std::fprintf(stderr, "model: %s\n", kDefaultModelDir);
    return kDefaultModelDir;
  }
  const fs::path dir = bundled_model_dir();
  std::fprintf(stderr, "model: %s (the bundled %s: %s has no %s; scripts/download_gpt2.sh fetches GPT-2)\n",
               dir.c_str(), KAEL_BUNDLED_MODEL_NAME, kDefaultModelDir, needed);
  return dir;
}

}  // namespace

std::string resolve_model_dir(const std::string& given) {
  const fs::path dir = default_dir(given, "model.safetensors");
  if (fs::exists(dir / "SHA256SUMS")) io::verify_sha256sums(dir);
  return dir.string();
}

std::string resolve_tokenizer_dir(const std::string& given) { return default_dir(given, "vocab.json").string(); }

}  // namespace kael::cli

// consumer MODEL_DIR TOKENS ID,ID,...: greedy generation through kael.hpp two ways, printed as
//   version 0.1.0
//   generate 1 2 3      (Model::generate, temperature 0)
//   session 1 2 3       (a Session stepped by hand, taking the argmax)
// Both stop after TOKENS tokens or at <|endoftext|> (which they include), as `kael generate` does.
#include <algorithm>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "kael/kael.hpp"

namespace {

void print(const char* label, const std::vector<std::int32_t>& ids) {
  std::cout << label;
  for (const std::int32_t id : ids) std::cout << ' ' << id;
  std::cout << '\n';
}

std::vector<std::int32_t> stepped_greedy(const kael::Model& model, const std::vector<std::int32_t>& prompt, int tokens) {
  kael::Session session = model.session();
  std::vector<std::int32_t> out;
  auto logits = session.feed(prompt);
  while (static_cast<int>(out.size()) < tokens) {
    out.push_back(static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
    if (out.back() == kael::text::kEndOfText || static_cast<int>(out.size()) == tokens) break;
    logits = session.feed(out.back());
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: consumer MODEL_DIR TOKENS ID,ID,...\n";
    return 2;
  }
  try {
    const kael::Model model = kael::Model::load(argv[1], {.threads = 1});
    const int tokens = std::stoi(argv[2]);
    std::vector<std::int32_t> prompt;
    std::stringstream ids(argv[3]);
    for (std::string id; std::getline(ids, id, ',');) prompt.push_back(std::stoi(id));

    kael::GenerateOptions options;
    options.max_new_tokens = tokens;
    options.sampling.temperature = 0.0f;  // greedy
    std::cout << "version " << kael::version() << '\n';
    print("generate", model.generate(prompt, options).ids);
    print("session", stepped_greedy(model, prompt, tokens));
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

#include "serve/choices.hpp"

namespace kael::serve {

Json join_choices(std::vector<Json> completions) {
  Json choices = Json::array();
  for (std::size_t i = 0; i < completions.size(); ++i) {
    Json choice = std::move(completions[i]["choices"][0]);
    choice["index"] = i;
    choices.push_back(std::move(choice));
  }
  Json out = std::move(completions.front());
  out["choices"] = std::move(choices);
  return out;
}

}  // namespace kael::serve

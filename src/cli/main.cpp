// The `kael` command line. Only this file prints errors and chooses exit codes.
#include <algorithm>
#include <iostream>
#include <string>

#include "cli/command.hpp"
#include "cli/integer_options.hpp"
#include "kael/core/error.hpp"
#include "kael/model/gpt2.hpp"
#include "kael/version.hpp"

namespace kael::cli {

std::vector<RegisteredCommand>& registry() {
  static std::vector<RegisteredCommand> commands;
  return commands;
}

Registration::Registration(std::string name, SetupFn setup) { registry().push_back({std::move(name), setup}); }

void set_threads_option(int requested) {
  if (const std::string warning = model::threads_cap_warning(requested); !warning.empty())
    std::cerr << warning << "\n";
  model::set_num_threads(requested);
}

}  // namespace kael::cli

int main(int argc, char** argv) {
  using namespace kael::cli;
  CLI::App app{"kael: GPT-2 inference without a framework"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("kael ") + kael::version());

  auto commands = registry();
  std::sort(commands.begin(), commands.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  std::vector<std::pair<CLI::App*, RunFn>> runs;
  for (const auto& command : commands) {
    RunFn run = command.setup(app);
    runs.emplace_back(app.get_subcommand(command.name), std::move(run));
  }
  require_decimal_integers(app);

  // CLI11 would take an unknown first word for a stray argument, and say of a missing one only
  // that a subcommand is required; either way, say which subcommands kael has.
  const auto unknown = [&] {
    return std::none_of(commands.begin(), commands.end(), [&](const auto& c) { return c.name == argv[1]; });
  };
  if (argc == 1 || (argv[1][0] != '-' && unknown())) {
    std::string known;
    for (const auto& command : commands) known += (known.empty() ? "" : ", ") + command.name;
    if (argc == 1)
      std::cerr << "error: no subcommand (kael has: " << known << "; `kael --help` describes them)\n";
    else
      std::cerr << "error: unknown subcommand '" << argv[1] << "' (kael has: " << known
                << "; `kael --help` describes them)\n";
    return 1;
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);  // --help prints and exits 0; a bad option prints and exits non-zero
  }

  try {
    for (auto& [subcommand, run] : runs)
      if (subcommand->parsed()) return run();
    return 1;
  } catch (const kael::Error& e) {
    std::cout.flush();
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cout.flush();
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}

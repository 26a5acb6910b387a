// Decimal integer options (integer_options.hpp).
#include "cli/integer_options.hpp"

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "kael/core/error.hpp"

namespace kael::cli {
namespace {

// "" when `text` is a decimal integer within 64 bits (signed or not), else why not.
std::string check_decimal(const std::string& text, bool is_signed) {
  const std::string range = is_signed ? str("[", INT64_MIN, ", ", INT64_MAX, "]") : str("[0, ", UINT64_MAX, "]");
  const std::size_t digits_from = is_signed && !text.empty() && text[0] == '-' ? 1 : 0;
  const bool decimal = text.size() > digits_from &&
                       text.find_first_not_of("0123456789", digits_from) == std::string::npos &&
                       (text[digits_from] != '0' || text.size() == digits_from + 1);  // no octal, no padding
  if (!decimal) return str("'", text, "' is not a decimal integer in ", range);
  errno = 0;
  if (is_signed) (void)std::strtoll(text.c_str(), nullptr, 10);
  else (void)std::strtoull(text.c_str(), nullptr, 10);
  if (errno == ERANGE) return str(text, " is out of range: expected an integer in ", range);
  return "";
}

}  // namespace

void require_decimal_integers(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    const std::string full = option->get_type_name();  // "INT", or "INT:<a validator's description>"
    const std::string type = full.substr(0, full.find(':'));
    if (type != "INT" && type != "UINT") continue;
    const bool is_signed = type == "INT";
    option->check(CLI::Validator([is_signed](std::string& value) { return check_decimal(value, is_signed); }, ""));
  }
  for (CLI::App* subcommand : app.get_subcommands([](CLI::App*) { return true; })) require_decimal_integers(*subcommand);
}

}  // namespace kael::cli

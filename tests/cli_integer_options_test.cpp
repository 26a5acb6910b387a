// Integer options of the command line (cli/integer_options.hpp): CLI11 alone takes "-1" for
// 2^64-1, a number past 64 bits for the largest one and "010" for eight; with the check each
// is a parse error naming the option, the value and the range.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/integer_options.hpp"

namespace {

struct Parsed {
  std::uint64_t seed = 0;
  std::size_t max_body = 0;
  int threads = 0;
  std::int64_t offset = 0;
  std::optional<std::string> error;  // the parse error's message, if any
};

Parsed parse(std::vector<std::string> args) {
  Parsed out;
  CLI::App app;
  CLI::App* sub = app.add_subcommand("serve");
  sub->add_option("--seed", out.seed);
  sub->add_option("--max-body", out.max_body);
  sub->add_option("--threads", out.threads)->check(CLI::NonNegativeNumber);
  app.add_option("--offset", out.offset);
  kael::cli::require_decimal_integers(app);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them last first
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    out.error = e.what();
  }
  return out;
}

TEST(IntegerOptions, DecimalValuesWithinRangeAreRead) {
  const Parsed p = parse({"--offset", "-5", "serve", "--seed", "18446744073709551615", "--max-body", "0",
                          "--threads", "3"});
  ASSERT_FALSE(p.error) << *p.error;
  EXPECT_EQ(p.seed, UINT64_MAX);
  EXPECT_EQ(p.max_body, 0u);
  EXPECT_EQ(p.threads, 3);
  EXPECT_EQ(p.offset, -5);
}

TEST(IntegerOptions, APastRangeOrNonDecimalValueIsAnErrorNamingTheRange) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"serve", "--seed", "18446744073709551616"},
       "--seed: 18446744073709551616 is out of range: expected an integer in [0, 18446744073709551615]"},
      {{"serve", "--max-body", "-1"}, "--max-body: '-1' is not a decimal integer in [0, 18446744073709551615]"},
      {{"serve", "--seed", "0x10"}, "'0x10' is not a decimal integer"},
      {{"serve", "--seed", "010"}, "'010' is not a decimal integer"},
      {{"serve", "--seed", ""}, "'' is not a decimal integer"},
      {{"serve", "--threads", "1e3"}, "'1e3' is not a decimal integer"},
      {{"--offset", "-9223372036854775809", "serve"},
       "-9223372036854775809 is out of range: expected an integer in [-9223372036854775808, 9223372036854775807]"},
  };
  for (const auto& c : cases) {
    const Parsed p = parse(c.args);
    ASSERT_TRUE(p.error) << c.args[c.args.size() - 1];
    EXPECT_NE(p.error->find(c.message), std::string::npos) << *p.error;
  }
  // The option's own checks still run after this one.
  EXPECT_TRUE(parse({"serve", "--threads", "-1"}).error);
}

}  // namespace

// StopMatcher: stop strings that span pushes are found and never leak, not even in part;
// text that cannot start a stop string is released at once.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kael/core/error.hpp"
#include "kael/generate/stop.hpp"

using namespace kael;
using namespace kael::generate;

namespace {

// Pushes the pieces and returns the concatenated output and whether it stopped.
std::pair<std::string, bool> run(StopMatcher& matcher, const std::vector<std::string>& pieces) {
  std::string out;
  for (const auto& piece : pieces) out += matcher.push(piece);
  if (!matcher.stopped()) out += matcher.flush();
  return {out, matcher.stopped()};
}

}  // namespace

TEST(StopMatcher, NoStopStringsPassesEverythingThrough) {
  StopMatcher matcher;
  EXPECT_EQ(matcher.push("Hello"), "Hello");
  EXPECT_EQ(matcher.push(", world"), ", world");
  EXPECT_EQ(matcher.flush(), "");
  EXPECT_FALSE(matcher.stopped());
}

TEST(StopMatcher, StopWithinOnePiece) {
  StopMatcher matcher({"\n\n"});
  EXPECT_EQ(matcher.push("one\n\ntwo"), "one");
  EXPECT_TRUE(matcher.stopped());
  EXPECT_EQ(matcher.matched(), "\n\n");
  EXPECT_EQ(matcher.push("three"), "");
}

TEST(StopMatcher, StopSpanningPiecesIsHeldBackAndNotLeaked) {
  StopMatcher matcher({"END"});
  EXPECT_EQ(matcher.push("the E"), "the ");  // "E" could start "END"
  EXPECT_EQ(matcher.held(), 1u);
  EXPECT_EQ(matcher.push("N"), "");
  EXPECT_EQ(matcher.push("D and more"), "");
  EXPECT_TRUE(matcher.stopped());
}

TEST(StopMatcher, FalseStartIsReleased) {
  StopMatcher matcher({"END"});
  EXPECT_EQ(matcher.push("an E"), "an ");
  EXPECT_EQ(matcher.push("NO"), "ENO");  // "EN" then "O": not a stop, released in full
  EXPECT_EQ(matcher.push("EN"), "");
  EXPECT_EQ(matcher.flush(), "EN");  // generation ended: held text is emitted
  EXPECT_FALSE(matcher.stopped());
}

TEST(StopMatcher, OverlappingPrefixFindsTheLaterStart) {
  // "aab" contains "ab" starting at the second "a"; the first "a" is released then.
  StopMatcher matcher({"ab"});
  auto [out, stopped] = run(matcher, {"a", "a", "b", "c"});
  EXPECT_EQ(out, "a");
  EXPECT_TRUE(stopped);
}

TEST(StopMatcher, EarliestOfSeveralStopsWins) {
  StopMatcher matcher({"world", "lo, w"});
  auto [out, stopped] = run(matcher, {"Hel", "lo, ", "world"});
  EXPECT_EQ(out, "Hel");
  EXPECT_EQ(matcher.matched(), "lo, w");
  EXPECT_TRUE(stopped);
}

TEST(StopMatcher, EveryPieceSplitGivesTheSameText) {
  // Whatever the token boundaries, the emitted text is everything before the stop string.
  const std::string text = "alpha beta ###gamma delta";
  for (std::size_t cut1 = 0; cut1 <= text.size(); ++cut1) {
    for (std::size_t cut2 = cut1; cut2 <= text.size(); ++cut2) {
      StopMatcher matcher({"###", "#!"});
      auto [out, stopped] =
          run(matcher, {text.substr(0, cut1), text.substr(cut1, cut2 - cut1), text.substr(cut2)});
      ASSERT_EQ(out, "alpha beta ") << cut1 << " " << cut2;
      ASSERT_TRUE(stopped);
    }
  }
}

TEST(StopMatcher, MultibyteStopString) {
  StopMatcher matcher({"é!"});
  EXPECT_EQ(matcher.push("caf"), "caf");
  EXPECT_EQ(matcher.push("é"), "");
  EXPECT_EQ(matcher.push("?"), "é?");
  EXPECT_EQ(matcher.push("é!"), "");
  EXPECT_TRUE(matcher.stopped());
}

TEST(StopMatcher, EmptyStopStringIsAValueError) {
  EXPECT_THROW(StopMatcher({"ok", ""}), ValueError);
}

// Case 7 of the hostile-client issue: a client sees invalid UTF-8 as U+FFFD (one per maximal
// invalid subpart), so a stop string holding U+FFFD matches there, and the text before it
// keeps its exact bytes.
TEST(StopMatcher, ReplacementCharacterMatchesInvalidBytesAsAClientShowsThem) {
  const std::string fffd = "\xEF\xBF\xBD";
  {
    StopMatcher matcher({"a" + fffd + "b"});
    EXPECT_EQ(run(matcher, {"x\xC3", "a\x80", "b tail"}), std::make_pair(std::string("x\xC3"), true));
  }
  {
    // "\xE2\x82" is one maximal subpart (one U+FFFD), held back across pushes as a prefix.
    StopMatcher matcher({fffd + "b"});
    EXPECT_EQ(matcher.push("x\xE2\x82"), "x");
    EXPECT_EQ(matcher.push("b"), "");
    EXPECT_TRUE(matcher.stopped());
  }
  {
    // Two invalid bytes are two U+FFFD: one replacement character does not match both.
    StopMatcher matcher({fffd + "b"});
    EXPECT_EQ(run(matcher, {"\x80\x80", "c"}), std::make_pair(std::string("\x80\x80" "c"), false));
    StopMatcher pair({fffd + fffd + "c"});
    EXPECT_EQ(run(pair, {"z\x80\x80", "c"}), std::make_pair(std::string("z"), true));
  }
  {
    // A real U+FFFD in the text matches too, and valid text is untouched.
    StopMatcher matcher({fffd});
    EXPECT_EQ(run(matcher, {"ok \xE2\x82\xAC ", fffd, "!"}), std::make_pair(std::string("ok \xE2\x82\xAC "), true));
  }
}

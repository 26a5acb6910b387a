#!/usr/bin/env python3
"""Generates src/text/unicode_tables.cpp: the code point ranges of \\p{L}, \\p{N} and \\s that
kael's GPT-2 pre-splitter uses, pinned to one Unicode version.

Why Unicode 16.0.0: kael must give the ids of tiktoken's `gpt2` encoding, whose pattern runs in
Rust's regex engine with that crate's own Unicode tables. Probing tiktoken 0.14 on every code
point (see `tiktoken_classes`) gives exactly the letters and numbers of Unicode 16.0.0: 4,924
letters and 80 numbers more than 15.0 (U+1C89, U+A7CB, U+105C0.., U+10D40.., U+116D0..), and
4,644 letters and 13 numbers fewer than 17.0. Debian's unicode-data (15.0) and Python's own
unicodedata (14.0) are too old, so the categories come from the `unicodedata2` package pinned
at 16.0.0 (pip install unicodedata2==16.0.0).

  \\p{L} = Lu | Ll | Lt | Lm | Lo      \\p{N} = Nd | Nl | No      \\s = White_Space

White_Space is not in unicodedata2; its 25 code points (PropList.txt, unchanged since Unicode
6.3 dropped U+180E) are listed below and checked against a local PropList.txt when there is one.

Usage:
  scripts/gen_unicode_tables.py            # writes src/text/unicode_tables.cpp
  scripts/gen_unicode_tables.py --check    # also compares the tables with tiktoken's regex engine
Tests import `parse_generated` and `tiktoken_classes` from here.
"""
import argparse
import pathlib
import re
import sys

UNICODE_VERSION = "16.0.0"
ROOT = pathlib.Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "src" / "text" / "unicode_tables.cpp"
MAX_CODE_POINT = 0x10FFFF

# White_Space from PropList-16.0.0.txt.
WHITE_SPACE = [(0x0009, 0x000D), (0x0020, 0x0020), (0x0085, 0x0085), (0x00A0, 0x00A0),
               (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029), (0x202F, 0x202F),
               (0x205F, 0x205F), (0x3000, 0x3000)]

TABLES = [("kLetterRanges", "letters (general category L*)"),
          ("kNumberRanges", "numbers (general category N*)"),
          ("kWhiteSpaceRanges", "White_Space")]


def to_ranges(code_points):
    """Sorted code points -> list of inclusive (first, last) ranges."""
    ranges = []
    for cp in code_points:
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1] = (ranges[-1][0], cp)
        else:
            ranges.append((cp, cp))
    return ranges


def ucd_classes():
    """{table name: ranges} from unicodedata2 at the pinned version."""
    import unicodedata2

    if unicodedata2.unidata_version != UNICODE_VERSION:
        sys.exit(f"need unicodedata2 {UNICODE_VERSION}, found {unicodedata2.unidata_version}: "
                 f"pip install unicodedata2=={UNICODE_VERSION}")
    letters, numbers = [], []
    for cp in range(MAX_CODE_POINT + 1):
        category = unicodedata2.category(chr(cp))
        if category[0] == "L":
            letters.append(cp)
        elif category[0] == "N":
            numbers.append(cp)
    check_white_space_with_proplist()
    return {"kLetterRanges": to_ranges(letters), "kNumberRanges": to_ranges(numbers),
            "kWhiteSpaceRanges": WHITE_SPACE}


def check_white_space_with_proplist(path=pathlib.Path("/usr/share/unicode/PropList.txt")):
    if not path.exists():
        return
    found = []
    for line in path.read_text(encoding="utf-8").splitlines():
        fields = line.split("#")[0].split(";")
        if len(fields) == 2 and fields[1].strip() == "White_Space":
            first, _, last = fields[0].strip().partition("..")
            found.append((int(first, 16), int(last or first, 16)))
    merged = to_ranges([cp for first, last in found for cp in range(first, last + 1)])
    if merged != WHITE_SPACE:
        sys.exit(f"White_Space in {path} differs from the list in this script: {merged}")


def tiktoken_classes():
    """{table name: ranges} as tiktoken's regex engine sees them. A pattern of one class with a
    vocabulary of the 256 bytes encodes exactly the characters that match: tiktoken skips text
    its pattern does not match, so decoding the ids gives back the members of the class."""
    import tiktoken

    ranks = {bytes([b]): b for b in range(256)}
    every_char = "".join(chr(cp) for cp in range(MAX_CODE_POINT + 1) if not 0xD800 <= cp <= 0xDFFF)
    result = {}
    for name, pattern in [("kLetterRanges", r"\p{L}"), ("kNumberRanges", r"\p{N}"), ("kWhiteSpaceRanges", r"\s")]:
        encoding = tiktoken.Encoding(name=f"probe-{name}", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
        members = bytes(encoding.encode_ordinary(every_char)).decode("utf-8")
        result[name] = to_ranges(sorted(ord(ch) for ch in members))
    return result


def parse_generated(path=OUTPUT):
    """{"version": str, table name: ranges} read back from a generated file."""
    text = pathlib.Path(path).read_text(encoding="utf-8")
    result = {"version": re.search(r'kUnicodeVersion\[\] = "([0-9.]+)"', text).group(1)}
    for name, _ in TABLES:
        body = re.search(name + r"\[\] = \{(.*?)\};", text, re.S).group(1)
        result[name] = [(int(a, 16), int(b, 16)) for a, b in re.findall(r"\{0x([0-9A-F]+), 0x([0-9A-F]+)\}", body)]
    return result


def render(classes):
    lines = [
        f"// Generated by scripts/gen_unicode_tables.py from Unicode {UNICODE_VERSION} (Python package",
        f"// unicodedata2=={UNICODE_VERSION}); do not edit. {UNICODE_VERSION} is the version whose classes equal",
        "// those of tiktoken's regex engine (see the script). Inclusive ranges, sorted, disjoint.",
        '#include "text/unicode_tables.hpp"',
        "",
        "namespace kael::text::unicode {",
        "",
        f'const char kUnicodeVersion[] = "{UNICODE_VERSION}";',
    ]
    for name, what in TABLES:
        ranges = classes[name]
        lines += ["", f"// {what}: {len(ranges)} ranges, {sum(b - a + 1 for a, b in ranges)} code points.",
                  f"const CodePointRange {name}[] = {{"]
        for i in range(0, len(ranges), 4):
            lines.append("    " + " ".join(f"{{0x{a:06X}, 0x{b:06X}}}," for a, b in ranges[i:i + 4]))
        lines += ["};", f"const std::size_t {name[:-6]}RangeCount = sizeof({name}) / sizeof({name}[0]);"]
    lines += ["", "}  // namespace kael::text::unicode", ""]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare with tiktoken's regex engine too")
    parser.add_argument("--output", type=pathlib.Path, default=OUTPUT)
    args = parser.parse_args()
    classes = ucd_classes()
    args.output.write_text(render(classes), encoding="utf-8")
    print(f"wrote {args.output} (Unicode {UNICODE_VERSION})")
    if args.check:
        probe = tiktoken_classes()
        for name, _ in TABLES:
            if probe[name] != classes[name]:
                sys.exit(f"{name}: tiktoken's classes differ from Unicode {UNICODE_VERSION}")
        print("tiktoken's regex engine agrees on letters, numbers and white space")


if __name__ == "__main__":
    main()

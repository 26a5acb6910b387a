#!/usr/bin/env python3
"""Writes the King James Bible as plain text, one file per book, for training the bundled model.

The text comes from Debian's bible-kjv package (the `bible` program and its bible-kjv-text data,
version 4.38): the King James Version of 1611, whose copyright has expired (see
models/kael-tiny-kjv/LICENSE). Each book becomes DIR/NN-name.txt: its name on the first line, then
one verse a line without its number, and a blank line between chapters. The output is the same
bytes on every run; its SHA-256 over all files is checked against EXPECTED_SHA256 so that a rebuild
trains on exactly the text the bundled model was trained on.

    scripts/kjv_text.py DIR          # needs: apt-get install bible-kjv
"""

import hashlib
import pathlib
import re
import shutil
import subprocess
import sys

# Of the concatenated files in path order (as `kael train --data DIR` reads them).
EXPECTED_SHA256 = "5b7bc4b629e561f47c6a6b762e7831d8181aaa9653a4d08917e6e38b9d86ae06"

# A chapter heading ("Genesis 1", "1 Samuel 3", "Song of Solomon 2") and a verse ("  12 text").
HEADING = re.compile(r"^(?P<book>\S.*?) (?P<chapter>\d+)$")
VERSE = re.compile(r"^ +\d+ (?P<text>.+)$")


def bible_text() -> str:
    if shutil.which("bible") is None:
        sys.exit("error: the `bible` program is missing (apt-get install bible-kjv)")
    # A huge line width keeps each verse on one line.
    result = subprocess.run(["bible", "-l100000", "Genesis 1:1-Revelation 22:21"],
                            check=True, capture_output=True, text=True, encoding="ascii")
    return result.stdout


def books(text: str) -> list[tuple[str, list[list[str]]]]:
    """[(book name, [chapter: [verse text]])] in canonical order."""
    out: list[tuple[str, list[list[str]]]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if heading := HEADING.match(line):
            book = heading["book"]
            if not out or out[-1][0] != book:
                out.append((book, []))
            out[-1][1].append([])
        elif verse := VERSE.match(line):
            out[-1][1][-1].append(verse["text"].strip())
        else:
            sys.exit(f"error: unexpected line from `bible`: {line!r}")
    return out


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} DIR")
    out_dir = pathlib.Path(sys.argv[1])
    out_dir.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    parsed = books(bible_text())
    if len(parsed) != 66:
        sys.exit(f"error: expected the 66 books of the Bible, got {len(parsed)}")
    for number, (book, chapters) in enumerate(parsed, start=1):
        body = "\n\n".join("\n".join(verses) for verses in chapters)
        content = f"{book}\n\n{body}\n".encode("ascii")
        name = f"{number:02d}-{book.lower().replace(' ', '-')}.txt"
        (out_dir / name).write_bytes(content)
        digest.update(content)
    actual = digest.hexdigest()
    if actual != EXPECTED_SHA256:
        sys.exit(f"error: the text's SHA-256 is {actual}, expected {EXPECTED_SHA256} "
                 "(a different bible-kjv version?)")
    print(f"wrote {len(parsed)} books to {out_dir} (SHA-256 {actual})")


if __name__ == "__main__":
    main()

"""Every hand-made file of tests/io_malformed_test.cpp (the malformed cases and the controls)
through both kael and the reference `safetensors` package: the two must give the same verdict,
accept or refuse, except where kael is stricter on purpose (KAEL_STRICTER, each with its reason).

The C++ test writes the files and the verdict it checked kael against (KAEL_CONFORMANCE_DIR);
kael's verdict here comes from `kael inspect`, which validates the whole file."""
import os
import pathlib
import subprocess

import pytest
from safetensors import safe_open

# Files the reference reader loads and kael refuses, and why kael does.
KAEL_STRICTER = {
    "DuplicateTensor": "the reference keeps the last of two entries with one name; such a file means two things",
    "EntryArray": "the reference reads an entry written as a JSON array [dtype, shape, offsets]; the format says object",
    "UnknownField": "the reference ignores an unknown field in an entry; kael refuses what it cannot account for",
    "UnsupportedDtypeIsATypeError": "kael has no float8 types (it refuses with a TypeError naming the dtype)",
    "InvalidBoolBytesAreRejected": "the reference never reads BOOL bytes; a byte other than 0 or 1 is not a bool in C++ or numpy",
}


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    """{name: (path, verdict the C++ test expects of kael)} as the C++ test wrote them."""
    binary = pathlib.Path(os.environ.get("KAEL_BINARY", pathlib.Path(__file__).resolve().parents[2] / "build" / "kael"))
    binary = binary.parent / "tests" / "io_malformed_test"
    if not binary.exists():
        pytest.fail(f"{binary} not found; build the C++ tests first (scripts/test.sh does)")
    directory = tmp_path_factory.mktemp("conformance")
    result = subprocess.run([str(binary), "--gtest_filter=MalformedFile.WritesEveryCaseForTheReference"],
                            env={**os.environ, "KAEL_CONFORMANCE_DIR": str(directory)}, capture_output=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout.decode(errors="replace")
    table = {}
    for line in (directory / "verdicts.txt").read_text().splitlines():
        name, verdict = line.split()
        table[name] = (directory / f"{name}.safetensors", verdict)
    return table


def reference_verdict(path):
    """accept when the reference opens the file and reads every tensor, else refuse."""
    try:
        with safe_open(str(path), framework="pt") as f:
            for name in f.keys():
                f.get_tensor(name)
    except Exception:  # the reference raises SafetensorError, and others for framing it cannot read
        return "refuse"
    return "accept"


def test_the_table_holds_both_verdicts_and_the_known_differences(cases):
    verdicts = [verdict for _, verdict in cases.values()]
    assert verdicts.count("refuse") >= 60 and verdicts.count("accept") >= 5
    assert set(KAEL_STRICTER) <= set(cases), set(KAEL_STRICTER) - set(cases)


def test_kael_and_the_reference_agree_on_every_case(cases, kael):
    disagreements = []
    for name, (path, expected) in sorted(cases.items()):
        ours = "accept" if kael("inspect", path, check=False).returncode == 0 else "refuse"
        assert ours == expected, f"{name}: kael inspect says {ours}, the C++ test expects {expected}"
        theirs = reference_verdict(path)
        if name in KAEL_STRICTER:
            # The difference is still real: otherwise the entry has gone stale.
            if (ours, theirs) != ("refuse", "accept"):
                disagreements.append(f"{name}: listed as stricter, but kael {ours}s and the reference {theirs}s")
        elif ours != theirs:
            disagreements.append(f"{name}: kael {ours}s, the reference {theirs}s")
    assert not disagreements, "\n".join(disagreements)

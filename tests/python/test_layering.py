"""The CLI and the Python extension (outside the library) and the server layer (a library layer
that stands on the others' public API) include only kael's public headers (include/kael/...)
and their own: a library-private header such as kernels/ or model/ internals would tie them to
details the library is free to change."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)

# folder -> the quoted include prefixes its files may use ("" = a file beside them).
ALLOWED = {
    "src/cli": ("kael/", "cli/"),
    "src/serve": ("kael/", "serve/"),
    "python/src": ("kael/", ""),
}


def test_code_outside_the_library_includes_only_public_headers():
    wrong = []
    for folder, prefixes in ALLOWED.items():
        files = sorted((ROOT / folder).glob("*.[ch]pp"))
        assert files, folder
        for path in files:
            for header in INCLUDE.findall(path.read_text()):
                own = "/" not in header and (path.parent / header).exists()
                if not (own and "" in prefixes) and not any(p and header.startswith(p) for p in prefixes):
                    wrong.append(f"{path.relative_to(ROOT)}: #include \"{header}\"")
    assert not wrong, "\n".join(wrong)

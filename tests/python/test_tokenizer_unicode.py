"""The generated Unicode tables equal the classes tiktoken's regex engine uses, on every code
point (the C++ tests check that the fast lookup equals these tables)."""
import gen_unicode_tables as gen


def test_generated_tables_equal_tiktoken_classes():
    generated = gen.parse_generated()
    assert generated["version"] == gen.UNICODE_VERSION
    probe = gen.tiktoken_classes()
    for name, _ in gen.TABLES:
        assert generated[name] == probe[name], name

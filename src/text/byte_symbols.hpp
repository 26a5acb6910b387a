// GPT-2's byte-to-symbol table: vocab.json and merges.txt spell every byte as a printable
// character. 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF stand for themselves; the other 68 bytes map,
// in byte order, to U+0100 upward (space is U+0120 "Ġ", newline U+010A "Ċ").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kael::text {

// The symbol (a code point) that stands for `byte`.
char32_t byte_to_symbol(std::uint8_t byte);
// The byte that `symbol` stands for, or nullopt when it stands for none.
std::optional<std::uint8_t> symbol_to_byte(char32_t symbol);
// The raw bytes of a token spelled in symbols (UTF-8), or nullopt when the text is not valid
// UTF-8 or holds a character that is not a byte symbol.
std::optional<std::string> symbols_to_bytes(std::string_view symbols);
// The symbol spelling (UTF-8) of raw bytes.
std::string bytes_to_symbols(std::string_view bytes);

}  // namespace kael::text

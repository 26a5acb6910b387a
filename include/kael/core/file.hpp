// Opening the files kael reads (checkpoints, vocabularies, configs, data) so that nothing but a
// regular file is accepted and nothing blocks: a FIFO, socket or device given by mistake (or
// malice) is refused at once, where a plain open() of a FIFO would wait forever for a writer.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace kael {

// A read-only descriptor (close-on-exec) for the regular file at `path`. `what` names it in
// errors, which say whether it was missing ("<what> not found: <path>"), unreadable, or not a
// regular file (and what it is instead: a directory, a FIFO, ...). Throws Error.
int open_regular_file(const std::filesystem::path& path, std::string_view what);

// The whole content of the regular file at `path` (open_regular_file's rules and errors), which
// must hold at most `max_bytes`: each caller's cap fits what it reads (a key file is small, a
// training text large), so no file, growing or huge, is read without bound. Error
// "<what> '<path>' is larger than the limit of <max_bytes> bytes" past it, before reading when
// its size says so.
std::string read_regular_file(const std::filesystem::path& path, std::string_view what, std::uint64_t max_bytes);

}  // namespace kael

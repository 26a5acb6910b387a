// Opening the files kael reads (checkpoints, vocabularies, configs, data) so that nothing but a
// regular file is accepted and nothing blocks: a FIFO, socket or device given by mistake (or
// malice) is refused at once, where a plain open() of a FIFO would wait forever for a writer.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace kael {

// A read-only descriptor (close-on-exec) for the regular file at `path`. `what` names it in
// errors, which say whether it was missing ("<what> not found: <path>"), unreadable, or not a
// regular file (and what it is instead: a directory, a FIFO, ...). Throws Error.
int open_regular_file(const std::filesystem::path& path, std::string_view what);

// The whole content of the regular file at `path` (open_regular_file's rules and errors).
std::string read_regular_file(const std::filesystem::path& path, std::string_view what);

}  // namespace kael

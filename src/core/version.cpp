#include "kael/version.hpp"

namespace kael {

const char* version() { return KAEL_VERSION_STRING; }

}  // namespace kael

#include "latgov/text_file.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace latgov {

Result<std::string> read_text_file(const std::filesystem::path& path) {
    std::error_code ignored; // ifstream opens a directory without complaint
    if (std::filesystem::is_directory(path, ignored))
        return make_error("Failed to read " + path.string() + ": " + std::strerror(EISDIR));
    std::ifstream in(path, std::ios::binary);
    if (!in)
        return make_error("Failed to read " + path.string() + ": " + std::strerror(errno));
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad())
        return make_error("Failed to read " + path.string() + ": " + std::strerror(errno));
    return text.str();
}

} // namespace latgov

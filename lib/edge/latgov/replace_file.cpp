#include "latgov/replace_file.hpp"

#include "latgov/runtime_dir.hpp"

namespace latgov {

Result<void> replace_file(const std::filesystem::path& path, std::string_view text) {
    return write_file_atomic(path, text, 0644);
}

} // namespace latgov

#include "latgov/calibration_file.hpp"

#include "latgov/runtime_dir.hpp"

#include <system_error>

namespace latgov {

Result<std::optional<Calibration>> load_calibration(const std::filesystem::path& path) {
    auto text = read_file_nofollow(path);
    if (!text)
        return text.error();
    if (!*text)
        return std::optional<Calibration>{};
    auto parsed = parse_calibration_file(**text, path.string());
    if (!parsed)
        return parsed.error();
    return std::optional<Calibration>(std::move(*parsed));
}

Result<void> save_calibration(const std::filesystem::path& path, const Calibration& calibration) {
    std::error_code ec;
    if (path.has_parent_path())
        std::filesystem::create_directories(path.parent_path(), ec);
    return write_file_atomic(path, format_calibration(calibration), 0644, Durability::power_loss);
}

} // namespace latgov

#include "latgov/config_file.hpp"

#include "latgov/text_file.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace latgov {

namespace fs = std::filesystem;

namespace {

// `<dir>/latgov.d/*.toml`, in name order; none if the directory is missing.
Result<std::vector<fs::path>> drop_ins(const fs::path& dir) {
    std::vector<fs::path> files;
    std::error_code error;
    if (!fs::is_directory(dir, error))
        return files;
    for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
        std::error_code unreadable; // a dangling link is not a file: skipped
        if (it->path().extension() == ".toml" && it->is_regular_file(unreadable))
            files.push_back(it->path());
    }
    if (error)
        return make_error("Failed to list " + dir.string() + ": " + error.message());
    std::sort(files.begin(), files.end());
    return files;
}

} // namespace

Result<Config> load_config(const fs::path& path, bool required) {
    std::vector<fs::path> files;
    std::error_code error;
    if (fs::exists(path, error))
        files.push_back(path);
    else if (error)
        return make_error("Failed to read " + path.string() + ": " + error.message());
    else if (required)
        return make_error("Failed to read " + path.string() + ": " + std::strerror(ENOENT));
    auto more = drop_ins(path.parent_path() / "latgov.d");
    if (!more)
        return more.error();
    files.insert(files.end(), more->begin(), more->end());

    std::vector<ConfigText> layers;
    for (const auto& file : files) {
        auto text = read_text_file(file);
        if (!text)
            return text.error();
        layers.push_back({std::move(*text), file});
    }
    return parse_config_layers(layers);
}

} // namespace latgov

#include "latgov/snapshot.hpp"

#include "latgov/host_facts.hpp"
#include "latgov/status.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <cstring>
#include <memory>
#include <string>

namespace latgov {

namespace {

// libarchive's message, with the system's reason when it has one and the
// message does not already say it ("Failed to open '/x/y.tar.gz': No such
// file or directory").
std::string archive_reason(archive* ar) {
    const char* what = archive_error_string(ar);
    std::string reason = what ? what : "unknown error";
    if (const int err = archive_errno(ar); err > 0) {
        const std::string text = std::strerror(err);
        if (reason.find(text) == std::string::npos)
            reason += ": " + text;
    }
    return reason;
}

} // namespace

void capture_doctor_files(const SysRoot& root, std::string_view runtime_dir) {
    for (auto path : host_fact_files)
        (void)root.read(path);
    for (auto path : host_fact_dirs)
        (void)root.exists(path);
    (void)root.read(std::string(runtime_dir) + "/" + std::string(status_file_name));
}

Result<void> write_snapshot(const CaptureLog& log, const std::filesystem::path& output) {
    std::unique_ptr<archive, decltype(&archive_write_free)> ar(archive_write_new(),
                                                               archive_write_free);
    archive_write_set_format_pax_restricted(ar.get());
    archive_write_add_filter_gzip(ar.get());
    if (archive_write_open_filename(ar.get(), output.c_str()) != ARCHIVE_OK)
        return make_error("Failed to create " + output.string() + ": " + archive_reason(ar.get()));
    std::unique_ptr<archive_entry, decltype(&archive_entry_free)> entry(archive_entry_new(),
                                                                        archive_entry_free);
    for (const auto& [path, captured] : log.entries()) {
        archive_entry_clear(entry.get());
        archive_entry_set_pathname(entry.get(), path.substr(1).c_str()); // relative to the root
        archive_entry_set_mtime(entry.get(), 0, 0);                      // reproducible archives
        switch (captured.kind) {
        case CapturedEntry::Kind::directory:
            archive_entry_set_filetype(entry.get(), AE_IFDIR);
            archive_entry_set_perm(entry.get(), 0755);
            break;
        case CapturedEntry::Kind::symlink:
            archive_entry_set_filetype(entry.get(), AE_IFLNK);
            archive_entry_set_perm(entry.get(), 0777);
            archive_entry_set_symlink(entry.get(), captured.content.c_str());
            break;
        case CapturedEntry::Kind::file:
            archive_entry_set_filetype(entry.get(), AE_IFREG);
            archive_entry_set_perm(entry.get(), 0644);
            archive_entry_set_size(entry.get(), static_cast<la_int64_t>(captured.content.size()));
            break;
        }
        if (archive_write_header(ar.get(), entry.get()) != ARCHIVE_OK)
            return make_error("Failed to write " + path + " to " + output.string() + ": " +
                              archive_reason(ar.get()));
        if (captured.kind == CapturedEntry::Kind::file &&
            archive_write_data(ar.get(), captured.content.data(), captured.content.size()) < 0)
            return make_error("Failed to write " + path + " to " + output.string() + ": " +
                              archive_reason(ar.get()));
    }
    if (archive_write_close(ar.get()) != ARCHIVE_OK)
        return make_error("Failed to finish " + output.string() + ": " + archive_reason(ar.get()));
    return {};
}

} // namespace latgov

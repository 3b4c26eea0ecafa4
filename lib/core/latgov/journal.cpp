#include "latgov/journal.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>

namespace latgov {

bool at_least_as_strict(LatencyLimit a, LatencyLimit b) {
    if (!a)
        return !b;
    return !b || *a <= *b;
}

bool stricter(LatencyLimit a, LatencyLimit b) {
    return !at_least_as_strict(b, a);
}

bool JournalEntry::latgov_may_have_written(LatencyLimit value) const {
    return value == written || std::find(earlier.begin(), earlier.end(), value) != earlier.end();
}

std::string padded_record(const std::string& line) {
    std::string out = line;
    out.resize(journal_record_size - 1, ' ');
    out += '\n';
    return out;
}

std::string format_journal_entry(const JournalEntry& e) {
    std::string out = "cpu " + std::to_string(e.cpu) + " original " +
                      format_resume_latency(e.original) + " written " +
                      format_resume_latency(e.written);
    if (!e.earlier.empty()) {
        out += " earlier";
        for (const auto& value : e.earlier)
            out += " " + format_resume_latency(value);
    }
    if (e.released)
        out += " released";
    return out;
}

namespace {

// A root is a path, which may hold any byte but NUL: in the header each
// byte that is not printable ASCII, a space or '%' is written as "%XX", so
// that the line ends where it should and the record padding that follows
// the header's last line is not taken for a part of it.
std::string encode_root(std::string_view root) {
    static constexpr char hex[] = "0123456789ABCDEF";
    std::string out;
    for (const char ch : root) {
        const auto byte = static_cast<unsigned char>(ch);
        if (byte > 0x20 && byte < 0x7f && byte != '%') {
            out += ch;
        } else {
            out += '%';
            out += hex[byte >> 4];
            out += hex[byte & 0xf];
        }
    }
    return out;
}

// The root a header line names; a malformed escape leaves the text as it
// is, which names no root anyone has, so the journal is refused, not taken.
std::string decode_root(std::string_view text) {
    auto digit = [](char c) -> int {
        if (c >= '0' && c <= '9')
            return c - '0';
        if (c >= 'A' && c <= 'F')
            return c - 'A' + 10;
        return -1;
    };
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '%' && i + 2 < text.size() && digit(text[i + 1]) >= 0 &&
            digit(text[i + 2]) >= 0) {
            out += static_cast<char>(digit(text[i + 1]) * 16 + digit(text[i + 2]));
            i += 2;
        } else {
            out += text[i];
        }
    }
    return out;
}

} // namespace

std::string journal_header_for(const JournalOrigin& origin) {
    std::string out(journal_header);
    if (!origin.boot_id.empty())
        out += std::string(journal_boot_prefix) + origin.boot_id + "\n";
    if (!origin.root.empty())
        out += std::string(journal_root_prefix) + encode_root(origin.root) + "\n";
    return out;
}

std::string format_journal(const std::vector<JournalEntry>& entries,
                           const std::vector<std::string>& kept_lines,
                           const JournalOrigin& origin) {
    std::string out = journal_header_for(origin);
    for (const auto& line : kept_lines)
        out += line + "\n";
    for (const auto& e : entries)
        out += format_journal_entry(e) + "\n";
    return out;
}

JournalText parse_journal(std::string_view text) {
    JournalText out;
    int number = 0;
    for (auto line : split(text, '\n')) {
        ++number;
        const auto content = trim(line);
        if (content.starts_with(journal_boot_prefix) && out.boot_id.empty())
            out.boot_id = std::string(trim(content.substr(journal_boot_prefix.size())));
        if (content.starts_with(journal_root_prefix) && out.root.empty())
            out.root = decode_root(trim(content.substr(journal_root_prefix.size())));
        if (content.empty() || content.front() == '#')
            continue;
        auto fields = words(content);
        JournalEntry e;
        e.released = fields.size() > 6 && fields.back() == "released";
        if (e.released)
            fields.pop_back();
        bool good = fields.size() >= 6 && fields[0] == "cpu" && fields[2] == "original" &&
                    fields[4] == "written" &&
                    (fields.size() == 6 || (fields[6] == "earlier" && fields.size() > 7 &&
                                            fields.size() <= 7 + journal_max_earlier));
        if (good) {
            auto cpu = parse_u64(fields[1]);
            auto original = parse_resume_latency(fields[3]);
            auto written = parse_resume_latency(fields[5]);
            good = cpu && *cpu <= static_cast<std::uint64_t>(std::numeric_limits<int>::max()) &&
                   original && written;
            if (good) {
                e.cpu = static_cast<int>(*cpu);
                e.original = *original;
                e.written = *written;
            }
            for (size_t i = 7; good && i < fields.size(); ++i) {
                auto value = parse_resume_latency(fields[i]);
                good = static_cast<bool>(value);
                if (good)
                    e.earlier.push_back(*value);
            }
        }
        if (!good) {
            out.bad_lines.emplace_back(content);
            out.errors.push_back(
                "line " + std::to_string(number) +
                ": expected \"cpu N original V written V [earlier V...] [released]\", "
                "got \"" +
                std::string(content) + "\"");
            continue;
        }
        out.entries.push_back(std::move(e));
    }
    return out;
}

RestoreAction restore_action(const JournalEntry& entry, LatencyLimit current) {
    if (current == entry.original)
        return RestoreAction::none;
    return !entry.released && entry.latgov_may_have_written(current) ? RestoreAction::write_original
                                                                     : RestoreAction::leave_theirs;
}

} // namespace latgov

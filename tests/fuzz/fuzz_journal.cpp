// The journal parser: total on any bytes, and what it parses formats back to
// the same entries.
#include "latgov/journal.hpp"

#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const auto parsed = latgov::parse_journal(text);
    const auto again = latgov::parse_journal(latgov::format_journal(parsed.entries));
    if (again.entries.size() != parsed.entries.size() || !again.bad_lines.empty())
        std::abort();
    for (size_t i = 0; i < parsed.entries.size(); ++i)
        if (latgov::format_journal_entry(again.entries[i]) !=
            latgov::format_journal_entry(parsed.entries[i]))
            std::abort();
    return 0;
}

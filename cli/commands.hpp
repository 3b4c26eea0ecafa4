// The commands of `latgov`, one file each; main.cpp parses the global
// options and dispatches.
#pragma once

#include "latgov/result.hpp"

#include <filesystem>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace latgov::cli {

struct Args {
    std::string sysroot = "/";
    std::string command;
    std::vector<std::string> rest; // the command's own options
};

// Prints `text` on standard output with its control bytes made visible
// (terminal_safe): every text the commands print passes through here or
// fail(), JSON aside (its strings are escaped).
void print_text(std::string_view text);
// Prints "latgov: <message>" and returns the exit status of a failure (1).
int fail(const std::string& message);
// fail() for standard output that could not be written (errno `error`):
// said once, here, not again when latgov ends.
int output_failed(int error);
// Prints the message and the usage text (of the command being run, once
// there is one), returns the exit status of a usage error (2).
int usage_error(const std::string& message);
// The usage error for `option` of `command` that it does not take, or one
// of `with_value` given last, without its value ("explain: --config needs a
// value").
int option_error(std::string_view command, const std::string& option,
                 std::initializer_list<std::string_view> with_value);
// latgovd's status file in `runtime_dir`; the error says why not (missing:
// latgovd is not running; or not JSON).
Result<nlohmann::json> load_status(const std::filesystem::path& runtime_dir);
// The same, null for either error (a report that goes on without it).
nlohmann::json read_status(const std::filesystem::path& runtime_dir);

int topology(const Args& args);
int snapshot(const Args& args);
int status(const Args& args);
int calibrate(const Args& args);
int doctor(const Args& args);
int explain(const Args& args);

} // namespace latgov::cli

// The commands of `latgov`, one file each; main.cpp parses the global
// options and dispatches.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace latgov::cli {

struct Args {
    std::string sysroot = "/";
    std::string command;
    std::vector<std::string> rest; // the command's own options
};

// Prints "latgov: <message>" and returns the exit status of a failure (1).
int fail(const std::string& message);
// Prints the message and the usage text, returns the exit status of a usage error (2).
int usage_error(const std::string& message);
// latgovd's status file, or null when it is missing or unreadable (not running).
nlohmann::json read_status(const std::filesystem::path& path);

int topology(const Args& args);
int snapshot(const Args& args);
int status(const Args& args);
int calibrate(const Args& args);
int doctor(const Args& args);
int explain(const Args& args);

} // namespace latgov::cli

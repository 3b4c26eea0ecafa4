// latgov: inspect what the governor sees and does. Global options and
// dispatch; each command lives in a file of its own.
#include "commands.hpp"
#include "latgov/config.hpp"
#include "latgov/parse.hpp"

#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <string>
#include <string_view>
#include <system_error>

namespace latgov::cli {

namespace {

constexpr std::string_view usage_template = R"(Usage: latgov [--sysroot DIR] COMMAND [OPTIONS]

Commands:
  topology [--json]        hardware queues, their IRQs and completion CPUs
  snapshot -o FILE.tar.gz  capture the files topology discovery reads
      (--output FILE.tar.gz: the same)
  status [--json]          what latgovd holds now (from RUNTIME_DIR/status.json)
      [--runtime-dir DIR]  default {runtime_dir}
      [--watch]            redraw in place until Ctrl-C (a plain copy when not a terminal)
      [--interval S]       seconds between --watch refreshes (default 1)
  doctor                   check this host for what keeps latgov from working;
      [--runtime-dir DIR]  exit 3 when something needs attention
  explain DEVICE           why the device's limit is what it is
      [--config FILE]      default {config_file}
      [--runtime-dir DIR]
  calibrate                measure each idle state's wake-up cost with QD1 reads
      [--config FILE]      its devices and calibration_file; default {config_file}
      [--device NAME]      disk to read (read-only); default the first one it governs
      [--file PATH]        read this file on the disk instead of the raw device
      [--cpu N]            completion CPU to step; default queue 0's
      [--rounds N] [--ios N] [--max-seconds S]   default 5, 1000 per level, 30
      [--output FILE]      default the configuration's calibration_file
      [--runtime-dir DIR]  journal of the values it writes; default {runtime_dir}

Options:
  --sysroot DIR            read sysfs/procfs/dev under DIR (a captured tree)
  -h, --help               this text (after a command: that command's part)
)";

const std::string usage = fmt::format(usage_template, fmt::arg("runtime_dir", default_runtime_dir),
                                      fmt::arg("config_file", default_config_file));

// `latgov COMMAND --help`: the command's lines of the usage text (its first
// line and the indented ones below it), then the global options.
std::string command_usage(std::string_view command) {
    const auto options = usage.find("\nOptions:\n");
    std::string lines;
    bool in_command = false;
    for (size_t at = usage.find("Commands:\n"); at < options;) {
        const auto end = usage.find('\n', at) + 1;
        const std::string_view line(usage.data() + at, end - at);
        if (line.starts_with("  ") && !line.starts_with("   "))
            in_command = line.substr(2).starts_with(command) &&
                         (line[2 + command.size()] == ' ' || line[2 + command.size()] == '\n');
        if (in_command)
            lines += line;
        at = end;
    }
    if (lines.empty()) // a command the text does not list: all of it
        return usage;
    // The command with the arguments it must have, as its first line names
    // them before any optional one ("explain DEVICE").
    std::string_view first(lines);
    first = first.substr(2, first.find("  ", 2) - 2);
    first = first.substr(0, first.find(" ["));
    return fmt::format("Usage: latgov [--sysroot DIR] {} [OPTIONS]\n\n{}{}", first, lines,
                       usage.substr(options));
}

struct Command {
    std::string_view name;
    int (*run)(const Args&);
};

constexpr Command commands[] = {
    {"topology", topology},   {"snapshot", snapshot}, {"status", status},
    {"calibrate", calibrate}, {"doctor", doctor},     {"explain", explain},
};

// The command being run, whose part of the usage text a usage error shows.
std::string_view running_command;

} // namespace

void print_text(std::string_view text) {
    fmt::print("{}", terminal_safe(text));
}

int fail(const std::string& message) {
    fmt::print(stderr, "latgov: {}\n", terminal_safe(message));
    return 1;
}

int output_failed(int error) {
    std::clearerr(stdout);
    return fail(fmt::format("Failed to write to standard output: {}", std::strerror(error)));
}

int usage_error(const std::string& message) {
    fmt::print(stderr, "latgov: {}\n{}", message,
               running_command.empty() ? usage : command_usage(running_command));
    return 2;
}

int option_error(std::string_view command, const std::string& option,
                 std::initializer_list<std::string_view> with_value) {
    for (const auto takes : with_value)
        if (option == takes)
            return usage_error(fmt::format("{}: {} needs a value", command, option));
    return usage_error(fmt::format("{}: unknown option {}", command, option));
}

} // namespace latgov::cli

namespace {

int dispatch(int argc, char** argv) {
    using namespace latgov::cli;
    Args args;
    int i = 1;
    // --sysroot DIR or --sysroot=DIR, before or after the command; an empty
    // directory is none.
    auto take_sysroot = [&](std::string_view arg, int& at) {
        if (arg == "--sysroot") {
            if (at + 1 == argc)
                return false;
            args.sysroot = argv[++at];
        } else {
            args.sysroot = std::string(arg.substr(10));
        }
        return !args.sysroot.empty();
    };
    for (; i < argc; ++i) {
        std::string_view arg = argv[i];
        if (arg == "-h" || arg == "--help") {
            fmt::print("{}", usage);
            return 0;
        }
        if (arg == "--sysroot" || arg.starts_with("--sysroot=")) {
            if (!take_sysroot(arg, i))
                return usage_error("--sysroot needs a directory");
        } else if (!arg.starts_with("-")) {
            break;
        } else {
            return usage_error("unknown option " + std::string(arg));
        }
    }
    if (i == argc)
        return usage_error("no command given");
    args.command = argv[i];
    bool help = false;
    for (++i; i < argc; ++i) {
        std::string_view arg = argv[i];
        if (arg == "-h" || arg == "--help")
            help = true;
        else if (arg == "--sysroot" || arg.starts_with("--sysroot=")) {
            if (!take_sysroot(arg, i))
                return usage_error("--sysroot needs a directory");
        } else
            args.rest.emplace_back(arg);
    }
    for (const auto& command : commands) {
        if (command.name != args.command)
            continue;
        if (help) {
            fmt::print("{}", command_usage(command.name));
            return 0;
        }
        running_command = command.name;
        return command.run(args);
    }
    return usage_error("unknown command " + args.command);
}

} // namespace

// Output that did not reach its reader (a full disk, a closed file) fails
// the command, however it ended: fmt::print throws when a write fails, and
// what stays in stdout's buffer is written only at the flush here.
int main(int argc, char** argv) {
    using latgov::cli::fail;
    int status = 0;
    try {
        status = dispatch(argc, argv);
    } catch (const std::system_error& e) {
        if (!std::ferror(stdout))
            return fail(e.what());
        return fail("Failed to write to standard output: " + e.code().message());
    } catch (const std::exception& e) {
        return fail(e.what());
    }
    const bool flushed = std::fflush(stdout) == 0;
    const int error = errno;
    if (!flushed || std::ferror(stdout))
        return fail(fmt::format("Failed to write to standard output{}",
                                flushed ? "" : std::string(": ") + std::strerror(error)));
    return status;
}

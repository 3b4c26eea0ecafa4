#include "logging.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <string_view>
#include <sys/stat.h>
#include <unistd.h>

namespace latgov {

namespace {

// A sink that only counts: warnings and errors since the start.
class CountingSink : public spdlog::sinks::base_sink<std::mutex> {
  public:
    LogCounts counts() {
        std::lock_guard lock(mutex_);
        return counts_;
    }

  protected:
    void sink_it_(const spdlog::details::log_msg& msg) override {
        if (msg.level == spdlog::level::warn)
            ++counts_.warnings;
        else if (msg.level >= spdlog::level::err && msg.level != spdlog::level::off)
            ++counts_.errors;
    }
    void flush_() override {}

  private:
    LogCounts counts_;
};

const auto counting_sink = std::make_shared<CountingSink>();

// Lines to a stderr that systemd connected to the journal, each with the
// "<N>" syslog priority prefix journald reads (sd-daemon(3)). A stream, not
// sd_journal_send(): journald names a datagram's unit from the sender's
// /proc/PID/cgroup, which can be gone by the time it reads the datagram when
// the sender exits at once (ExecStopPost's `latgovd --restore`); the line
// then has no unit and `journalctl -u latgov` does not show it. A stream
// carries its unit from when systemd connected it.
class JournalStreamSink : public spdlog::sinks::base_sink<std::mutex> {
  protected:
    void sink_it_(const spdlog::details::log_msg& msg) override {
        spdlog::memory_buf_t text;
        formatter_->format(msg, text);
        const std::string prefix = "<" + std::to_string(syslog_priority(msg.level)) + ">";
        std::string out;
        out.reserve(text.size() + prefix.size());
        // every line of the message gets the prefix, or its later lines
        // would be logged at the default priority
        bool line_start = true;
        for (char c : std::string_view(text.data(), text.size())) {
            if (line_start)
                out += prefix;
            out += c;
            line_start = c == '\n';
        }
        write_all(out);
    }
    void flush_() override {}

  private:
    static int syslog_priority(spdlog::level::level_enum level) {
        switch (level) {
        case spdlog::level::critical:
            return 2;
        case spdlog::level::err:
            return 3;
        case spdlog::level::warn:
            return 4;
        case spdlog::level::info:
            return 6;
        default:
            return 7;
        }
    }
    static void write_all(std::string_view out) {
        while (!out.empty()) {
            ssize_t n = ::write(STDERR_FILENO, out.data(), out.size());
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                return; // nowhere left to report it
            out.remove_prefix(static_cast<std::size_t>(n));
        }
    }
};

// Whether stderr is the journal stream systemd set up: JOURNAL_STREAM names
// its device and inode; a redirected stderr keeps the variable but not them.
bool stderr_is_journal() {
    const char* stream = std::getenv("JOURNAL_STREAM");
    if (!stream)
        return false;
    unsigned long long dev = 0, ino = 0;
    struct stat st {};
    if (std::sscanf(stream, "%llu:%llu", &dev, &ino) != 2 || ::fstat(STDERR_FILENO, &st) != 0)
        return false;
    return st.st_dev == dev && st.st_ino == ino;
}

} // namespace

LogCounts logged_counts() {
    return counting_sink->counts();
}

void setup_logging(const std::string& level) {
    std::shared_ptr<spdlog::logger> logger;
    if (stderr_is_journal()) {
        // the journal adds the time and "latgovd[PID]:" itself
        logger = std::make_shared<spdlog::logger>("latgovd", std::make_shared<JournalStreamSink>());
        logger->set_pattern("%v");
    } else {
        logger = spdlog::stderr_color_mt("latgovd");
    }
    logger->sinks().push_back(counting_sink);
    logger->set_level(spdlog::level::from_str(level));
    spdlog::set_default_logger(logger);
}

void log_warning(const std::string& line) {
    spdlog::warn("{}", line);
}

std::string current_exception_text() {
    try {
        throw;
    } catch (const std::exception& e) {
        return e.what();
    } catch (...) {
        return "not a std::exception";
    }
}

} // namespace latgov

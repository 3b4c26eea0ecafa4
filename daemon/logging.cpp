#include "logging.hpp"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <poll.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <string_view>
#include <sys/socket.h>
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
//
// Written without blocking. latgovd logs from its loop, under the lock its
// kick threads share, and a journald that stops reading (stalled, or busy
// with a flood from elsewhere) would otherwise stall both with every hold in
// place. What the stream has no room for is dropped, counted, and reported
// in a line of its own once there is room again (tried at the next message
// and at each flush, which the loop asks for as it goes). A message the
// stream took in part keeps its rest, which goes first, so that no line is
// cut short or run into the next. At exit, finish() waits a little for
// room: a short-lived `latgovd --restore` logs what it put back, and then
// exits.
class JournalStreamSink : public spdlog::sinks::base_sink<std::mutex> {
  public:
    std::uint64_t dropped_messages() {
        std::lock_guard lock(mutex_);
        return dropped_total_;
    }
    // Sends what the stream has not taken yet and the report of what was
    // dropped, waiting up to `budget` for room.
    void finish(std::chrono::milliseconds budget) {
        std::lock_guard lock(mutex_);
        const auto deadline = std::chrono::steady_clock::now() + budget;
        while (!catch_up()) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - std::chrono::steady_clock::now());
            pollfd out{STDERR_FILENO, POLLOUT, 0};
            if (left.count() <= 0 || ::poll(&out, 1, static_cast<int>(left.count())) <= 0)
                return;
        }
    }

  protected:
    void sink_it_(const spdlog::details::log_msg& msg) override {
        spdlog::memory_buf_t text;
        formatter_->format(msg, text);
        if (!catch_up()) {
            ++dropped_;
            ++dropped_total_;
            return;
        }
        pending_ = with_priority(syslog_priority(msg.level), {text.data(), text.size()});
        send_pending();
    }
    void flush_() override { catch_up(); }

  private:
    // The rest of a message, then the report of those dropped since the
    // last one: true when both went.
    bool catch_up() {
        if (!send_pending())
            return false;
        if (dropped_ == 0)
            return true;
        pending_ = fmt::format("<4>{} log message{} dropped: the journal stream was full\n",
                               dropped_, dropped_ == 1 ? "" : "s");
        dropped_ = 0;
        return send_pending();
    }

    // Every line of the message gets the prefix, or its later lines would be
    // logged at the default priority.
    static std::string with_priority(int priority, std::string_view text) {
        const std::string prefix = "<" + std::to_string(priority) + ">";
        std::string out;
        out.reserve(text.size() + prefix.size());
        bool line_start = true;
        for (char c : text) {
            if (line_start)
                out += prefix;
            out += c;
            line_start = c == '\n';
        }
        return out;
    }
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
    // Sends what is pending, as much as the stream takes now; true when all
    // of it went (or cannot go anywhere). MSG_DONTWAIT, not O_NONBLOCK: the
    // file description stays as systemd made it. A stderr that is not a
    // socket (the variable set by hand) is written as before, blocking.
    bool send_pending() {
        std::string_view out = pending_;
        while (!out.empty()) {
            ssize_t n = stream_is_socket_ ? ::send(STDERR_FILENO, out.data(), out.size(),
                                                   MSG_DONTWAIT | MSG_NOSIGNAL)
                                          : ::write(STDERR_FILENO, out.data(), out.size());
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0 && errno == ENOTSOCK && stream_is_socket_) {
                stream_is_socket_ = false;
                continue;
            }
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                pending_.erase(0, pending_.size() - out.size());
                return false;
            }
            if (n <= 0)
                break; // nowhere left to report it
            out.remove_prefix(static_cast<std::size_t>(n));
        }
        pending_.clear();
        return true;
    }

    std::string pending_;       // what the stream has not taken yet
    std::uint64_t dropped_ = 0; // since the last report of them
    std::uint64_t dropped_total_ = 0;
    bool stream_is_socket_ = true;
};

const auto journal_sink = std::make_shared<JournalStreamSink>();

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
    auto counts = counting_sink->counts();
    counts.dropped_messages = journal_sink->dropped_messages();
    return counts;
}

void flush_log() {
    spdlog::default_logger()->flush();
}

void finish_logging() {
    journal_sink->finish(std::chrono::seconds(1));
}

void setup_logging(const std::string& level) {
    std::shared_ptr<spdlog::logger> logger;
    if (stderr_is_journal()) {
        // the journal adds the time and "latgovd[PID]:" itself
        logger = std::make_shared<spdlog::logger>("latgovd", journal_sink);
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

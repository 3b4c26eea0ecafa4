// latgovd's log: the journal under systemd, stderr otherwise.
#pragma once

#include "latgov/metrics.hpp"

#include <cstdint>
#include <string>

namespace latgov {

void setup_logging(const std::string& level);
// Warnings and errors logged since setup_logging, and the messages the
// journal stream had no room for, for the metrics.
LogCounts logged_counts();
// Whatever the log holds back goes now, as far as it can without waiting
// (the journal stream: the rest of a message, the report of those dropped).
void flush_log();
// At exit: the same, waiting up to a second for the journal stream to take it.
void finish_logging();
// For the edge's warning callbacks (PM QoS holders, journal restore).
void log_warning(const std::string& line);
// Inside a catch: what the exception being handled says, its what() or that
// it is not a std::exception.
std::string current_exception_text();

} // namespace latgov

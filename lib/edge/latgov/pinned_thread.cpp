#include "latgov/pinned_thread.hpp"

#include "latgov/sysroot.hpp"

#include <cerrno>
#include <exception>
#include <optional>
#include <sched.h>
#include <system_error>
#include <thread>

namespace latgov {

Result<void> run_on_cpu(int cpu, const std::function<Result<void>()>& work) {
    if (cpu < 0 || cpu >= CPU_SETSIZE)
        return make_error("Failed to pin a thread to cpu " + std::to_string(cpu) + ": no such CPU");
    std::optional<Result<void>> outcome;
    std::exception_ptr thrown;
    auto pinned = [&] {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(static_cast<unsigned>(cpu), &set);
        // 0 is the calling thread: this one, not the process.
        if (::sched_setaffinity(0, sizeof set, &set) != 0) {
            outcome = make_error("Failed to pin a thread to cpu " + std::to_string(cpu) + ": " +
                                 errno_message(errno));
            return;
        }
        try {
            outcome = work();
        } catch (...) {
            thrown = std::current_exception();
        }
    };
    try {
        std::thread(pinned).join();
    } catch (const std::system_error& e) {
        return make_error("Failed to start a thread for cpu " + std::to_string(cpu) + ": " +
                          std::string(e.what()));
    }
    if (thrown)
        std::rethrow_exception(thrown);
    return std::move(*outcome);
}

} // namespace latgov

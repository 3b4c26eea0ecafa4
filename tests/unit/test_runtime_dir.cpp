// The runtime directory and the files written as root: refused when someone
// else could have planted something, never followed through a symlink, one
// locker at a time; block-stat tick deltas across a 32-bit wrap.
#include "latgov/calibration_file.hpp"
#include "latgov/parse.hpp"
#include "latgov/runtime_dir.hpp"
#include "latgov/status.hpp"
#include "latgov/sysroot.hpp"
#include "scratch.hpp"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace latgov;
namespace fs = std::filesystem;

using test::slurp;

TEST_CASE("a new runtime directory is created ours and not writable by others") {
    test::TempDir tmp("latgov-rundir");
    const auto dir = tmp.path() / "a/run";
    auto opened = RuntimeDir::open(dir, true);
    REQUIRE(opened);
    struct stat st {};
    REQUIRE(::stat(dir.c_str(), &st) == 0);
    CHECK(st.st_uid == ::geteuid());
    CHECK((st.st_mode & 022) == 0);
    CHECK((st.st_mode & 07777) == runtime_dir_mode);
}

namespace {

// A pid that ran and is gone: a child, waited for.
pid_t gone_pid() {
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0)
        ::_exit(0);
    REQUIRE(::waitpid(child, nullptr, 0) == child);
    return child;
}

// Whether a user other than root and this one (nobody) can open `dir` to
// flock it; nullopt when not root, where no such user can be made.
std::optional<bool> nobody_can_lock(const fs::path& dir) {
    if (::geteuid() != 0)
        return std::nullopt;
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        if (::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0)
            ::_exit(2);
        const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ::_exit(fd >= 0 && ::flock(fd, LOCK_EX | LOCK_NB) == 0 ? 0 : 1);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) != 2);
    return WEXITSTATUS(status) == 0;
}

} // namespace

TEST_CASE("others may read a runtime directory's files by name but not lock it") {
    test::TempDir tmp("latgov-rundir");
    const auto dir = tmp.path() / "run";
    REQUIRE(::chmod(tmp.path().c_str(), 0755) == 0); // others may reach it
    fs::create_directory(dir);
    REQUIRE(::chmod(dir.c_str(), 0755) == 0);
    if (const auto before = nobody_can_lock(dir))
        CHECK(*before); // what the narrowing below takes away
    auto opened = RuntimeDir::open(dir, false);
    REQUIRE(opened);
    struct stat st {};
    REQUIRE(::stat(dir.c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0711);
    CHECK(opened->narrowed_from() == mode_t{0755});
    CHECK(opened->narrowed_message().starts_with("made " + dir.string() +
                                                 " unreadable to group and others (mode 0755 -> "
                                                 "0711)"));
    if (const auto after = nobody_can_lock(dir)) {
        CHECK_FALSE(*after);
    } else {
        MESSAGE("not root: another user's lock is not tried here (the test command runs as "
                "root, where it is)");
    }
    // Only the read bits go: a narrower mode stays as it is.
    REQUIRE(::chmod(dir.c_str(), 0700) == 0);
    opened = RuntimeDir::open(dir, false);
    REQUIRE(opened);
    CHECK_FALSE(opened->narrowed_from());
    CHECK(opened->narrowed_message().empty());
    REQUIRE(::stat(dir.c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0700);
}

TEST_CASE("a runtime directory others may write is refused") {
    test::TempDir tmp("latgov-rundir");
    const auto dir = tmp.path() / "run";
    fs::create_directory(dir);
    ::chmod(dir.c_str(), 01777);
    auto opened = RuntimeDir::open(dir, true);
    REQUIRE_FALSE(opened);
    CHECK(opened.error().message.find("group or others may write it") != std::string::npos);
}

TEST_CASE("a runtime directory created by another user is refused") {
    test::TempDir tmp("latgov-rundir");
    fs::path dir = tmp.path() / "run";
    if (::geteuid() == 0) {
        fs::create_directory(dir);
        REQUIRE(::chown(dir.c_str(), 65534, 65534) == 0);
    } else {
        dir = "/"; // root's, and we are not root
    }
    auto opened = RuntimeDir::open(dir, true);
    REQUIRE_FALSE(opened);
    CHECK(opened.error().message.find("someone else created it") != std::string::npos);
}

TEST_CASE("a runtime directory below a directory another user could change is refused") {
    test::TempDir tmp("latgov-rundir");
    const auto open_below = [&](const fs::path& above, mode_t mode) {
        fs::create_directories(above / "run");
        REQUIRE(::chmod(above.c_str(), mode) == 0);
        return RuntimeDir::open(above / "run", false);
    };
    // Anyone may rename "run" out of a world-writable directory.
    auto opened = open_below(tmp.path() / "open", 0777);
    REQUIRE_FALSE(opened);
    CHECK(opened.error().message ==
          "Refusing runtime directory " + (tmp.path() / "open/run").string() + ": " +
              (tmp.path() / "open").string() +
              ", on its path, is group or others may write it (mode 0777, not sticky), so another "
              "user could replace it");
    // Two levels up counts as much as one.
    fs::create_directories(tmp.path() / "open/a");
    CHECK_FALSE(RuntimeDir::open_locked(tmp.path() / "open/a/run", true));
    // Sticky, as /tmp and /dev/shm: only the owner of "run" may rename it.
    CHECK(open_below(tmp.path() / "sticky", 01777));
    CHECK(open_below(tmp.path() / "closed", 0755));
    // A symlink above it is followed: the directory it leads to counts too.
    fs::create_directory_symlink(tmp.path() / "open", tmp.path() / "link");
    opened = RuntimeDir::open(tmp.path() / "link/run", false);
    REQUIRE_FALSE(opened);
    CHECK(opened.error().message.find((tmp.path() / "open").string() + ", on its path, is group or "
                                                                       "others may write it") !=
          std::string::npos);
    if (::geteuid() == 0) { // another owner can only be made as root
        fs::create_directories(tmp.path() / "theirs/run");
        REQUIRE(::chown((tmp.path() / "theirs").c_str(), 65534, 65534) == 0);
        opened = RuntimeDir::open(tmp.path() / "theirs/run", false);
        REQUIRE_FALSE(opened);
        CHECK(opened.error().message.find("on its path, is owned by uid 65534") !=
              std::string::npos);
        // A symlink in a sticky directory: its owner may replace it, and
        // the runtime directory with it, after the check.
        fs::create_directory(tmp.path() / "sticky2");
        REQUIRE(::chmod((tmp.path() / "sticky2").c_str(), 01777) == 0);
        fs::create_directories(tmp.path() / "ours/run");
        fs::create_directory_symlink(tmp.path() / "ours", tmp.path() / "sticky2/x");
        CHECK(RuntimeDir::open(tmp.path() / "sticky2/x/run", false)); // ours: kept
        REQUIRE(::lchown((tmp.path() / "sticky2/x").c_str(), 65534, 65534) == 0);
        opened = RuntimeDir::open(tmp.path() / "sticky2/x/run", false);
        REQUIRE_FALSE(opened);
        CHECK(opened.error().message.find((tmp.path() / "sticky2/x").string() +
                                          ", on its path, is a symlink owned by uid 65534 in a "
                                          "sticky directory") != std::string::npos);
        // In a directory only root may write, its owner cannot replace it.
        fs::create_directory(tmp.path() / "closed2");
        fs::create_directory_symlink(tmp.path() / "ours", tmp.path() / "closed2/x");
        REQUIRE(::lchown((tmp.path() / "closed2/x").c_str(), 65534, 65534) == 0);
        CHECK(RuntimeDir::open(tmp.path() / "closed2/x/run", false));
        // A chain of symlinks through another user's directory: root's link
        // leads to theirs/link, which leads back to a directory of ours.
        // Neither the path as written nor the one reached lies below
        // theirs, yet its owner may point theirs/link elsewhere.
        fs::create_directory_symlink(tmp.path() / "ours", tmp.path() / "theirs/link");
        fs::create_directory_symlink(tmp.path() / "theirs/link", tmp.path() / "entry");
        opened = RuntimeDir::open(tmp.path() / "entry/run", false);
        REQUIRE_FALSE(opened);
        CHECK(opened.error().message ==
              "Refusing runtime directory " + (tmp.path() / "entry/run").string() + ": " +
                  (tmp.path() / "theirs").string() +
                  ", on its path, is owned by uid 65534, so another user could replace it");
        // A ".." after a symlink goes up from where the link led: here into
        // theirs, then down to a directory of ours.
        fs::create_directory(tmp.path() / "theirs/sub");
        REQUIRE(::chown((tmp.path() / "theirs/sub").c_str(), 0, 0) == 0);
        fs::create_directories(tmp.path() / "closed3/run");
        fs::create_directory_symlink(tmp.path() / "theirs/sub", tmp.path() / "closed3/up");
        opened = RuntimeDir::open(tmp.path() / "closed3/up/../sub", false);
        REQUIRE_FALSE(opened);
        CHECK(opened.error().message.find((tmp.path() / "theirs").string() +
                                          ", on its path, is owned by uid 65534") !=
              std::string::npos);
    } else {
        MESSAGE("not root: an ancestor owned by another user is not checked here (the test "
                "command runs as root, where it is)");
    }
}

TEST_CASE("a runtime directory that is a symlink is refused") {
    test::TempDir tmp("latgov-rundir");
    fs::create_directory(tmp.path() / "real");
    fs::create_directory_symlink(tmp.path() / "real", tmp.path() / "run");
    auto opened = RuntimeDir::open(tmp.path() / "run", true);
    REQUIRE_FALSE(opened);
    CHECK(opened.error().message.find("symlink") != std::string::npos);
}

TEST_CASE("only one process-wide owner holds the runtime directory's lock") {
    test::TempDir tmp("latgov-rundir");
    auto first = RuntimeDir::open(tmp.path() / "run", true);
    auto second = RuntimeDir::open(tmp.path() / "run", true);
    REQUIRE(first);
    REQUIRE(second);
    REQUIRE(first->lock());
    auto locked = second->lock();
    REQUIRE_FALSE(locked);
    CHECK(locked.error().message.find("another latgovd") != std::string::npos);
    // Named by pid, from /proc/locks.
    CHECK(locked.error().message.find("(pid " + std::to_string(::getpid()) + ")") !=
          std::string::npos);
    { auto gone = std::move(*first); } // the owner exits
    // The moved-from Result still owns nothing; the lock went with the fd.
    CHECK(second->lock());
}

TEST_CASE("runtime directories that guard the same CPUs lock each other out") {
    test::TempDir tmp("latgov-rundir");
    fs::create_directories(tmp.path() / "root/sys/devices/system/cpu/cpu0");
    fs::create_directories(tmp.path() / "root/dev");
    std::ofstream(tmp.path() / "root/dev/cpu_dma_latency") << "";
    const SysRoot root(tmp.path() / "root");
    // Anyone may open the CPUs' sysfs directory and flock it: that lock is
    // not the guard's, and keeps no latgovd out.
    const int cpus = ::open((tmp.path() / "root/sys/devices/system/cpu").c_str(),
                            O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    REQUIRE(cpus >= 0);
    REQUIRE(::flock(cpus, LOCK_EX | LOCK_NB) == 0);
    // A runtime directory that guards the tree's CPUs, not locked yet.
    const auto guarded = [&](const char* name) {
        auto dir = RuntimeDir::open(tmp.path() / name, true);
        REQUIRE(dir);
        REQUIRE(dir->guard_cpus(root));
        return std::optional<RuntimeDir>(std::move(*dir));
    };
    auto first = guarded("run-a");
    auto second = guarded("run-b");
    REQUIRE(first->lock());
    auto locked = second->lock();
    REQUIRE_FALSE(locked);
    CHECK(locked.error().message.find((tmp.path() / "root/dev/cpu_dma_latency").string()) !=
          std::string::npos);
    CHECK(locked.error().message.find("another runtime directory") != std::string::npos);
    CHECK(locked.error().message.find("(pid " + std::to_string(::getpid()) + ")") !=
          std::string::npos);
    // Not half locked: its own runtime directory stays free.
    CHECK(runtime_dir_locked(tmp.path() / "run-b") == false);
    first.reset(); // the owner exits
    CHECK(second->lock());
    CHECK(runtime_dir_locked(tmp.path() / "run-b") == true);

    ::close(cpus);

    // Without the node (a private /dev), the CPUs' directory is the lock.
    fs::remove(tmp.path() / "root/dev/cpu_dma_latency");
    auto fourth = guarded("run-d");
    auto fifth = guarded("run-e");
    REQUIRE(fourth->lock());
    locked = fifth->lock();
    REQUIRE_FALSE(locked);
    CHECK(locked.error().message.find((tmp.path() / "root/sys/devices/system/cpu").string() +
                                      ": a latgovd") != std::string::npos);

    // A tree with neither has nothing to guard.
    auto third = RuntimeDir::open(tmp.path() / "run-c", true);
    REQUIRE(third);
    CHECK(third->guard_cpus(SysRoot(tmp.path() / "empty")));
    CHECK(third->lock());
}

TEST_CASE("open_locked opens and locks, and says which of the two failed") {
    test::TempDir tmp("latgov-rundir");
    auto owner = RuntimeDir::open_locked(tmp.path() / "run", true);
    REQUIRE(owner);
    auto other = RuntimeDir::open_locked(tmp.path() / "run", false);
    REQUIRE_FALSE(other);
    CHECK(other.error().message.find("another latgovd") != std::string::npos);
    auto missing = RuntimeDir::open_locked(tmp.path() / "none", false);
    REQUIRE_FALSE(missing);
    CHECK(missing.error().message ==
          "Failed to open " + (tmp.path() / "none").string() + ": No such file or directory");
    { auto gone = std::move(*owner); }
    CHECK(RuntimeDir::open_locked(tmp.path() / "run", false));
}

TEST_CASE("an atomic write replaces a planted symlink instead of writing through it") {
    test::TempDir tmp("latgov-rundir");
    auto dir = RuntimeDir::open(tmp.path() / "run", true);
    REQUIRE(dir);
    const auto victim = tmp.path() / "victim";
    std::ofstream(victim) << "precious";
    fs::create_symlink(victim, tmp.path() / "run/status.json");
    // The name the old code used for its temporary file, planted as well.
    fs::create_symlink(victim, tmp.path() / "run/status.json.tmp");
    REQUIRE(dir->write_atomic("status.json", "{}\n", 0644));
    CHECK(slurp(victim) == "precious");
    CHECK_FALSE(fs::is_symlink(tmp.path() / "run/status.json"));
    CHECK(slurp(tmp.path() / "run/status.json") == "{}\n");
    // Nothing else left behind but the planted link.
    int entries = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(tmp.path() / "run"))
        ++entries;
    CHECK(entries == 2);
}

TEST_CASE("reads refuse symlinks, non-regular files and files past the size cap") {
    test::TempDir tmp("latgov-rundir");
    auto dir = RuntimeDir::open(tmp.path() / "run", true);
    REQUIRE(dir);
    fs::create_symlink("/dev/zero", tmp.path() / "run/zero");
    auto zero = dir->read("zero");
    REQUIRE_FALSE(zero);
    CHECK(zero.error().message.find("symlink") != std::string::npos);
    std::ofstream(tmp.path() / "run/big") << std::string(4096, 'x');
    auto big = dir->read("big", 1000);
    REQUIRE_FALSE(big);
    CHECK(big.error().message.find("larger than") != std::string::npos);
    auto missing = dir->read("missing");
    REQUIRE(missing);
    CHECK_FALSE(*missing);
    CHECK_FALSE(dir->read("../escape"));
}

TEST_CASE("a calibration file is written atomically, never through a symlink, and a cut one "
          "is rejected") {
    test::TempDir tmp("latgov-rundir");
    Calibration c;
    c.machine = {"model", "6.18", "haltpoll", "haltpoll"};
    c.device = "vda";
    c.levels.push_back({"poll", LatencyLimit{0}, {}, {30.0}, 30.0, 40.0});
    c.levels.push_back({"none", LatencyLimit{}, {}, {50.0}, 50.0, 60.0});
    c.states.push_back({"haltpoll idle", 1, 20.0});
    const auto path = tmp.path() / "calibration.toml";
    const auto victim = tmp.path() / "victim";
    std::ofstream(victim) << "precious";
    fs::create_symlink(victim, path);
    REQUIRE(save_calibration(path, c));
    CHECK(slurp(victim) == "precious");
    auto loaded = load_calibration(path);
    REQUIRE(loaded);
    REQUIRE(*loaded);
    CHECK((*loaded)->states.at(0).measured_cost_us == doctest::Approx(20.0));

    // Cut at every length: never accepted as a calibration.
    const std::string whole = slurp(path);
    for (size_t n = 0; n < whole.size(); n += 7) {
        CAPTURE(n);
        std::ofstream(path, std::ios::trunc) << whole.substr(0, n);
        CHECK_FALSE(load_calibration(path));
    }
    fs::remove(path);
    auto missing = load_calibration(path);
    REQUIRE(missing);
    CHECK_FALSE(*missing);
}

TEST_CASE("a status naming a file that is not UTF-8 is written, not thrown") {
    // A drop-in's file name comes from the machine: bytes, not text.
    test::TempDir tmp("latgov-rundir");
    auto dir = RuntimeDir::open(tmp.path() / "run", true);
    REQUIRE(dir);
    nlohmann::ordered_json status = {{"config", "/etc/latgov/latgov.toml.d/50-\xff\xfe.toml"}};
    auto written = write_status(*dir, status);
    REQUIRE(written);
    const auto text = slurp(tmp.path() / "run/status.json");
    CHECK(text.find("50-\xef\xbf\xbd\xef\xbf\xbd.toml") != std::string::npos);
}

TEST_CASE("temporaries with this process's own pid are a killed process's too at start-up") {
    // The kernel gave this pid again (a container's latgovd always has the
    // same one): what the earlier process left looks like this one's, and
    // latgovd, which has written nothing yet, removes it.
    test::TempDir tmp("latgov-rundir");
    const std::string own = std::to_string(::getpid());
    const std::vector<std::string> leftovers = {".status.json." + own + ".0.tmp",
                                                ".status.json." + own + ".7.tmp"};
    for (const auto& name : leftovers)
        std::ofstream(tmp.path() / name) << "x";
    CHECK(remove_dead_temporaries(tmp.path() / "status.json") == 0); // a live writer's, by default
    CHECK(remove_dead_temporaries(tmp.path() / "status.json",
                                  TemporariesOf::dead_processes_and_this_one) == leftovers.size());
    for (const auto& name : leftovers)
        CHECK_MESSAGE(!fs::exists(tmp.path() / name), name);
}

TEST_CASE("temporaries of a killed writer are removed, a live writer's and others' kept") {
    test::TempDir tmp("latgov-rundir");
    const std::string dead = std::to_string(gone_pid()), alive = std::to_string(::getpid());
    const std::vector<std::string> kept = {
        ".status.json." + alive + ".3.tmp", // being written by a running process
        ".journal." + dead + ".0.tmp",      // another file's
        ".status.json.x.0.tmp",             // not a name write_file_atomic_at gives
        ".status.json." + dead + ".tmp",    // nor this
        "status.json"};
    const std::vector<std::string> removed = {".status.json." + dead + ".0.tmp",
                                              ".status.json." + dead + ".12.tmp"};
    for (const auto& name : kept)
        std::ofstream(tmp.path() / name) << "x";
    for (const auto& name : removed)
        std::ofstream(tmp.path() / name) << "x";
    CHECK(remove_dead_temporaries(tmp.path() / "status.json") == removed.size());
    for (const auto& name : kept)
        CHECK_MESSAGE(fs::exists(tmp.path() / name), name);
    for (const auto& name : removed)
        CHECK_MESSAGE(!fs::exists(tmp.path() / name), name);
    // The same through a directory fd; nothing left to remove.
    auto dir = RuntimeDir::open(tmp.path(), false);
    REQUIRE(dir);
    CHECK(remove_dead_temporaries_at(dir->fd(), status_file_name) == 0);
}

TEST_CASE("a temporary name a killed process of the same pid left is passed over") {
    // Not removed while this process lives (remove_dead_temporaries_at
    // takes the pid for this one's): the write takes the next free name.
    test::TempDir tmp("latgov-rundir");
    auto dir = RuntimeDir::open(tmp.path(), false);
    REQUIRE(dir);
    const std::string first = next_temporary_name(status_file_name);
    const auto dot = first.rfind('.', first.size() - 5);
    const std::string stem = first.substr(0, dot + 1);
    const unsigned next = static_cast<unsigned>(std::stoul(first.substr(dot + 1))) + 1;
    std::vector<std::string> left;
    for (unsigned n = next; n < next + 20; ++n)
        left.push_back(stem + std::to_string(n) + ".tmp");
    for (const auto& name : left)
        std::ofstream(tmp.path() / name) << "a killed run's\n";
    REQUIRE(dir->write_atomic(status_file_name, "records\n", 0600));
    CHECK(slurp(tmp.path() / status_file_name) == "records\n");
    for (const auto& name : left)
        CHECK_MESSAGE(slurp(tmp.path() / name) == "a killed run's\n", name);
}

TEST_CASE("temporaries are removed with a single descriptor free, and none is left open") {
    // Listing the directory takes one descriptor, handed to the DIR: not
    // two (a dup of it), which a process at its limit does not have.
    test::TempDir tmp("latgov-rundir");
    const std::string dead = ".status.json." + std::to_string(gone_pid()) + ".0.tmp";
    std::ofstream(tmp.path() / dead) << "x";
    auto dir = RuntimeDir::open(tmp.path(), false);
    REQUIRE(dir);
    // The lowest free descriptor is the only one below the limit.
    const int free_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    REQUIRE(free_fd >= 0);
    ::close(free_fd);
    rlimit saved{};
    REQUIRE(::getrlimit(RLIMIT_NOFILE, &saved) == 0);
    const rlimit one_more{static_cast<rlim_t>(free_fd) + 1, saved.rlim_max};
    REQUIRE(::setrlimit(RLIMIT_NOFILE, &one_more) == 0);
    const std::size_t removed = remove_dead_temporaries_at(dir->fd(), status_file_name);
    // Still free, so nothing was left open.
    const int after = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    ::setrlimit(RLIMIT_NOFILE, &saved);
    CHECK(removed == 1);
    CHECK_FALSE(fs::exists(tmp.path() / dead));
    CHECK(after == free_fd);
    if (after >= 0)
        ::close(after);
}

// What `latgov doctor` and `latgov status` read of a host, on trees built in
// a temporary directory.
#include "latgov/host_facts.hpp"
#include "latgov/journal.hpp"
#include "latgov/runtime_dir.hpp"
#include "latgov/snapshot.hpp"
#include "latgov/status_place.hpp"

#include <algorithm>
#include <doctest/doctest.h>
#include <filesystem>
#include <fstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace latgov;
namespace fs = std::filesystem;

namespace {

// A tree in a temporary directory, removed at the end of the test.
struct TempTree {
    fs::path root;
    explicit TempTree(const char* name) {
        std::string pattern = std::string("/tmp/") + name + ".XXXXXX";
        root = ::mkdtemp(pattern.data());
    }
    ~TempTree() { fs::remove_all(root); }
    TempTree(const TempTree&) = delete;
    TempTree& operator=(const TempTree&) = delete;
    void put(const std::string& path, const std::string& text) const {
        fs::create_directories((root / path.substr(1)).parent_path());
        std::ofstream(root / path.substr(1), std::ios::binary) << text;
    }
};

// A runtime directory of this host that does not exist.
const StatusPlace nowhere(SysRoot(), "/nonexistent");

} // namespace

TEST_CASE("facts from a tree: /run's mount, isolated CPUs, APST, tracefs") {
    const TempTree tree("latgov-doctor");
    const fs::path& root = tree.root;
    tree.put("/proc/mounts", "/dev/vda1 / ext4 rw 0 0\ntmpfs /run tmpfs rw 0 0\n"
                             "tmpfs /run/lock tmpfs rw 0 0\n");
    tree.put("/sys/devices/system/cpu/isolated", "2-3\n");
    tree.put("/sys/module/nvme_core/parameters/default_ps_max_latency_us", "100000\n");
    tree.put("/sys/kernel/tracing/events/block/block_getrq/id", "1234\n");
    Topology topology;
    BlockDevice disk;
    disk.name = "nvme0n1";
    HardwareQueue q;
    q.irq = 40;
    q.irq_name = "nvme0q3";
    q.completion_cpus = {2};
    disk.queues.push_back(q);
    topology.devices.push_back(disk);
    const auto read =
        read_host_facts(SysRoot(root), topology, nullptr, StatusPlace(SysRoot(root), root / "run"));
    REQUIRE(read);
    const auto& facts = *read;
    CHECK(facts.run_fstype == "tmpfs");
    CHECK(facts.isolated_cpus == std::set<int>{2, 3});
    CHECK(facts.nvme_ps_max_latency_us == 100000);
    CHECK(facts.tracefs_events == Found::yes);
    // Its /proc/mounts shows no debugfs: missing on that host, not uncaptured.
    CHECK(facts.debugfs_block == Found::no);
    CHECK(facts.snapshot);
    CHECK(facts.mounts == Found::yes);
    CHECK_FALSE(facts.latgov_running);
    CHECK(facts.irqs_by_cpu.at(2) == std::vector<std::string>{"nvme0q3"});
    const auto findings = diagnose(facts);
    const auto isolated = std::find_if(findings.begin(), findings.end(), [](const Finding& f) {
        return f.check == "queue IRQs on isolated CPUs";
    });
    REQUIRE(isolated != findings.end());
    CHECK(isolated->level == Finding::Level::attention);
}

TEST_CASE("facts a tree has but the kernel would not write are warnings naming the file") {
    const TempTree tree("latgov-doctor-bad");
    const fs::path& root = tree.root;
    tree.put("/sys/devices/system/cpu/isolated", "0-1x\n");
    tree.put("/sys/module/nvme_core/parameters/default_ps_max_latency_us", "lots\n");
    Topology topology;
    topology.warnings = {"Failed to parse /dev/cpu_dma_latency: 3 bytes"};
    NvmeController nvme0;
    nvme0.name = "nvme0";
    topology.controllers.push_back(nvme0);
    const auto read =
        read_host_facts(SysRoot(root), topology, nullptr, StatusPlace(SysRoot(root), root / "run"));
    REQUIRE(read);
    CHECK(read->isolated_cpus.empty());
    CHECK_FALSE(read->nvme_ps_max_latency_us);
    REQUIRE(read->warnings.size() == 3);
    CHECK(read->warnings[0] == topology.warnings[0]);
    CHECK(read->warnings[1].starts_with(
        "Failed to parse /sys/module/nvme_core/parameters/default_ps_max_latency_us:"));
    CHECK(read->warnings[2].starts_with("Failed to parse /sys/devices/system/cpu/isolated:"));
    CHECK(read->warnings[2].find("\"0-1x\"") != std::string::npos);
    // Doctor shows each, and says the files were unparsable, not missing.
    const auto findings = diagnose(*read);
    for (const auto& warning : read->warnings)
        CHECK(std::any_of(findings.begin(), findings.end(), [&](const Finding& f) {
            return f.check == "warning" && f.result == warning;
        }));
    for (const auto& f : findings)
        if (f.check == "NVMe APST" || f.check == "/dev/cpu_dma_latency")
            CHECK(f.result.find("unparsable") != std::string::npos);
    // An APST limit beyond 2^63 is shown as the kernel holds it, not wrapped.
    tree.put("/sys/module/nvme_core/parameters/default_ps_max_latency_us",
             "18446744073709551615\n");
    const auto huge =
        read_host_facts(SysRoot(root), topology, nullptr, StatusPlace(SysRoot(root), root / "run"));
    REQUIRE(huge);
    CHECK(huge->nvme_ps_max_latency_us == 18446744073709551615u);
}

TEST_CASE("latgov status names the limits others hold, not latgov's own") {
    const TempTree tree("latgov-holders");
    const fs::path& root = tree.root;
    const std::int32_t twenty = 20;
    tree.put("/dev/cpu_dma_latency", std::string(reinterpret_cast<const char*>(&twenty), 4));
    tree.put("/sys/devices/system/cpu/cpu0/power/pm_qos_resume_latency_us", "100\n");
    tree.put("/sys/devices/system/cpu/cpu1/power/pm_qos_resume_latency_us", "n/a\n");
    tree.put("/sys/devices/system/cpu/cpu2/power/pm_qos_resume_latency_us", "0\n");
    auto status = nlohmann::json::parse(R"({"global_limit_us": null, "cpus": [
        {"cpu": 0, "limit_us": null}, {"cpu": 1, "limit_us": 0}, {"cpu": 2, "limit_us": null}]})");
    const StatusPlace place(SysRoot(root), root / "run");
    CHECK(format_other_holders(SysRoot(root), status, place) ==
          "other holders (kept, not governed by latgov): /dev/cpu_dma_latency 20 us, cpu0 100\n");
    status["global_limit_us"] = 20; // latgov's own request
    status["cpus"][0]["limit_us"] = 100;
    CHECK(format_other_holders(SysRoot(root), status, place) == "other holders: none\n");
    // Not readable (as a user who is not root): said, not taken for no holder.
    fs::remove(root / "dev/cpu_dma_latency");
    fs::create_directory(root / "dev/cpu_dma_latency");
    const auto unknown = format_other_holders(SysRoot(root), status, place);
    CHECK(unknown.starts_with("other holders: none; /dev/cpu_dma_latency not known ("));
    CHECK(unknown.find("cpu_dma_latency") !=
          unknown.rfind("cpu_dma_latency")); // the error names it
    CHECK(unknown.ends_with(")\n"));
}

TEST_CASE("a hold newer than the status is latgov's by its journal, not another writer's") {
    // The status is written at most once per status_interval_ms; the
    // journal record before the CPU's file.
    const TempTree tree("latgov-journaled");
    const fs::path& root = tree.root;
    tree.put("/sys/devices/system/cpu/cpu0/power/pm_qos_resume_latency_us", "20\n");
    tree.put("/sys/devices/system/cpu/cpu1/power/pm_qos_resume_latency_us", "100\n");
    tree.put("/run/journal", format_journal({{0, LatencyLimit{}, LatencyLimit{20}},
                                             {1, LatencyLimit{}, LatencyLimit{20}}}));
    const auto status = nlohmann::json::parse(R"({"global_limit_us": null, "cpus": [
        {"cpu": 0, "limit_us": null}, {"cpu": 1, "limit_us": null}]})");
    const StatusPlace place(SysRoot(root), root / "run");
    // cpu 1 holds a value latgov never writes there: someone else's.
    CHECK(format_other_holders(SysRoot(root), status, place) ==
          "other holders (kept, not governed by latgov): cpu1 100\n");
    Topology topology;
    for (auto [id, value] : {std::pair{0, 20u}, std::pair{1, 100u}}) {
        Cpu cpu;
        cpu.id = id;
        cpu.resume_latency = LatencyLimit{value};
        cpu.resume_latency_known = true;
        topology.cpus.push_back(cpu);
    }
    const auto facts = read_host_facts(SysRoot(root), topology, status, place);
    REQUIRE(facts);
    CHECK(facts->latgov_held_cpus == std::set<int>{0});
    const auto findings = diagnose(*facts);
    CHECK(std::any_of(findings.begin(), findings.end(), [](const Finding& f) {
        return f.result.find("cpu1=100") != std::string::npos &&
               f.result.find("cpu0") == std::string::npos;
    }));
    // A journal of another boot says nothing of this one's holds, nor does
    // one that is not a regular file (read without blocking on a FIFO).
    const std::string both = "other holders (kept, not governed by latgov): cpu0 20, cpu1 100\n";
    tree.put("/proc/sys/kernel/random/boot_id", "this-boot\n");
    tree.put("/run/journal", format_journal({{0, LatencyLimit{}, LatencyLimit{20}}}, {},
                                            {.boot_id = "earlier-boot"}));
    CHECK(format_other_holders(SysRoot(root), status, place) == both);
    fs::remove(root / "run/journal");
    REQUIRE(::mkfifo((root / "run/journal").c_str(), 0600) == 0);
    CHECK(format_other_holders(SysRoot(root), status, place) == both);
}

TEST_CASE("a status whose latgovd is gone says so, and its holds are no longer latgov's") {
    // The runtime directory's lock tells: every latgovd holds it while it
    // runs. Taken here by this process, as latgovd takes it.
    const TempTree tree("latgov-writer");
    const fs::path run = tree.root / "run";
    fs::create_directory(run);
    const SysRoot sys; // the live host's: a snapshot's writer is not looked for
    auto status = nlohmann::json::parse(R"({"cpus": [{"cpu": 1, "limit_us": 0}]})");
    status["pid"] = ::getpid(); // written by this process, as if it were latgovd
    {
        auto dir = RuntimeDir::open_locked(run, false);
        REQUIRE(dir);
        CHECK(runtime_dir_locked(run) == true);
        CHECK(status_writer_running(run, status) == true);
        CHECK_FALSE(status_writer_gone(run, status));
        CHECK(format_writer_gone(run, status).empty());
        const auto running = read_host_facts(sys, Topology{}, status, StatusPlace(sys, run));
        REQUIRE(running);
        CHECK(running->latgov_running);
        CHECK(running->latgov_held_cpus == std::set<int>{1});
        // Locked by someone else than its writer (latgov calibrate after a
        // kill): its writer is gone all the same.
        auto other = status;
        other["pid"] = 4242;
        CHECK(status_writer_running(run, other) == false);
        CHECK(status_writer_gone(run, other) == 4242);
    }
    CHECK(runtime_dir_locked(run) == false); // the lock went with the directory's fd
    CHECK(status_writer_running(run, status) == false);
    status["pid"] = 4242;
    CHECK(status_writer_gone(run, status) == 4242);
    CHECK(format_writer_gone(run, status).find("(pid 4242) is not running") != std::string::npos);
    // From an answer already had: only "not running" is said.
    CHECK(format_writer_gone(std::optional<bool>(false), status) ==
          format_writer_gone(run, status));
    CHECK(format_writer_gone(std::optional<bool>(true), status).empty());
    CHECK(format_writer_gone(std::nullopt, status).empty());
    const auto gone = read_host_facts(sys, Topology{}, status, StatusPlace(sys, run));
    REQUIRE(gone);
    CHECK_FALSE(gone->latgov_running);
    CHECK(gone->latgov_gone_pid == 4242);
    CHECK(gone->latgov_held_cpus.empty());
    // Nothing to tell: a status that names no pid, a directory not there.
    CHECK_FALSE(status_writer_gone(run, nlohmann::json::parse(R"({"cpus": []})")));
    CHECK(status_writer_running(run, nlohmann::json::parse(R"({"cpus": []})")) == std::nullopt);
    CHECK_FALSE(runtime_dir_locked(tree.root / "none"));
    CHECK_FALSE(status_writer_gone(tree.root / "none", status));
    CHECK(status_writer_running(tree.root / "none", status) == std::nullopt);
}

TEST_CASE("a snapshot's facts: files it lacks are unknown, its status is its own") {
    const TempTree tree("latgov-snapshot-facts");
    const SysRoot sys(tree.root);
    const StatusPlace own(sys, std::nullopt); // the snapshot's /run/latgov
    CHECK(own.dir() == tree.root / "run/latgov");
    auto status = nlohmann::json::parse(R"({"cpus": [{"cpu": 1, "limit_us": 0}]})");
    status["pid"] = 4242; // no lock held here: gone, were it this host's
    Topology topology;
    topology.cpuidle_driver = "intel_idle";
    const auto bare = read_host_facts(sys, topology, status, own);
    REQUIRE(bare);
    CHECK(bare->snapshot);
    CHECK(bare->status_from_snapshot);
    CHECK(bare->tracefs_events == Found::unknown);
    CHECK(bare->debugfs_block == Found::unknown);
    CHECK(bare->mounts == Found::unknown);
    CHECK(bare->latgov_running);
    CHECK_FALSE(bare->latgov_gone_pid);
    CHECK(bare->latgov_held_cpus == std::set<int>{1});
    CHECK_FALSE(needs_attention(diagnose(*bare)));
    // A runtime directory of this host named beside the snapshot: its
    // status is this host's, and its writer is asked (nobody holds its lock).
    fs::create_directory(tree.root / "run");
    const auto here = read_host_facts(sys, topology, status, StatusPlace(sys, tree.root / "run"));
    REQUIRE(here);
    CHECK(here->snapshot);
    CHECK_FALSE(here->status_from_snapshot);
    CHECK(here->latgov_gone_pid == 4242);
    CHECK(here->latgov_held_cpus.empty());
    CHECK(needs_attention(diagnose(*here)));
    // Its /proc/mounts tells: tracefs mounted (the id uncaptured, as a user
    // may not read it) is unknown; debugfs not mounted is missing.
    tree.put("/proc/mounts", "sysfs /sys sysfs rw 0 0\ntracefs /sys/kernel/tracing tracefs rw 0 0\n"
                             "tmpfs /run tmpfs rw 0 0\n");
    const auto mounted = read_host_facts(sys, Topology{}, nullptr, own);
    REQUIRE(mounted);
    CHECK(mounted->mounts == Found::yes);
    CHECK(mounted->run_fstype == "tmpfs");
    CHECK(mounted->tracefs_events == Found::unknown);
    CHECK(mounted->debugfs_block == Found::no);
    tree.put("/proc/mounts", "sysfs /sys sysfs rw 0 0\ntmpfs /run tmpfs rw 0 0\n");
    CHECK(read_host_facts(sys, Topology{}, nullptr, own)->tracefs_events == Found::no);
}

TEST_CASE("a snapshot's status is read inside the snapshot, this host's by its path") {
    const TempTree outside("latgov-outside");
    outside.put("/status.json", R"({"pid": 1, "cpus": []})");
    const TempTree tree("latgov-status-place");
    const SysRoot sys(tree.root);
    const StatusPlace snapshot(sys, std::nullopt);
    CHECK_FALSE(snapshot.of_this_host());
    const std::string file = (tree.root / "run/latgov/status.json").string();
    auto loaded = snapshot.load();
    REQUIRE_FALSE(loaded);
    CHECK(loaded.error().message == "no status in the snapshot (" + file + ")");
    // A link in the tree to a file outside it resolves inside the tree.
    fs::create_directories(tree.root / "run/latgov");
    fs::create_symlink(outside.root / "status.json", file);
    loaded = snapshot.load();
    REQUIRE_FALSE(loaded);
    CHECK(loaded.error().message == "no status in the snapshot (" + file + ")");
    CHECK(snapshot.read().is_null());
    fs::remove(file);
    tree.put("/run/latgov/status.json", "[]");
    loaded = snapshot.load();
    REQUIRE_FALSE(loaded);
    CHECK(loaded.error().message == "Failed to parse " + file + ": not a JSON object");
    // Not JSON: where the parser stopped and why, with what it last read
    // shown without its control bytes (the parser names them) nor bytes
    // that are not ASCII.
    tree.put("/run/latgov/status.json", "{\"pid\": 7,\n \x1b[2J");
    loaded = snapshot.load();
    REQUIRE_FALSE(loaded);
    CHECK(loaded.error().message == "Failed to parse " + file +
                                        " at line 2, column 2: syntax error while parsing object "
                                        "key - invalid literal; last read: '7,<U+000A> <U+001B>'; "
                                        "expected string literal");
    // JSON whose number no double holds: named, not thrown past the caller.
    tree.put("/run/latgov/status.json", R"({"pid": 1e400})");
    loaded = snapshot.load();
    REQUIRE_FALSE(loaded);
    CHECK(loaded.error().message ==
          "Failed to parse " + file + ": number overflow parsing '1e400'");
    tree.put("/run/latgov/status.json", "\xff\xfe");
    loaded = snapshot.load();
    REQUIRE_FALSE(loaded);
    CHECK(loaded.error().message == "Failed to parse " + file +
                                        " at line 1, column 1: syntax error while parsing value - "
                                        "invalid literal; last read: '?'");
    tree.put("/run/latgov/status.json", R"({"pid": 7})");
    loaded = snapshot.load();
    REQUIRE(loaded);
    CHECK(loaded->at("pid") == 7);
    // A directory of this host, named beside the snapshot, is read by path.
    const StatusPlace here(sys, outside.root);
    CHECK(here.of_this_host());
    loaded = here.load();
    REQUIRE(loaded);
    CHECK(loaded->at("pid") == 1);
    loaded = StatusPlace(sys, outside.root / "none").load();
    REQUIRE_FALSE(loaded);
    CHECK(loaded.error().message ==
          "no status at " + (outside.root / "none/status.json").string() + ": is latgovd running?");
}

TEST_CASE("the live host's facts are never unknown") {
    const auto facts = read_host_facts(SysRoot(), Topology{}, nullptr, nowhere);
    REQUIRE(facts);
    CHECK_FALSE(facts->snapshot);
    CHECK(facts->mounts == Found::yes);
    CHECK(facts->tracefs_events != Found::unknown);
    CHECK(facts->debugfs_block != Found::unknown);
}

TEST_CASE("a snapshot keeps the files doctor reads and latgovd's status") {
    const TempTree tree("latgov-snapshot-capture");
    tree.put("/proc/mounts", "tmpfs /run tmpfs rw 0 0\n");
    tree.put("/sys/kernel/tracing/events/block/block_getrq/id", "1234\n");
    tree.put("/sys/module/nvme_core/parameters/default_ps_max_latency_us", "0\n");
    tree.put("/sys/devices/system/cpu/isolated", "\n");
    tree.put("/run/latgov/status.json", "{}\n");
    fs::create_directories(tree.root / "sys/kernel/debug/block");
    SysRoot sys(tree.root);
    sys.start_capture();
    capture_doctor_files(sys, "/run/latgov");
    const auto& kept = sys.capture()->entries();
    for (const char* path : {"/proc/mounts", "/sys/kernel/tracing/events/block/block_getrq/id",
                             "/sys/module/nvme_core/parameters/default_ps_max_latency_us",
                             "/sys/devices/system/cpu/isolated", "/run/latgov/status.json"}) {
        CAPTURE(path);
        REQUIRE(kept.contains(path));
        CHECK(kept.at(path).kind == CapturedEntry::Kind::file);
    }
    REQUIRE(kept.contains("/sys/kernel/debug/block"));
    CHECK(kept.at("/sys/kernel/debug/block").kind == CapturedEntry::Kind::directory);
}

namespace {

// What a user without root sees of this host's tracefs: root's view, when
// this process is root, is left in a child that drops to nobody.
Found tracefs_unprivileged() {
    if (::geteuid() != 0)
        return read_host_facts(SysRoot(), Topology{}, nullptr, nowhere)->tracefs_events;
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        char result = 'x';
        if (::setresgid(65534, 65534, 65534) == 0 && ::setresuid(65534, 65534, 65534) == 0)
            result = static_cast<char>(
                '0' +
                static_cast<int>(
                    read_host_facts(SysRoot(), Topology{}, nullptr, nowhere)->tracefs_events));
        (void)!::write(fds[1], &result, 1);
        ::_exit(0);
    }
    ::close(fds[1]);
    char result = 'x';
    CHECK(::read(fds[0], &result, 1) == 1);
    ::close(fds[0]);
    int wstatus = 0;
    ::waitpid(child, &wstatus, 0);
    REQUIRE_MESSAGE(result != 'x', "the child could not drop to uid 65534");
    return static_cast<Found>(result - '0');
}

} // namespace

TEST_CASE("tracefs closed to this user is unreadable, not missing") {
    // Whatever root finds, a user who may not look in is never told it is
    // missing when it is there, nor that it is there when it is missing.
    const Found unprivileged = tracefs_unprivileged();
    CAPTURE(static_cast<int>(unprivileged));
    if (::geteuid() == 0) {
        const Found root = read_host_facts(SysRoot(), Topology{}, nullptr, nowhere)->tracefs_events;
        CAPTURE(static_cast<int>(root));
        REQUIRE(root != Found::unreadable); // root may look everywhere
        CHECK((unprivileged == root || unprivileged == Found::unreadable));
    } else {
        // Run as a user: mounted where latgovd looks, it is not missing.
        const auto mounts = SysRoot().read("/proc/mounts");
        REQUIRE(mounts);
        if (mount_fstype(*mounts, "/sys/kernel/tracing/events") == "tracefs" ||
            mount_fstype(*mounts, "/sys/kernel/debug/tracing/events") == "tracefs")
            CHECK(unprivileged != Found::no);
        else // mounted nowhere it looks: missing, or a place this user may not search
            CHECK(unprivileged != Found::yes);
    }
}

TEST_CASE("a malformed status is a status error naming the file and key, not an abort") {
    // Its writer runs: this process holds the runtime directory's lock and
    // is the status's pid, as latgovd is.
    const TempTree tree("latgov-malformed");
    const fs::path run = tree.root / "run";
    fs::create_directory(run);
    auto locked = RuntimeDir::open_locked(run, false);
    REQUIRE(locked);
    const SysRoot sys(tree.root);
    const std::string file = (run / "status.json").string();
    auto error_of = [&](const char* text) {
        auto status = nlohmann::json::parse(text);
        if (!status.contains("pid"))
            status["pid"] = ::getpid();
        auto facts = read_host_facts(sys, Topology{}, status, StatusPlace(sys, run));
        REQUIRE(facts);
        CHECK(facts->latgov_running);
        // Nothing it says is taken for a hold.
        CHECK(facts->latgov_held_cpus.empty());
        CHECK_FALSE(facts->latgov_global_limit);
        return facts->status_error;
    };
    CHECK(error_of(R"({"cpus": [{"limit_us": 5}]})") ==
          file + ": cpus[0].cpu: must be a CPU number, got nothing");
    CHECK(error_of(R"({"cpus": [{"cpu": 0, "limit_us": 5}, {"cpu": "x", "limit_us": 5}]})") ==
          file + ": cpus[1].cpu: must be a CPU number, got \"x\"");
    CHECK(error_of(R"({"cpus": [{"cpu": 0, "limit_us": "5"}]})") ==
          file + ": cpus[0].limit_us: must be null or a number of microseconds, got \"5\"");
    CHECK(error_of(R"({"cpus": 3})") == file + ": cpus: must be an array, got 3");
    CHECK(error_of(R"({"global_limit_us": 9, "cpus": [{"cpu": 0, "limit_us": -1}]})")
              .starts_with(file + ": cpus[0].limit_us: must be"));
    CHECK(error_of(R"({"global_limit_us": -1})").starts_with(file + ": global_limit_us: must be"));
    CHECK(error_of(R"({"global_limit_us": 4294967296})").ends_with("got 4294967296"));
    // With no pid whose latgovd could be looked for, it cannot be told
    // whether the status is a running latgovd's: not taken for one.
    CHECK(error_of(R"({"pid": null, "cpus": []})") ==
          file + ": pid: must be a process id, got null");
    CHECK(error_of(R"({"pid": 0, "cpus": []})") == file + ": pid: must be a process id, got 0");
    auto facts = read_host_facts(sys, Topology{}, nlohmann::json::parse(R"({"cpus": []})"),
                                 StatusPlace(sys, run));
    REQUIRE(facts);
    CHECK(facts->status_error == file + ": pid: missing");
    // Each is a FIX naming it, and the other checks still run.
    const auto findings = diagnose(*facts);
    CHECK(std::any_of(findings.begin(), findings.end(), [&](const Finding& f) {
        return f.result == "status unreadable: " + file + ": pid: missing";
    }));
    CHECK(findings.size() > 1);
    // What latgovd writes still reads.
    auto written =
        nlohmann::json::parse(R"({"global_limit_us": 7, "cpus": [{"cpu": 3, "limit_us": 0}]})");
    written["pid"] = ::getpid();
    auto good = read_host_facts(sys, Topology{}, written, StatusPlace(sys, run));
    REQUIRE(good);
    CHECK(good->status_error.empty());
    CHECK(good->latgov_global_limit == LatencyLimit{7});
    CHECK(good->latgov_held_cpus == std::set<int>{3});
    // `latgov status` skips what it cannot read instead of aborting.
    CHECK(format_other_holders(
              sys, nlohmann::json::parse(R"({"global_limit_us": -1, "cpus": [{"cpu": "x"}]})"),
              StatusPlace(sys, run)) == "other holders: none\n");
}

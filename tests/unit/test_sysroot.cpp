// A tree given with --sysroot is not trusted: every path resolves inside it
// as if it were "/", and no read takes more than its cap.
#include "latgov/qos.hpp"
#include "latgov/sampler.hpp"
#include "latgov/sysroot.hpp"
#include "latgov/text_file.hpp"
#include "scratch.hpp"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace latgov;
namespace fs = std::filesystem;

namespace {

void write(const fs::path& path, const std::string& text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
}

std::string slurp(const fs::path& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

// A tree under <tmp>/root, and outside it <tmp>/host/secret. The tree holds
// its own copy of that absolute path, so a path that resolves inside the
// root reads "tree" and one that escapes reads "host".
struct EscapeTree {
    test::TempDir tmp{"latgov-sysroot"};
    fs::path root = tmp.path() / "root";
    fs::path host_dir = tmp.path() / "host";
    // host_dir as an absolute path, then the same path inside the tree
    std::string host_abs = host_dir.string();
    fs::path tree_copy = root / host_dir.relative_path();

    EscapeTree() {
        write(host_dir / "secret", "host");
        write(tree_copy / "secret", "tree");
        fs::create_directories(root / "sys/a/b");
        fs::create_directories(root / "dev");
        // An absolute symlink, and a ../ chain deeper than the tree.
        fs::create_symlink(host_abs + "/secret", root / "sys/absolute");
        std::string up;
        for (int i = 0; i < 12; ++i)
            up += "../";
        fs::create_symlink(up + host_dir.relative_path().string() + "/secret",
                           root / "sys/a/b/dotdot");
        // A directory link out of the tree, a file only the host has in it.
        fs::create_symlink(host_abs, root / "sys/hostdir");
        write(host_dir / "only-on-host", "host");
        fs::create_symlink(host_abs + "/only-on-host", host_dir / "link");
        fs::create_symlink("/dev/zero", root / "sys/zero");
    }
};

} // namespace

TEST_CASE("an absolute symlink in a sysroot resolves inside it") {
    EscapeTree t;
    const SysRoot root(t.root);
    auto text = root.read("/sys/absolute");
    REQUIRE(text);
    CHECK(*text == "tree");
}

TEST_CASE("a ../ chain in a sysroot stops at its top") {
    EscapeTree t;
    const SysRoot root(t.root);
    auto text = root.read("/sys/a/b/dotdot");
    REQUIRE(text);
    CHECK(*text == "tree");
    // The path asked for is resolved the same way.
    auto asked = root.read("/sys/../../../.." + t.host_abs + "/secret");
    REQUIRE(asked);
    CHECK(*asked == "tree");
}

TEST_CASE("a directory link out of a sysroot is listed, tested and followed inside it") {
    EscapeTree t;
    const SysRoot root(t.root);
    auto names = root.list("/sys/hostdir");
    REQUIRE(names);
    CHECK(*names == std::vector<std::string>{"secret"});
    CHECK_FALSE(root.exists("/sys/hostdir/only-on-host"));
    CHECK(root.exists("/sys/hostdir/secret"));
    // The link exists on the host only; its parent resolves inside the tree.
    auto link = root.read_link("/sys/hostdir/link");
    CHECK_FALSE(link);
    if (!link)
        CHECK(link.error().message.find("No such file or directory") != std::string::npos);
}

TEST_CASE("a capture lists a directory whose entries it cannot stat") {
    // Read permission without search: readdir() gives the names and the
    // capture's fstatat() of each fails, as for an entry gone between the
    // two. That failure is no failure to list. Checked in a child without
    // privilege, which root's would read past.
    test::TempDir tmp("latgov-list");
    const fs::path dir = tmp.path() / "sys/block";
    write(dir / "vda", "x");
    write(dir / "vdb", "x");
    for (const fs::path& open : {tmp.path(), tmp.path() / "sys"})
        REQUIRE(::chmod(open.c_str(), 0755) == 0);
    REQUIRE(::chmod(dir.c_str(), 0444) == 0);
    // Searchable again before the removal, however the test ends.
    const std::unique_ptr<const fs::path, void (*)(const fs::path*)> searchable(
        &dir, [](const fs::path* p) { ::chmod(p->c_str(), 0755); });
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0))
            ::_exit(3);
        struct stat st {};
        if (::stat((dir / "vda").c_str(), &st) == 0)
            ::_exit(4); // the entries can be stat'ed: nothing would be tested
        SysRoot root(tmp.path());
        root.start_capture();
        const auto names = root.list("/sys/block");
        ::_exit(!names ? 1 : *names == std::vector<std::string>{"vda", "vdb"} ? 0 : 2);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    // 1: "Failed to list", 2: other names, 3: no unprivileged user to be,
    // 4: that user could stat the entries all the same.
    CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("a link to /dev/zero in a sysroot finds the tree's /dev, not the machine's") {
    EscapeTree t;
    const SysRoot root(t.root);
    auto missing = root.read("/sys/zero");
    REQUIRE_FALSE(missing);
    CHECK(missing.error().message ==
          "Failed to open " + (t.root / "sys/zero").string() + ": No such file or directory");
    write(t.root / "dev/zero", "the tree's own");
    auto own = root.read("/sys/zero");
    REQUIRE(own);
    CHECK(*own == "the tree's own");
}

TEST_CASE("the files sampled and written every tick resolve inside the sysroot") {
    EscapeTree t;
    const SysRoot root(t.root);
    fs::create_directories(t.root / "sys/block/vda");
    fs::create_symlink(t.host_abs + "/secret", t.root / "sys/block/vda/stat");
    auto stat = PreadFile::open(root, "/sys/block/vda/stat");
    REQUIRE(stat);
    auto text = stat->read();
    REQUIRE(text);
    CHECK(*text == "tree");

    // A PM QoS file linked out of the tree: the write lands in the tree.
    const fs::path power = t.root / "sys/devices/system/cpu/cpu0/power";
    fs::create_directories(power);
    fs::create_symlink(t.host_abs + "/secret", power / "pm_qos_resume_latency_us");
    write(t.tree_copy / "secret", "0\n");
    ResumeLatencyFile file(root, 0);
    REQUIRE(file.write(LatencyLimit{20}));
    CHECK(slurp(t.host_dir / "secret") == "host");
    CHECK(slurp(t.tree_copy / "secret") == "20");
}

TEST_CASE("the component walk resolves inside the root as openat2 does") {
    EscapeTree t;
    const int root_fd = ::open(t.root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    REQUIRE(root_fd >= 0);
    auto read_walking = [&](const std::string& path) -> std::string {
        const int fd = open_in_root_walking(root_fd, path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return std::string("error: ") + errno_message(errno);
        char buf[64];
        const ssize_t n = ::read(fd, buf, sizeof buf);
        ::close(fd);
        return n < 0 ? std::string("error: read") : std::string(buf, static_cast<size_t>(n));
    };
    CHECK(read_walking("sys/absolute") == "tree");
    CHECK(read_walking("sys/a/b/dotdot") == "tree");
    CHECK(read_walking("/../../sys/hostdir/secret") == "tree");
    CHECK(read_walking("sys/hostdir/only-on-host") == "error: No such file or directory");
    CHECK(read_walking("sys/zero") == "error: No such file or directory");
    fs::create_symlink("loop", t.root / "sys/loop");
    CHECK(read_walking("sys/loop") == "error: Too many levels of symbolic links");
    // The last link itself, with O_NOFOLLOW: what read_link needs.
    const int link = open_in_root_walking(root_fd, "sys/absolute", O_PATH | O_NOFOLLOW);
    CHECK(link >= 0);
    char target[256];
    const ssize_t n = ::readlinkat(link, "", target, sizeof target);
    CHECK(std::string(target, n > 0 ? static_cast<size_t>(n) : 0) == t.host_abs + "/secret");
    ::close(link);
    ::close(root_fd);
}

TEST_CASE("a file larger than its kind's cap is an error naming it") {
    EscapeTree t;
    const SysRoot root(t.root);
    // Sparse: a size, no blocks.
    auto sparse = [](const fs::path& path, off_t size) {
        fs::create_directories(path.parent_path());
        const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        REQUIRE(fd >= 0);
        REQUIRE(::ftruncate(fd, size) == 0);
        ::close(fd);
    };
    CHECK(read_cap("/sys/block/vda/stat") == 64 * 1024);
    CHECK(read_cap("/sys/kernel/debug/block/vda/hctx0/tags") == 1024 * 1024);
    CHECK(read_cap("/proc/stat") == 64 * 1024 * 1024);
    CHECK(read_cap("/dev/cpu_dma_latency") == 1024 * 1024);
    // latgovd's status lists every CPU and queue: as when read by path.
    CHECK(read_cap("/run/latgov/status.json") == max_text_file_bytes);
    CHECK(read_cap("/run/latgovx/status.json") == 1024 * 1024);

    sparse(t.root / "sys/block/vda/stat", 64 * 1024 + 1);
    auto attr = root.read("/sys/block/vda/stat");
    REQUIRE_FALSE(attr);
    CHECK(attr.error().message == "Failed to read " + (t.root / "sys/block/vda/stat").string() +
                                      ": larger than 65536 bytes");
    auto sampled = PreadFile::open(root, "/sys/block/vda/stat");
    REQUIRE(sampled);
    auto again = sampled->read();
    REQUIRE_FALSE(again);
    CHECK(again.error().message == attr.error().message);

    // Exactly at the cap is still a file.
    sparse(t.root / "sys/block/vdb/stat", 64 * 1024);
    auto at_cap = root.read("/sys/block/vdb/stat");
    REQUIRE(at_cap);
    CHECK(at_cap->size() == 64 * 1024);

    sparse(t.root / "proc/stat", 64 * 1024 * 1024 + 1);
    auto proc = root.read("/proc/stat");
    REQUIRE_FALSE(proc);
    CHECK(proc.error().message ==
          "Failed to read " + (t.root / "proc/stat").string() + ": larger than 67108864 bytes");
}

TEST_CASE("on the live root a file that never ends is an error, not a hang") {
    const SysRoot live;
    auto zero = live.read("/dev/zero");
    REQUIRE_FALSE(zero);
    CHECK(zero.error().message == "Failed to read /dev/zero: larger than 1048576 bytes");
    auto text = read_text_file("/dev/zero");
    REQUIRE_FALSE(text);
    CHECK(text.error().message == "Failed to read /dev/zero: larger than 16777216 bytes");
}

TEST_CASE("a FIFO in a sysroot does not block the reader") {
    test::TempDir tmp("latgov-sysroot");
    fs::create_directories(tmp.path() / "sys");
    REQUIRE(::mkfifo((tmp.path() / "sys/fifo").c_str(), 0600) == 0);
    const SysRoot root(tmp.path());
    auto text = root.read("/sys/fifo");
    REQUIRE(text);
    CHECK(text->empty());
}

// SPDX-License-Identifier: MIT
// Hardening (issue 15): files hugify writes as root, reads that never hang or grow without bound, inputs that
// cannot wrap or inject. Each test reproduces one finding with the real thing — planted links (with
// fs.protected_symlinks off for the test and put back after), FIFOs, /dev/zero, a setuid copy run by an
// unprivileged user — and checks what hugify does now. Hangs are caught by running commands under
// timeout(1) with a generous limit: a guard against a regression stalling the suite, never a timed assertion.
#include <gtest/gtest.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

extern "C" {
#include "pool.h"
#include "procfs.h"
}
#include "safe_file.h"
#include "test_support.hpp"

namespace {

using test_support::command_result;

bool is_root() { return geteuid() == 0; }

// A fresh directory, removed with everything in it at the end of the test.
struct temp_dir {
  std::string path;
  temp_dir() {
    char name[] = "/tmp/hugify-harden-XXXXXX";
    path = mkdtemp(name) ? name : "";
  }
  ~temp_dir() {
    if (!path.empty()) test_support::run({"rm", "-rf", path});
  }
  std::string operator/(const std::string &leaf) const { return path + "/" + leaf; }
  std::set<std::string> entries() const {
    std::set<std::string> names;
    if (DIR *d = opendir(path.c_str())) {
      while (dirent *e = readdir(d))
        if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..")) names.insert(e->d_name);
      closedir(d);
    }
    return names;
  }
};

// fs.protected_symlinks off while the test runs (so that a planted link in a sticky directory is followed
// the way Debian's default would not: the attack the fixes must stop by themselves), put back after —
// also when an assertion fails, since the destructor runs on the way out.
struct symlinks_unprotected {
  static constexpr const char *knob = "/proc/sys/fs/protected_symlinks";
  std::string before;
  std::string skip;
  symlinks_unprotected() {
    before = test_support::read_file(knob);
    if (before.empty()) { skip = "no /proc/sys/fs/protected_symlinks"; return; }
    if (before[0] == '0') return;
    if (!write("0")) skip = "cannot set fs.protected_symlinks=0 (needs root)";
  }
  ~symlinks_unprotected() {
    if (!before.empty() && before[0] != '0') write(before.substr(0, 1));
  }
  static bool write(const std::string &value) {
    std::ofstream out(knob);
    out << value;
    out.flush();
    return static_cast<bool>(out);
  }
};

std::string slurp(const std::string &path) { return test_support::read_file(path); }
bool is_link(const std::string &path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}
bool is_regular(const std::string &path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}
void write_text(const std::string &path, const std::string &text) { std::ofstream(path) << text; }

// A command under timeout(1): 124 means it hung (the guard, not a measurement).
command_result guarded(std::vector<std::string> argv, const std::map<std::string, std::string> &env = {}) {
  argv.insert(argv.begin(), {"timeout", "120"});
  return test_support::run(argv, env);
}
command_result guarded_hugify(std::vector<std::string> args, const std::map<std::string, std::string> &env = {}) {
  args.insert(args.begin(), HUGIFY_CLI_PATH);
  return guarded(args, env);
}

// ---- the file-safety module itself -----------------------------------------------------------------------

TEST(SafeFile, ReplaceNeverFollowsOrReplacesALink) {
  temp_dir dir;
  write_text(dir / "victim", "precious\n");
  ASSERT_EQ(symlink((dir / "victim").c_str(), (dir / "target").c_str()), 0);
  char reason[512] = "";
  EXPECT_EQ(safe_file_replace((dir / "target").c_str(), "new\n", 4, 0644, SAFE_FILE_ALLOW_DEVICE, reason, sizeof reason),
            -ELOOP);
  EXPECT_NE(std::string(reason).find("symbolic link"), std::string::npos) << reason;
  EXPECT_EQ(slurp(dir / "victim"), "precious\n");
  EXPECT_TRUE(is_link(dir / "target"));
  EXPECT_EQ(dir.entries(), (std::set<std::string>{"victim", "target"})) << "a temporary was left behind";
}

TEST(SafeFile, ReplaceWritesANewRegularFileWithItsMode) {
  temp_dir dir;
  write_text(dir / "target", "old contents that are longer\n");
  ASSERT_EQ(safe_file_replace((dir / "target").c_str(), "new\n", 4, 0640, SAFE_FILE_DURABLE, nullptr, 0), 0);
  EXPECT_EQ(slurp(dir / "target"), "new\n");
  struct stat st {};
  ASSERT_EQ(stat((dir / "target").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_EQ(dir.entries(), (std::set<std::string>{"target"}));
}

TEST(SafeFile, StreamsOnlyWhenAllowedAndAFifoWithoutReaderNeverHangs) {
  temp_dir dir;
  ASSERT_EQ(mkfifo((dir / "fifo").c_str(), 0600), 0);
  EXPECT_EQ(safe_file_replace((dir / "fifo").c_str(), "x", 1, 0644, 0, nullptr, 0), -EINVAL);
  EXPECT_EQ(safe_file_replace((dir / "fifo").c_str(), "x", 1, 0644, SAFE_FILE_ALLOW_DEVICE, nullptr, 0), -ENXIO);
  struct stat st {};
  ASSERT_EQ(lstat((dir / "fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(safe_file_open_read((dir / "fifo").c_str(), true), -EINVAL);
  EXPECT_EQ(safe_file_open_read("/dev/zero", true), -EINVAL);
  if (!is_root()) GTEST_SKIP() << "mknod of a block device needs root (CAP_MKNOD)";
  ASSERT_EQ(mknod((dir / "block").c_str(), S_IFBLK | 0600, makedev(7, 0)), 0) << std::strerror(errno);
  EXPECT_EQ(safe_file_replace((dir / "block").c_str(), "x", 1, 0644, SAFE_FILE_ALLOW_DEVICE, nullptr, 0), -EINVAL)
      << "a block device must never be written, even when devices are allowed";
}

TEST(SafeFile, AppendRefusesLinksHardLinksAndOtherUsersFiles) {
  temp_dir dir;
  write_text(dir / "victim", "precious\n");
  ASSERT_EQ(symlink((dir / "victim").c_str(), (dir / "link").c_str()), 0);
  EXPECT_EQ(safe_file_open_append((dir / "link").c_str(), nullptr, 0), -ELOOP);
  ASSERT_EQ(link((dir / "victim").c_str(), (dir / "hard").c_str()), 0);
  EXPECT_EQ(safe_file_open_append((dir / "hard").c_str(), nullptr, 0), -EPERM);
  EXPECT_EQ(slurp(dir / "victim"), "precious\n");
  int fd = safe_file_open_append((dir / "fresh").c_str(), nullptr, 0);
  ASSERT_GE(fd, 0);
  close(fd);
  struct stat st {};
  ASSERT_EQ(stat((dir / "fresh").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  if (!is_root()) return;
  write_text(dir / "theirs", "");
  ASSERT_EQ(chown((dir / "theirs").c_str(), 65534, 65534), 0);
  EXPECT_EQ(safe_file_open_append((dir / "theirs").c_str(), nullptr, 0), -EPERM);
}

// ---- the run report ----------------------------------------------------------------------------------------

// The old code wrote FILE.tmp.<pid> through whatever was there: links planted at the next pids' names made
// root overwrite another file. The pid `hugify run` will get is predicted the way an attacker would.
TEST(RunReport, PlantedTemporaryLinksAreNeverFollowed) {
  symlinks_unprotected guard;
  if (!guard.skip.empty()) GTEST_SKIP() << guard.skip;
  temp_dir dir;
  write_text(dir / "victim", "precious\n");
  long last = std::strtol(slurp("/proc/sys/kernel/ns_last_pid").c_str(), nullptr, 10);
  for (long pid = last + 1; pid <= last + 400; pid++)
    ASSERT_EQ(symlink((dir / "victim").c_str(), (dir / ("r.json.tmp." + std::to_string(pid))).c_str()), 0);
  auto run = test_support::hugify({"run", "--report", dir / "r.json", "--", "true"});
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(slurp(dir / "victim"), "precious\n") << "the report went through a planted link";
  ASSERT_TRUE(is_regular(dir / "r.json")) << "the report is missing or was renamed from a link";
  EXPECT_EQ(slurp(dir / "r.json").substr(0, 1), "{");
  for (const auto &name : dir.entries())
    EXPECT_TRUE(name == "victim" || name == "r.json" || name.rfind("r.json.tmp.", 0) == 0) << name << " left behind";
}

TEST(RunReport, ATargetThatIsALinkIsRefusedByTheCliAndByThePreload) {
  symlinks_unprotected guard;
  if (!guard.skip.empty()) GTEST_SKIP() << guard.skip;
  temp_dir dir;
  write_text(dir / "victim", "precious\n");
  ASSERT_EQ(symlink((dir / "victim").c_str(), (dir / "r.json").c_str()), 0);
  auto run = test_support::hugify({"run", "--report", dir / "r.json", "--", "true"});
  EXPECT_EQ(run.status, 2) << run.err;
  EXPECT_NE(run.err.find("symbolic link"), std::string::npos) << run.err;
  // The preload on its own (HUGIFY_REPORT set by hand, no CLI check): no report, the link stays a link.
  // (true: dash leaves by _exit, printenv closes stderr at exit, before the report says why it is missing)
  auto direct = test_support::run({"true"}, {{"LD_PRELOAD", HUGIFY_PRELOAD_PATH},
                                                                 {"HUGIFY_REPORT", dir / "r.json"},
                                                                 {"HUGIFY_TEXT", "0"},
                                                                 {"HUGIFY_VERBOSE", "1"}});
  EXPECT_EQ(direct.status, 0) << direct.err;
  EXPECT_NE(direct.err.find("symbolic link"), std::string::npos) << "status " << direct.status << ": " << direct.err;
  EXPECT_EQ(slurp(dir / "victim"), "precious\n");
  EXPECT_TRUE(is_link(dir / "r.json"));
  EXPECT_EQ(dir.entries(), (std::set<std::string>{"victim", "r.json"}));
}

// --json=FILE and bench --chart FILE used to be opened with fopen: through a planted link, onto a block
// device. They follow the same file rules as the report now, checked before any work is done.
TEST(OutputFiles, JsonAndChartFilesNeverGoThroughALinkAndAreWrittenWhole) {
  symlinks_unprotected guard;
  if (!guard.skip.empty()) GTEST_SKIP() << guard.skip;
  temp_dir dir;
  write_text(dir / "victim", "precious\n");
  ASSERT_EQ(symlink((dir / "victim").c_str(), (dir / "s.json").c_str()), 0);
  ASSERT_EQ(symlink((dir / "victim").c_str(), (dir / "c.svg").c_str()), 0);
  auto status = test_support::hugify({"status", "--json=" + (dir / "s.json")});
  EXPECT_EQ(status.status, 2) << status.err;
  EXPECT_NE(status.err.find("--json " + (dir / "s.json") + " is a symbolic link"), std::string::npos) << status.err;
  auto bench = test_support::hugify({"bench", "chase", "--quick", "--chart", dir / "c.svg"});
  EXPECT_EQ(bench.status, 2) << bench.err;
  EXPECT_NE(bench.err.find("--chart " + (dir / "c.svg") + " is a symbolic link"), std::string::npos) << bench.err;
  EXPECT_EQ(bench.out, "") << "nothing ran before the check";
  EXPECT_EQ(slurp(dir / "victim"), "precious\n");
  EXPECT_TRUE(is_link(dir / "s.json") && is_link(dir / "c.svg"));
  // A directory is refused; a missing directory is said at once.
  EXPECT_EQ(test_support::hugify({"elf", "--json=" + dir.path, "/bin/true"}).status, 2);
  auto missing = test_support::hugify({"elf", "--json=" + (dir / "no/such.json"), "/bin/true"});
  EXPECT_EQ(missing.status, 2) << missing.err;
  EXPECT_NE(missing.err.find("cannot write"), std::string::npos) << missing.err;
  // A regular file is replaced whole (a new inode, no temporary left), with the text still on stdout.
  write_text(dir / "e.json", std::string(100000, '\x01')); // JSON never holds a raw control character
  struct stat before {};
  ASSERT_EQ(stat((dir / "e.json").c_str(), &before), 0);
  auto elf = test_support::hugify({"elf", "--json=" + (dir / "e.json"), "/bin/true"});
  ASSERT_EQ(elf.status, 0) << elf.err;
  EXPECT_NE(elf.out, "");
  std::string json = slurp(dir / "e.json");
  EXPECT_EQ(json.rfind("{\n  \"schema\": \"hugify.elf/1\"", 0), 0u) << json.substr(0, 200);
  EXPECT_EQ(json.find('\x01'), std::string::npos) << "the old contents are gone";
  struct stat after {};
  ASSERT_EQ(stat((dir / "e.json").c_str(), &after), 0);
  EXPECT_NE(before.st_ino, after.st_ino) << "replaced by rename, not rewritten in place";
  EXPECT_EQ(dir.entries(), (std::set<std::string>{"victim", "s.json", "c.svg", "e.json"}));
  // A character device the user names is written into (here /dev/null), not replaced.
  EXPECT_EQ(test_support::hugify({"elf", "--json=/dev/null", "/bin/true"}).status, 0);
  struct stat null {};
  ASSERT_EQ(stat("/dev/null", &null), 0);
  EXPECT_TRUE(S_ISCHR(null.st_mode));
}

// Children of a device target used to create `<device>.<pid>` files next to it (/dev/null.1234 in /dev).
TEST(RunReport, ChildrenOfADeviceTargetCreateNoSiblings) {
  if (!is_root()) GTEST_SKIP() << "mknod of a null device needs root (CAP_MKNOD)";
  temp_dir dir;
  ASSERT_EQ(mknod((dir / "null").c_str(), S_IFCHR | 0666, makedev(1, 3)), 0) << std::strerror(errno);
  auto run = test_support::hugify({"run", "--report", dir / "null", "--", "sh", "-c", "printenv HOME >/dev/null; "
                                   "printenv PATH >/dev/null; exit 4"});
  EXPECT_EQ(run.status, 4) << run.err;
  EXPECT_EQ(dir.entries(), (std::set<std::string>{"null"}));
  struct stat st {};
  ASSERT_EQ(lstat((dir / "null").c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

TEST(RunReport, AFifoTargetWithoutAReaderDoesNotHang) {
  temp_dir dir;
  ASSERT_EQ(mkfifo((dir / "fifo").c_str(), 0600), 0);
  auto run = guarded_hugify({"run", "--verbose", "--report", dir / "fifo", "--", "true"});
  ASSERT_NE(run.status, 124) << "hugify run hung on a FIFO report target";
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.err.find("without a reader"), std::string::npos) << run.err;
}

// ---- the perf map ------------------------------------------------------------------------------------------

struct perf_run {
  command_result result;
  std::string map;  // /tmp/perf-PID.map
};

// text_program --remap --perf-map, with `plant` run in the child (knowing its pid) before the exec.
template <typename Plant>
perf_run run_perf_map(Plant plant) {
  perf_run r;
  int out[2];
  if (pipe(out) != 0) return r;
  pid_t pid = fork();
  if (pid == 0) {
    std::string map = "/tmp/perf-" + std::to_string(getpid()) + ".map";
    plant(map);
    dup2(out[1], 1);
    close(out[0]);
    std::string program = test_support::helper_path("text_program_static");
    execl(program.c_str(), program.c_str(), "--remap", "--perf-map", static_cast<char *>(nullptr));
    _exit(127);
  }
  close(out[1]);
  char buf[65536];
  ssize_t n;
  while ((n = read(out[0], buf, sizeof buf)) > 0) r.result.out.append(buf, static_cast<size_t>(n));
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  r.result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.map = "/tmp/perf-" + std::to_string(pid) + ".map";
  return r;
}

bool code_moved(const command_result &r) { return r.out.find("copy-swap") != std::string::npos; }

TEST(PerfMap, PlantedLinksAreRefusedAndTheMapIsPrivate) {
  symlinks_unprotected guard;
  if (!guard.skip.empty()) GTEST_SKIP() << guard.skip;
  temp_dir dir;
  write_text(dir / "victim", "precious\n");
  std::string victim = dir / "victim", dangling = dir / "created-by-root";

  auto own = run_perf_map([](const std::string &) {});
  if (!code_moved(own.result)) {
    std::remove(own.map.c_str());
    GTEST_SKIP() << "the text remap moved no code on this machine (THP?):\n" << own.result.out;
  }
  struct stat st {};
  ASSERT_EQ(lstat(own.map.c_str(), &st), 0) << own.result.out;
  EXPECT_EQ(st.st_mode & 07777, 0600u) << "the perf map shows code addresses: readable by its owner only";
  std::remove(own.map.c_str());

  auto linked = run_perf_map([&](const std::string &map) { symlink(victim.c_str(), map.c_str()); });
  EXPECT_EQ(slurp(victim), "precious\n") << "symbols were appended through a planted link";
  EXPECT_NE(linked.result.out.find("perf-map failed"), std::string::npos) << linked.result.out;
  EXPECT_TRUE(is_link(linked.map));
  std::remove(linked.map.c_str());

  auto dangling_run = run_perf_map([&](const std::string &map) { symlink(dangling.c_str(), map.c_str()); });
  EXPECT_FALSE(is_regular(dangling)) << "a dangling link made root create a file";
  std::remove(dangling_run.map.c_str());

  if (!is_root()) return;
  auto theirs = run_perf_map([](const std::string &map) {
    int fd = open(map.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd >= 0) close(fd);
    if (chown(map.c_str(), 65534, 65534) != 0) _exit(126);
  });
  EXPECT_EQ(slurp(theirs.map), "") << "appended to a file another user owns";
  EXPECT_NE(theirs.result.out.find("owned by another user"), std::string::npos) << theirs.result.out;
  std::remove(theirs.map.c_str());
}

// ---- readers that expect a file ---------------------------------------------------------------------------

TEST(Readers, ElfOfAFifoOrDevZeroEndsAtOnce) {
  temp_dir dir;
  ASSERT_EQ(mkfifo((dir / "fifo").c_str(), 0600), 0);
  for (std::string path : {dir / "fifo", std::string("/dev/zero")}) {
    auto elf = guarded_hugify({"elf", path});
    ASSERT_NE(elf.status, 124) << "hugify elf hung on " << path;
    EXPECT_EQ(elf.status, 1) << elf.err;
    EXPECT_NE(elf.err.find("not a regular file"), std::string::npos) << elf.err;
  }
}

// `hugify run` reads CMD (its #! line, its ELF header) before it runs it: an executable FIFO must not hang it.
TEST(Readers, RunOfAFifoCommandEndsAtOnce) {
  temp_dir dir;
  ASSERT_EQ(mkfifo((dir / "fifo").c_str(), 0700), 0);
  auto run = guarded_hugify({"run", "--", dir / "fifo"});
  ASSERT_NE(run.status, 124) << "hugify run hung reading a FIFO";
  EXPECT_EQ(run.status, 126) << run.err;
}

// Every file of a captured tree replaced by a FIFO, then by a link to /dev/zero: status and pool show read
// them all and must end (what cannot be read is listed), never hang or grow.
TEST(Readers, StatusAndPoolOverATreeOfFifosAndDevZero) {
  for (const char *kind : {"fifo", "zero"}) {
    temp_dir dir;
    ASSERT_EQ(test_support::run({"cp", "-r", std::string(HUGIFY_FIXTURES_DIR) + "/pool/kvm-6.18/.", dir.path}).status, 0);
    auto files = test_support::run({"find", dir.path, "-type", "f"});
    std::istringstream list(files.out);
    std::string file;
    int replaced = 0;
    while (std::getline(list, file)) {
      ASSERT_EQ(unlink(file.c_str()), 0);
      if (std::strcmp(kind, "fifo") == 0) ASSERT_EQ(mkfifo(file.c_str(), 0600), 0);
      else ASSERT_EQ(symlink("/dev/zero", file.c_str()), 0);
      replaced++;
    }
    ASSERT_GT(replaced, 20);
    for (std::vector<std::string> args : {std::vector<std::string>{"status", "--root", dir.path},
                                          std::vector<std::string>{"status", "--json", "--root", dir.path},
                                          std::vector<std::string>{"pool", "--root", dir.path}}) {
      auto r = guarded_hugify(args);
      ASSERT_NE(r.status, 124) << kind << ": hugify " << args[0] << " hung";
      EXPECT_LT(r.status, 4) << kind << ": " << r.err;
    }
  }
}

// ---- inputs that wrap or inject ----------------------------------------------------------------------------

// (bytes + size - 1) / size wrapped to 0 pages: `pool set` cleared the pool and said it was done.
TEST(PoolInput, ByteCountsThatWrapNeverClearThePool) {
  temp_dir dir;
  ASSERT_EQ(test_support::run({"cp", "-r", std::string(HUGIFY_FIXTURES_DIR) + "/pool/kvm-6.18/.", dir.path}).status, 0);
  std::string knob = dir / "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages";
  std::string before = slurp(knob);
  auto set = test_support::hugify({"pool", "set", "--bytes", "18446744073709551615", "--size", "2M", "--root", dir.path});
  EXPECT_NE(set.status, 0) << set.out;
  EXPECT_NE(set.out.find("8796093022208"), std::string::npos) << "the page count must round up, not wrap:\n" << set.out;
  EXPECT_EQ(slurp(knob), before) << "the pool was changed";
  auto count = test_support::hugify({"pool", "set", "2M=18446744073709551615", "--dry-run", "--root", dir.path});
  EXPECT_EQ(count.status, 2) << count.out << count.err;
  EXPECT_EQ(slurp(knob), before);
}

TEST(PoolInput, MountDirCannotInjectIntoTheUnit) {
  auto newline = test_support::hugify({"pool", "mount", "--dir", "/mnt/x\nExecStartPre=/bin/touch /tmp/owned", "--persist",
                                       "--dry-run"});
  EXPECT_EQ(newline.status, 2) << newline.out;
  EXPECT_EQ(newline.out.find("ExecStartPre"), std::string::npos) << newline.out;
  EXPECT_NE(newline.err.find("control character"), std::string::npos) << newline.err;
  auto long_dir = test_support::hugify({"pool", "mount", "--dir", "/mnt/" + std::string(1100, 'a'), "--dry-run"});
  EXPECT_EQ(long_dir.status, 2) << long_dir.err;
  auto dots = test_support::hugify({"pool", "mount", "--dir", "/mnt/../etc", "--persist", "--dry-run"});
  EXPECT_EQ(dots.status, 2) << dots.err;
  auto name = test_support::hugify({"pool", "mount", "--dir", "/mnt/" + std::string(100, '-'), "--persist", "--dry-run"});
  EXPECT_EQ(name.status, 2) << "an escaped unit name over 255 characters:\n" << name.err;

  auto percent = test_support::hugify({"pool", "mount", "--dir", "/mnt/a%b c-d", "--persist", "--dry-run"});
  ASSERT_EQ(percent.status, 0) << percent.err;
  EXPECT_NE(percent.out.find("Where=/mnt/a%%b c-d\n"), std::string::npos) << "specifiers escaped:\n" << percent.out;
  auto escape = test_support::run({"systemd-escape", "--path", "/mnt/a%b c-d"});
  std::string unit = escape.status == 0 ? escape.out.substr(0, escape.out.find('\n')) + ".mount" : "mnt-a\\x25b\\x20c\\x2dd.mount";
  EXPECT_NE(percent.out.find("/etc/systemd/system/" + unit), std::string::npos) << unit << "\n" << percent.out;
}

TEST(PoolInput, MountDirRules) {
  char reason[256] = "";
  EXPECT_EQ(pool_check_mount_dir("/dev/hugepages1G", reason, sizeof reason), 0) << reason;
  EXPECT_EQ(pool_check_mount_dir("/a\tb", nullptr, 0), -EINVAL);
  EXPECT_EQ(pool_check_mount_dir("/a/./b", nullptr, 0), -EINVAL);
  EXPECT_EQ(pool_check_mount_dir("/a/..", nullptr, 0), -EINVAL);
  EXPECT_EQ(pool_check_mount_dir("/a/.hidden/..b", nullptr, 0), 0);
  EXPECT_EQ(pool_check_mount_dir("relative", nullptr, 0), -EINVAL);
  EXPECT_EQ(pool_check_mount_dir(("/" + std::string(1023, 'x')).c_str(), nullptr, 0), -ENAMETOOLONG);
}

// An LD_PRELOAD over 8 KiB was cut: the user's last entry lost, hugify's preload dropped, no report.
TEST(RunInput, ALongLdPreloadIsKeptWholeAndThePreloadAdded) {
  temp_dir dir;
  std::string list;
  for (int i = 0; list.size() < 10 * 1024; i++) list += "/nonexistent/hugify-test/lib" + std::to_string(i) + ".so:";
  list += "/nonexistent/hugify-test/last.so";
  auto run = test_support::hugify({"run", "--report", dir / "r.json", "--", "printenv", "LD_PRELOAD"},
                                  {{"LD_PRELOAD", list}});
  EXPECT_EQ(run.status, 0) << run.err.substr(run.err.size() > 2000 ? run.err.size() - 2000 : 0);
  char preload[PATH_MAX];
  ASSERT_NE(realpath(HUGIFY_PRELOAD_PATH, preload), nullptr);
  EXPECT_EQ(run.out, list + ":" + preload + "\n");
  EXPECT_TRUE(is_regular(dir / "r.json")) << "the preload did not run: no report";
}

// ---- messages that say what is really wrong -----------------------------------------------------------------

TEST(Messages, LowRowsSayWhatIsWrong) {
  auto status = test_support::hugify({"status", "--root", "/nonexistent"});
  EXPECT_EQ(status.status, 2) << status.out;
  EXPECT_NE(status.err.find("No such file or directory"), std::string::npos) << status.err;
  auto pool = test_support::hugify({"pool", "set", "2M=4", "--root", "/nonexistent"});
  EXPECT_EQ(pool.status, 2) << pool.err;
  EXPECT_EQ(pool.err.find("not understood"), std::string::npos) << pool.err;
  EXPECT_NE(pool.err.find("/nonexistent"), std::string::npos) << pool.err;

  temp_dir dir;
  auto dashes = test_support::run({"sh", "-c", "cd \"$0\" && exec \"$1\" run --report -- true", dir.path, HUGIFY_CLI_PATH});
  EXPECT_EQ(dashes.status, 2) << dashes.err;
  EXPECT_TRUE(dir.entries().empty()) << "a file named -- was written";

  auto verbose = test_support::hugify({"run", "--verbose", "--", "true"}, {{"HUGIFY_TEXT_MIN_SIZE", "banana"}});
  size_t first = verbose.err.find("HUGIFY_TEXT_MIN_SIZE=banana");
  ASSERT_NE(first, std::string::npos) << verbose.err;
  EXPECT_EQ(verbose.err.find("HUGIFY_TEXT_MIN_SIZE=banana", first + 1), std::string::npos) << "warned twice:\n" << verbose.err;

  unsigned long flags = 0;
  std::string stat = slurp("/proc/2/stat");
  if (!parse_stat_flags(stat.c_str(), &flags) || !(flags & PROCFS_PF_KTHREAD))
    GTEST_SKIP() << "pid 2 is not a kernel thread here (a pid namespace?)";
  auto collapse = test_support::hugify({"collapse", "2"});
  EXPECT_EQ(collapse.status, 2) << collapse.err;
  EXPECT_NE(collapse.err.find("kernel thread"), std::string::npos) << collapse.err;
}

TEST(Messages, StatFlagsParserCountsFromTheLastParenthesis) {
  unsigned long flags = 0;
  ASSERT_TRUE(parse_stat_flags("42 (a) b (c)) S 1 42 42 0 -1 4194560 100 0", &flags));
  EXPECT_EQ(flags, 4194560ul);
  EXPECT_FALSE(parse_stat_flags("42 (truncated) S 1", &flags));
  EXPECT_FALSE(parse_stat_flags("no parenthesis", &flags));
}

// ---- AT_SECURE -------------------------------------------------------------------------------------------

// A setuid-root copy of a test program, run by nobody: the loader sets AT_SECURE, and HUGIFY_* must read as
// unset (with the preload in /etc/ld.so.preload, a user could otherwise steer a setuid program's report).
TEST(Secure, SetuidProgramsIgnoreHugifyVariables) {
  if (!is_root()) GTEST_SKIP() << "making a setuid-root copy needs root";
  if (test_support::run({"setpriv", "--help"}).status != 0) GTEST_SKIP() << "setpriv (util-linux) is not installed";
  temp_dir dir;
  ASSERT_EQ(chmod(dir.path.c_str(), 0755), 0);
  std::string copy = dir / "secure_options";
  ASSERT_EQ(test_support::run({"cp", test_support::helper_path("secure_options"), copy}).status, 0);
  ASSERT_EQ(chown(copy.c_str(), 0, 0), 0);
  ASSERT_EQ(chmod(copy.c_str(), 04755), 0);
  std::map<std::string, std::string> env{{"HUGIFY_REPORT", dir / "steered.json"}, {"HUGIFY_PERF_MAP", "1"}};

  auto plain = test_support::run({copy}, env); // as root: not secure, the variables apply
  EXPECT_NE(plain.out.find("secure=0\nreport=" + (dir / "steered.json") + "\nperf_map=1"), std::string::npos) << plain.out;

  auto secure = test_support::run({"setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", copy}, env);
  ASSERT_EQ(secure.status, 0) << secure.err;
  if (secure.out.find("secure=0") != std::string::npos)
    GTEST_SKIP() << dir.path << " is mounted nosuid: the copy did not run setuid";
  EXPECT_NE(secure.out.find("secure=1\nreport=\nperf_map=0"), std::string::npos) << secure.out;
}

}  // namespace

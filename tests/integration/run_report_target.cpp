// SPDX-License-Identifier: MIT
// `hugify run --report PATH` must never replace what PATH is when it is not a regular file: as root, a
// rename over or an unlink of /dev/null would break the whole machine. The test uses its own null device
// (mknod) so that a regression cannot take the real /dev/null with it.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "test_support.hpp"

namespace {

TEST(RunReport, DeviceTargetIsWrittenIntoNotReplaced) {
  char dir[] = "/tmp/hugify-report-target-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string device = std::string(dir) + "/null";
  if (mknod(device.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) {
    rmdir(dir);
    GTEST_SKIP() << "mknod of a null device needs root (CAP_MKNOD): " << std::strerror(errno);
  }
  auto result = test_support::hugify({"run", "--report", device, "--", "sh", "-c", "echo kept; exit 3"});
  EXPECT_EQ(result.status, 3) << result.err;
  EXPECT_EQ(result.out, "kept\n");
  struct stat after {};
  ASSERT_EQ(stat(device.c_str(), &after), 0);
  EXPECT_TRUE(S_ISCHR(after.st_mode)) << "the device was replaced by a regular file";
  EXPECT_EQ(after.st_rdev, makedev(1, 3));
  unlink(device.c_str());
  EXPECT_EQ(rmdir(dir), 0) << "something besides the device was left in " << dir;
}

}  // namespace

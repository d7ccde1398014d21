// The hugify command's dispatch: --help, --version, help CMD, unknown commands, exit codes.
#include <gtest/gtest.h>

#include <string>

#include "hugify.h"
#include "test_support.hpp"

namespace {

const char *const commands[] = {"status", "pool", "inspect", "top", "collapse", "run", "check", "bench", "elf"};

TEST(Cli, HelpListsEveryCommand) {
  auto result = test_support::hugify({"--help"});
  EXPECT_EQ(result.status, 0);
  for (const char *command : commands) EXPECT_NE(result.out.find(std::string("  ") + command), std::string::npos) << command;
  EXPECT_TRUE(result.err.empty());
}

TEST(Cli, Version) {
  auto result = test_support::hugify({"--version"});
  EXPECT_EQ(result.status, 0);
  EXPECT_EQ(result.out, std::string("hugify ") + HUGIFY_VERSION_STRING + "\n");
  EXPECT_STREQ(hugify_version(), HUGIFY_VERSION_STRING);
}

TEST(Cli, HelpForEachCommandIsItsUsage) {
  for (const char *command : commands) {
    auto help = test_support::hugify({"help", command});
    auto flag = test_support::hugify({command, "--help"});
    EXPECT_EQ(help.status, 0) << command;
    EXPECT_EQ(flag.status, 0) << command;
    EXPECT_EQ(help.out, flag.out) << command;
    EXPECT_NE(help.out.find(std::string("usage: hugify ") + command), std::string::npos) << help.out;
  }
}

TEST(Cli, BadUsageIsExitTwoOnStderr) {
  auto none = test_support::hugify({});
  EXPECT_EQ(none.status, 2);
  EXPECT_NE(none.err.find("usage: hugify"), std::string::npos);
  auto unknown = test_support::hugify({"frobnicate"});
  EXPECT_EQ(unknown.status, 2);
  EXPECT_NE(unknown.err.find("'frobnicate' is not a command"), std::string::npos) << unknown.err;
  EXPECT_TRUE(unknown.out.empty());
  auto help_unknown = test_support::hugify({"help", "frobnicate"});
  EXPECT_EQ(help_unknown.status, 2);
}

}  // namespace

// SPDX-License-Identifier: MIT
// The hugify command's dispatch: --help, --version, help CMD, unknown commands, exit codes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <sstream>
#include <string>
#include <vector>

#include "hugify.h"
#include "test_support.hpp"

namespace {

// The commands, from the command table itself (main.c's, as `hugify --help` lists it: "  NAME  summary"
// under "Commands:"), so a new command is covered here without a list to keep.
std::vector<std::string> command_table() {
  std::vector<std::string> names;
  std::istringstream lines(test_support::hugify({"--help"}).out);
  bool in_table = false;
  for (std::string line; std::getline(lines, line);) {
    if (line == "Commands:") in_table = true;
    else if (in_table && line.rfind("  ", 0) == 0) names.push_back(line.substr(2, line.find(' ', 2) - 2));
    else if (in_table) break;
  }
  return names;
}

const std::vector<std::string> commands = command_table();

TEST(Cli, HelpListsEveryCommand) {
  auto result = test_support::hugify({"--help"});
  EXPECT_EQ(result.status, 0);
  EXPECT_GE(commands.size(), 10u) << result.out;
  // every command of the table has its page, docs/NAME.md (fixtures/ sits beside docs/'s parent's tests/)
  for (const std::string &command : commands) {
    std::string page = std::string(HUGIFY_FIXTURES_DIR) + "/../../docs/" + command + ".md";
    EXPECT_EQ(access(page.c_str(), R_OK), 0) << page;
  }
  EXPECT_TRUE(result.err.empty());
}

TEST(Cli, Version) {
  auto result = test_support::hugify({"--version"});
  EXPECT_EQ(result.status, 0);
  EXPECT_EQ(result.out, std::string("hugify ") + HUGIFY_VERSION_STRING + "\n");
  EXPECT_STREQ(hugify_version(), HUGIFY_VERSION_STRING);
}

TEST(Cli, HelpForEachCommandIsItsUsage) {
  for (const std::string &command : commands) {
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

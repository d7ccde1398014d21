// SPDX-License-Identifier: MIT
// The man pages and the bash completion the build generates from the tables of --help (src/cli/manual.c):
// every page renders without a warning, lists exactly the options its command's --help lists, and the
// completion offers every option of every command.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>
#include <unistd.h>
#include <vector>

#include "test_support.hpp"

namespace {

const std::string man_dir = std::string(HUGIFY_BUILD_DIR) + "/man";
const std::string completion = std::string(HUGIFY_BUILD_DIR) + "/completion/hugify";

// The commands `hugify --help` lists ("  NAME  summary" under "Commands:").
std::vector<std::string> commands() {
  auto help = test_support::hugify({"--help"});
  std::vector<std::string> names;
  std::regex line("^  ([a-z]+) +\\S", std::regex::multiline);
  for (std::sregex_iterator it(help.out.begin(), help.out.end(), line), end; it != end; ++it) names.push_back((*it)[1]);
  return names;
}

// Every long option a text names ("--heap", "--json"), once.
std::set<std::string> long_options(const std::string &text) {
  std::set<std::string> names;
  std::regex option("(^|[^a-z0-9-])(--[a-z][a-z0-9-]*)");
  for (std::sregex_iterator it(text.begin(), text.end(), option), end; it != end; ++it) names.insert((*it)[2]);
  return names;
}

// The options of --help's option lines ("  --name VALUE  help", "  -x, --name  help").
std::set<std::string> option_lines(const std::string &help) {
  std::set<std::string> names;
  std::regex line("^  (-[a-zA-Z], )?(--[a-z][a-z0-9-]*)", std::regex::multiline);
  for (std::sregex_iterator it(help.begin(), help.end(), line), end; it != end; ++it) names.insert((*it)[2]);
  return names;
}

// A page's roff as plain words: comments dropped, \- is '-', font changes and \& dropped.
std::string roff_words(const std::string &roff) {
  std::string text = std::regex_replace(roff, std::regex("^\\.\\\\\".*$", std::regex::multiline), "");
  text = std::regex_replace(text, std::regex("\\\\-"), "-");
  return std::regex_replace(text, std::regex("\\\\f[BIRP]|\\\\&"), "");
}

std::string join(const std::set<std::string> &words) {
  std::string out;
  for (const auto &w : words) out += w + " ";
  return out;
}

TEST(Manual, EveryCommandHasAPageThatRendersWithoutWarnings) {
  if (access("/usr/bin/groff", X_OK) != 0) REQUIRE_PREREQUISITE("groff is not installed (Debian: groff-base)");
  auto names = commands();
  ASSERT_GE(names.size(), 10u);
  std::vector<std::string> pages = {"hugify"};
  for (const auto &name : names) pages.push_back("hugify-" + name);
  for (const auto &page : pages) {
    std::string path = man_dir + "/" + page + ".1";
    ASSERT_EQ(access(path.c_str(), R_OK), 0) << path << " was not generated";
    // -ww: every warning; -z: no output, only the diagnostics.
    auto groff = test_support::run({"groff", "-ww", "-z", "-man", "-Tutf8", path}, {{"LC_ALL", "C.UTF-8"}});
    EXPECT_EQ(groff.status, 0) << page;
    EXPECT_EQ(groff.err, "") << page;
    if (access("/usr/bin/mandoc", X_OK) == 0) {
      auto lint = test_support::run({"mandoc", "-T", "lint", "-W", "warning", path});
      EXPECT_EQ(lint.out + lint.err, "") << page;
    }
  }
}

TEST(Manual, EachPageListsExactlyTheOptionsOfHelp) {
  for (const auto &name : commands()) {
    auto help = test_support::hugify({name, "--help"});
    ASSERT_EQ(help.status, 0) << name;
    std::string page = roff_words(test_support::read_file(man_dir + "/hugify-" + name + ".1"));
    auto from_help = long_options(help.out), from_page = long_options(page);
    EXPECT_EQ(join(from_page), join(from_help)) << "hugify-" << name << "(1) and hugify " << name << " --help";
    for (const auto &option : option_lines(help.out))
      EXPECT_TRUE(from_page.count(option)) << "hugify-" << name << "(1) lacks " << option;
  }
}

// What the completion offers for `hugify WORDS...` (the last word being completed).
std::set<std::string> complete(const std::vector<std::string> &words) {
  std::string array = "hugify";
  for (const auto &w : words) array += " '" + w + "'";
  std::string script = "source '" + completion + "'; COMP_WORDS=(" + array + "); COMP_CWORD=" +
                       std::to_string(words.size()) + "; _hugify; printf '%s\\n' \"${COMPREPLY[@]}\"";
  auto result = test_support::run({"bash", "--norc", "-c", script});
  EXPECT_EQ(result.status, 0) << result.err;
  std::set<std::string> offered;
  std::regex line("[^\\n]+");
  for (std::sregex_iterator it(result.out.begin(), result.out.end(), line), end; it != end; ++it) offered.insert(it->str());
  return offered;
}

TEST(Manual, CompletionOffersEveryCommandAndItsOptions) {
  ASSERT_EQ(access(completion.c_str(), R_OK), 0) << completion << " was not generated";
  auto names = commands();
  auto first = complete({""});
  for (const auto &name : names) EXPECT_TRUE(first.count(name)) << name;
  for (const auto &name : names) {
    auto help = test_support::hugify({name, "--help"});
    auto offered = complete({name, "--"});
    auto options = option_lines(help.out);
    EXPECT_FALSE(options.empty()) << name;
    for (const auto &option : options) EXPECT_TRUE(offered.count(option)) << "hugify " << name << " " << option;
  }
  // The words of an option that takes one of a few.
  EXPECT_EQ(join(complete({"check", "--metric", ""})), "cpu wall ");
  auto heaps = complete({"run", "--heap", ""});
  EXPECT_TRUE(heaps.count("auto") && heaps.count("jemalloc")) << join(heaps);
}

} // namespace

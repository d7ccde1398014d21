// SPDX-License-Identifier: MIT
// The one option parser (src/cli/parse_options.c): every value type with its bounds, --name VALUE and
// --name=VALUE, operands mixed with options or a command line of its own, "--", values that must not
// begin with "--", unknown options with suggestions, and the --help block generated from the table.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <string>
#include <vector>

extern "C" {
#include "cli.h"
#include "parse_options.h"
}

namespace {

struct values {
  bool dry_run, verbose;
  uint64_t runs, chunk;
  double budget;
  const char *report;
  int metric;
  struct json_output json;
};

const char *const metrics[] = {"cpu", "wall", nullptr};
const option_spec table[] = {
    OPT_GROUP("Options"),
    OPT_FLAG("dry-run", 0, struct values, dry_run, "change nothing"),
    OPT_FLAG("verbose", 'v', struct values, verbose, "say more"),
    OPT_COUNT("runs", struct values, runs, "N", 6, 1000, "exactly N rounds"),
    OPT_SIZE("chunk", struct values, chunk, "SIZE", 2 << 20, "at most SIZE per call"),
    OPT_DECIMAL("budget", struct values, budget, "SECONDS", 0.5, 3600, "time to spend\nsecond line"),
    OPT_STRING("report", struct values, report, "FILE", "where the report goes"),
    OPT_ENUM("metric", struct values, metric, "cpu|wall", metrics, "what is compared"),
    OPT_JSON(struct values, json, "JSON instead of the text"),
    OPT_END,
};

struct parsed {
  int rc;
  values v;
  option_result result;
  std::vector<std::string> words;
};

parsed parse(std::vector<std::string> words, option_mode mode = OPTIONS_ANYWHERE) {
  parsed p{};
  p.words = words;
  p.words.insert(p.words.begin(), "cmd");
  std::vector<char *> argv;
  for (auto &w : p.words) argv.push_back(w.data());
  argv.push_back(nullptr);
  p.rc = option_table_parse(table, mode, (int)p.words.size(), argv.data(), &p.v, &p.result);
  return p;
}

TEST(ParseOptions, EveryTypeInBothSpellings) {
  auto p = parse({"--dry-run", "-v", "--runs", "12", "--chunk=64M", "--budget", "2.5", "--report=r.json", "--metric",
                  "wall", "--json=out.json"});
  ASSERT_EQ(p.rc, 0) << p.result.error;
  EXPECT_TRUE(p.v.dry_run);
  EXPECT_TRUE(p.v.verbose);
  EXPECT_EQ(p.v.runs, 12u);
  EXPECT_EQ(p.v.chunk, 64u << 20);
  EXPECT_DOUBLE_EQ(p.v.budget, 2.5);
  EXPECT_STREQ(p.v.report, "r.json");
  EXPECT_EQ(p.v.metric, 1);
  EXPECT_TRUE(p.v.json.wanted);
  EXPECT_STREQ(p.v.json.path, "out.json");
  EXPECT_TRUE(option_table_given(table, &p.result, "runs"));
  EXPECT_FALSE(option_table_given(table, &p.result, "no-such-option"));
  p = parse({"--json"});
  ASSERT_EQ(p.rc, 0);
  EXPECT_TRUE(p.v.json.wanted);
  EXPECT_EQ(p.v.json.path, nullptr) << "--json: stdout";
  p = parse({"--json=-"});
  EXPECT_EQ(p.v.json.path, nullptr) << "--json=-: stdout";
  EXPECT_FALSE(option_table_given(table, &p.result, "runs"));
}

TEST(ParseOptions, BadValuesSayWhatIsExpected) {
  struct {
    std::vector<std::string> words;
    const char *message;
  } cases[] = {
      {{"--runs", "3"}, "--runs '3': expected 6 to 1000"},
      {{"--runs", "12x"}, "--runs '12x': expected 6 to 1000"},
      {{"--runs", " 12"}, "--runs ' 12': expected 6 to 1000"},
      {{"--chunk", "1M"}, "--chunk '1M': expected a size of at least 2M"},
      {{"--budget", "-1"}, "--budget '-1': expected seconds from 0.5 to 3600"},
      {{"--budget", "nan"}, "--budget 'nan': expected"},
      {{"--metric", "joules"}, "--metric 'joules': expected cpu or wall"},
      {{"--report", ""}, "--report '': expected"},
      {{"--runs"}, "--runs needs a value (N)"},
      {{"--report", "--", "cmd"}, "--report needs a value (FILE)"},
      {{"--dry-run=yes"}, "--dry-run takes no value"},
      {{"--json="}, "--json=FILE needs a file name"},
      {{"--dry"}, "unknown option '--dry'; did you mean --dry-run?"},
      {{"--repor"}, "unknown option '--repor'; did you mean --report?"},
      {{"--frobnicate"}, "unknown option '--frobnicate'"},
      {{"-x"}, "unknown option '-x'"},
  };
  for (const auto &c : cases) {
    auto p = parse(c.words);
    EXPECT_EQ(p.rc, -EINVAL) << c.words[0];
    EXPECT_EQ(std::string(p.result.error).find(c.message), 0u) << p.result.error;
  }
  EXPECT_EQ(std::string(parse({"--frobnicate"}).result.error).find("did you mean"), std::string::npos)
      << "nothing near: no suggestion";
}

TEST(ParseOptions, OperandsAnywhereOrACommandOfItsOwn) {
  auto p = parse({"1234", "--dry-run", "extra", "--", "--not-an-option"});
  ASSERT_EQ(p.rc, 0) << p.result.error;
  ASSERT_EQ(p.result.operand_count, 3);
  EXPECT_EQ(p.words[(size_t)p.result.operands[0]], "1234");
  EXPECT_EQ(p.words[(size_t)p.result.operands[1]], "extra");
  EXPECT_EQ(p.words[(size_t)p.result.operands[2]], "--not-an-option") << "after --, words are operands";
  EXPECT_TRUE(p.v.dry_run);

  // run/check: the first operand starts the command, whose own options are not ours.
  p = parse({"-v", "make", "--dry-run", "-j2"}, OPTIONS_THEN_COMMAND);
  ASSERT_EQ(p.rc, 0) << p.result.error;
  EXPECT_EQ(p.result.command, 2);
  EXPECT_FALSE(p.v.dry_run);
  p = parse({"--runs", "6", "--", "--weird-command"}, OPTIONS_THEN_COMMAND);
  ASSERT_EQ(p.rc, 0) << p.result.error;
  EXPECT_EQ(p.words[(size_t)p.result.command], "--weird-command");
  p = parse({"--runs", "6"}, OPTIONS_THEN_COMMAND);
  EXPECT_EQ(p.result.command, 3) << "no command: argc";
  p = parse({"-"}, OPTIONS_ANYWHERE);
  ASSERT_EQ(p.result.operand_count, 1) << "a lone dash is an operand (stdin, stdout)";
}

TEST(ParseOptions, HelpIsGeneratedFromTheTable) {
  char *text = nullptr;
  size_t length = 0;
  FILE *out = open_memstream(&text, &length);
  option_table_help(table, out);
  fclose(out);
  std::string help(text, length);
  free(text);
  EXPECT_EQ(help.find("Options:\n"), 0u) << help;
  EXPECT_NE(help.find("\n  --dry-run         change nothing\n"), std::string::npos) << help;
  EXPECT_NE(help.find("\n  -v, --verbose     say more\n"), std::string::npos) << help;
  EXPECT_NE(help.find("\n  --runs N          exactly N rounds\n"), std::string::npos) << help;
  EXPECT_NE(help.find("\n  --budget SECONDS  time to spend\n                    second line\n"), std::string::npos) << help;
  EXPECT_NE(help.find("\n  --json[=FILE]     JSON instead of the text\n"), std::string::npos) << help;
  // Every option of the table is in the help, and nothing else starts with "--".
  size_t options = 0;
  for (size_t at = help.find("--"); at != std::string::npos; at = help.find("--", at + 2)) options++;
  EXPECT_EQ(options, 8u) << help;
}

// A list option (a callback that stores each value) and a configuration file's settings through the same
// table: the same checks, the same stores, messages that name the setting without "--".
struct list_values {
  int items[2];
  int count;
  bool once;
  double interval;
  struct json_output json;
};

int add_item(void *values, const char *value) {
  auto *v = static_cast<list_values *>(values);
  if (value[0] < '0' || value[0] > '9' || value[1]) return -EINVAL;
  if (v->count == 2) return -ENOSPC;
  v->items[v->count++] = value[0] - '0';
  return 0;
}

const option_spec list_table[] = {
    OPT_CALLBACK("item", "DIGIT", add_item, "one digit", 2, "an item (repeat it)"),
    OPT_FLAG("once", 0, struct list_values, once, "one pass"),
    OPT_DECIMAL("interval", struct list_values, interval, "SECONDS", 0.05, 10, "time between passes"),
    OPT_JSON(struct list_values, json, "JSON"),
    OPT_END,
};

TEST(ParseOptions, ListsAndConfigurationSettingsShareTheTable) {
  list_values v{};
  option_result result;
  std::vector<std::string> words = {"cmd", "--item", "1", "--item=2"};
  std::vector<char *> argv;
  for (auto &w : words) argv.push_back(w.data());
  ASSERT_EQ(option_table_parse(list_table, OPTIONS_ANYWHERE, (int)argv.size(), argv.data(), &v, &result), 0) << result.error;
  EXPECT_EQ(v.count, 2);
  EXPECT_EQ(v.items[1], 2);
  EXPECT_EQ(option_table_set(list_table, "item", "3", &v, &result), -EINVAL);
  EXPECT_STREQ(result.error, "item '3': at most 2 of them");
  v.count = 0;
  EXPECT_EQ(option_table_set(list_table, "item", "x", &v, &result), -EINVAL);
  EXPECT_STREQ(result.error, "item 'x': expected one digit");
  EXPECT_EQ(option_table_set(list_table, "once", "yes", &v, &result), 0);
  EXPECT_TRUE(v.once);
  EXPECT_EQ(option_table_set(list_table, "once", "perhaps", &v, &result), -EINVAL);
  EXPECT_EQ(option_table_set(list_table, "interval", "0.5", &v, &result), 0);
  EXPECT_DOUBLE_EQ(v.interval, 0.5);
  EXPECT_EQ(option_table_set(list_table, "interval", "99", &v, &result), -EINVAL);
  EXPECT_STREQ(result.error, "interval '99': expected seconds from 0.05 to 10");
  EXPECT_EQ(option_table_set(list_table, "intervl", "1", &v, &result), -EINVAL);
  EXPECT_STREQ(result.error, "unknown setting 'intervl'; did you mean interval?");
  EXPECT_EQ(option_table_set(list_table, "json", "1", &v, &result), -EINVAL) << "--json is never a setting";
}

TEST(ExitCodes, OneMappingOfLibraryResults) {
  EXPECT_EQ(exit_code_for(0), EXIT_DONE);
  EXPECT_EQ(exit_code_for(-EPERM), EXIT_PRIVILEGE);
  EXPECT_EQ(exit_code_for(-EACCES), EXIT_PRIVILEGE);
  EXPECT_EQ(exit_code_for(-ENOSYS), EXIT_PRIVILEGE);
  EXPECT_EQ(exit_code_for(-EINVAL), EXIT_USAGE);
  EXPECT_EQ(exit_code_for(-ENOMEM), EXIT_SHORT);
  EXPECT_EQ(exit_code_for(-ESRCH), EXIT_SHORT);
}

// The table's own rules (option_table_check, as git's parse_options_check): each planted mistake is named,
// and option_table_parse refuses a bad table before reading argv.
TEST(OptionTable, ChecksItsOwnRows) {
  char error[256] = "";
  EXPECT_EQ(option_table_check(table, error, sizeof error), 0) << error;
  const option_spec twice[] = {OPT_FLAG("dry-run", 0, struct values, dry_run, "a"),
                               OPT_FLAG("dry-run", 0, struct values, verbose, "b"), OPT_END};
  EXPECT_EQ(option_table_check(twice, error, sizeof error), -EINVAL);
  EXPECT_STREQ(error, "option table: --dry-run appears twice");
  const option_spec same_short[] = {OPT_FLAG("dry-run", 'v', struct values, dry_run, "a"),
                                    OPT_FLAG("verbose", 'v', struct values, verbose, "b"), OPT_END};
  EXPECT_EQ(option_table_check(same_short, error, sizeof error), -EINVAL);
  EXPECT_STREQ(error, "option table: --verbose has the short name of an earlier option");
  const option_spec no_words[] = {OPT_ENUM("metric", struct values, metric, "M", nullptr, "a"), OPT_END};
  EXPECT_EQ(option_table_check(no_words, error, sizeof error), -EINVAL);
  EXPECT_STREQ(error, "option table: --metric is an enum without its words");
  const option_spec upside_down[] = {OPT_COUNT("runs", struct values, runs, "N", 10, 2, "a"), OPT_END};
  EXPECT_EQ(option_table_check(upside_down, error, sizeof error), -EINVAL);
  EXPECT_STREQ(error, "option table: --runs has a lower bound above its upper bound");
  std::vector<option_spec> long_table(OPTIONS_MAX_ROWS + 1, option_spec(OPT_GROUP("Options")));
  long_table.push_back(option_spec(OPT_END));
  EXPECT_EQ(option_table_check(long_table.data(), error, sizeof error), -EINVAL);
  EXPECT_STREQ(error, "option table: group Options is past row 64 (the given-bits of option_result)");
  values v{};
  option_result result;
  char arg0[] = "x", arg1[] = "--dry-run";
  char *argv[] = {arg0, arg1};
  EXPECT_EQ(option_table_parse(twice, OPTIONS_ANYWHERE, 2, argv, &v, &result), -EINVAL);
  EXPECT_STREQ(result.error, "option table: --dry-run appears twice");
}

}  // namespace

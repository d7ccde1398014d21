// The one option parser (src/cli/parse_options.c): every value type with its bounds, --name VALUE and
// --name=VALUE, operands mixed with options or a command line of its own, "--", values that must not
// begin with "--", unknown options with suggestions, and the --help block generated from the table.
#include <gtest/gtest.h>

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

TEST(ExitCodes, OneMappingOfLibraryResults) {
  EXPECT_EQ(exit_code_for(0), EXIT_DONE);
  EXPECT_EQ(exit_code_for(-EPERM), EXIT_PRIVILEGE);
  EXPECT_EQ(exit_code_for(-EACCES), EXIT_PRIVILEGE);
  EXPECT_EQ(exit_code_for(-ENOSYS), EXIT_PRIVILEGE);
  EXPECT_EQ(exit_code_for(-EINVAL), EXIT_USAGE);
  EXPECT_EQ(exit_code_for(-ENOMEM), EXIT_SHORT);
  EXPECT_EQ(exit_code_for(-ESRCH), EXIT_SHORT);
}

}  // namespace

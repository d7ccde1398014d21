// SPDX-License-Identifier: MIT
// The format layer (src/format): the JSON writer read back with jansson (strict: invalid UTF-8 is an
// error), its escaping of every kind of byte, tables, percent and fraction formatting.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include "test_support.hpp"

extern "C" {
#include "format.h"
#include "prometheus.h"
#include "hugify.h"
}

namespace {

// What `write` prints to a FILE.
std::string capture(const std::function<void(FILE *)> &write) {
  char *buffer = nullptr;
  size_t size = 0;
  FILE *out = open_memstream(&buffer, &size);
  write(out);
  fclose(out);
  std::string text(buffer, size);
  free(buffer);
  return text;
}

// One document with one string member "s" = value; returns the JSON text.
std::string document_with(const std::string &value) {
  return capture([&](FILE *out) {
    json_writer j;
    json_begin(&j, out, "hugify.test/1");
    json_put_string(&j, "s", value.c_str());
    json_end(&j);
  });
}

// The string member "s" as jansson reads it back (UTF-8), or fails the test.
std::string read_back(const std::string &value) {
  std::string text = document_with(value), error;
  auto doc = test_support::parse_json(text, &error);
  EXPECT_TRUE(doc.present()) << error << "\n" << text;
  return doc["s"].text();
}

TEST(JsonWriter, NestsAndReadsBackWithJansson) {
  std::string text = capture([](FILE *out) {
    json_writer j;
    json_begin(&j, out, "hugify.test/1");
    json_put_u64(&j, "big_bytes", UINT64_C(1) << 52);
    json_put_i64(&j, "negative", -42);
    json_put_double(&j, "half", 0.5);
    json_put_double(&j, "not_a_number", NAN);
    json_put_double(&j, "infinite", INFINITY);
    json_put_bool(&j, "yes", true);
    json_put_null(&j, "nothing");
    json_put_string(&j, "absent", nullptr);
    json_put_hex(&j, "address", UINT64_C(0x7f12345678));
    json_put_fraction(&j, "share_fraction", 1, 4);
    json_put_fraction(&j, "empty_fraction", 1, 0);
    json_open_array(&j, "list");
    json_put_u64(&j, nullptr, 1);
    json_open_object(&j, nullptr);
    json_put_string(&j, "inner", "x");
    json_close(&j);
    json_open_array(&j, nullptr);
    json_close(&j);
    json_close(&j);
    json_open_object(&j, "left_open");
    json_put_u64(&j, "n", 7);
    json_end(&j); // closes what is still open
  });
  std::string error;
  auto doc = test_support::parse_json(text, &error);
  ASSERT_TRUE(doc.present()) << error << "\n" << text;
  EXPECT_EQ(doc.members().front().first, "schema") << "the schema comes first";
  EXPECT_EQ(doc["big_bytes"].u64(), UINT64_C(1) << 52);
  EXPECT_EQ(static_cast<long long>(json_integer_value(doc["negative"].get())), -42);
  EXPECT_EQ(doc["half"].number(), 0.5);
  EXPECT_TRUE(doc["not_a_number"].is_null());
  EXPECT_TRUE(doc["infinite"].is_null());
  EXPECT_TRUE(doc["yes"].flag());
  EXPECT_TRUE(doc["nothing"].is_null());
  EXPECT_TRUE(doc["absent"].is_null());
  EXPECT_EQ(doc["address"].text(), "0x7f12345678");
  EXPECT_EQ(doc["share_fraction"].number(), 0.25);
  EXPECT_TRUE(doc["empty_fraction"].is_null());
  ASSERT_EQ(doc["list"].size(), 3u);
  EXPECT_EQ(doc.at("list.1.inner").text(), "x");
  EXPECT_EQ(doc.at("list.2").size(), 0u);
  EXPECT_EQ(doc.at("left_open.n").u64(), 7u);
  EXPECT_EQ(text.back(), '\n');
}

TEST(JsonWriter, LayoutIsStable) {
  std::string text = capture([](FILE *out) {
    json_writer j;
    json_begin(&j, out, "hugify.test/1");
    json_open_array(&j, "empty");
    json_close(&j);
    json_open_object(&j, "one");
    json_put_u64(&j, "n", 1);
    json_close(&j);
    json_end(&j);
  });
  EXPECT_EQ(text, "{\n  \"schema\": \"hugify.test/1\",\n  \"empty\": [],\n  \"one\": {\n    \"n\": 1\n  }\n}\n");
}

TEST(JsonWriter, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(read_back("a\"b\\c"), "a\"b\\c");
  EXPECT_EQ(read_back("tab\there\nnew\rret"), "tab\there\nnew\rret");
  EXPECT_EQ(read_back(std::string("\x01\x1f", 2)), std::string("\x01\x1f", 2));
  EXPECT_NE(document_with("\x01").find("\\u0001"), std::string::npos);
  EXPECT_EQ(read_back("\x7f"), "\x7f"); // DEL is valid in JSON strings
}

TEST(JsonWriter, KeepsWellFormedUtf8) {
  for (const char *text : {"caf\xc3\xa9", "\xe4\xb8\xad\xe6\x96\x87", "\xf0\x9f\x90\x98", "\xef\xbf\xbd",
                           "\xf4\x8f\xbf\xbf" /* U+10FFFF */, "\xed\x9f\xbf" /* U+D7FF */})
    EXPECT_EQ(read_back(text), text) << text;
}

TEST(JsonWriter, ReplacesEveryByteThatIsNotUtf8WithUFFFD) {
  const std::string replacement = "\xef\xbf\xbd";
  struct example {
    std::string in, out;
  } examples[] = {
      {"name-\xff.so", "name-" + replacement + ".so"},                          // never in UTF-8
      {"\xc0\xaf", replacement + replacement},                                 // overlong '/'
      {"\xe0\x80\xaf", replacement + replacement + replacement},               // overlong, 3 bytes
      {"\xed\xa0\x80", replacement + replacement + replacement},               // a surrogate (U+D800)
      {"\xf4\x90\x80\x80", replacement + replacement + replacement + replacement}, // above U+10FFFF
      {"\xf5\x80", replacement + replacement},                                 // lead byte out of range
      {"\x80x", replacement + "x"},                                            // a lone continuation
      {"ab\xe2\x82", "ab" + replacement + replacement},                        // cut short at the end
      {"\xe2\x82" "a", replacement + replacement + "a"},                       // cut short by ASCII
  };
  for (const auto &e : examples) EXPECT_EQ(read_back(e.in), e.out) << e.in;
  // Keys go through the same escaping.
  std::string text = capture([](FILE *out) {
    json_writer j;
    json_begin(&j, out, "hugify.test/1");
    json_put_u64(&j, "key\xff", 1);
    json_end(&j);
  });
  EXPECT_TRUE(test_support::parse_json(text).present()) << text;
}

TEST(JsonWriter, UsageObjectHasBytesAndFraction) {
  hugify_usage usage{};
  usage.resident = 8u << 20;
  usage.base = 2u << 20;
  usage.thp = 4u << 20;
  usage.hugetlb_2m = 2u << 20;
  usage.anonymous = 6u << 20;
  usage.anon_thp = 4u << 20;
  uint64_t not_huge[HUGIFY_WHY_COUNT] = {0};
  not_huge[HUGIFY_WHY_NOHUGEPAGE] = 4096;
  std::string text = capture([&](FILE *out) {
    json_writer j;
    json_begin(&j, out, "hugify.test/1");
    json_put_usage(&j, "usage", &usage);
    json_put_not_huge(&j, "not_huge_bytes", not_huge);
    hugify_usage empty{};
    json_put_usage(&j, "empty", &empty);
    json_end(&j);
  });
  auto doc = test_support::parse_json(text);
  ASSERT_TRUE(doc.present()) << text;
  EXPECT_EQ(doc.at("usage.resident_bytes").u64(), 8u << 20);
  EXPECT_EQ(doc.at("usage.huge_bytes").u64(), 6u << 20);
  EXPECT_EQ(doc.at("usage.huge_fraction").number(), 0.75);
  EXPECT_EQ(doc.at("usage.base_bytes").u64(), 2u << 20);
  EXPECT_EQ(doc.at("usage.anon_thp_bytes").u64(), 4u << 20);
  EXPECT_TRUE(doc.at("empty.huge_fraction").is_null()) << "nothing resident: no share";
  EXPECT_EQ(doc.at("not_huge_bytes.nohugepage").u64(), 4096u);
  EXPECT_EQ(doc["not_huge_bytes"].size(), static_cast<size_t>(HUGIFY_WHY_COUNT - 1)) << "every reason but none";
  EXPECT_FALSE(doc["not_huge_bytes"].has("none"));
}

TEST(Table, WidthsFromTheContentNumbersRightAligned) {
  static const char *const headers[] = {"name", "bytes", "note"};
  static const bool right[] = {false, true, false};
  table t;
  table_init(&t, 3, headers, right);
  table_row(&t, "a", "1", "first");
  table_row(&t, "longer name", "12345", static_cast<const char *>(nullptr));
  std::string text = capture([&](FILE *out) { table_print(&t, out, "  "); });
  table_free(&t);
  EXPECT_EQ(text,
            "  name         bytes  note\n"
            "  a                1  first\n"
            "  longer name  12345  \n");
}

TEST(Table, ManyRowsGrowAndFree) {
  static const char *const headers[] = {"n"};
  table t;
  table_init(&t, 1, headers, nullptr);
  for (int i = 0; i < 100; i++) table_row(&t, std::to_string(i).c_str());
  EXPECT_EQ(t.rows, 100);
  std::string text = capture([&](FILE *out) { table_print(&t, out, nullptr); });
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 101);
  table_free(&t);
  EXPECT_EQ(t.rows, 0);
}

TEST(Numbers, PercentOfAWhole) {
  char text[16];
  format_percent(1, 8, text, sizeof text);
  EXPECT_STREQ(text, "12.5%");
  format_percent(3, 3, text, sizeof text);
  EXPECT_STREQ(text, "100.0%");
  format_percent(0, 5, text, sizeof text);
  EXPECT_STREQ(text, "0.0%");
  format_percent(1, 0, text, sizeof text);
  EXPECT_STREQ(text, "-");
}

// ---- Prometheus text format (hugify agent's metrics) ----

TEST(Prometheus, EscapesLabelsAndHelpAndPrintsNumbersExactly) {
  std::string text = capture([](FILE *out) {
    prometheus_family(out, "m_bytes", "gauge", "line one\nback\\slash");
    const char *labels[] = {"comm", "we\"ird\\na\nme", "pid", "7", nullptr};
    prometheus_sample(out, "m_bytes", labels, 9007199254740991.0);
    prometheus_sample(out, "m_bytes", nullptr, 0.25);
    prometheus_sample(out, "m_bytes", nullptr, 0.0 / 0.0);
    prometheus_sample(out, "m_bytes", nullptr, -1.0 / 0.0);
  });
  EXPECT_EQ(text,
            "# HELP m_bytes line one\\nback\\\\slash\n"
            "# TYPE m_bytes gauge\n"
            "m_bytes{comm=\"we\\\"ird\\\\na\\nme\",pid=\"7\"} 9007199254740991\n"
            "m_bytes 0.25\n"
            "m_bytes NaN\n"
            "m_bytes -Inf\n");
}

TEST(Prometheus, HistogramBucketsAreCumulativeWithInfSumAndCount) {
  const double bounds[] = {0.001, 0.01, 0.1};
  const uint64_t counts[] = {2, 0, 3, 1}; // per bucket; the last above 0.1
  std::string text = capture([&](FILE *out) { prometheus_histogram(out, "p_seconds", "pauses", bounds, 3, counts, 0.75); });
  EXPECT_EQ(text,
            "# HELP p_seconds pauses\n"
            "# TYPE p_seconds histogram\n"
            "p_seconds_bucket{le=\"0.001\"} 2\n"
            "p_seconds_bucket{le=\"0.01\"} 2\n"
            "p_seconds_bucket{le=\"0.1\"} 5\n"
            "p_seconds_bucket{le=\"+Inf\"} 6\n"
            "p_seconds_sum 0.75\n"
            "p_seconds_count 6\n");
}

}  // namespace

// SPDX-License-Identifier: MIT
// The measurement module (src/lib/measure.c): the balanced round order, the rounds driver with its stop
// rules (on a scripted "run" callback: no timing involved), verdicts, spreads and ties, the noise
// diagnosis, and one real measured child (exit status, signal, environment, output).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>

#include <csignal>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

extern "C" {
#include "measure.h"
#include "os.h"
}

namespace {

// Over a full cycle of rounds (count, or 2 x count when count is odd) every configuration runs once per
// round, in every position equally often, and right after every other one equally often.
TEST(MeasureRoundOrder, WilliamsDesignIsBalanced) {
  for (int count = 2; count <= 7; count++) {
    size_t cycle = count % 2 ? 2 * (size_t)count : (size_t)count;
    std::map<std::pair<int, int>, int> follows;
    std::map<std::pair<int, int>, int> at;
    for (size_t round = 0; round < cycle; round++) {
      std::set<int> seen;
      int previous = -1;
      for (int position = 0; position < count; position++) {
        int c = measure_round_order(round, position, count);
        ASSERT_GE(c, 0);
        ASSERT_LT(c, count);
        seen.insert(c);
        at[{position, c}]++;
        if (previous >= 0) follows[{previous, c}]++;
        previous = c;
      }
      EXPECT_EQ(seen.size(), (size_t)count) << "round " << round << " of " << count;
    }
    int per_position = (int)(cycle / count);
    for (int p = 0; p < count; p++) {
      for (int c = 0; c < count; c++) {
        EXPECT_EQ((at[{p, c}]), per_position) << count << ": " << p << "," << c;
      }
    }
    int per_pair = (int)(cycle * (count - 1) / (count * (count - 1)));
    for (int a = 0; a < count; a++)
      for (int b = 0; b < count; b++) {
        if (a == b) continue;
        EXPECT_EQ((follows[{a, b}]), per_pair) << count << ": " << a << " then " << b;
      }
  }
  EXPECT_EQ(measure_round_order(3, 0, 1), 0);
}

// A scripted run: configuration 1 takes half the baseline's time, configuration 2 the same, except for
// a disturbance in one round.
struct script {
  int calls = 0, warmups = 0, fail_at = -1;
  std::vector<int> order;
};

int scripted_run(void *context, int config, size_t round, bool warmup, double *seconds, double *system);

// A plan of `configs` configurations run by the script, at 95 %; the test sets how the rounds end.
measure_plan scripted_plan(int configs, script *s) {
  measure_plan plan = {};
  plan.configs = configs;
  plan.confidence = 0.95;
  plan.run = scripted_run;
  plan.context = s;
  return plan;
}

int scripted_run(void *context, int config, size_t round, bool warmup, double *seconds, double *system) {
  auto *s = static_cast<script *>(context);
  if (s->calls++ == s->fail_at) return -1;
  if (warmup) s->warmups++;
  else s->order.push_back(config);
  double base = 1.0 + 0.001 * (double)(round % 3);
  *seconds = config == 1 ? base / 2 : base;
  if (config == 2 && round == 4) *seconds = base * 3; /* one disturbed round */
  *system = 0.1;
  return 0;
}

TEST(MeasureRounds, FixedRoundsGivePairedRatios) {
  script s;
  std::vector<measure_series> series(3);
  measure_plan plan = scripted_plan(3, &s);
  plan.warmup = 1;
  plan.rounds = 8;
  size_t rounds = 0;
  EXPECT_EQ(measure_rounds(&plan, series.data(), &rounds), MEASURE_STOP_ROUNDS);
  EXPECT_EQ(rounds, 8u);
  EXPECT_EQ(s.warmups, 3);
  EXPECT_EQ(s.order.size(), 24u);
  for (int c = 0; c < 3; c++) EXPECT_EQ(series[c].count, 8u);
  ASSERT_EQ(series[1].ratio_rc, 0);
  EXPECT_DOUBLE_EQ(series[1].ratio.estimate, 2.0);
  EXPECT_EQ(measure_judge(&series[1].ratio, 0.02), MEASURE_GAIN);
  ASSERT_EQ(series[2].ratio_rc, 0);
  EXPECT_DOUBLE_EQ(series[2].ratio.estimate, 1.0); /* one bad round moves the median by nothing */
  EXPECT_EQ(measure_judge(&series[2].ratio, 0.02), MEASURE_TIE);
  EXPECT_STREQ(measure_stop_name(MEASURE_STOP_ROUNDS), "runs");
}

TEST(MeasureRounds, AdaptiveStopsWhenConvergedOrFailed) {
  script s;
  std::vector<measure_series> series(2);
  measure_plan plan = scripted_plan(2, &s);
  plan.budget_seconds = 3600;
  plan.precision = 0.02;
  size_t rounds = 0;
  EXPECT_EQ(measure_rounds(&plan, series.data(), &rounds), MEASURE_STOP_CONVERGED);
  EXPECT_EQ(rounds, 6u) << "the fewest rounds for a 95 % interval, already within +-2 %";

  script failing;
  failing.fail_at = 5;
  plan.context = &failing;
  EXPECT_EQ(measure_rounds(&plan, series.data(), &rounds), MEASURE_STOP_FAILED);
  EXPECT_EQ(rounds, 2u);
}

TEST(MeasureVerdict, GainLossTie) {
  stats_interval gain = {1.30, 1.20, 1.40, 0.96}, small = {1.01, 1.005, 1.02, 0.96},
                 loss = {0.80, 0.75, 0.85, 0.96}, tie = {1.10, 0.95, 1.25, 0.96};
  EXPECT_EQ(measure_judge(&gain, 0.02), MEASURE_GAIN);
  EXPECT_EQ(measure_judge(&small, 0.02), MEASURE_TIE) << "real but below the minimum gain";
  EXPECT_EQ(measure_judge(&loss, 0.02), MEASURE_LOSS);
  EXPECT_EQ(measure_judge(&tie, 0.02), MEASURE_TIE);
  EXPECT_STREQ(measure_verdict_text(MEASURE_GAIN), "measurable gain");
  EXPECT_STREQ(measure_verdict_text(MEASURE_LOSS), "measurably slower");
  EXPECT_STREQ(measure_verdict_text(MEASURE_TIE), "no measurable gain");
}

// check's verdict (measure_choose) on scripted timings fed through the rounds driver: per configuration a
// time relative to the baseline, with a round-to-round wobble and some disturbed rounds, as a shared machine
// gives them. No timing is involved.
struct timings {
  std::vector<double> relative;           // each configuration's time / the baseline's
  std::vector<std::pair<int, int>> spikes; // (configuration, round): that run took 3x (a disturbed round)
};

int timed_run(void *context, int config, size_t round, bool warmup, double *seconds, double *system) {
  auto *t = static_cast<timings *>(context);
  (void)warmup;
  double wobble = 1.0 + 0.01 * (double)((round * 7 + (size_t)config * 3) % 5) - 0.02;  // +-2 %
  *seconds = t->relative[(size_t)config] * wobble;
  for (auto spike : t->spikes)
    if (spike.first == config && (size_t)spike.second == round) *seconds *= 3;
  *system = 0.1;
  return 0;
}

// Runs `rounds` rounds of the scripted timings and returns measure_choose's answer; creditable[i] false
// marks a configuration that changed nothing (a code remap that moved no code).
measure_choice choose(timings t, size_t rounds, std::vector<bool> creditable) {
  size_t n = t.relative.size();
  std::vector<measure_series> series(n);
  measure_plan plan = {};
  plan.configs = (int)n;
  plan.confidence = 0.95;
  plan.rounds = rounds;
  plan.run = timed_run;
  plan.context = &t;
  size_t done = 0;
  EXPECT_EQ(measure_rounds(&plan, series.data(), &done), MEASURE_STOP_ROUNDS);
  std::vector<measure_candidate> candidates(n);
  for (size_t i = 0; i < n; i++) candidates[i] = {series[i].seconds, i < creditable.size() ? (bool)creditable[i] : true};
  measure_choice choice = {};
  measure_choose(candidates.data(), (int)n, done, 0.95, 0.02, 0.10, &choice);
  return choice;
}

TEST(MeasureChoose, TlbBoundWorkloadChoosesTheHeap) {
  // plain, heap (1.5x faster), heap+text (1.6x faster, but its remap moved no code): the heap, even with two
  // disturbed rounds each.
  timings t{{1.0, 0.66, 0.62}, {{1, 2}, {2, 5}, {0, 9}}};
  measure_choice c = choose(t, 12, {true, true, false});
  EXPECT_EQ(c.chosen, 1) << "heap+text moved no code, so its lower times are not the code's";
  EXPECT_EQ(c.best, 2) << "the highest estimate is still reported";
  c = choose(t, 12, {true, true, true});
  EXPECT_EQ(c.chosen, 2) << "with its code moved, heap+text measurably beats heap";
}

TEST(MeasureChoose, TheSimplestGainTheBestDoesNotMeasurablyBeat) {
  // heap 1.50x, hugetlb 1.51x: within the wobble of each other, so the simpler one (earlier) is chosen.
  timings t{{1.0, 0.666, 0.662}, {}};
  EXPECT_EQ(choose(t, 8, {}).chosen, 1);
  // hugetlb 2x: measurably better than heap, so it is chosen.
  t.relative = {1.0, 0.666, 0.5};
  EXPECT_EQ(choose(t, 8, {}).chosen, 2);
}

TEST(MeasureChoose, TinyWorkingSetHasNoMeasurableGain) {
  // Every configuration within +-2 % of plain (a working set inside every TLB), with disturbed rounds both
  // ways: no configuration is chosen.
  timings t{{1.0, 1.0, 0.995}, {{1, 0}, {0, 3}, {2, 6}}};
  measure_choice c = choose(t, 8, {});
  EXPECT_EQ(c.chosen, -1);
  EXPECT_GE(c.best, 1) << "the best estimate is still named";
  // A configuration measurably slower is never chosen either.
  t.relative = {1.0, 1.3, 1.25};
  EXPECT_EQ(choose(t, 8, {}).chosen, -1);
  // Too few rounds for an interval: nothing is measured, nothing chosen.
  t.relative = {1.0, 0.5};
  c = choose(t, 3, {});
  EXPECT_EQ(c.chosen, -1);
  EXPECT_EQ(c.best, -1);
}

// Scripted per-round figures with a +-2 % wobble: `scale` times a base that differs per round.
std::vector<double> scripted(double scale, size_t rounds, int seed) {
  std::vector<double> values(rounds);
  for (size_t r = 0; r < rounds; r++) values[r] = scale * (1.0 + 0.01 * (double)((r * 7 + (size_t)seed * 3) % 5) - 0.02);
  return values;
}

TEST(MeasureChoose, AGainWithAWorseTailIsNamedWithTheSteadyAlternative) {
  // plain; heap 1.25x faster but its p99 1.4x worse; hugetlb 1.18x faster with the tail of plain.
  const size_t rounds = 8;
  auto plain = scripted(1.0, rounds, 0), heap = scripted(0.8, rounds, 1), hugetlb = scripted(0.85, rounds, 2);
  auto plain_p99 = scripted(2e-3, rounds, 3), heap_p99 = scripted(2.8e-3, rounds, 4), hugetlb_p99 = scripted(2e-3, rounds, 5);
  auto plain_max = scripted(8e-3, rounds, 6), heap_max = scripted(8e-3, rounds, 7), hugetlb_max = scripted(8e-3, rounds, 1);
  std::vector<measure_candidate> c = {{plain.data(), true, {plain_p99.data(), plain_max.data()}},
                                      {heap.data(), true, {heap_p99.data(), heap_max.data()}},
                                      {hugetlb.data(), true, {hugetlb_p99.data(), hugetlb_max.data()}}};
  measure_choice choice;
  measure_choose(c.data(), 3, rounds, 0.95, 0.02, 0.10, &choice);
  EXPECT_EQ(choice.chosen, 1) << "the tail does not change the choice by throughput";
  EXPECT_EQ(choice.tail_worse, 1u << MEASURE_TAIL_P99) << "p99 worse, max not";
  ASSERT_EQ(choice.tail_rc[MEASURE_TAIL_P99], 0);
  EXPECT_NEAR(choice.tail[MEASURE_TAIL_P99].estimate, 1.4, 0.05);
  EXPECT_EQ(choice.tail_rc[MEASURE_TAIL_MAX], 0);
  EXPECT_EQ(choice.steady, 2) << "hugetlb gains without the worse tail";

  // The same with the max 2x worse as well, and no alternative: both bits, no steady configuration.
  auto heap_max_worse = scripted(16e-3, rounds, 7), hugetlb_p99_worse = scripted(3e-3, rounds, 5);
  c[1].latency[MEASURE_TAIL_MAX] = heap_max_worse.data();
  c[2].latency[MEASURE_TAIL_P99] = hugetlb_p99_worse.data();
  measure_choose(c.data(), 3, rounds, 0.95, 0.02, 0.10, &choice);
  EXPECT_EQ(choice.chosen, 1);
  EXPECT_EQ(choice.tail_worse, (1u << MEASURE_TAIL_P99) | (1u << MEASURE_TAIL_MAX));
  EXPECT_EQ(choice.steady, -1);
}

TEST(MeasureChoose, TailWithinNoiseOrNotMeasuredIsNotWorse) {
  const size_t rounds = 8;
  auto plain = scripted(1.0, rounds, 0), heap = scripted(0.8, rounds, 1);
  // p99 5 % higher: beyond the wobble maybe, but under the 10 % that counts.
  auto plain_p99 = scripted(2e-3, rounds, 3), heap_p99 = scripted(2.1e-3, rounds, 4);
  std::vector<measure_candidate> c = {{plain.data(), true, {plain_p99.data(), nullptr}},
                                      {heap.data(), true, {heap_p99.data(), nullptr}}};
  measure_choice choice;
  measure_choose(c.data(), 2, rounds, 0.95, 0.02, 0.10, &choice);
  EXPECT_EQ(choice.chosen, 1);
  EXPECT_EQ(choice.tail_worse, 0u);
  EXPECT_EQ(choice.tail_rc[MEASURE_TAIL_P99], 0);
  EXPECT_NE(choice.tail_rc[MEASURE_TAIL_MAX], 0) << "no max measured: not judged";
  EXPECT_EQ(choice.steady, -1);
  // A round without a figure (NaN: the load did not print it) leaves the tail unjudged.
  heap_p99[3] = std::nan("");
  heap_p99[0] = 9e-3;
  measure_choose(c.data(), 2, rounds, 0.95, 0.02, 0.10, &choice);
  EXPECT_NE(choice.tail_rc[MEASURE_TAIL_P99], 0);
  EXPECT_EQ(choice.tail_worse, 0u);
  // A better tail (0.7x) is judged a gain of latency, never "worse".
  stats_interval better = {0.7, 0.65, 0.75, 0.99};
  EXPECT_EQ(measure_judge_latency(&better, 0.10), MEASURE_GAIN);
  stats_interval worse = {1.4, 1.3, 1.5, 0.99}, straddles = {1.4, 0.9, 1.5, 0.99};
  EXPECT_EQ(measure_judge_latency(&worse, 0.10), MEASURE_LOSS);
  EXPECT_EQ(measure_judge_latency(&straddles, 0.10), MEASURE_TIE);
  EXPECT_STREQ(measure_tail_name(MEASURE_TAIL_P99), "p99");
}

TEST(MeasureSpread, MedianRangeNoisyAndTies) {
  const double steady[] = {100, 102, 101}, disturbed[] = {100, 200, 101}, faster[] = {60, 61, 62};
  measure_spread a, b, c;
  measure_spread_of(steady, 3, 0.95, 0.10, &a);
  EXPECT_DOUBLE_EQ(a.median, 101);
  EXPECT_DOUBLE_EQ(a.min, 100);
  EXPECT_DOUBLE_EQ(a.max, 102);
  EXPECT_FALSE(a.noisy);
  EXPECT_NE(a.interval_rc, 0) << "3 samples are too few for a 95 % interval";
  measure_spread_of(disturbed, 3, 0.95, 0.10, &b);
  EXPECT_TRUE(b.noisy);
  EXPECT_NEAR(b.relative_spread, 100.0 / 101.0, 1e-12);
  measure_spread_of(faster, 3, 0.95, 0.10, &c);
  EXPECT_TRUE(measure_overlap(&a, &b));
  EXPECT_FALSE(measure_overlap(&a, &c));
  const double six[] = {5, 1, 4, 2, 6, 3};
  measure_spread_of(six, 6, 0.95, 0.10, &a);
  EXPECT_EQ(a.interval_rc, 0);
  EXPECT_DOUBLE_EQ(a.interval.low, 1);
  EXPECT_DOUBLE_EQ(a.interval.high, 6);
}

TEST(MeasureNoise, NamesTheLikelyCause) {
  char text[512];
  measure_noise quiet = {0.3, 2, 0.1, 0.02};
  measure_noise_cause(&quiet, text, sizeof text);
  EXPECT_STREQ(text, "");
  measure_noise loaded = {16.0, 2, -1, -1};
  measure_noise_cause(&loaded, text, sizeof text);
  EXPECT_NE(std::string(text).find("machine load: load average 16.0 on 2 CPUs"), std::string::npos) << text;
  measure_noise kernel = {0.5, 2, 1.2, 0.4};
  measure_noise_cause(&kernel, text, sizeof text);
  EXPECT_NE(std::string(text).find("large system-time variance: kernel time varied by 120 %"), std::string::npos)
      << text;
  measure_noise both = {9.0, 2, 1.2, 0.4};
  measure_noise_cause(&both, text, sizeof text);
  EXPECT_NE(std::string(text).find("; large system-time variance"), std::string::npos) << text;
  measure_noise machine = {-1, 0, -1, -1};
  measure_noise_read(&machine);
  EXPECT_GT(machine.cpus, 0);
  EXPECT_GE(machine.load_average, 0) << "/proc/loadavg is readable here";
}

// A real child: its exit status, the signal that ended it, the environment it was given, its output in a
// memory file, and an unknown program (127).
TEST(MeasureCommand, RealChildIsMeasured) {
  int fd = memfd_create("measure_test", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  setenv("HUGIFY_MEASURE_TEST_DROPPED", "yes", 1);
  const char *argv[] = {"sh", "-c", "echo \"$HUGIFY_MEASURE_TEST_SET/${HUGIFY_MEASURE_TEST_DROPPED:-gone}\"; exit 7",
                        nullptr};
  const char *unset[] = {"HUGIFY_MEASURE_TEST_DROPPED", nullptr}, *set[] = {"HUGIFY_MEASURE_TEST_SET=given", nullptr};
  measure_command command = {argv, fd, -1, unset, set};
  measure_run run;
  ASSERT_EQ(measure_command_run(&command, &run), 0);
  EXPECT_EQ(run.status, 7);
  EXPECT_EQ(run.signal, 0);
  EXPECT_GT(run.wall_seconds, 0);
  EXPECT_GT(run.max_rss_bytes, 0);
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  char *text = nullptr;
  ASSERT_EQ(os_read_file(path, &text, nullptr), 0);
  EXPECT_STREQ(text, "given/gone\n");
  free(text);
  close(fd);
  unsetenv("HUGIFY_MEASURE_TEST_DROPPED");

  const char *killed[] = {"sh", "-c", "kill -TERM $$", nullptr};
  measure_command kill_command = {killed, -1, -1, nullptr, nullptr};
  ASSERT_EQ(measure_command_run(&kill_command, &run), 0);
  EXPECT_EQ(run.signal, SIGTERM);
  EXPECT_EQ(run.status, 128 + SIGTERM);

  int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
  const char *missing[] = {"/nonexistent/hugify-measure-test", nullptr};
  measure_command missing_command = {missing, devnull, devnull, nullptr, nullptr};
  ASSERT_EQ(measure_command_run(&missing_command, &run), 0);
  EXPECT_EQ(run.status, 127);
  close(devnull);
}

TEST(MeasurePrograms, SelfAndBeside) {
  char self[4096], found[4096];
  ASSERT_EQ(measure_self_path(self, sizeof self), 0);
  std::string name = std::string(self).substr(std::string(self).rfind('/') + 1);
  const char *candidates[] = {"no-such-program", name.c_str(), nullptr};
  ASSERT_EQ(measure_find_beside_self(candidates, found, sizeof found), 0);
  EXPECT_STREQ(found, self);
  const char *none[] = {"no-such-program", nullptr};
  EXPECT_EQ(measure_find_beside_self(none, found, sizeof found), -ENOENT);
  double a = measure_now(), b = measure_now();
  EXPECT_LE(a, b) << "monotonic";
  // The thread's CPU clock moves while the thread runs, and never faster than the wall clock.
  double cpu0 = measure_thread_cpu_now(), wall0 = measure_now();
  volatile unsigned long spin = 0;
  while (measure_thread_cpu_now() - cpu0 < 0.005 && measure_now() - wall0 < 30) spin = spin + 1;
  double cpu = measure_thread_cpu_now() - cpu0, wall = measure_now() - wall0;
  EXPECT_GE(cpu, 0.005) << "the CPU clock did not move in " << wall << " s of spinning";
  EXPECT_LE(cpu, wall + 0.001);
}

}  // namespace

// test_support.hpp - what integration tests share: running real commands, reading /proc independently
// of libhugify's own parsers, and making sure the hugetlb pool has the pages a test needs.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace test_support {

struct command_result {
  int status = -1;      // exit status, or 128 + signal
  std::string out, err; // captured stdout and stderr
};

// Run argv (argv[0] looked up in PATH), with extra environment variables set (or removed when the value
// is "\x01unset"), stdin from /dev/null. Waits for it.
command_result run(const std::vector<std::string> &argv, const std::map<std::string, std::string> &env = {});
// Run the built hugify CLI with these arguments.
command_result hugify(const std::vector<std::string> &args, const std::map<std::string, std::string> &env = {});

std::string read_file(const std::string &path);
uint64_t read_u64(const std::string &path);
std::string helper_path(const std::string &name); // a program from tests/helpers
std::string fixture(const std::string &relative); // text of tests/fixtures/<relative>

// Sum of one smaps field (in bytes) over the mappings that overlap [start, start+size), each prorated to
// the overlap — an independent read of /proc/PID/smaps, written without libhugify's parser.
uint64_t smaps_field(int pid, uintptr_t start, size_t size, const std::string &field);

// Ensure at least `pages` free (unreserved) hugetlb pages of page_size, growing the pool when we may.
// Returns "" when done, else the reason it could not (the caller skips with it). The pool is put back to
// its previous size when the test program exits.
std::string ensure_free_hugetlb(uint64_t page_size, uint64_t pages);
uint64_t free_hugetlb(uint64_t page_size); // free minus reserved

}  // namespace test_support

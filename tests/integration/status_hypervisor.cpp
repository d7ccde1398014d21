// SPDX-License-Identifier: MIT
// status_hypervisor.cpp - `hugify status` says when the machine is a virtual machine, and what that means
// for measurements: the parsers on fixed text, then the live machine against /proc/cpuinfo read here.
#include <gtest/gtest.h>
#include <jansson.h>

#include <fstream>
#include <sstream>
#include <string>

#include "test_support.hpp"

extern "C" {
#include "procfs.h"
}

namespace {

TEST(Hypervisor, CpuinfoFlagIsFoundOnlyAsAWholeWord) {
  EXPECT_TRUE(parse_cpuinfo_hypervisor("processor\t: 0\nflags\t\t: fpu vme hypervisor lahf_lm\n"));
  EXPECT_TRUE(parse_cpuinfo_hypervisor("flags\t\t: fpu hypervisor"));
  EXPECT_FALSE(parse_cpuinfo_hypervisor("flags\t\t: fpu vme lahf_lm\nbugs\t\t: hypervisor\n"));
  EXPECT_FALSE(parse_cpuinfo_hypervisor("flags\t\t: fpu nothypervisor hypervisors\n"));
  EXPECT_FALSE(parse_cpuinfo_hypervisor("processor\t: 0\n"));
  EXPECT_FALSE(parse_cpuinfo_hypervisor(""));
}

TEST(Hypervisor, SignaturesAreNamed) {
  EXPECT_STREQ(hypervisor_name("KVMKVMKVM\0\0\0"), "KVM");
  EXPECT_STREQ(hypervisor_name("Microsoft Hv"), "Hyper-V");
  EXPECT_STREQ(hypervisor_name("VMwareVMware"), "VMware");
  EXPECT_EQ(hypervisor_name("NotAKnownOne"), nullptr);
}

TEST(Hypervisor, StatusSaysWhatThisMachineIs) {
  std::ifstream in("/proc/cpuinfo");
  std::stringstream text;
  text << in.rdbuf();
  bool guest = parse_cpuinfo_hypervisor(text.str().c_str());
  auto run = test_support::hugify({"status", "--json"});
  ASSERT_EQ(run.status, 0) << run.err;
  json_error_t error;
  json_t *root = json_loads(run.out.c_str(), 0, &error);
  ASSERT_TRUE(root) << error.text;
  const json_t *hypervisor = json_object_get(root, "hypervisor");
  bool diagnosed = false;
  size_t index;
  json_t *diagnosis;
  json_array_foreach(json_object_get(root, "diagnoses"), index, diagnosis)
    if (std::string(json_string_value(json_object_get(diagnosis, "id")) ?: "") == "virtual_machine") diagnosed = true;
  if (guest) {
    ASSERT_TRUE(json_is_string(hypervisor)) << run.out;
    EXPECT_TRUE(diagnosed) << run.out;
    auto text_run = test_support::hugify({"status"});
    EXPECT_NE(text_run.out.find("virtual machine (hypervisor: " + std::string(json_string_value(hypervisor))),
              std::string::npos) << text_run.out;
  } else {
    EXPECT_TRUE(json_is_null(hypervisor)) << run.out;
    EXPECT_FALSE(diagnosed) << run.out;
  }
  json_decref(root);
}

}  // namespace

// SPDX-License-Identifier: MIT
// text_elf.cpp - hugify_elf_parse and the ELF helpers of the text remap, on the real headers of binaries
// captured from this machine kind (tests/fixtures/elf/*.ranges) and on images built here to the ELF spec.
#include <elf.h>
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "elf_image.h"
#include "hugify.h"
extern "C" {
#include "options.h"
}
#include "test_support.hpp"

namespace {

constexpr uint64_t MiB = uint64_t(1) << 20;

// A fixture file: the real bytes of a binary at their real offsets, zeros elsewhere. The image is an
// untouched anonymous mapping of the file's size, so a 150 MiB file costs only the pages written.
struct sparse_image {
  void *data = MAP_FAILED;
  size_t size = 0;
  explicit sparse_image(const std::string &name) {
    std::istringstream in(test_support::fixture("elf/" + name + ".ranges"));
    std::string word;
    while (in >> word) {
      if (word[0] == '#') { std::getline(in, word); continue; }
      if (word == "size") {
        in >> size;
        data = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      } else if (word == "at") {
        uint64_t offset;
        std::string hex;
        in >> offset >> hex;
        if (data == MAP_FAILED || offset + hex.size() / 2 > size) { ADD_FAILURE() << "bad fixture " << name; return; }
        for (size_t i = 0; i < hex.size() / 2; i++)
          static_cast<unsigned char *>(data)[offset + i] = static_cast<unsigned char>(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
      }
    }
  }
  ~sparse_image() { if (data != MAP_FAILED) munmap(data, size); }
};

hugify_elf_info parse_fixture(const std::string &name, int *rc = nullptr) {
  sparse_image image(name);
  hugify_elf_info info;
  EXPECT_NE(image.data, MAP_FAILED);
  int r = hugify_elf_parse(image.data, image.size, &info);
  if (rc) *rc = r;
  else EXPECT_EQ(r, 0) << info.reason;
  return info;
}

TEST(ElfFixtures, NodeIsAFixedAddressExecutableWith24MiBInWindows) {
  // readelf -lW /usr/bin/node: R E segments 0xb6f000+0x1e90, 0xb72000+0x1a8bca0, 0x2600000+0x1f1.
  hugify_elf_info info = parse_fixture("node");
  EXPECT_EQ(info.kind, HUGIFY_ELF_EXECUTABLE);
  EXPECT_EQ(info.machine, 62u);
  EXPECT_EQ(info.load_count, 6u);
  EXPECT_EQ(info.text_segments, 3u);
  EXPECT_EQ(info.text_bytes, 0x1e90u + 0x1a8bca0u + 0x1f1u);
  EXPECT_EQ(info.max_align, 0x1000u);
  EXPECT_FALSE(info.text_aligned);
  // 0xb72000 .. 0x25fe000 (page-rounded): windows 0xc00000 .. 0x2400000.
  EXPECT_EQ(info.loads[2].huge_at_2m, 24 * MiB);
  EXPECT_EQ(info.huge_at_2m, 24 * MiB);
  EXPECT_EQ(info.huge_expected, 24 * MiB); // fixed address: what it gets is the 2 MiB-aligned figure
  EXPECT_EQ(info.huge_at_4k_min, 24 * MiB);
  EXPECT_GT(info.huge_at_4k_mean, 24 * MiB);
  EXPECT_LE(info.huge_at_4k_mean, 26 * MiB);
  EXPECT_EQ(info.huge_relinked, 26 * MiB); // starting on a boundary: 0x1a8c000 -> 13 whole windows
  EXPECT_EQ(info.has_symtab, 1);
  EXPECT_GT(info.relinked_size_estimate, info.file_size);
  EXPECT_LE(info.relinked_size_estimate, info.file_size + 5 * 2 * MiB); // at most 2 MiB per boundary
}

TEST(ElfFixtures, Cc1plusHas18MiBInWindowsAndOnlyDynamicSymbols) {
  hugify_elf_info info = parse_fixture("cc1plus");
  EXPECT_EQ(info.kind, HUGIFY_ELF_EXECUTABLE);
  EXPECT_EQ(info.text_segments, 1u);
  EXPECT_EQ(info.text_bytes, 0x1532be5u);
  // 0x658000 .. 0x1b8b000: windows 0x800000 .. 0x1a00000.
  EXPECT_EQ(info.huge_expected, 18 * MiB);
  EXPECT_EQ(info.has_symtab, 0); // stripped: the perf map uses .dynsym
}

TEST(ElfFixtures, RustcDriverMixesAlignmentsAndLoadsTwoMiBAligned) {
  // Two R E segments: 0x11a1c00+0x3b1c9c0 (p_align 4 KiB) and 0x5000000+0x2be2b8c (p_align 2 MiB).
  hugify_elf_info info = parse_fixture("librustc_driver");
  EXPECT_EQ(info.kind, HUGIFY_ELF_SHARED_OBJECT);
  EXPECT_EQ(info.text_segments, 2u);
  EXPECT_EQ(info.max_align, 2 * MiB);
  EXPECT_FALSE(info.text_aligned); // one executable segment has 4 KiB alignment
  EXPECT_EQ(info.loads[1].huge_at_2m, 58 * MiB);
  EXPECT_EQ(info.loads[4].huge_at_2m, 42 * MiB);
  EXPECT_EQ(info.huge_at_2m, 100 * MiB);
  EXPECT_EQ(info.huge_expected, 100 * MiB); // max p_align 2 MiB: glibc loads it 2 MiB-aligned
  EXPECT_LT(info.huge_at_4k_min, info.huge_at_2m);
}

TEST(ElfFixtures, LibcIsASharedObjectDespitePtInterp) {
  hugify_elf_info info = parse_fixture("libc");
  EXPECT_EQ(info.kind, HUGIFY_ELF_SHARED_OBJECT);
  EXPECT_EQ(info.text_segments, 1u);
  EXPECT_EQ(info.huge_at_2m, 0u); // 1.3 MiB of code: no whole 2 MiB window anywhere
  EXPECT_EQ(info.huge_at_4k_min, 0u);
  EXPECT_EQ(info.huge_relinked, 0u);
}

TEST(ElfFixtures, LsIsAPieByItsDynamicFlags) {
  hugify_elf_info info = parse_fixture("ls");
  EXPECT_EQ(info.kind, HUGIFY_ELF_PIE);
  EXPECT_EQ(info.huge_expected, 0u);
}

// ---- images built to the spec --------------------------------------------------------------------

struct load_spec { uint64_t offset, vaddr, size; uint32_t flags; uint64_t align; };

// ELF header, program headers, then (optionally) a .symtab + .strtab and section headers.
std::vector<unsigned char> build_image(uint16_t type, const std::vector<load_spec> &loads,
                                       const std::vector<std::pair<std::string, Elf64_Sym>> &symbols = {}) {
  std::vector<unsigned char> image(sizeof(Elf64_Ehdr) + loads.size() * sizeof(Elf64_Phdr));
  Elf64_Ehdr eh{};
  memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = type;
  eh.e_machine = EM_X86_64;
  eh.e_version = EV_CURRENT;
  eh.e_phoff = sizeof(Elf64_Ehdr);
  eh.e_ehsize = sizeof(Elf64_Ehdr);
  eh.e_phentsize = sizeof(Elf64_Phdr);
  eh.e_phnum = static_cast<uint16_t>(loads.size());
  for (size_t i = 0; i < loads.size(); i++) {
    Elf64_Phdr ph{};
    ph.p_type = PT_LOAD;
    ph.p_flags = loads[i].flags;
    ph.p_offset = loads[i].offset;
    ph.p_vaddr = ph.p_paddr = loads[i].vaddr;
    ph.p_filesz = ph.p_memsz = loads[i].size;
    ph.p_align = loads[i].align;
    memcpy(&image[sizeof eh + i * sizeof ph], &ph, sizeof ph);
  }
  if (!symbols.empty()) {
    std::string strtab(1, '\0');
    std::vector<Elf64_Sym> syms(1); // index 0: the null symbol
    for (auto [name, sym] : symbols) {
      sym.st_name = static_cast<uint32_t>(name == "<bad>" ? 1u << 20 : strtab.size());
      if (name != "<bad>") strtab += name + '\0';
      syms.push_back(sym);
    }
    size_t sym_off = image.size(), str_off = sym_off + syms.size() * sizeof(Elf64_Sym), sh_off = str_off + strtab.size();
    image.resize(sh_off + 3 * sizeof(Elf64_Shdr));
    memcpy(&image[sym_off], syms.data(), syms.size() * sizeof(Elf64_Sym));
    memcpy(&image[str_off], strtab.data(), strtab.size());
    Elf64_Shdr sh[3]{};
    sh[1].sh_type = SHT_SYMTAB;
    sh[1].sh_offset = sym_off;
    sh[1].sh_size = syms.size() * sizeof(Elf64_Sym);
    sh[1].sh_entsize = sizeof(Elf64_Sym);
    sh[1].sh_link = 2;
    sh[2].sh_type = SHT_STRTAB;
    sh[2].sh_offset = str_off;
    sh[2].sh_size = strtab.size();
    memcpy(&image[sh_off], sh, sizeof sh);
    eh.e_shoff = sh_off;
    eh.e_shentsize = sizeof(Elf64_Shdr);
    eh.e_shnum = 3;
  }
  memcpy(image.data(), &eh, sizeof eh);
  return image;
}

Elf64_Sym function(uint64_t value, uint64_t size, unsigned char type = STT_FUNC, uint16_t section = 1) {
  Elf64_Sym s{};
  s.st_info = ELF64_ST_INFO(STB_GLOBAL, type);
  s.st_shndx = section;
  s.st_value = value;
  s.st_size = size;
  return s;
}

TEST(ElfImage, WindowsAtEveryLoadAddress) {
  // Code at 0x1000 .. 0x601000 (6 MiB): at a 2 MiB-aligned base the windows are 0x200000 .. 0x600000.
  auto image = build_image(ET_DYN, {{0, 0, 0x1000, PF_R, 0x1000}, {0x1000, 0x1000, 6 * MiB, PF_R | PF_X, 0x1000}});
  hugify_elf_info info;
  ASSERT_EQ(hugify_elf_parse(image.data(), image.size(), &info), 0) << info.reason;
  EXPECT_EQ(info.kind, HUGIFY_ELF_SHARED_OBJECT);
  EXPECT_EQ(info.huge_at_2m, 4 * MiB);
  // Any 4 KiB-aligned base: the 6 MiB run holds 3 windows only when it starts on a boundary (base =
  // 2 MiB - 4 KiB), 2 otherwise; so the worst is 4 MiB and the mean just above it.
  EXPECT_EQ(info.huge_at_4k_min, 4 * MiB);
  EXPECT_EQ(info.huge_at_4k_mean, (511 * 4 * MiB + 6 * MiB) / 512);
  EXPECT_EQ(info.huge_expected, 4 * MiB);
  EXPECT_EQ(info.huge_relinked, 6 * MiB);
  EXPECT_EQ(info.has_symtab, 0);
  // Relinked: the code starts at 2 MiB in the file: 2 MiB + 6 MiB.
  EXPECT_EQ(info.relinked_size_estimate, 8 * MiB);
}

TEST(ElfImage, AlignedTextIsRecognisedAndCostsNothingMore) {
  auto image = build_image(ET_DYN, {{0, 0, 0x1000, PF_R, 2 * MiB}, {2 * MiB, 2 * MiB, 5 * MiB, PF_R | PF_X, 2 * MiB}});
  hugify_elf_info info;
  ASSERT_EQ(hugify_elf_parse(image.data(), image.size(), &info), 0) << info.reason;
  EXPECT_TRUE(info.text_aligned);
  EXPECT_EQ(info.max_align, 2 * MiB);
  EXPECT_EQ(info.huge_expected, 4 * MiB); // 2 MiB-aligned load; the last 1 MiB is the tail
  EXPECT_EQ(info.relinked_size_estimate, info.file_size);
}

TEST(ElfImage, FixedAddressExecutableUsesItsOwnAddresses) {
  auto image = build_image(ET_EXEC, {{0x1000, 0x401000, 4 * MiB, PF_R | PF_X, 0x1000}});
  hugify_elf_info info;
  ASSERT_EQ(hugify_elf_parse(image.data(), image.size(), &info), 0) << info.reason;
  EXPECT_EQ(info.kind, HUGIFY_ELF_EXECUTABLE);
  EXPECT_EQ(info.huge_expected, 2 * MiB); // 0x401000 .. 0x801000: one window 0x600000 .. 0x800000
}

TEST(ElfImage, RejectsWhatIsNotA64BitExecutableOrSharedObject) {
  hugify_elf_info info;
  const char text[] = "#!/bin/sh\necho hello\n";
  EXPECT_EQ(hugify_elf_parse(text, sizeof text, &info), -ENOEXEC);
  EXPECT_STREQ(info.reason, "not an ELF file");
  auto image = build_image(ET_DYN, {{0, 0, 0x1000, PF_R | PF_X, 0x1000}});
  image[EI_CLASS] = ELFCLASS32;
  EXPECT_EQ(hugify_elf_parse(image.data(), image.size(), &info), -ENOEXEC);
  image = build_image(ET_REL, {{0, 0, 0x1000, PF_R | PF_X, 0x1000}});
  EXPECT_EQ(hugify_elf_parse(image.data(), image.size(), &info), -ENOEXEC);
  image = build_image(ET_DYN, {{0, 0, 0x1000, PF_R | PF_X, 0x1000}});
  EXPECT_EQ(hugify_elf_parse(image.data(), image.size() - 1, &info), -EINVAL); // program headers cut short
  EXPECT_EQ(hugify_elf_parse(image.data(), 20, &info), -EINVAL);              // ELF header cut short
  EXPECT_EQ(hugify_elf_parse(nullptr, 0, &info), -ENOEXEC);
}

TEST(ElfImage, RejectsInconsistentSegments) {
  auto image = build_image(ET_DYN, {{0, 0, 0x1000, PF_R | PF_X, 0x1000}});
  Elf64_Phdr ph;
  memcpy(&ph, &image[sizeof(Elf64_Ehdr)], sizeof ph);
  ph.p_filesz = ph.p_memsz + 1;
  memcpy(&image[sizeof(Elf64_Ehdr)], &ph, sizeof ph);
  hugify_elf_info info;
  EXPECT_EQ(hugify_elf_parse(image.data(), image.size(), &info), -EINVAL);
  ph.p_filesz = 0;
  ph.p_vaddr = UINT64_MAX - 10;
  memcpy(&image[sizeof(Elf64_Ehdr)], &ph, sizeof ph);
  EXPECT_EQ(hugify_elf_parse(image.data(), image.size(), &info), -EINVAL);
}

TEST(ElfImage, FunctionSymbolsForThePerfMap) {
  auto image = build_image(ET_DYN, {{0, 0, 4 * MiB, PF_R | PF_X, 0x1000}},
                           {{"first", function(0x1000, 0x40)},
                            {"zero_size", function(0x2000, 0)},          // no size: not in the map
                            {"an_object", function(0x3000, 8, STT_OBJECT)}, // not a function
                            {"undefined", function(0, 0x10, STT_FUNC, SHN_UNDEF)},
                            {"<bad>", function(0x4000, 0x10)},           // name offset outside .strtab
                            {"second", function(0x5000, 0x80)}});
  struct seen { std::vector<std::string> names; std::vector<uint64_t> values; } got;
  long n = elf_functions(image.data(), image.size(), [](void *c, uint64_t value, uint64_t, const char *name) {
    static_cast<seen *>(c)->names.push_back(name);
    static_cast<seen *>(c)->values.push_back(value);
  }, &got);
  EXPECT_EQ(n, 2);
  ASSERT_EQ(got.names.size(), 2u);
  EXPECT_EQ(got.names[0], "first");
  EXPECT_EQ(got.values[0], 0x1000u);
  EXPECT_EQ(got.names[1], "second");
  hugify_elf_info info;
  ASSERT_EQ(hugify_elf_parse(image.data(), image.size(), &info), 0);
  EXPECT_EQ(info.symbols, 2);
  EXPECT_EQ(info.has_symtab, 1);
  // Section headers beyond the data: unknown, not zero.
  Elf64_Ehdr eh;
  memcpy(&eh, image.data(), sizeof eh);
  EXPECT_EQ(elf_functions(image.data(), eh.e_shoff + 10, nullptr, nullptr), -ENOEXEC);
}

TEST(ElfImage, HugeWindowArithmetic) {
  uint64_t lo, hi;
  EXPECT_EQ(elf_huge_window(0x1000, 0x600000, &lo, &hi), 4 * MiB);
  EXPECT_EQ(lo, 2 * MiB);
  EXPECT_EQ(hi, 6 * MiB);
  EXPECT_EQ(elf_huge_window(0x200c00, 0x400001, &lo, &hi), 2 * MiB); // rounded out to pages first
  EXPECT_EQ(lo, 2 * MiB);
  EXPECT_EQ(elf_huge_window(0x201000, 0x5ff000, &lo, &hi), 0u);
  EXPECT_EQ(lo, hi);
}

// PT_INTERP is what `hugify run` asks of a program: without one (static), LD_PRELOAD is ignored.
TEST(ElfRead, InterpreterOfADynamicAndAStaticProgram) {
  hugify_elf_info info;
  ASSERT_EQ(hugify_elf_read(test_support::helper_path("static_hello").c_str(), &info), 0) << info.reason;
  EXPECT_STREQ(info.interpreter, "");
  ASSERT_EQ(hugify_elf_read("/proc/self/exe", &info), 0) << info.reason;
  EXPECT_NE(std::string(info.interpreter).find("ld-linux"), std::string::npos) << info.interpreter;
}

// DT_NEEDED, what `hugify run` reads to know a sanitized program: this test program's own list (read back
// from the real file), none in a static program, -ENOEXEC for a cut image, never a read past the end.
TEST(ElfRead, NeededLibrariesOfADynamicAndAStaticProgram) {
  auto needed = [](const std::string &path, long *count) {
    size_t size = 0;
    void *data = nullptr;
    std::vector<std::string> names;
    EXPECT_EQ(elf_map_file(path.c_str(), &data, &size), 0) << path;
    if (!data) return names;
    *count = elf_needed(data, size, [](void *context, const char *name) {
      static_cast<std::vector<std::string> *>(context)->push_back(name);
    }, &names);
    if (*count > 0) { // cut before its dynamic section or string table
      std::vector<unsigned char> cut(static_cast<unsigned char *>(data), static_cast<unsigned char *>(data) + 4096);
      EXPECT_EQ(elf_needed(cut.data(), cut.size(), nullptr, nullptr), -ENOEXEC);
    }
    elf_unmap(data, size);
    return names;
  };
  long count = -2;
  std::vector<std::string> names = needed("/proc/self/exe", &count);
  EXPECT_EQ(count, static_cast<long>(names.size()));
  EXPECT_NE(std::find(names.begin(), names.end(), "libc.so.6"), names.end());
  std::vector<std::string> none = needed(test_support::helper_path("static_hello"), &count);
  EXPECT_EQ(count, 0);
  EXPECT_EQ(elf_needed("not an ELF image", 16, nullptr, nullptr), -ENOEXEC);
}

TEST(ElfRead, HeapOwnersByLibraryAndSymbol) {
  EXPECT_STREQ(elf_heap_owner_of_library("/lib/x86_64-linux-gnu/libasan.so.8"), "AddressSanitizer");
  EXPECT_STREQ(elf_heap_owner_of_library("libclang_rt.asan-x86_64.so"), "AddressSanitizer");
  EXPECT_STREQ(elf_heap_owner_of_library("libtsan.so.2"), "ThreadSanitizer");
  EXPECT_STREQ(elf_heap_owner_of_library("liblsan.so.0"), "LeakSanitizer");
  EXPECT_STREQ(elf_heap_owner_of_library("/usr/libexec/valgrind/vgpreload_memcheck-amd64-linux.so"),
               "valgrind memcheck");
  EXPECT_EQ(elf_heap_owner_of_library("/usr/libexec/valgrind/vgpreload_core-amd64-linux.so"), nullptr);
  EXPECT_EQ(elf_heap_owner_of_library("libubsan.so.1"), nullptr); // UBSan leaves malloc alone
  EXPECT_EQ(elf_heap_owner_of_library("/lib/x86_64-linux-gnu/libc.so.6"), nullptr);
  EXPECT_EQ(elf_heap_owner_of_library(""), nullptr);
  EXPECT_STREQ(elf_heap_owner_of_symbol("__asan_init"), "AddressSanitizer");
  EXPECT_STREQ(elf_heap_owner_of_symbol("__tsan_init"), "ThreadSanitizer");
  EXPECT_EQ(elf_heap_owner_of_symbol("malloc"), nullptr);
  std::vector<std::string> symbols;
  for (size_t i = 0; elf_heap_owner_symbol(i); i++) symbols.push_back(elf_heap_owner_symbol(i));
  EXPECT_EQ(symbols, (std::vector<std::string>{"__asan_init", "__hwasan_init", "__tsan_init", "__msan_init",
                                               "__lsan_init"})); // each once, ASan before LSan
}

TEST(ElfRead, ReportsMissingFilesAndDirectories) {
  hugify_elf_info info;
  EXPECT_EQ(hugify_elf_read("/nonexistent/hugify", &info), -ENOENT);
  EXPECT_EQ(hugify_elf_read("/", &info), -EISDIR);
  EXPECT_EQ(hugify_elf_read("/proc/self/exe", &info), 0) << info.reason; // this test program itself
  EXPECT_GT(info.text_bytes, 0u);
}

TEST(TextOptions, PageKindAndFaultStepFromTheEnvironment) {
  std::map<std::string, std::string> vars = {{"HUGIFY_TEXT_PAGES", "2M"}, {"HUGIFY_TEXT_FAIL_STEP", "9"},
                                             {"HUGIFY_TEXT_MIN_SIZE", "8M"}, {"HUGIFY_TEXT_EXCLUDE", "libLLVM*:libc.so*"}};
  auto lookup = [](const char *name, void *context) -> const char * {
    auto *v = static_cast<std::map<std::string, std::string> *>(context);
    auto it = v->find(name);
    return it == v->end() ? nullptr : it->second.c_str();
  };
  hugify_options options;
  char warnings[512] = "";
  EXPECT_EQ(options_parse(lookup, &vars, &options, warnings, sizeof warnings), 0) << warnings;
  EXPECT_TRUE(options.text_hugetlb);
  EXPECT_EQ(options.test.text_fail_step, HUGIFY_TEXT_STEP_SWAP);
  EXPECT_EQ(options.text_min_size, 8 * MiB);
  EXPECT_STREQ(options.text_exclude, "libLLVM*:libc.so*");
  vars = {{"HUGIFY_TEXT_PAGES", "thp"}};
  EXPECT_EQ(options_parse(lookup, &vars, &options, warnings, sizeof warnings), 0);
  EXPECT_FALSE(options.text_hugetlb);
  vars = {{"HUGIFY_TEXT_PAGES", "1G"}};
  EXPECT_EQ(options_parse(lookup, &vars, &options, warnings, sizeof warnings), 1);
  EXPECT_FALSE(options.text_hugetlb);
  EXPECT_NE(std::string(warnings).find("HUGIFY_TEXT_PAGES=1G: expected thp or 2M"), std::string::npos) << warnings;
}

}  // namespace

// run's "#!" reader: what the kernel's binfmt_script would run.
TEST(ElfScript, InterpreterOfAHashBangLine) {
  char out[32];
  auto interpreter = [&](const std::string &bytes, size_t cap = sizeof out) -> std::string {
    return elf_script_interpreter(bytes.data(), bytes.size(), out, cap) ? out : "(none)";
  };
  EXPECT_EQ(interpreter("#!/bin/sh -e\necho hi\n"), "/bin/sh");
  EXPECT_EQ(interpreter("#! \t/usr/bin/env python3\n"), "/usr/bin/env");
  EXPECT_EQ(interpreter("#!/bin/bash"), "/bin/bash") << "no newline: the file ends the name";
  EXPECT_EQ(interpreter(std::string("#!/bin/sh\0tail", 14)), "/bin/sh");
  EXPECT_EQ(interpreter("#!\n"), "(none)");
  EXPECT_EQ(interpreter("#!   \n"), "(none)");
  EXPECT_EQ(interpreter("#"), "(none)");
  EXPECT_EQ(interpreter("\x7f" "ELF..."), "(none)");
  EXPECT_EQ(interpreter("#!/usr/bin/a-long-interpreter-name\n", 16), "(none)") << "too long for the buffer";
  EXPECT_EQ(interpreter("#!/bin/sh\n", 8), "/bin/sh") << "exactly fits with its NUL";
}


// check's question "is CMD CPython?": the program a script runs, through env too.
TEST(ElfScript, ProgramOfAScriptThroughEnv) {
  char out[32];
  auto program = [&](const std::string &bytes, size_t cap = sizeof out) -> std::string {
    return elf_script_program(bytes.data(), bytes.size(), out, cap) ? out : "(none)";
  };
  EXPECT_EQ(program("#!/usr/bin/python3.11 -u\n"), "/usr/bin/python3.11");
  EXPECT_EQ(program("#! \t/usr/bin/env python3\n"), "python3");
  EXPECT_EQ(program("#!/usr/bin/env -S PYTHONHASHSEED=0 python3 -u\n"), "python3") << "options and assignments skipped";
  EXPECT_EQ(program("#!/usr/bin/env\n"), "/usr/bin/env") << "env alone: env itself";
  EXPECT_EQ(program("#!/bin/sh\n"), "/bin/sh");
  EXPECT_EQ(program("#!/usr/bin/env a-name-longer-than-the-buffer\n", 16), "(none)");
  EXPECT_EQ(program("not a script"), "(none)");
}

// run refuses a static Go program and inspect names its heap: the Go linker's sections, or its note.
TEST(ElfFixtures, GoProgramIsRecognisedBySectionsOrNote) {
  sparse_image image("go");
  ASSERT_NE(image.data, MAP_FAILED);
  EXPECT_TRUE(elf_is_go(image.data, image.size)) << ".go.buildinfo, .gopclntab, .note.go.buildid";
  // without section headers (sstrip): the PT_NOTE's "Go" build-ID note
  auto *header = static_cast<Elf64_Ehdr *>(image.data);
  header->e_shnum = 0;
  EXPECT_TRUE(elf_is_go(image.data, image.size));
  // without either: not Go
  auto *phdrs = reinterpret_cast<Elf64_Phdr *>(static_cast<char *>(image.data) + header->e_phoff);
  for (unsigned i = 0; i < header->e_phnum; i++)
    if (phdrs[i].p_type == PT_NOTE) phdrs[i].p_type = PT_NULL;
  EXPECT_FALSE(elf_is_go(image.data, image.size));
  for (const char *name : {"ls", "node", "libc"}) {
    sparse_image other(name);
    EXPECT_FALSE(elf_is_go(other.data, other.size)) << name;
  }
  EXPECT_FALSE(elf_is_go("not an ELF image", 16));
  EXPECT_FALSE(elf_is_go(image.data, 40)) << "cut inside the header";
}

TEST(ElfImage, TheCLibraryIsToldByTheInterpretersFileName) {
  for (const char *glibc : {"/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1", "/lib/ld-linux.so.2",
                            "/lib64/ld64.so.2", "/lib/ld.so.1", "/nix/store/abc-glibc-2.38/lib/ld-linux-x86-64.so.2"})
    EXPECT_EQ(elf_libc_of_interpreter(glibc), ELF_LIBC_GLIBC) << glibc;
  for (const char *musl : {"/lib/ld-musl-x86_64.so.1", "/lib/ld-musl-aarch64.so.1", "ld-musl-armhf.so.1"})
    EXPECT_EQ(elf_libc_of_interpreter(musl), ELF_LIBC_MUSL) << musl;
  EXPECT_EQ(elf_libc_of_interpreter(""), ELF_LIBC_NONE) << "a static program";
  for (const char *other : {"/system/bin/linker64", "/tmp/hm1234/ld-x.so", "/lib/ld-musl"})
    EXPECT_EQ(elf_libc_of_interpreter(other), ELF_LIBC_OTHER) << other;
}

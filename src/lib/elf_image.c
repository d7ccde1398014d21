/* SPDX-License-Identifier: MIT */
/* elf_image.c - ELF images as bytes -> what the text remap can cover (hugify_elf_parse), and the function
 * symbols the perf map needs. Pure functions over the bytes; only elf_map_file and hugify_elf_read do I/O.
 * Every offset read from the file is checked against the size before use: files may be truncated,
 * corrupt or hostile. */
#include "elf_image.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "os.h"
#include "safe_file.h"

#define SMALL_PAGE UINT64_C(4096)

static uint64_t align_down(uint64_t x, uint64_t a) { return x & ~(a - 1); }
static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) & ~(a - 1); }
/* The huge page code can be on: this kernel's PMD size (a binary linked for 2 MiB lands 2 MiB-aligned, which
 * a 32 MiB PMD does not cover). */
static uint64_t huge_page(void) { return os_pmd_size(); }

uint64_t elf_huge_window(uint64_t start, uint64_t end, uint64_t *window_start, uint64_t *window_end) {
  uint64_t lo = align_up(align_down(start, SMALL_PAGE), huge_page());
  uint64_t hi = align_down(align_up(end, SMALL_PAGE), huge_page());
  if (hi <= lo) hi = lo;
  if (window_start) *window_start = lo;
  if (window_end) *window_end = hi;
  return hi - lo;
}

static bool in_bounds(uint64_t offset, uint64_t length, size_t size) {
  return offset <= size && length <= size - offset;
}

/* Bytes of the executable loads in whole 2 MiB windows when the image is loaded at `base`. */
static uint64_t huge_at_base(const struct hugify_elf_info *info, uint64_t base) {
  uint64_t total = 0;
  for (unsigned i = 0; i < info->load_count; i++) {
    const struct hugify_elf_load *l = &info->loads[i];
    if (l->flags & PF_X) total += elf_huge_window(base + l->vaddr, base + l->vaddr + l->memory_size, NULL, NULL);
  }
  return total;
}

/* Relinked with max-page-size = common-page-size = 2 MiB, every load after the first starts on a fresh
 * 2 MiB boundary of the file (separate code; RELRO's end on a common-page boundary costs the same). */
static uint64_t relinked_size(const struct hugify_elf_info *info) {
  if (info->load_count == 0 || info->text_aligned) return info->file_size;
  uint64_t end = 0, last = 0;
  for (unsigned i = 0; i < info->load_count; i++) {
    const struct hugify_elf_load *l = &info->loads[i];
    uint64_t start = i == 0 ? l->offset : align_up(end, huge_page()) + l->offset % SMALL_PAGE;
    end = start + l->file_size;
    if (l->offset + l->file_size > last) last = l->offset + l->file_size;
  }
  return end + (info->file_size > last ? info->file_size - last : 0);
}

static int fail(struct hugify_elf_info *out, int code, const char *why) {
  snprintf(out->reason, sizeof out->reason, "%s", why);
  return code;
}

/* What the dynamic section says about the kind of object: DF_1_PIE, and whether it has a DT_SONAME. */
struct elf_dynamic_facts {
  bool interp;
  int pie_flag; /* DF_1_PIE in DT_FLAGS_1: 1 set, 0 clear, -1 no DT_FLAGS_1 (older linkers) */
  bool soname;
};

static void read_dynamic(const unsigned char *bytes, size_t size, const Elf64_Phdr *ph, struct elf_dynamic_facts *facts) {
  if (!in_bounds(ph->p_offset, ph->p_filesz, size)) return;
  for (uint64_t off = 0; off + sizeof(Elf64_Dyn) <= ph->p_filesz; off += sizeof(Elf64_Dyn)) {
    Elf64_Dyn dyn;
    memcpy(&dyn, bytes + ph->p_offset + off, sizeof dyn);
    if (dyn.d_tag == DT_NULL) break;
    if (dyn.d_tag == DT_FLAGS_1) facts->pie_flag = (dyn.d_un.d_val & DF_1_PIE) != 0;
    if (dyn.d_tag == DT_SONAME) facts->soname = true;
  }
}

/* The program headers: the interpreter, the dynamic facts, and the PT_LOAD segments. 0, or -errno with
 * out->reason set. */
static int read_program_headers(const unsigned char *bytes, size_t size, const Elf64_Ehdr *eh,
                                struct hugify_elf_info *out, struct elf_dynamic_facts *facts) {
  for (unsigned i = 0; i < eh->e_phnum; i++) {
    Elf64_Phdr ph;
    memcpy(&ph, bytes + eh->e_phoff + (uint64_t)i * sizeof ph, sizeof ph);
    if (ph.p_type == PT_INTERP) {
      facts->interp = true;
      if (in_bounds(ph.p_offset, ph.p_filesz, size)) /* the path, NUL-terminated in the file */
        snprintf(out->interpreter, sizeof out->interpreter, "%.*s", (int)(ph.p_filesz < sizeof out->interpreter
                                                                          ? ph.p_filesz : sizeof out->interpreter - 1),
                 (const char *)bytes + ph.p_offset);
      else
        snprintf(out->interpreter, sizeof out->interpreter, "?");
    }
    if (ph.p_type == PT_DYNAMIC) read_dynamic(bytes, size, &ph, facts);
    if (ph.p_type != PT_LOAD) continue;
    if (ph.p_filesz > ph.p_memsz || ph.p_vaddr + ph.p_memsz < ph.p_vaddr)
      return fail(out, -EINVAL, "a PT_LOAD segment is inconsistent (file size above memory size, or it wraps)");
    if (ph.p_align > out->max_align) out->max_align = ph.p_align;
    if (ph.p_flags & PF_X) {
      out->text_segments++;
      out->text_bytes += ph.p_memsz;
    }
    if (out->load_count == HUGIFY_ELF_MAX_LOADS) continue;
    struct hugify_elf_load *l = &out->loads[out->load_count++];
    *l = (struct hugify_elf_load){ph.p_offset, ph.p_vaddr, ph.p_filesz, ph.p_memsz, ph.p_align, ph.p_flags, 0};
    if (ph.p_flags & PF_X) l->huge_at_2m = elf_huge_window(ph.p_vaddr, ph.p_vaddr + ph.p_memsz, NULL, NULL);
  }
  if (out->load_count == 0) return fail(out, -EINVAL, "no PT_LOAD segments");
  return 0;
}

/* How much of the code huge pages would cover: at a 2 MiB-aligned base, at the worst and mean 4 KiB-aligned
 * base, where it will land, and once relinked with 2 MiB alignment. */
static void estimate_coverage(struct hugify_elf_info *out) {
  out->text_aligned = out->text_segments > 0;
  for (unsigned i = 0; i < out->load_count; i++)
    if ((out->loads[i].flags & PF_X) && out->loads[i].align < huge_page()) out->text_aligned = 0;

  out->huge_at_2m = huge_at_base(out, 0);
  uint64_t sum = 0, min = UINT64_MAX;
  for (uint64_t base = 0; base < huge_page(); base += SMALL_PAGE) {
    uint64_t h = huge_at_base(out, base);
    sum += h;
    if (h < min) min = h;
  }
  out->huge_at_4k_min = min;
  out->huge_at_4k_mean = sum / (huge_page() / SMALL_PAGE);
  bool lands_aligned = out->kind == HUGIFY_ELF_EXECUTABLE || out->max_align >= huge_page();
  out->huge_expected = lands_aligned ? out->huge_at_2m : out->huge_at_4k_min;
  out->relinked_size_estimate = relinked_size(out);
  for (unsigned i = 0; i < out->load_count; i++)
    if (out->loads[i].flags & PF_X)
      out->huge_relinked += align_down(align_up(out->loads[i].memory_size + out->loads[i].vaddr % SMALL_PAGE, SMALL_PAGE),
                                       huge_page());
  if (out->huge_relinked < out->huge_expected) out->huge_relinked = out->huge_expected;
}

/* The function symbols, and whether a .symtab is there (not stripped). */
static void count_symbols(const void *data, size_t size, const Elf64_Ehdr *eh, struct hugify_elf_info *out) {
  const unsigned char *bytes = data;
  long functions = elf_functions(data, size, NULL, NULL);
  if (functions < 0) return;
  out->symbols = (int)(functions > INT32_MAX ? INT32_MAX : functions);
  Elf64_Shdr sh;
  out->has_symtab = 0;
  for (unsigned i = 0; i < eh->e_shnum; i++) {
    memcpy(&sh, bytes + eh->e_shoff + (uint64_t)i * sizeof sh, sizeof sh);
    if (sh.sh_type == SHT_SYMTAB) out->has_symtab = 1;
  }
}

int hugify_elf_parse(const void *data, size_t size, struct hugify_elf_info *out) {
  if (!out) return -EINVAL;
  memset(out, 0, sizeof *out);
  out->file_size = size;
  out->symbols = out->has_symtab = -1;
  const unsigned char *bytes = data;
  if (!data || size < EI_NIDENT || memcmp(bytes, ELFMAG, SELFMAG) != 0) return fail(out, -ENOEXEC, "not an ELF file");
  if (bytes[EI_CLASS] != ELFCLASS64 || bytes[EI_DATA] != ELFDATA2LSB)
    return fail(out, -ENOEXEC, "only 64-bit little-endian ELF files are supported");
  if (size < sizeof(Elf64_Ehdr)) return fail(out, -EINVAL, "truncated ELF header");
  Elf64_Ehdr eh;
  memcpy(&eh, bytes, sizeof eh);
  if (eh.e_type != ET_EXEC && eh.e_type != ET_DYN)
    return fail(out, -ENOEXEC, "not an executable or shared object (relocatable object or core file)");
  out->machine = eh.e_machine;
  if (eh.e_phnum == 0) return fail(out, -EINVAL, "no program headers");
  if (eh.e_phentsize != sizeof(Elf64_Phdr) || !in_bounds(eh.e_phoff, (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr), size))
    return fail(out, -EINVAL, "program headers truncated or malformed");

  struct elf_dynamic_facts facts = {.pie_flag = -1};
  int rc = read_program_headers(bytes, size, &eh, out, &facts);
  if (rc) return rc;
  /* A PIE says so with DF_1_PIE; without DT_FLAGS_1, one with PT_INTERP and no DT_SONAME is taken for a
   * PIE (libc.so.6 has PT_INTERP, to run as a program, and a DT_SONAME). */
  bool pie = facts.pie_flag >= 0 ? facts.pie_flag == 1 : facts.interp && !facts.soname;
  out->kind = eh.e_type == ET_EXEC ? HUGIFY_ELF_EXECUTABLE : pie ? HUGIFY_ELF_PIE : HUGIFY_ELF_SHARED_OBJECT;
  estimate_coverage(out);
  count_symbols(data, size, &eh, out);
  return 0;
}

/* The symbols of one symbol table section (checked), one callback per defined sized function. */
static long walk_symbols(const unsigned char *bytes, size_t size, const Elf64_Shdr *table, const Elf64_Shdr *strings,
                         elf_function_fn fn, void *context) {
  if (table->sh_entsize != sizeof(Elf64_Sym) || !in_bounds(table->sh_offset, table->sh_size, size) ||
      !in_bounds(strings->sh_offset, strings->sh_size, size))
    return -ENOEXEC;
  const char *names = (const char *)bytes + strings->sh_offset;
  long count = 0;
  for (uint64_t off = 0; off + sizeof(Elf64_Sym) <= table->sh_size; off += sizeof(Elf64_Sym)) {
    Elf64_Sym sym;
    memcpy(&sym, bytes + table->sh_offset + off, sizeof sym);
    if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_shndx == SHN_UNDEF || sym.st_size == 0) continue;
    if (sym.st_name >= strings->sh_size || !memchr(names + sym.st_name, '\0', strings->sh_size - sym.st_name)) continue;
    if (fn) fn(context, sym.st_value, sym.st_size, names + sym.st_name);
    count++;
  }
  return count;
}

long elf_functions(const void *data, size_t size, elf_function_fn fn, void *context) {
  const unsigned char *bytes = data;
  if (!data || size < sizeof(Elf64_Ehdr) || memcmp(bytes, ELFMAG, SELFMAG) != 0 || bytes[EI_CLASS] != ELFCLASS64)
    return -ENOEXEC;
  Elf64_Ehdr eh;
  memcpy(&eh, bytes, sizeof eh);
  if (eh.e_shnum == 0) return 0; /* no section headers at all: nothing to name functions with */
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || !in_bounds(eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr), size))
    return -ENOEXEC;
  int chosen = -1;
  for (unsigned i = 0; i < eh.e_shnum; i++) {
    Elf64_Shdr sh;
    memcpy(&sh, bytes + eh.e_shoff + (uint64_t)i * sizeof sh, sizeof sh);
    if (sh.sh_type == SHT_SYMTAB) { chosen = (int)i; break; }
    if (sh.sh_type == SHT_DYNSYM) chosen = (int)i;
  }
  if (chosen < 0) return 0;
  Elf64_Shdr table, strings;
  memcpy(&table, bytes + eh.e_shoff + (uint64_t)chosen * sizeof table, sizeof table);
  if (table.sh_link >= eh.e_shnum) return -ENOEXEC;
  memcpy(&strings, bytes + eh.e_shoff + (uint64_t)table.sh_link * sizeof strings, sizeof strings);
  return walk_symbols(bytes, size, &table, &strings, fn, context);
}

int elf_map_file(const char *path, void **data, size_t *size) {
  /* a FIFO would block the open and the read; a device is no ELF file: refused before either */
  int fd = safe_file_open_read(path, true);
  if (fd < 0) return fd;
  struct stat st;
  int rc = fstat(fd, &st) != 0 ? -errno : st.st_size == 0 ? -ENOEXEC : 0;
  if (rc == 0) rc = os_mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0, data);
  if (rc == 0) *size = (size_t)st.st_size;
  close(fd);
  return rc;
}

void elf_unmap(void *data, size_t size) {
  if (data) os_munmap(data, size);
}

int hugify_elf_read(const char *path, struct hugify_elf_info *out) {
  if (!path || !out) return -EINVAL;
  size_t size = 0;
  void *data = NULL;
  int err = -elf_map_file(path, &data, &size);
  if (err) {
    memset(out, 0, sizeof *out);
    snprintf(out->reason, sizeof out->reason, "%s", err == EINVAL ? "not a regular file (a device, FIFO or socket)"
                                                     : strerror(err));
    return -err;
  }
  int rc = hugify_elf_parse(data, size, out);
  elf_unmap(data, size);
  return rc;
}

/* The file offset of virtual address `vaddr` through the PT_LOAD segments; false when none holds it. */
static bool file_offset_of(const unsigned char *bytes, size_t size, const Elf64_Ehdr *eh, uint64_t vaddr,
                           uint64_t *offset) {
  for (unsigned i = 0; i < eh->e_phnum; i++) {
    Elf64_Phdr ph;
    memcpy(&ph, bytes + eh->e_phoff + (uint64_t)i * sizeof ph, sizeof ph);
    if (ph.p_type != PT_LOAD || vaddr < ph.p_vaddr || vaddr - ph.p_vaddr >= ph.p_filesz) continue;
    *offset = ph.p_offset + (vaddr - ph.p_vaddr);
    return *offset < size;
  }
  return false;
}

long elf_needed(const void *data, size_t size, elf_name_fn fn, void *context) {
  const unsigned char *bytes = data;
  if (!data || size < sizeof(Elf64_Ehdr) || memcmp(bytes, ELFMAG, SELFMAG) != 0 || bytes[EI_CLASS] != ELFCLASS64)
    return -ENOEXEC;
  Elf64_Ehdr eh;
  memcpy(&eh, bytes, sizeof eh);
  if (eh.e_phentsize != sizeof(Elf64_Phdr) || !in_bounds(eh.e_phoff, (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr), size))
    return -ENOEXEC;
  for (unsigned i = 0; i < eh.e_phnum; i++) {
    Elf64_Phdr ph;
    memcpy(&ph, bytes + eh.e_phoff + (uint64_t)i * sizeof ph, sizeof ph);
    if (ph.p_type != PT_DYNAMIC) continue;
    if (!in_bounds(ph.p_offset, ph.p_filesz, size)) return -ENOEXEC;
    /* two passes: DT_STRTAB/DT_STRSZ may follow the DT_NEEDED entries */
    uint64_t strtab = 0, strsz = 0, strings = 0;
    bool have_strtab = false;
    for (uint64_t off = 0; off + sizeof(Elf64_Dyn) <= ph.p_filesz; off += sizeof(Elf64_Dyn)) {
      Elf64_Dyn dyn;
      memcpy(&dyn, bytes + ph.p_offset + off, sizeof dyn);
      if (dyn.d_tag == DT_NULL) break;
      if (dyn.d_tag == DT_STRTAB) { strtab = dyn.d_un.d_ptr; have_strtab = true; }
      if (dyn.d_tag == DT_STRSZ) strsz = dyn.d_un.d_val;
    }
    if (!have_strtab || !file_offset_of(bytes, size, &eh, strtab, &strings)) return -ENOEXEC;
    if (strsz == 0 || strsz > size - strings) strsz = size - strings;
    long count = 0;
    for (uint64_t off = 0; off + sizeof(Elf64_Dyn) <= ph.p_filesz; off += sizeof(Elf64_Dyn)) {
      Elf64_Dyn dyn;
      memcpy(&dyn, bytes + ph.p_offset + off, sizeof dyn);
      if (dyn.d_tag == DT_NULL) break;
      if (dyn.d_tag != DT_NEEDED) continue;
      if (dyn.d_un.d_val >= strsz) return -ENOEXEC;
      const char *name = (const char *)bytes + strings + dyn.d_un.d_val;
      if (!memchr(name, '\0', strsz - dyn.d_un.d_val)) return -ENOEXEC;
      if (fn) fn(context, name);
      count++;
    }
    return count;
  }
  return 0;
}

/* Who owns malloc when such a runtime is in a process: gcc's and clang's sanitizer runtimes (shared:
 * libasan.so.8, libclang_rt.asan-x86_64.so; static: their init symbol in the executable) and valgrind's
 * tools that replace malloc (vgpreload_<tool>: cachegrind, callgrind and none leave malloc alone). */
static const struct {
  const char *library_prefix, *symbol, *owner;
} heap_owners[] = {
    {"libasan.so", "__asan_init", "AddressSanitizer"},
    {"libclang_rt.asan", "__asan_init", "AddressSanitizer"},
    {"libhwasan.so", "__hwasan_init", "HWAddressSanitizer"},
    {"libclang_rt.hwasan", "__hwasan_init", "HWAddressSanitizer"},
    {"libtsan.so", "__tsan_init", "ThreadSanitizer"},
    {"libclang_rt.tsan", "__tsan_init", "ThreadSanitizer"},
    {"libclang_rt.msan", "__msan_init", "MemorySanitizer"},
    {"liblsan.so", "__lsan_init", "LeakSanitizer"},
    {"libclang_rt.lsan", "__lsan_init", "LeakSanitizer"},
    {"vgpreload_memcheck", NULL, "valgrind memcheck"},
    {"vgpreload_helgrind", NULL, "valgrind helgrind"},
    {"vgpreload_drd", NULL, "valgrind drd"},
    {"vgpreload_massif", NULL, "valgrind massif"},
    {"vgpreload_dhat", NULL, "valgrind dhat"},
};
#define HEAP_OWNER_COUNT (sizeof heap_owners / sizeof heap_owners[0])

const char *elf_heap_owner_of_library(const char *path) {
  if (!path) return NULL;
  const char *slash = strrchr(path, '/'), *name = slash ? slash + 1 : path;
  for (size_t i = 0; i < HEAP_OWNER_COUNT; i++)
    if (strncmp(name, heap_owners[i].library_prefix, strlen(heap_owners[i].library_prefix)) == 0)
      return heap_owners[i].owner;
  return NULL;
}

const char *elf_heap_owner_of_symbol(const char *name) {
  for (size_t i = 0; name && i < HEAP_OWNER_COUNT; i++)
    if (heap_owners[i].symbol && strcmp(name, heap_owners[i].symbol) == 0) return heap_owners[i].owner;
  return NULL;
}

const char *elf_heap_owner_symbol(size_t index) {
  /* each symbol once, in table order (an ASan runtime holds LeakSanitizer too: it is found first) */
  for (size_t i = 0, seen = 0; i < HEAP_OWNER_COUNT; i++) {
    if (!heap_owners[i].symbol || (i > 0 && heap_owners[i - 1].symbol &&
                                   strcmp(heap_owners[i - 1].symbol, heap_owners[i].symbol) == 0))
      continue;
    if (seen++ == index) return heap_owners[i].symbol;
  }
  return NULL;
}

/* A note of the Go linker in [offset, offset + length): owner "Go", type 4 (NT_GO_BUILDID). */
static bool holds_go_note(const unsigned char *bytes, size_t size, uint64_t offset, uint64_t length) {
  if (!in_bounds(offset, length, size)) return false;
  for (uint64_t at = 0; at + sizeof(Elf64_Nhdr) <= length;) {
    Elf64_Nhdr note;
    memcpy(&note, bytes + offset + at, sizeof note);
    uint64_t name_at = at + sizeof note, name_size = (note.n_namesz + UINT64_C(3)) & ~UINT64_C(3);
    uint64_t desc_size = (note.n_descsz + UINT64_C(3)) & ~UINT64_C(3);
    if (name_at + name_size > length || name_at + name_size + desc_size > length) return false;
    /* the Go linker writes the name padded: "Go\0\0", n_namesz 4 */
    if (note.n_type == 4 && note.n_namesz >= 3 && note.n_namesz <= 4 && memcmp(bytes + offset + name_at, "Go", 3) == 0)
      return true;
    at = name_at + name_size + desc_size;
  }
  return false;
}

bool elf_is_go(const void *data, size_t size) {
  const unsigned char *bytes = data;
  if (!data || size < sizeof(Elf64_Ehdr) || memcmp(bytes, ELFMAG, SELFMAG) != 0 || bytes[EI_CLASS] != ELFCLASS64)
    return false;
  Elf64_Ehdr eh;
  memcpy(&eh, bytes, sizeof eh);
  if (eh.e_shnum > 0 && eh.e_shentsize == sizeof(Elf64_Shdr) && eh.e_shstrndx < eh.e_shnum &&
      in_bounds(eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr), size)) {
    Elf64_Shdr names;
    memcpy(&names, bytes + eh.e_shoff + (uint64_t)eh.e_shstrndx * sizeof names, sizeof names);
    if (!in_bounds(names.sh_offset, names.sh_size, size)) return false;
    static const char *const go_sections[] = {".go.buildinfo", ".gopclntab", ".note.go.buildid"};
    for (unsigned i = 0; i < eh.e_shnum; i++) {
      Elf64_Shdr sh;
      memcpy(&sh, bytes + eh.e_shoff + (uint64_t)i * sizeof sh, sizeof sh);
      if (sh.sh_name >= names.sh_size) continue;
      const char *name = (const char *)bytes + names.sh_offset + sh.sh_name;
      size_t room = names.sh_size - sh.sh_name;
      for (size_t k = 0; k < sizeof go_sections / sizeof go_sections[0]; k++)
        if (room > strlen(go_sections[k]) && memcmp(name, go_sections[k], strlen(go_sections[k]) + 1) == 0) return true;
    }
    return false;
  }
  if (eh.e_phentsize != sizeof(Elf64_Phdr) || !in_bounds(eh.e_phoff, (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr), size))
    return false;
  for (unsigned i = 0; i < eh.e_phnum; i++) {
    Elf64_Phdr ph;
    memcpy(&ph, bytes + eh.e_phoff + (uint64_t)i * sizeof ph, sizeof ph);
    if (ph.p_type == PT_NOTE && holds_go_note(bytes, size, ph.p_offset, ph.p_filesz)) return true;
  }
  return false;
}

/* The first character at or after `at` that is not a blank (space or tab) of the "#!" line, or the end. */
static size_t blank_end(const char *data, size_t length, size_t at) {
  while (at < length && (data[at] == ' ' || data[at] == '\t')) at++;
  return at;
}

/* The end of the word of the "#!" line that starts at `at`: a blank, newline or NUL, or the end. */
static size_t word_end(const char *data, size_t length, size_t at) {
  while (at < length && data[at] != ' ' && data[at] != '\t' && data[at] != '\n' && data[at] != '\0') at++;
  return at;
}

enum elf_libc elf_libc_of_interpreter(const char *interpreter) {
  if (!interpreter[0]) return ELF_LIBC_NONE;
  const char *name = strrchr(interpreter, '/') ? strrchr(interpreter, '/') + 1 : interpreter;
  if (strncmp(name, "ld-musl-", 8) == 0) return ELF_LIBC_MUSL;
  if (strncmp(name, "ld-linux", 8) == 0 || strncmp(name, "ld64.so.", 8) == 0 || strncmp(name, "ld.so.", 6) == 0)
    return ELF_LIBC_GLIBC;
  return ELF_LIBC_OTHER;
}

bool elf_script_interpreter(const char *data, size_t length, char *out, size_t cap) {
  if (length < 3 || data[0] != '#' || data[1] != '!') return false;
  size_t at = blank_end(data, length, 2);
  size_t end = word_end(data, length, at);
  if (end == at || end - at >= cap) return false;
  memcpy(out, data + at, end - at);
  out[end - at] = '\0';
  return true;
}

bool elf_script_program(const char *data, size_t length, char *out, size_t cap) {
  if (!elf_script_interpreter(data, length, out, cap)) return false;
  const char *slash = strrchr(out, '/');
  if (strcmp(slash ? slash + 1 : out, "env") != 0) return true;
  size_t at = word_end(data, length, blank_end(data, length, 2)); /* env itself */
  while (at < length && (data[at] == ' ' || data[at] == '\t')) {
    at = blank_end(data, length, at);
    size_t end = word_end(data, length, at);
    if (end == at) break;
    if (data[at] != '-' && !memchr(data + at, '=', end - at)) {
      if (end - at >= cap) return false;
      memcpy(out, data + at, end - at);
      out[end - at] = '\0';
      return true;
    }
    at = end;
  }
  return true;
}

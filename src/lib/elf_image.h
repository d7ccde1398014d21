/* SPDX-License-Identifier: MIT */
/* elf_image.h - reading ELF images (pure functions over bytes): program headers for the text remap and
 * `hugify elf`, function symbols for the perf map, DT_NEEDED and the runtimes that own malloc (sanitizers,
 * valgrind) for `hugify run` and the preload. */
#ifndef HUGIFY_ELF_IMAGE_H
#define HUGIFY_ELF_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hugify.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of [start, end) (rounded out to 4 KiB pages) that lie in whole windows of this kernel's PMD size
 * (os_pmd_size(): 2 MiB on x86-64, 32 MiB on arm64's 16 KiB pages), aligned to it, and where
 * those windows begin and end (*window_start == *window_end when there are none). */
uint64_t elf_huge_window(uint64_t start, uint64_t end, uint64_t *window_start, uint64_t *window_end);

/* Called once per defined function symbol with a nonzero size. */
typedef void (*elf_function_fn)(void *context, uint64_t value, uint64_t size, const char *name);

/* The function symbols of an ELF64 image: .symtab when present, else .dynsym. Returns how many were
 * passed to fn, -ENOEXEC when the section headers lie outside the data (or the image is not ELF64). fn may be
 * NULL (count only). */
long elf_functions(const void *data, size_t size, elf_function_fn fn, void *context);

/* What the kernel runs for a script: the interpreter its "#!" line names ("#! /bin/sh -e" -> "/bin/sh"),
 * from the first `length` bytes of the file (any bytes). False when they do not start with "#!", name no
 * interpreter, or name one of `cap` bytes or more. The name ends at a blank, newline or NUL, as the
 * kernel's binfmt_script reads it. */
bool elf_script_interpreter(const char *data, size_t length, char *out, size_t cap);

/* The program a script runs: its interpreter (elf_script_interpreter), or for "#!/usr/bin/env [-S] NAME ..."
 * the NAME env looks up ("python3"), the first word after env that is neither an option nor NAME=VALUE. False
 * as elf_script_interpreter, and when NAME has `cap` bytes or more. */
bool elf_script_program(const char *data, size_t length, char *out, size_t cap);

/* The C library a dynamically linked program runs on, told by its interpreter (PT_INTERP), whose file
 * name each C library's loader keeps on every distribution: glibc's "ld-linux-x86-64.so.2",
 * "ld-linux-aarch64.so.1", "ld-linux.so.2", "ld64.so.1", "ld.so.1"; musl's "ld-musl-x86_64.so.1". NONE
 * for "" (a static program), OTHER for anything else (Android's linker64, a path of one's own). */
enum elf_libc { ELF_LIBC_NONE, ELF_LIBC_GLIBC, ELF_LIBC_MUSL, ELF_LIBC_OTHER };
enum elf_libc elf_libc_of_interpreter(const char *interpreter);

/* Called once per DT_NEEDED entry, with the library's name as written ("libasan.so.8"). */
typedef void (*elf_name_fn)(void *context, const char *name);

/* The DT_NEEDED entries of an ELF64 image, in order (the string table found through its PT_LOAD
 * segments). Returns how many were passed to fn, -ENOEXEC when the image is not ELF64 or its dynamic section
 * or string table lie outside the data; 0 for a static image. fn may be NULL (count only). */
long elf_needed(const void *data, size_t size, elf_name_fn fn, void *context);

/* Runtimes that replace malloc with their own allocator (the sanitizers, valgrind's tools): the owner's
 * name ("AddressSanitizer", "valgrind memcheck") for a library path or name, by its file name
 * ("/lib/x86_64-linux-gnu/libasan.so.8", "libclang_rt.tsan-x86_64.so", "vgpreload_memcheck-amd64-linux.so"),
 * else NULL. */
const char *elf_heap_owner_of_library(const char *path);
/* The same for a symbol a runtime defines when it is linked in statically ("__asan_init"), else NULL. */
const char *elf_heap_owner_of_symbol(const char *name);
/* The symbols of elf_heap_owner_of_symbol, one by index (NULL past the last), in the order to try them. */
const char *elf_heap_owner_symbol(size_t index);

/* Whether an ELF64 image is a Go program (its runtime maps the heap with its own system calls, bypassing libc):
 * a section the Go linker writes (".go.buildinfo", ".gopclntab", ".note.go.buildid"), or, without section
 * headers, a PT_NOTE holding the "Go" build-ID note. False for anything else, and for bytes that are not
 * ELF64. */
bool elf_is_go(const void *data, size_t size);

/* Map a regular file read-only (never blocks: a FIFO or device is -EINVAL, safe_file_open_read): 0 with
 * *data and *size set, or -errno (-ENOEXEC for an empty file) with *data untouched. Unmap with elf_unmap. */
int elf_map_file(const char *path, void **data, size_t *size);
/* Unmap what elf_map_file mapped (data NULL: nothing). */
void elf_unmap(void *data, size_t size);

#ifdef __cplusplus
}
#endif

#endif

# SPDX-License-Identifier: MIT
# hugify_enable_huge_text(target): link `target` (an executable, shared library or module) so that each of
# its executable segments starts on a 2 MiB boundary (-z max-page-size=0x200000 -z common-page-size=0x200000).
# hugify's text remap moves only whole 2 MiB windows of code onto huge pages; with the segment starting on
# a boundary only the tail after its last boundary stays on 4 KiB pages (without: also a head of up to
# 2 MiB). glibc 2.35+ loads such a PIE or shared object at a 2 MiB-aligned address (it honours p_align).
# Cost: the file grows by the padding between segments, up to 2 MiB per segment boundary (`hugify elf FILE`
# shows the estimate); the padding is not loaded into memory. Only for ELF targets (Linux).
function(hugify_enable_huge_text target)
  get_target_property(type ${target} TYPE)
  if(NOT type MATCHES "^(EXECUTABLE|SHARED_LIBRARY|MODULE_LIBRARY)$")
    message(FATAL_ERROR "hugify_enable_huge_text(${target}): ${type} is not linked; use it on an executable or shared library")
  endif()
  if(NOT CMAKE_SYSTEM_NAME STREQUAL "Linux")
    message(WARNING "hugify_enable_huge_text(${target}): not on Linux; the text remap does not apply, flags not added")
    return()
  endif()
  target_link_options(${target} PRIVATE "LINKER:-z,max-page-size=0x200000" "LINKER:-z,common-page-size=0x200000")
endfunction()

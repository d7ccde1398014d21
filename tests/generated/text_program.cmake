# SPDX-License-Identifier: MIT
# The text remap's test programs (included from tests/CMakeLists.txt, so they land in the helpers' directory
# and every test depends on them). text_generator writes >= 16 MiB worth of C at build time: 8 files of
# 576 distinct functions, 40 rounds each (about 18 MiB of code at -O0), plus a table that calls them all in
# a scattered order and the checksum that order must give. The code is compiled once and linked three ways:
#   text_program_static   the code inside the executable (PIE)
#   text_program_shared   the code in libhugify_text_code.so
#   text_program_aligned  as _static, linked with hugify_enable_huge_text() (2 MiB-aligned segments)
set(HUGIFY_TEXT_GENERATED_FILES 8)
set(HUGIFY_TEXT_GENERATED_DIR ${CMAKE_CURRENT_BINARY_DIR}/text_generated)
add_executable(text_generator ${CMAKE_CURRENT_LIST_DIR}/text_generator.c)
set(HUGIFY_TEXT_GENERATED_SOURCES ${HUGIFY_TEXT_GENERATED_DIR}/text_code_table.c)
math(EXPR last "${HUGIFY_TEXT_GENERATED_FILES} - 1")
foreach(i RANGE ${last})
  list(APPEND HUGIFY_TEXT_GENERATED_SOURCES ${HUGIFY_TEXT_GENERATED_DIR}/text_code_${i}.c)
endforeach()
add_custom_command(OUTPUT ${HUGIFY_TEXT_GENERATED_SOURCES}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${HUGIFY_TEXT_GENERATED_DIR}
  COMMAND text_generator ${HUGIFY_TEXT_GENERATED_DIR} ${HUGIFY_TEXT_GENERATED_FILES} 576 40
  DEPENDS text_generator COMMENT "Generating the text remap test code (about 18 MiB)")
add_library(hugify_text_code_objects OBJECT ${HUGIFY_TEXT_GENERATED_SOURCES})
# -O0 gives the most code per second of compiling; the code is the same in the sanitized build.
target_compile_options(hugify_text_code_objects PRIVATE -O0 -g0 -w -fno-sanitize=all)
set_target_properties(hugify_text_code_objects PROPERTIES POSITION_INDEPENDENT_CODE ON)

add_library(hugify_text_code SHARED $<TARGET_OBJECTS:hugify_text_code_objects>)
set_target_properties(hugify_text_code PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})

include(${PROJECT_SOURCE_DIR}/cmake/hugifyText.cmake)
foreach(variant static shared aligned)
  set(target text_program_${variant})
  if(variant STREQUAL "shared")
    add_executable(${target} ${CMAKE_CURRENT_LIST_DIR}/text_program.c)
    target_link_libraries(${target} PRIVATE hugify_text_code)
  else()
    add_executable(${target} ${CMAKE_CURRENT_LIST_DIR}/text_program.c $<TARGET_OBJECTS:hugify_text_code_objects>)
  endif()
  if(variant STREQUAL "aligned")
    hugify_enable_huge_text(${target})
  endif()
  set_target_properties(${target} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  target_link_libraries(${target} PRIVATE hugify_internal Threads::Threads ${CMAKE_DL_LIBS}) # text_inject_failure
  list(APPEND HUGIFY_TEST_HELPER_TARGETS ${target})
endforeach()

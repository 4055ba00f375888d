# Warnings and sanitizers for mmserve's own targets (never for llama.cpp, which is built once).
add_library(mms_options INTERFACE)
target_compile_options(mms_options INTERFACE -Wall -Wextra -Wpedantic -Wno-unused-parameter -Wno-missing-field-initializers)
if(MMSERVE_SANITIZE)
  target_compile_options(mms_options INTERFACE -fsanitize=${MMSERVE_SANITIZE} -fno-omit-frame-pointer
                                               -fno-sanitize-recover=undefined)
  target_link_options(mms_options INTERFACE -fsanitize=${MMSERVE_SANITIZE})
endif()

# mms_add_library(name SOURCES ... DEPS ...): one library per src/ folder, linking only layers below.
function(mms_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_link_libraries(${name} PUBLIC mms_options ${ARG_DEPS})
endfunction()

# mms_add_test(name LIBS ... [LABELS ...]): tests/<path>/<name>.cc, one gtest binary, discovered by ctest.
function(mms_add_test name)
  cmake_parse_arguments(ARG "" "" "LIBS;LABELS" ${ARGN})
  add_executable(${name} ${name}.cc)
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} mms_testing GTest::gmock_main)
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  gtest_discover_tests(${name} PROPERTIES LABELS "${ARG_LABELS}" DISCOVERY_TIMEOUT 60)
endfunction()

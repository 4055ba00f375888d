# Warnings and sanitizers for mmserve's own targets (never for llama.cpp, which is built once).
add_library(mms_options INTERFACE)
target_compile_options(mms_options INTERFACE -Wall -Wextra -Wpedantic -Werror -Wno-unused-parameter
                                             -Wno-missing-field-initializers)
if(MMSERVE_FUZZ)
  # Coverage for libFuzzer in every library; clang's warnings differ from GCC's, which -Werror
  # is tuned for.
  target_compile_options(mms_options INTERFACE -fsanitize=fuzzer-no-link -Wno-error)
endif()
# clang's static check of the lock annotations (common/thread_annotations.h): a member
# GUARDED_BY a mutex touched without it, a REQUIRES not met, fail the build
# (tests/scripts/thread_safety_test.sh shows it does).
set(MMS_THREAD_SAFETY_FLAGS -Wthread-safety -Wthread-safety-beta -Werror=thread-safety
                            -Werror=thread-safety-beta)
if(MMSERVE_THREAD_SAFETY)
  # clang's other warnings differ from GCC's, which -Werror is tuned for.
  target_compile_options(mms_options INTERFACE -Wno-error ${MMS_THREAD_SAFETY_FLAGS})
endif()
if(MMSERVE_SANITIZE)
  # GCC 12 reports false maybe-uninitialized warnings inside libstdc++ (std::regex, std::function)
  # once the sanitizers' instrumentation is inlined.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(mms_options INTERFACE -Wno-maybe-uninitialized)
  endif()
  if(MMSERVE_SANITIZE MATCHES "thread")
    # Boost.Asio's fences are invisible to TSan; the TSan-labelled tests do not use Asio.
    target_compile_options(mms_options INTERFACE -Wno-tsan)
  endif()
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

# mms_add_test(name LIBS ... [LABEL integration] [TSAN]): tests/<path>/<name>.cc, one gtest binary
# whose tests ctest discovers. Each test carries one label (gtest_discover_tests cannot carry a
# list): "unit" by default, "unit+tsan" with TSAN (also run under ThreadSanitizer). `ctest -L`
# takes a regex, so -L unit selects both and -L tsan the second.
function(mms_add_test name)
  cmake_parse_arguments(ARG "TSAN" "LABEL" "LIBS" ${ARGN})
  add_executable(${name} ${name}.cc)
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} mms_testing GTest::gmock_main)
  # The test's own code is compiled for speed of compiling; the code under test (the libraries)
  # keeps the tree's optimization. A gtest-heavy file takes half the time at -O1 as at -O2, and
  # instrumented (clang, ASan + UBSan + coverage) half the time at -O0 as at -O1.
  if(MMSERVE_SANITIZE)
    target_compile_options(${name} PRIVATE -O0)
  else()
    target_compile_options(${name} PRIVATE -O1)
  endif()
  if(NOT ARG_LABEL)
    set(ARG_LABEL unit)
  endif()
  if(ARG_TSAN)
    set(ARG_LABEL "${ARG_LABEL}+tsan")
  endif()
  gtest_discover_tests(${name} PROPERTIES LABELS "${ARG_LABEL}" DISCOVERY_TIMEOUT 60)
endfunction()

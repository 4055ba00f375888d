# llama.cpp, built once per variant (cpu / cuda / cann) into .deps/llama-<variant> and found
# with find_package. The source comes from scripts/setup.sh (npm node-llama-cpp, sha512-checked).
# The build happens at configure time, only when the variant's install is missing, so every
# build tree of mmserve (release, ASan, TSan) shares one llama.cpp build; ccache makes a rebuild
# on a fresh clone cheap.
set(MMSERVE_LLAMA_SOURCE "${CMAKE_SOURCE_DIR}/.deps/llama.cpp" CACHE PATH "llama.cpp source tree")

set(_variant cpu)
if(MMSERVE_CUDA)
  set(_variant cuda)
elseif(MMSERVE_CANN)
  set(_variant cann)
endif()
set(MMSERVE_LLAMA_PREFIX "${CMAKE_SOURCE_DIR}/.deps/llama-${_variant}" CACHE PATH
    "Install prefix of the llama.cpp build")

# llama.cpp's `common` library (chat templates, tool-call parsing, JSON schema → grammar) is
# built in the same tree; its install rules install nothing, so its archives are copied into the
# prefix, and their presence says the prefix is complete.
set(_build "${MMSERVE_LLAMA_PREFIX}-build")
if(NOT EXISTS "${MMSERVE_LLAMA_PREFIX}/lib/cmake/llama/llama-config.cmake" OR
   NOT EXISTS "${MMSERVE_LLAMA_PREFIX}/lib/libllama-common.a")
  if(NOT EXISTS "${MMSERVE_LLAMA_SOURCE}/include/llama.h")
    message(FATAL_ERROR "llama.cpp source not found in ${MMSERVE_LLAMA_SOURCE}: run scripts/setup.sh")
  endif()
  message(STATUS "Building llama.cpp (${_variant}) into ${MMSERVE_LLAMA_PREFIX}; the first build takes minutes")
  find_program(_ccache ccache)
  set(_launcher "")
  if(_ccache)
    set(_launcher -DCMAKE_C_COMPILER_LAUNCHER=${_ccache} -DCMAKE_CXX_COMPILER_LAUNCHER=${_ccache})
  endif()
  execute_process(
    COMMAND ${CMAKE_COMMAND} -S ${MMSERVE_LLAMA_SOURCE} -B ${_build} -G Ninja
            -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=${MMSERVE_LLAMA_PREFIX} ${_launcher}
            -DCMAKE_C_FLAGS=-w -DCMAKE_CXX_FLAGS=-w
            -DBUILD_SHARED_LIBS=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON
            -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF
            -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_COMMON=ON
            -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF
            -DGGML_CUDA=${MMSERVE_CUDA} -DGGML_CANN=${MMSERVE_CANN}
    OUTPUT_QUIET RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "configuring llama.cpp failed (${_rc})")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${_build} RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "building llama.cpp failed (${_rc})")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} --install ${_build} OUTPUT_QUIET RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "installing llama.cpp failed (${_rc})")
  endif()
  file(COPY ${_build}/common/libllama-common-base.a ${_build}/vendor/cpp-httplib/libcpp-httplib.a
       ${_build}/common/libllama-common.a DESTINATION ${MMSERVE_LLAMA_PREFIX}/lib)
endif()

find_package(llama REQUIRED CONFIG PATHS "${MMSERVE_LLAMA_PREFIX}" NO_DEFAULT_PATH)

# llama-common, as an imported target: its headers from the source tree. Its JSON type
# (common_json) hides the vendored nlohmann 3.12 behind a pimpl, so mmserve's Debian nlohmann
# 3.11 never meets it.
add_library(mms_llama_common STATIC IMPORTED GLOBAL)
set_target_properties(mms_llama_common PROPERTIES
  IMPORTED_LOCATION "${MMSERVE_LLAMA_PREFIX}/lib/libllama-common.a"
  INTERFACE_LINK_LIBRARIES
    "${MMSERVE_LLAMA_PREFIX}/lib/libllama-common-base.a;${MMSERVE_LLAMA_PREFIX}/lib/libcpp-httplib.a;llama")
set(MMSERVE_LLAMA_COMMON_INCLUDES "${MMSERVE_LLAMA_SOURCE}/common")

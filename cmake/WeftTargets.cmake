# Warnings and sanitizers apply to our own targets only, never to dependencies.
function(weft_target_defaults target)
  set_property(GLOBAL APPEND PROPERTY WEFT_TARGETS ${target})  # for weft_precompile_headers()
  target_compile_options(${target} PRIVATE -Wall -Wextra -Werror)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    # GCC 12 at -O2/-O3 warns -Wrestrict inside libstdc++ for `"literal" +
    # std::string` (GCC bug 105329): a false positive that is not our code's.
    target_compile_options(${target} PRIVATE -Wno-restrict)
  endif()
  if(WEFT_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=address,undefined -fno-omit-frame-pointer
                           -fno-sanitize-recover=undefined)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
endfunction()

# A native plugin: a shared library built against sdk/ only, hidden visibility,
# written to <build>/plugins/<kind>/ so hosts and tests find it at a known place.
function(weft_plugin target kind)
  add_library(${target} MODULE ${ARGN})
  target_link_libraries(${target} PRIVATE weft_sdk)
  set_target_properties(${target} PROPERTIES
    PREFIX "" CXX_VISIBILITY_PRESET hidden C_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/plugins/${kind})
  weft_target_defaults(${target})
  # The host lends a plugin no symbols (only the services table), so every symbol
  # must come from what the plugin links: an unresolved one fails the build here
  # instead of weft-host's dlopen. Clang does not link its sanitizer runtimes into
  # shared objects (the executable brings them), so sanitized Clang builds
  # (WEFT_SANITIZE, or WEFT_FUZZ's instrumented weft_common) skip it.
  if(NOT ((WEFT_SANITIZE OR WEFT_FUZZ) AND CMAKE_CXX_COMPILER_ID MATCHES "Clang"))
    target_link_options(${target} PRIVATE -Wl,--no-undefined)
  endif()
endfunction()

# Precompiled headers: the standard library, nlohmann/json and cppzmq (and
# Catch2 for the tests) are parsed once per build instead of once per
# translation unit; in the sanitizer Debug build that is a few seconds of each of
# ~270 compiles. Off by default under ccache (a warm cache beats them, and ccache
# cannot cache a compile that uses one without extra sloppiness settings) and for
# WEFT_FUZZ (its libraries carry instrumentation flags of their own). A PCH only
# changes how fast a header is read: -DWEFT_PCH=OFF builds the same objects.
set(weft_pch_default ON)
if(CMAKE_CXX_COMPILER_LAUNCHER MATCHES "ccache" OR WEFT_FUZZ)
  set(weft_pch_default OFF)
endif()
option(WEFT_PCH "Precompile the common headers (the standard library, nlohmann/json, cppzmq, Catch2)"
       ${weft_pch_default})

set(WEFT_PCH_HEADERS <algorithm> <chrono> <cstdint> <filesystem> <functional> <map> <memory> <mutex>
    <optional> <set> <sstream> <string> <string_view> <unordered_map> <utility> <variant> <vector>
    <nlohmann/json.hpp> <zmq.hpp>)
set(WEFT_PCH_TEST_HEADERS ${WEFT_PCH_HEADERS} <random> <regex> <thread> <catch2/catch.hpp>)

# One target per flag set owns a PCH; every target of that flag set reuses it
# (REUSE_FROM), so a one-file test binary pays nothing for it.
function(weft_pch_owner owner pic visibility headers)
  file(CONFIGURE OUTPUT ${CMAKE_BINARY_DIR}/weft_pch/${owner}.cpp CONTENT "// ${owner}: owns a PCH\n")
  add_library(${owner} OBJECT ${CMAKE_BINARY_DIR}/weft_pch/${owner}.cpp)
  target_link_libraries(${owner} PRIVATE nlohmann_json::nlohmann_json cppzmq ${ARGN})
  set_target_properties(${owner} PROPERTIES POSITION_INDEPENDENT_CODE ${pic})
  if(visibility)
    set_target_properties(${owner} PROPERTIES CXX_VISIBILITY_PRESET ${visibility} VISIBILITY_INLINES_HIDDEN ON)
  endif()
  target_precompile_headers(${owner} PRIVATE ${headers})
  weft_target_defaults(${owner})
endfunction()

# Called once, at the end of the top-level CMakeLists.txt (every target exists and
# has its final properties): gives each C++ target of ours the PCH of its flag set.
# Plugins (PIC, hidden visibility) have a flag set of their own. Left out: C or
# mixed targets, and Catch2's main (it must see catch.hpp after CATCH_CONFIG_MAIN).
# CMake compiles with -Winvalid-pch, so under -Werror a PCH whose flags do not
# match its user fails the build instead of being skipped in silence.
function(weft_precompile_headers)
  if(NOT WEFT_PCH)
    return()
  endif()
  get_property(targets GLOBAL PROPERTY WEFT_TARGETS)
  weft_pch_owner(weft_pch OFF "" "${WEFT_PCH_HEADERS}")
  weft_pch_owner(weft_pch_pic ON "" "${WEFT_PCH_HEADERS}")
  weft_pch_owner(weft_pch_plugin ON hidden "${WEFT_PCH_HEADERS}")
  if(TARGET Catch2::Catch2)  # WEFT_BUILD_TESTS
    weft_pch_owner(weft_pch_test OFF "" "${WEFT_PCH_TEST_HEADERS}" Catch2::Catch2)
  endif()
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    get_target_property(sources ${target} SOURCES)
    get_target_property(pic ${target} POSITION_INDEPENDENT_CODE)
    get_target_property(visibility ${target} CXX_VISIBILITY_PRESET)
    get_target_property(libs ${target} LINK_LIBRARIES)
    list(FILTER sources INCLUDE REGEX "\\.(c|cpp)$")
    set(c_sources ${sources})
    list(FILTER c_sources INCLUDE REGEX "\\.c$")
    if(target MATCHES "^weft_pch" OR target STREQUAL "weft_test_main" OR NOT sources OR c_sources
       OR type STREQUAL "INTERFACE_LIBRARY")
      continue()
    endif()
    if(visibility OR type MATCHES "^(MODULE|SHARED)")
      if(NOT visibility STREQUAL "hidden")
        continue()
      endif()
      set(owner weft_pch_plugin)
    elseif("Catch2::Catch2" IN_LIST libs)
      set(owner weft_pch_test)
    elseif(pic)
      set(owner weft_pch_pic)
    else()
      set(owner weft_pch)
    endif()
    target_precompile_headers(${target} REUSE_FROM ${owner})
  endforeach()
endfunction()

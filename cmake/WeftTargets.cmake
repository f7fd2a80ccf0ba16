# Warnings and sanitizers apply to our own targets only, never to dependencies.
function(weft_target_defaults target)
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

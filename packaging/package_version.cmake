# cmake -DSOURCE=<repository> -DVERSION=<project version> -DOUT=<file> -P package_version.cmake
# Writes OUT, which cpack reads (cpack_project.cmake): the Debian packages'
# version for the commit the build was made from. In a git checkout that is
# VERSION+git<commit time, UTC>.<hash> (0.1.0+git20261128.064136.909a49e), so
# the packages of a later commit upgrade those of an earlier one: apt and dpkg
# compare versions, and install nothing over a package of the same version.
# Outside a git checkout (a release tarball) it is VERSION.
set(version ${VERSION})
find_program(WEFT_GIT git)
if(WEFT_GIT AND EXISTS ${SOURCE}/.git)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env TZ=UTC
                          ${WEFT_GIT} -C ${SOURCE} log -1 --format=%cd.%h --date=format-local:%Y%m%d.%H%M%S
                  OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE failed ERROR_QUIET)
  if(NOT failed AND commit MATCHES "^[0-9]+\\.[0-9]+\\.[0-9a-f]+$")
    set(version ${VERSION}+git${commit})
  endif()
endif()
set(content "set(CPACK_DEBIAN_PACKAGE_VERSION ${version})\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT old STREQUAL content)
  file(WRITE ${OUT} "${content}")
endif()

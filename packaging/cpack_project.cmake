# Read by cpack (CPACK_PROJECT_CONFIG_FILE): the packages' version for the
# commit the build was made from, which every build writes (package_version.cmake),
# unless `cpack -D CPACK_DEBIAN_PACKAGE_VERSION=...` set one.
if(NOT CPACK_DEBIAN_PACKAGE_VERSION AND EXISTS "${CPACK_WEFT_VERSION_FILE}")
  include("${CPACK_WEFT_VERSION_FILE}")
endif()

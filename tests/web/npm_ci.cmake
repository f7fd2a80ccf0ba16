# Installs the browser tests' npm packages (package-lock.json, exact versions)
# into DEST, outside the source tree: cmake -DSOURCE=.. -DDEST=.. -DNPM=npm -P npm_ci.cmake
file(MAKE_DIRECTORY "${DEST}")
file(COPY "${SOURCE}/package.json" "${SOURCE}/package-lock.json" DESTINATION "${DEST}")
execute_process(COMMAND "${NPM}" ci --no-audit --no-fund --loglevel=error
                WORKING_DIRECTORY "${DEST}" RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "npm ci in ${DEST} failed (${result}); the browser tests need playwright-core from the npm registry")
endif()

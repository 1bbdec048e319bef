# Writes the version header (cmake/version.hpp.in) with the source tree's commit. Runs at every build (target
# symmoe_version_header) so the commit follows HEAD without a re-configure; configure_file rewrites the header only
# when its text changes, so an unchanged commit recompiles nothing.
# Inputs (-D): SOURCE_DIR, TEMPLATE, OUTPUT, PROJECT_VERSION{,_MAJOR,_MINOR,_PATCH}, SYMMOE_WITH_CUDA_01.
set(SYMMOE_GIT_COMMIT unknown)
find_package(Git QUIET)
if(GIT_FOUND)
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short HEAD WORKING_DIRECTORY ${SOURCE_DIR}
                  OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
  if(rc EQUAL 0 AND commit)
    set(SYMMOE_GIT_COMMIT ${commit})
    execute_process(COMMAND ${GIT_EXECUTABLE} diff --quiet HEAD WORKING_DIRECTORY ${SOURCE_DIR}
                    RESULT_VARIABLE dirty ERROR_QUIET)
    if(NOT dirty EQUAL 0)
      string(APPEND SYMMOE_GIT_COMMIT "-dirty")
    endif()
  endif()
endif()
configure_file(${TEMPLATE} ${OUTPUT} @ONLY)

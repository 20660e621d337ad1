# The fuzz targets, tests/fuzz/fuzz_<name>.c (docs/fuzzing.md). Included by tests/CMakeLists.txt
# (each target replays its corpus tests/fuzz/corpus/<name>/ in the test suite) and by
# tests/fuzz/CMakeLists.txt (the libFuzzer build, -DSB_FUZZ=ON). A new target is a file, a
# corpus folder and its name here.
set(SB_FUZZ_TARGETS ceiling_json flags results safetensors sweep)

# sb_fuzz_sources(name out): the sources of target `name`, besides the driver (libFuzzer's
# main, or tests/fuzz/replay_main.c).
function(sb_fuzz_sources name out)
  set(_src ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_${name}.c ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_common.c)
  if(name STREQUAL "flags")
    # train's flag parser is the CLI's (src/cli/options.c, src/cli/run_options.c)
    list(APPEND _src ${CMAKE_SOURCE_DIR}/src/cli/options.c ${CMAKE_SOURCE_DIR}/src/cli/run_options.c)
  endif()
  set(${out} ${_src} PARENT_SCOPE)
endfunction()

# The fuzz targets, tests/fuzz/fuzz_<name>.c (docs/fuzzing.md). Included by tests/CMakeLists.txt
# (each target replays its corpus tests/fuzz/corpus/<name>/ in the test suite) and by
# tests/fuzz/CMakeLists.txt (the libFuzzer build, -DSB_FUZZ=ON). A new target is a file, a
# corpus folder and its name here.
set(SB_FUZZ_TARGETS ceiling_json flags record results safetensors serve sweep)

# sb_fuzz_sources(name out): the sources of target `name`, besides the driver (libFuzzer's
# main, or tests/fuzz/replay_main.c).
function(sb_fuzz_sources name out)
  set(_src ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_${name}.c ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_common.c)
  if(name STREQUAL "flags")
    # train's flag parser is the CLI's (src/cli/options.c, src/cli/run_options.c)
    list(APPEND _src ${CMAKE_SOURCE_DIR}/src/cli/options.c ${CMAKE_SOURCE_DIR}/src/cli/run_options.c)
  elseif(name STREQUAL "serve")
    # the dashboard's server (src/cli/serve*.c), what it uses of the CLI (results_curves.c,
    # results_view.c, cli.c, options.c, run_options.c), and the embedded page: the file the top-level
    # CMakeLists.txt generates for the program (SB_WEB_C), made again here by the same script
    # from the same files (a generated source is known only in the folder of its rule)
    set(_web ${CMAKE_CURRENT_BINARY_DIR}/generated/fuzz_web_assets.c)
    get_directory_property(_have SB_FUZZ_WEB_RULE)
    if(NOT _have)
      add_custom_command(OUTPUT ${_web}
        COMMAND ${CMAKE_COMMAND} -DWEB_DIR=${CMAKE_SOURCE_DIR}/src/cli/web -DOUT=${_web}
                -P ${CMAKE_SOURCE_DIR}/cmake/embed_web.cmake
        DEPENDS ${SB_WEB_FILES} ${CMAKE_SOURCE_DIR}/cmake/embed_web.cmake
        COMMENT "Embedding the dashboard's page (src/cli/web) for fuzz_serve" VERBATIM)
      set_directory_properties(PROPERTIES SB_FUZZ_WEB_RULE ON)
    endif()
    foreach(_f serve_http.c serve_data.c serve_groups.c serve_run.c serve_figures.c results_curves.c
               results_view.c cli.c options.c run_options.c)
      list(APPEND _src ${CMAKE_SOURCE_DIR}/src/cli/${_f})
    endforeach()
    list(APPEND _src ${_web})
  endif()
  set(${out} ${_src} PARENT_SCOPE)
endfunction()

# sb_fuzz_libraries(name out): what target `name` links besides the library.
function(sb_fuzz_libraries name out)
  set(_libs "")
  if(name STREQUAL "serve")
    list(APPEND _libs PkgConfig::MHD) # libmicrohttpd, as the program links it
  endif()
  set(${out} ${_libs} PARENT_SCOPE)
endfunction()

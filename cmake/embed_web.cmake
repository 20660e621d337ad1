# Embeds the dashboard's page (src/cli/web/*: HTML, CSS, JS) into `selectivbench serve` as C
# arrays, so that the program serves it from any folder and fetches nothing at run time.
# Run at build time in script mode (CMakeLists.txt's add_custom_command), re-run whenever a
# file of the page changes:
#   cmake -DWEB_DIR=src/cli/web -DOUT=build/generated/web_assets.c -P cmake/embed_web.cmake
# file(READ ... HEX) does what xxd -i would, without needing xxd.
if(NOT WEB_DIR OR NOT OUT)
  message(FATAL_ERROR "embed_web.cmake: give -DWEB_DIR=FOLDER and -DOUT=FILE.c")
endif()
file(GLOB _files ${WEB_DIR}/*.html ${WEB_DIR}/*.css ${WEB_DIR}/*.js)
list(SORT _files)
set(_body "/* generated from src/cli/web/ by cmake/embed_web.cmake; do not edit */\n")
string(APPEND _body "#include <stddef.h>\n#include \"cli/web_assets.h\"\n\n")
set(_table "")
set(_i 0)
foreach(_file ${_files})
  get_filename_component(_name ${_file} NAME)
  file(READ ${_file} _hex HEX)
  string(LENGTH "${_hex}" _len)
  math(EXPR _bytes "${_len} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," _hex "${_hex}")
  # one terminating zero beyond the size, so that the page can also be read as a string
  string(APPEND _body "static const unsigned char asset_${_i}[] = {${_hex}0x00};\n")
  string(APPEND _table "    {\"/${_name}\", asset_${_i}, ${_bytes}},\n")
  math(EXPR _i "${_i} + 1")
endforeach()
string(APPEND _body "\nconst sb_web_asset sb_web_assets[] = {\n${_table}    {NULL, NULL, 0},\n};\n")
file(WRITE ${OUT}.new "${_body}")
file(COPY_FILE ${OUT}.new ${OUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUT}.new)

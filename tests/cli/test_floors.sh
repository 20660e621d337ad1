#!/bin/sh
# The library reads bottom-up (docs/ARCHITECTURE.md): every folder of src/ is a floor, and a
# file may include headers of its own floor and of the floors below, never above:
#   core -> config -> task -> tensor -> ops -> layers -> model -> train -> exp -> api -> cli
# Also: nothing outside src/cli/ exits or writes to the terminal (the library returns a
# status and a message), and no two files of a floor include each other's headers (no
# circles). usage: test_floors.sh SOURCE_DIR
set -u
src=${1:?usage: test_floors.sh SOURCE_DIR}/src
floors="core config task tensor ops layers model train exp api cli"
fail=0

rank() { # rank FLOOR -> its position, or nothing for an unknown folder
  i=0
  for f in $floors; do
    [ "$f" = "$1" ] && { echo $i; return; }
    i=$((i + 1))
  done
}

# every folder of src/ is a floor
for d in "$src"/*/; do
  d=$(basename "$d")
  if [ -z "$(rank "$d")" ]; then
    echo "FAIL: src/$d/ is not a floor; add it to the order in tests/cli/test_floors.sh and docs/ARCHITECTURE.md"
    fail=1
  fi
done

# includes point down (or sideways within the floor)
for file in $(find "$src" -name '*.c' -o -name '*.h' -o -name '*.def' | sort); do
  rel=${file#"$src"/}
  floor=${rel%%/*}
  own=$(rank "$floor")
  [ -n "$own" ] || continue
  for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file"); do
    case "$inc" in
      */*) target=${inc%%/*} ;;
      *) continue ;; # same folder
    esac
    r=$(rank "$target")
    if [ -z "$r" ]; then
      [ "$target" = selectivbench ] && continue # the public header (include/)
      echo "FAIL: src/$rel includes \"$inc\": not a floor"
      fail=1
    elif [ "$r" -gt "$own" ]; then
      echo "FAIL: src/$rel (floor $floor) includes \"$inc\" from the floor above ($target)"
      fail=1
    fi
  done
done

# no two files include each other's headers (x.c includes y.h and y.c includes x.h)
for file in $(find "$src" -name '*.c' | sort); do
  base=${file%.c}
  for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)\.h".*/\1/p' "$file"); do
    other="$src/$inc.c"
    [ "$other" = "$file" ] && continue
    [ -f "$other" ] || continue
    mine=${base#"$src"/}
    if grep -q "^[[:space:]]*#[[:space:]]*include[[:space:]]*\"$mine\.h\"" "$other"; then
      echo "FAIL: circle: src/$mine.c includes $inc.h and src/$inc.c includes $mine.h"
      fail=1
    fi
  done
done

# only the CLI exits or prints
lib_files=$(find "$src" -name '*.c' -o -name '*.h' | grep -v "^$src/cli/" | sort)
# shellcheck disable=SC2086
hits=$(grep -nE '(^|[^_a-z])(exit|_Exit|abort)[[:space:]]*\(|(^|[^_a-z.>])(printf|puts|perror|putchar)[[:space:]]*\(|f(printf|puts|putc|write)[[:space:]]*\([^;]*\b(stdout|stderr)\b|\b(stdout|stderr)\b[[:space:]]*[,)]' $lib_files |
  grep -vE '^[^:]+:[0-9]+:[[:space:]]*(/?\*|//)' | grep -v 'floors: allowed')
if [ -n "$hits" ]; then
  echo "FAIL: the library must not exit or print (return a status; the CLI prints):"
  echo "$hits"
  fail=1
fi

# the CLI includes only the public header and its own files (docs/ARCHITECTURE.md)
for file in $(find "$src/cli" -name '*.c' -o -name '*.h' | sort); do
  name=$(basename "$file")
  for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file"); do
    case "$inc" in
      selectivbench/selectivbench.h | cli/*) ;;
      *)
        echo "FAIL: src/cli/$name includes \"$inc\": the CLI uses the public API (selectivbench/selectivbench.h) and its own cli/ headers"
        fail=1
        ;;
    esac
  done
done

[ $fail -eq 0 ] && echo "ok: every include points down the floors, no circles, only src/cli/ exits or prints, the CLI on the public API"
exit $fail

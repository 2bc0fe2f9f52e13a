#!/usr/bin/env bash
# Runs the binding's tests under valgrind: no definite leaks, no invalid reads or writes.
#
#   lua/t/valgrind.sh
#
# 1. The Rust test binaries that drive the library: ffi/tests/c_abi.rs (the C ABI),
#    ffi/tests/explain.rs (its explain, matches and route-text functions), ffi/tests/background.rs
#    (background syncs: the builder thread, lent texts, frees while building), ffi/tests/stats.rs
#    (the counters, written into structs of every size), ffi/tests/image_file.rs (table image
#    files: written, mapped under locks, removed). The Lua tests below publish, map, open on a
#    thread, match from and retire table images through the C ABI.
# 2. The Lua tests (lua/t/binding_test.lua, lua/t/gateway_test.lua) once: in the installed
#    `luajit` (the LuaJIT OpenResty users run) through lua/t/run.lua, or, without one, in the
#    embedded LuaJIT of ffi/tests/lua.rs. Running both would repeat the same tests under
#    valgrind for a quarter of the CI time.
#
# Exits non-zero on the first run that valgrind or the tests fail. Needs valgrind
# (apt-get install valgrind); installs nothing itself.
set -euo pipefail
cd "$(dirname "$0")/../.."

command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 2; }

VALGRIND=(valgrind --quiet --leak-check=full --show-leak-kinds=definite
          --errors-for-leak-kinds=definite --error-exitcode=1)

executable() {
    cargo test -p atc-router-ffi --test "$1" --no-run 2>&1 \
        | sed -n 's/.*Executable .*(\(.*\))$/\1/p' | tail -n 1
}

tests=(c_abi explain background stats image_file)
command -v luajit >/dev/null || tests=(lua "${tests[@]}")
for t in "${tests[@]}"; do
    exe=$(executable "$t")
    [ -x "$exe" ] || { echo "could not build the $t test binary" >&2; exit 2; }
    echo "==> valgrind $exe"
    "${VALGRIND[@]}" "$exe" --test-threads=1 -q
done

if command -v luajit >/dev/null; then
    lib=$(realpath "$(dirname "$(executable lua)")/libatc_router_ffi.so")
    dir=$(mktemp -d)
    trap 'rm -rf "$dir"' EXIT
    ln -s "$lib" "$dir/libatc_router.so"
    echo "==> valgrind luajit lua/t/run.lua"
    # The gateway tests' lists of 20,000-30,000 routes at a tenth: the same paths through the
    # code, without half an hour of building under valgrind.
    ATC_TEST_SCALE=0.1 LUA_PATH="lua/?.lua;lua/t/?.lua" LUA_CPATH="$dir/?.so" \
        "${VALGRIND[@]}" luajit lua/t/run.lua
else
    echo "(no luajit installed: the Lua tests ran in the embedded LuaJIT above)"
fi
echo "valgrind: no errors, no definite leaks"

#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The sanitizer build's test runner (LOG_COMPILER of `make check` configured
# with --enable-sanitizers): runs TEST with every ASan, LSan and UBSan report
# going to files in $AV_SANITIZER_DIR/NAME/ (log_path), not to stderr: the
# hook's detached worker has /dev/null there, and the hook's own stderr is
# what the tests compare.  After TEST, waits (60 s at most) for the processes
# it left behind that carry its environment (the detached worker), then
# fails the test ("Bail out!", each report copied into the test's log) when
# any report file is there.
#
#   sanitized-test.sh TEST [ARG...]
set -u
: "${AV_SANITIZER_DIR:?AV_SANITIZER_DIR is not set: run the tests with make check}"
: "${AV_TEST_SRCDIR:?AV_TEST_SRCDIR is not set: run the tests with make check}"

name=$(basename "$1")
dir="$AV_SANITIZER_DIR/$name"
rm -rf "$dir"
mkdir -p "$dir" || exit 99
supp="$AV_TEST_SRCDIR/fuzz/lsan.supp"

# Reports name functions and lines through llvm-symbolizer; Debian's llvm-14
# has it as llvm-symbolizer-14 only (install-deps --sanitize).
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ] && ! command -v llvm-symbolizer >/dev/null 2>&1; then
    for s in llvm-symbolizer-14 /usr/lib/llvm-14/bin/llvm-symbolizer; do
        if command -v "$s" >/dev/null 2>&1; then
            ASAN_SYMBOLIZER_PATH=$(command -v "$s")
            export ASAN_SYMBOLIZER_PATH
            break
        fi
    done
fi

# intercept_strstr=0: ASan's strstr() interceptor measures the whole
# haystack on every call, which makes GLib's g_strsplit() quadratic (the
# 50,000-line journal of test-pool took minutes in av_journal_verify()).
# Options already in the environment come after the defaults (they win),
# log_path last (a nested run, as in test-sanitizers.sh, keeps its own).
# Only TEST's environment carries these (not this script's), so that the
# wait below finds TEST's descendants and not this shell.
ASAN_OPTIONS="detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1:intercept_strstr=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}:log_path=$dir/report" \
UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}:log_path=$dir/report" \
LSAN_OPTIONS="suppressions=$supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}" \
AV_SANITIZER_TAG="$dir" \
    "$@"
rc=$?

# Detached descendants (the hook's worker, reparented to init) report at
# their exit: wait for them.
tag="AV_SANITIZER_TAG=$dir"
i=0
while [ $i -lt 600 ]; do
    left=$(grep -lsaF "$tag" /proc/[0-9]*/environ 2>/dev/null | sed 's|^/proc/||; s|/environ$||' | tr '\n' ' ')
    [ -n "$left" ] || break
    sleep 0.1
    i=$((i + 1))
done
if [ -n "$left" ]; then
    echo "sanitized-test.sh: processes of $name still running after 60 s: $left" >&2
fi

reports=$(find "$dir" -type f | sort)
if [ -n "$reports" ]; then
    for f in $reports; do
        echo "=== $f" >&2
        cat "$f" >&2
    done
    echo "Bail out! sanitizer reports of $name: $(echo $reports)"
    exit 1
fi
exit $rc

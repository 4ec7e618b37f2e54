#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The sanitizer build's own check (make check configured with
# --enable-sanitizers): each kind of report (LeakSanitizer, AddressSanitizer,
# UndefinedBehaviorSanitizer), from the test's own process and from one
# detached as the hook detaches its worker, makes tests/fuzz/sanitized-test.sh
# fail the test with "Bail out!" and the report in its log; a clean program
# passes.
. "$AV_TEST_SRCDIR/lib.sh"
: "${AV_TEST_BUILDDIR:?run the tests with make check}"
CANARY="$AV_TEST_BUILDDIR/fuzz/canary"
RUN="$AV_TEST_SRCDIR/fuzz/sanitized-test.sh"

# caught KIND WANT [detached]: the wrapper fails, naming WANT from the report.
caught() {
    kind=$1; want=$2; shift 2
    AV_SANITIZER_DIR="$AV_TMP/reports" sh "$RUN" "$CANARY" "$kind" "$@" >"$AV_TMP/out" 2>"$AV_TMP/err"
    rc=$?
    [ "$rc" -ne 0 ] || { echo "exit 0"; cat "$AV_TMP/out" "$AV_TMP/err"; return 1; }
    grep -q '^Bail out! sanitizer reports of canary' "$AV_TMP/out" || { echo "no Bail out:"; cat "$AV_TMP/out"; return 1; }
    grep -q "$want" "$AV_TMP/err" || { echo "no '$want' in:"; cat "$AV_TMP/err"; return 1; }
}

clean() {
    AV_SANITIZER_DIR="$AV_TMP/reports" sh "$RUN" "$CANARY" none "$@" >"$AV_TMP/out" 2>"$AV_TMP/err" || {
        cat "$AV_TMP/out" "$AV_TMP/err"; return 1; }
    ! grep -q 'Bail out' "$AV_TMP/out"
}

check "a leak fails the test" caught leak "ERROR: LeakSanitizer: detected memory leaks"
check "a heap overflow fails the test" caught overflow "ERROR: AddressSanitizer: heap-buffer-overflow"
check "a signed overflow fails the test" caught ubsan "runtime error: signed integer overflow"
check "a detached process's leak (stderr on /dev/null) fails the test" caught leak "LeakSanitizer" detached
check "a detached process's heap overflow fails the test" caught overflow "heap-buffer-overflow" detached
check "a detached process's undefined behaviour fails the test" caught ubsan "signed integer overflow" detached
check "a clean program passes" clean
check "a clean detached program passes" clean detached
finish

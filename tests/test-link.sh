#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# accelvirt tests: what the programs link (issue 12, item 1).  libvirt runs
# the hook for every operation of every domain and waits for it, and the hook
# must never call libvirt (DESIGN.md): so accelvirt-hook records as NEEDED
# (readelf -d) only the libraries it uses, from an allow-list, and never
# libvirt; it holds none of the code that calls libvirt (the "vm" scrub
# method).  accelvirt and accelvirt-worker, which run "vm" steps, do link
# libvirt: that proves the readings below see what they look for.  libyaml
# (the provider config of `accelvirt nova config`) is accelvirt's alone.
. "$AV_TEST_SRCDIR/lib.sh"

: "${ACCELVIRT_HOOK:?ACCELVIRT_HOOK is not set: run the tests with make check}"
: "${ACCELVIRT_WORKER:?ACCELVIRT_WORKER is not set: run the tests with make check}"
READELF=${READELF:-readelf}
if ! command -v "$READELF" >/dev/null 2>&1; then
    echo "not ok 1 - readelf ('$READELF') is not installed: install binutils (build-aux/install-deps does)"
    echo "1..1"
    exit 1
fi

# needed PROGRAM: its NEEDED entries, one a line.
needed() {
    "$READELF" -dW "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p'
}

# What the hook may need: GLib, jansson (the pool and journal), libxml2 (the
# domain XML), and the C library
# with its parts (libm, libpthread, librt, libdl, libgcc_s, the dynamic
# loader), which a sanitizer build's runtime asks for.
allowed() {
    case $1 in
        libglib-2.0.so.*|libjansson.so.*|libxml2.so.*) return 0 ;;
        libc.so.*|libm.so.*|libpthread.so.*|librt.so.*|libdl.so.*|libgcc_s.so.*|ld-linux*.so.*) return 0 ;;
    esac
    return 1
}

# only_allowed PROGRAM: every NEEDED entry of PROGRAM is allowed().
only_allowed() {
    list=$(needed "$1")
    [ -n "$list" ] || { echo "no NEEDED entry read from $1:"; "$READELF" -dW "$1"; return 1; }
    bad=""
    for lib in $list; do
        allowed "$lib" || bad="$bad $lib"
    done
    [ -z "$bad" ] || { echo "$1 needs libraries outside the hook's allow-list:$bad"; echo "all:"; echo "$list"; return 1; }
}

# needs PROGRAM PATTERN: some NEEDED entry of PROGRAM matches PATTERN (grep -E).
needs() {
    needed "$1" | grep -Eq "$2" || { echo "$1 does not need $2:"; needed "$1"; return 1; }
}

# needs_not PROGRAM PATTERN
needs_not() {
    ! needed "$1" | grep -E "$2"
}

# defines PROGRAM SYMBOL: SYMBOL is in PROGRAM's symbol table.
defines() {
    "$READELF" -sW "$1" | awk '{print $8}' | grep -qx "$2"
}

check "accelvirt-hook needs no libvirt" needs_not "$ACCELVIRT_HOOK" '^libvirt'
check "accelvirt-hook needs only libraries of its allow-list (GLib, jansson, libxml2, libc)" \
    only_allowed "$ACCELVIRT_HOOK"
check "  ... among them GLib and the C library (the reading works)" \
    eval "needs '$ACCELVIRT_HOOK' '^libglib-2\\.0\\.so' && needs '$ACCELVIRT_HOOK' '^libc\\.so'"
check "accelvirt-hook holds no code of the vm scrub method" \
    eval "defines '$ACCELVIRT_WORKER' av_scrub_method_vm && ! defines '$ACCELVIRT_HOOK' av_scrub_method_vm && ! defines '$ACCELVIRT_HOOK' av_scrub_vm_register"
check "accelvirt-worker needs libvirt (it runs vm steps)" needs "$ACCELVIRT_WORKER" '^libvirt\.so'
check "accelvirt needs libvirt (domain commands, accelvirt scrub)" needs "$ACCELVIRT" '^libvirt\.so'
# The Placement sync (issue 18): HTTP and clouds.yaml in the worker and the
# command, never in the hook.
check "accelvirt-hook needs neither libcurl nor libyaml, nor holds the Placement client" \
    eval "needs_not '$ACCELVIRT_HOOK' '^lib(curl|yaml)' && ! defines '$ACCELVIRT_HOOK' av_placement_sync && ! defines '$ACCELVIRT_HOOK' av_os_cloud_load"
check "accelvirt-worker and accelvirt need libcurl and libyaml (they talk to Placement)" \
    eval "needs '$ACCELVIRT_WORKER' '^libcurl' && needs '$ACCELVIRT_WORKER' '^libyaml' && needs '$ACCELVIRT' '^libcurl' && needs '$ACCELVIRT' '^libyaml' && defines '$ACCELVIRT_WORKER' av_placement_sync"
check "accelvirt needs libyaml (clouds.yaml, and nova config's provider config)" \
    eval "needs '$ACCELVIRT' '^libyaml-0\\.so'"

finish

#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# accelvirt tests: the license is declared.  LICENSE holds the Apache
# License 2.0; every source file (C, CUDA, shell, Python, make and autoconf
# files, systemd units, man pages, the schema, the package's scripts) names
# its license in an SPDX-License-Identifier line among its first three
# lines; debian/copyright says it in the machine-readable format; and both
# programs' --version say it.  Data the tests feed (corpora, fixtures,
# goldens, example policies and domains) and prose are not source files.
. "$AV_TEST_SRCDIR/lib.sh"

TOP="$AV_TEST_SRCDIR/.."

check "LICENSE is the Apache License 2.0" eval "grep -q 'Apache License' '$TOP/LICENSE' && grep -q 'Version 2.0, January 2004' '$TOP/LICENSE'"

python3 - "$TOP" >"$AV_TMP/license.out" 2>&1 <<'PY'
import os, subprocess, sys
top = sys.argv[1]
data_dirs = ("tests/data", "tests/fuzz/corpus", "tests/bad-input", "tests/xml", "tests/place",
             "policies", "xml/examples", "debian/source", ".git", "autom4te.cache", "tests/bin")
code_ext = (".c", ".h", ".cu", ".sh", ".py", ".mk", ".am", ".ac", ".in", ".rng", ".dict", ".supp",
            ".1", ".5", ".8")
named = {"debian/rules", "debian/control", "debian/accelvirt.links", "debian/accelvirt.postinst",
         "debian/accelvirt.postrm", ".ci/run", ".gitignore", "autogen.sh"}
def tree():
    """The tracked files in a git checkout (an in-tree build leaves its own
    files beside them), else every file of the unpacked tarball."""
    try:
        out = subprocess.run(["git", "-C", top, "ls-files", "-z"], capture_output=True, check=True).stdout
        if out:
            return [f for f in out.decode().split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        pass
    found = []
    for d, dirs, files in os.walk(top):
        rel_d = os.path.relpath(d, top)
        dirs[:] = [x for x in dirs if not x.startswith((".", "accelvirt-"))]
        found += [os.path.normpath(os.path.join(rel_d, f)) for f in files]
    return found

bad, seen = [], 0
for rel in tree():
    if rel.startswith(tuple(x + "/" for x in data_dirs)) or os.path.basename(rel) in (
            "config.h", "config.status", "config.log", "stamp-h1", "Makefile"):
        continue
    if True:
        path = os.path.join(top, rel)
        try:
            head = open(path, "rb").read(4096)
        except OSError:
            continue
        if rel in ("Makefile.in", "configure", "config.h.in", "aclocal.m4") or b"\0" in head:
            continue
        if rel.startswith(("build-aux/", "m4/")) and rel != "build-aux/tap-driver.sh" and \
                rel not in ("build-aux/demo", "build-aux/quickstart", "build-aux/install-deps"):
            continue
        script = head.startswith(b"#!")
        if not (rel.endswith(code_ext) or rel in named or script):
            continue
        # Built files beside their sources (the units made from .in) are not tracked.
        if rel.endswith((".service", ".timer")) or rel.endswith(".o"):
            continue
        seen += 1
        first = head.decode("utf-8", "replace").split("\n")[:3]
        if not any("SPDX-License-Identifier: " in line for line in first):
            bad.append(rel)
print("%d source files read" % seen)
for b in sorted(bad):
    print("no SPDX-License-Identifier line in its first three lines: " + b)
sys.exit(1 if bad or seen < 200 else 0)
PY
check "every source file names its license (SPDX)" eval "cat '$AV_TMP/license.out' >&2; ! grep -q '^no SPDX' '$AV_TMP/license.out' && grep -q 'source files read' '$AV_TMP/license.out'"
check "debian/copyright is machine-readable and says Apache-2.0" \
    eval "head -1 '$TOP/debian/copyright' | grep -q '^Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/' && grep -q '^License: Apache-2.0\$' '$TOP/debian/copyright'"
check "accelvirt --version: version, optional parts, license" \
    eval "\"$ACCELVIRT\" --version >'$AV_TMP/v.out' && grep -q '^accelvirt [0-9]' '$AV_TMP/v.out' && grep -q '^GPU scrubbing kernel: ' '$AV_TMP/v.out' && grep -q '^Placement client: built in (libcurl ' '$AV_TMP/v.out' && grep -q '^License: Apache-2.0' '$AV_TMP/v.out'"
check "accelvirt-hook --version alone: version and license, no Placement client" \
    eval "\"$ACCELVIRT_HOOK\" --version >'$AV_TMP/hv.out' && grep -q '^accelvirt-hook [0-9]' '$AV_TMP/hv.out' && grep -q '^Placement client: not in the hook' '$AV_TMP/hv.out' && grep -q '^License: Apache-2.0' '$AV_TMP/hv.out'"
check "a domain named --version is not a version request: its call is a hook call" \
    eval "! \"$ACCELVIRT_HOOK\" --version prepare begin - </dev/null >'$AV_TMP/hd.out' 2>&1; ! grep -q 'License' '$AV_TMP/hd.out'"
finish

#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# accelvirt tests: the layout of the source holds.  docs/design.md lists
# the rooms of src/ and hooks/ from the ground up; a file may include
# headers of its own room and of the rooms listed before it, never of a
# room listed after it, and every room of the tree is on the list.  This is
# what lets a newcomer find where a change goes from the folder names.
. "$AV_TEST_SRCDIR/lib.sh"

TOP="$AV_TEST_SRCDIR/.."

python3 - "$TOP" >"$AV_TMP/layout.out" 2>&1 <<'PY'
import os, re, sys
top = sys.argv[1]
text = open(os.path.join(top, "docs/design.md")).read()
section = text.split("## Layout of the source", 1)[1]
order = []
for line in section.splitlines():
    m = re.match(r"^    (src/[a-z]+/|hooks/)\s", line)
    if m:
        order.append(m.group(1).rstrip("/"))
    elif line.startswith("Beside the code"):
        break
rank = {room: i for i, room in enumerate(order)}
rooms = ["src/" + d for d in sorted(os.listdir(os.path.join(top, "src")))
         if os.path.isdir(os.path.join(top, "src", d))] + ["hooks"]
bad = ["%s/ is not in docs/design.md's layout" % r for r in rooms if r not in rank]
for room in rooms:
    for name in sorted(os.listdir(os.path.join(top, room))):
        if not name.endswith((".c", ".h")):
            continue
        for n, line in enumerate(open(os.path.join(top, room, name)), 1):
            m = re.match(r'#include "([a-z]+)/', line)
            if not m:
                continue
            target = "src/" + m.group(1)
            if target == room:
                continue
            if target not in rank:
                bad.append("%s/%s:%d includes %s/, which is not a room" % (room, name, n, target))
            elif room in rank and rank[target] > rank[room]:
                bad.append("%s/%s:%d includes %s/, a room above %s/" % (room, name, n, target, room))
print("%d rooms in order: %s" % (len(order), " ".join(order)))
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
PY
check "every room of src/ and hooks/ is in docs/design.md's layout, and none includes a room above it" \
    eval "cat '$AV_TMP/layout.out' >&2; ! grep -q -v '^[0-9]* rooms in order' '$AV_TMP/layout.out'"

# Inside a room the calls point one way too: no two files of a room call
# each other, directly or round a longer loop ("calls": one's object uses a
# symbol the other's defines, as nm(1) lists them; the built objects of the
# room's .c files, make check having built them).
BUILD="${AV_TEST_BUILDDIR:-$TOP/tests}/.."
python3 - "$TOP" "$BUILD" >"$AV_TMP/circles.out" 2>&1 <<'PY'
import os, subprocess, sys
top, build = sys.argv[1:3]
rooms = ["src/" + d for d in sorted(os.listdir(os.path.join(top, "src")))
         if os.path.isdir(os.path.join(top, "src", d))] + ["hooks"]
bad, files = [], 0
for room in rooms:
    defs, uses = {}, {}
    for name in sorted(os.listdir(os.path.join(top, room))):
        if not name.endswith(".c"):
            continue
        obj = os.path.join(build, room, name[:-2] + ".o")
        if not os.path.exists(obj):
            continue  # not built in this configuration (the GPU scrubber, the fuzzers)
        out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
        n = name[:-2]
        defs[n], uses[n] = set(), set()
        for line in out.splitlines():
            f = line.split()
            if len(f) == 2 and f[0] == "U":
                uses[n].add(f[1])
            elif len(f) == 3 and f[1] in "TDBRVW":
                defs[n].add(f[2])
    files += len(defs)
    names = sorted(defs)
    edges = {a: {b for b in names if b != a and uses[a] & defs[b]} for a in names}
    # Strongly connected components (Tarjan): any with two files or more is a circle.
    index, low, stack, on, counter = {}, {}, [], set(), [0]
    def visit(v):
        index[v] = low[v] = counter[0]; counter[0] += 1; stack.append(v); on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comp.sort()
                why = ["%s.c uses %s of %s.c" % (a, ", ".join(sorted(uses[a] & defs[b])[:4]), b)
                       for a in comp for b in comp if b in edges[a]]
                bad.append("%s/: a circle among %s: %s" % (room, ", ".join(c + ".c" for c in comp), "; ".join(why)))
    for v in names:
        if v not in index:
            visit(v)
print("%d objects in %d rooms read" % (files, len(rooms)))
for b in bad:
    print(b)
sys.exit(1 if bad or files == 0 else 0)
PY
check "inside each room of src/ and hooks/ the calls between files point one way: no circle (nm of the built objects)" \
    eval "cat '$AV_TMP/circles.out' >&2; grep -q '^[1-9][0-9]* objects in' '$AV_TMP/circles.out' && ! grep -q -v '^[0-9]* objects in' '$AV_TMP/circles.out'"

finish

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

finish

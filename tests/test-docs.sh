#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# accelvirt tests: the commands the documents show run, and print what they
# show.  Every indented line "$ COMMAND" of README.md and docs/*.md is a
# command; the indented lines after it, up to the next "$ " or the end of the
# block, are its output.  The commands of one document run in order in one
# shell (its exports and its files carry from one to the next), in a private
# copy of a clone: a directory of the source tree's files whose programs
# accelvirt, accelvirt-hook, accelvirt-worker and accelvirt-hold (at its top and in
# tests/bin/, which the tour names) are the ones the test environment names ($ACCELVIRT, $ACCELVIRT_HOOK, $ACCELVIRT_WORKER,
# $ACCELVIRT_HOLD) and whose tests/data/hosts are make check's fake hosts.
# One TAP line per command; a command whose output differs prints the
# unified diff.  AV_TEST_REGENERATE=1 writes the output of each command that
# differs into its document instead (read the diff).
#
# What the test changes in a command before running it:
#   - /tmp/av-tour becomes a directory of this test's own (and back again in
#     the output, where the clone's own path becomes relative);
#   - "make -s hosts" becomes "true": make check has made the fake hosts.
# What it sets before a document's first command: the clone first on PATH,
# ACCELVIRT_LOG_FILE (the hook logs into the test's directory, not to
# syslog), and ACCELVIRT_WORKER and ACCELVIRT_HOLD as the README's tour
# exports them (for the documents that do not).
# The scrub worker that the hook starts in the background waits until the
# command that shows its work (BEFORE, below) is about to run, and that
# command runs once every worker has ended: the outputs before and after it
# never depend on how fast the worker is.
# What differs between runs, and is compared as a placeholder on both sides:
# dates and times, durations in ms, us or fractions of a second, SHA-256
# hashes, pids and uids (the tour ran as root, make check need not).
#
# Blocks not run (SKIP, below): a command that cannot run here is named in a
# TAP comment, not reported as a skipped test (the tiers count a skip as a
# failure: a test that cannot run proves nothing); a document that cannot
# run on this host (SKIP_DOC) fails, saying why:
#   - docs/operator-guide.md, "sudo accelvirt stale": asks a real libvirtd
#     about its domains, and its line is abridged ("...", "2222...");
#   - the README's tour, on a host where the Debian package has installed
#     /usr/libexec/accelvirt/accelvirt-nvidia-clear-memory: the tour's scrub
#     step shows that it is missing.
# The documents' other blocks are no "$ " commands: lists of commands
# without their output (they install packages, write /etc, start systemd
# units, or need libvirt, Nova or Placement), file contents and diagrams.
. "$AV_TEST_SRCDIR/lib.sh"

: "${ACCELVIRT_HOOK:?ACCELVIRT_HOOK is not set: run the tests with make check}"
: "${ACCELVIRT_WORKER:?ACCELVIRT_WORKER is not set: run the tests with make check}"
: "${ACCELVIRT_HOLD:?ACCELVIRT_HOLD is not set: run the tests with make check}"
TOP=$(cd "$AV_TEST_SRCDIR/.." && pwd)

# The clone: the source tree's top-level files and folders as links, but for
# the programs (the test's), tests/data/hosts (the generated hosts) and
# policies (a copy: the hook trusts no policy its owner's group may write).
CLONE="$AV_TMP/clone"
mkdir -p "$CLONE/tests/data" "$AV_TMP/worker-gate"
for e in "$TOP"/* "$TOP"/tests/* "$TOP"/tests/data/*; do
    rel=${e#"$TOP"/}
    case $rel in
    tests | tests/bin | tests/data | tests/data/hosts | policies | accelvirt | accelvirt-hook | accelvirt-worker | accelvirt-hold) continue ;;
    esac
    [ -e "$CLONE/$rel" ] || ln -s "$e" "$CLONE/$rel"
done
ln -s "$AV_TEST_HOSTS" "$CLONE/tests/data/hosts"
cp -R "$TOP/policies" "$CLONE/policies" && chmod -R u+w,go-w "$CLONE/policies"
ln -s "$ACCELVIRT" "$CLONE/accelvirt"
ln -s "$ACCELVIRT_HOOK" "$CLONE/accelvirt-hook"
ln -s "$ACCELVIRT_HOLD" "$CLONE/accelvirt-hold"
# The worker: waits for the gate's "go" (60 s at most), then runs the real
# one and records that it ended.
G="$AV_TMP/worker-gate"
cat >"$CLONE/accelvirt-worker" <<EOF
#!/bin/sh
touch "$G/started.\$\$" || exit 1
i=0
while [ ! -e "$G/go" ] && [ \$i -lt 600 ]; do [ -d "$G" ] || exit 1; sleep 0.1; i=\$((i + 1)); done
"$ACCELVIRT_WORKER" "\$@"
rc=\$?
touch "$G/done.\$\$"
exit \$rc
EOF
chmod 0755 "$CLONE/accelvirt-worker"
# The test builds the tour names (tests/bin/): the same programs.
mkdir -p "$CLONE/tests/bin"
for p in accelvirt accelvirt-hook accelvirt-worker accelvirt-hold; do
    ln -s "$CLONE/$p" "$CLONE/tests/bin/$p"
done

python3 - "$TOP" "$CLONE" "$AV_TMP" "$G" <<'PY'
import difflib, os, re, subprocess, sys

top, clone, tmp, gate = sys.argv[1:5]
regenerate = os.environ.get("AV_TEST_REGENERATE", "0") == "1"
docs = ["README.md"] + sorted("docs/" + f for f in os.listdir(os.path.join(top, "docs")) if f.endswith(".md"))

# Commands not run: (document, command) -> why.
SKIP = {
    ("docs/operator-guide.md", "sudo accelvirt stale"):
        "needs a real libvirtd, and its output is abridged",
}
# Documents not run where this host would print other output: -> why.
SKIP_DOC = {}
if os.path.exists("/usr/libexec/accelvirt/accelvirt-nvidia-clear-memory"):
    SKIP_DOC["README.md"] = ("the tour's scrub step finds accelvirt-nvidia-clear-memory "
                             "installed in /usr/libexec/accelvirt on this host")
# Commands before which the scrub workers run to their end.
BEFORE = {
    ("README.md", "accelvirt quarantine list"): "av_doc_worker_go",
}
TOUR = os.path.join(tmp, "av-tour")


def sandbox(cmd):
    return cmd.replace("/tmp/av-tour", TOUR).replace("make -s hosts", "true")


NORMALISE = [
    (re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?Z?"), "<time>"),
    (re.compile(r"\b\d+(\.\d+)? ?(ms|us|µs)\b|\b\d+\.\d+ ?s\b"), "<duration>"),
    (re.compile(r"\b[0-9a-f]{64}\b"), "<sha256>"),
    (re.compile(r"\bpid \d+"), "pid <pid>"),
    (re.compile(r"\buid \d+"), "uid <uid>"),
]


def normalise(lines):
    out = []
    for line in lines:
        for pat, rep in NORMALISE:
            line = pat.sub(rep, line)
        out.append(line)
    return out


def commands(doc):
    """(line number, indent, command, output lines) of each "$ " line of
    DOC, in order."""
    lines = open(os.path.join(top, doc), encoding="utf-8").read().split("\n")
    found = []
    i = 0
    while i < len(lines):
        m = re.match(r"^( {4,})\$ (.*)$", lines[i])
        if not m:
            i += 1
            continue
        ind = m.group(1)
        j = i + 1
        out = []
        while j < len(lines):
            l = lines[j]
            if l.strip() == "":
                # a blank line is the block's when an indented line follows
                k = j
                while k < len(lines) and lines[k].strip() == "":
                    k += 1
                if k < len(lines) and lines[k].startswith(ind) and not lines[k].startswith(ind + "$ "):
                    out.extend([""] * (k - j))
                    j = k
                    continue
                break
            if not l.startswith(ind) or l.startswith(ind + "$ "):
                break
            out.append(l[len(ind):])
            j += 1
        found.append((i + 1, ind, m.group(2), out))
        i = j
    return found


def tap_name(doc, line, cmd):
    """A test's name: where its command is, and the command ("#" escaped,
    as TAP wants it outside a directive)."""
    return ("%s:%d: %s" % (doc, line, cmd)).replace("#", "\\#")


n = 0
failed = 0
for doc in docs:
    cmds = commands(doc)
    if not cmds:
        continue
    if doc in SKIP_DOC:
        n += 1
        failed += 1
        print("not ok %d - %s: its commands cannot run on this host: %s" % (n, doc, SKIP_DOC[doc]))
        continue
    run = [c for c in cmds if (doc, c[2]) not in SKIP]
    outdir = os.path.join(tmp, "out", doc.replace("/", "_"))
    os.makedirs(outdir)
    script = [
        "cd '%s' || exit 1" % clone,
        "PATH='%s':\"$PATH\"" % clone,
        "ACCELVIRT_WORKER='%s/accelvirt-worker' ACCELVIRT_HOLD='%s/accelvirt-hold'" % (clone, clone),
        "ACCELVIRT_LOG_FILE='%s/hook-%s.log'" % (tmp, doc.replace("/", "_")),
        "export ACCELVIRT_WORKER ACCELVIRT_HOLD ACCELVIRT_LOG_FILE",
        # the workers started so far run, and have ended (30 s)
        "av_doc_worker_go() {",
        "  touch '%s/go'" % gate,
        "  for _ in $(seq 300); do",
        "    left=0",
        "    for s in '%s'/started.*; do [ -e \"$s\" ] && [ ! -e '%s'/done.\"${s##*.}\" ] && left=1; done" % (gate, gate),
        "    [ $left = 0 ] && return 0",
        "    sleep 0.1",
        "  done",
        "}",
    ]
    for k, c in enumerate(run):
        if (doc, c[2]) in BEFORE:
            script.append(BEFORE[(doc, c[2])])
        script.append("{ %s\n} >'%s/%d.out' 2>&1 </dev/null; echo $? >'%s/%d.rc'" % (sandbox(c[2]), outdir, k, outdir, k))
    open(os.path.join(outdir, "script.sh"), "w").write("\n".join(script) + "\n")
    try:
        subprocess.run(["sh", os.path.join(outdir, "script.sh")], timeout=300,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pass
    edits = []
    k = 0
    for c in cmds:
        line, ind, cmd, shown = c
        name = tap_name(doc, line, cmd)
        if (doc, cmd) in SKIP:
            print("# not run: %s: %s" % (name, SKIP[(doc, cmd)]))
            continue
        n += 1
        out, rcf = (os.path.join(outdir, "%d.%s" % (k, x)) for x in ("out", "rc"))
        k += 1
        ran = os.path.exists(rcf)
        rc = open(rcf).read().strip() if ran else "none: not run, or killed after 300 s"
        got = open(out, encoding="utf-8", errors="replace").read() if os.path.exists(out) else ""
        got = got.replace(TOUR, "/tmp/av-tour").replace(clone + "/", "")
        got = got.split("\n")
        while got and got[-1] == "":
            got.pop()
        if ran and normalise(got) == normalise(shown):
            print("ok %d - %s" % (n, name))
            continue
        if regenerate and ran:
            edits.append((line, len(shown), [ind + g if g else "" for g in got]))
            print("ok %d - %s # regenerated" % (n, name))
            continue
        failed += 1
        print("not ok %d - %s" % (n, name))
        print("# exit status %s; the output as shown (-) and as it came (+), normalised:" % rc)
        for d in difflib.unified_diff(normalise(shown), normalise(got), doc, "output", lineterm=""):
            print("# " + d)
    if edits:
        path = os.path.join(top, doc)
        lines = open(path, encoding="utf-8").read().split("\n")
        for line, count, new in reversed(edits):
            lines[line:line + count] = new
        open(path, "w", encoding="utf-8").write("\n".join(lines))
for (doc, cmd) in list(SKIP) + list(BEFORE):
    if not any(c[2] == cmd for c in commands(doc)):
        n += 1
        failed += 1
        print("not ok %d - %s: no command '%s' any more: update this test" % (n, doc, cmd))
print("1..%d" % n)
sys.exit(1 if failed else 0)
PY

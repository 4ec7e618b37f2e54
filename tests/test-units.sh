#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# accelvirt tests: the systemd units as built (systemd/*.service, *.timer):
# `systemd-analyze verify` on copies whose ExecStart names the build tree's
# accelvirt, and the ordering a later edit must not drop: reconcile runs
# before libvirt's daemons and libvirt-guests, after udev's coldplug, and
# only once a policy is in place (issue 17).
. "$AV_TEST_SRCDIR/lib.sh"

: "${AV_TEST_BUILDDIR:?AV_TEST_BUILDDIR is not set: run the tests with make check}"
UNITS="$AV_TEST_BUILDDIR/../systemd"

# systemd-analyze comes with Debian 12's systemd package; a test that
# needs a tool installs it, or fails.
if ! command -v systemd-analyze >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ]; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends systemd >/dev/null 2>&1
    fi
fi
check "systemd-analyze is there (build-aux/install-deps installs systemd)" command -v systemd-analyze

U="$AV_TMP/units"
mkdir -p "$U"
for f in accelvirt-watch.service accelvirt-reconcile.service accelvirt-reconcile.timer; do
    sed "s|^\(ExecStart=\)[^ ]*/accelvirt |\1$ACCELVIRT |; s|^\(ExecStartPost=-\)[^ ]*/accelvirt |\1$ACCELVIRT |" "$UNITS/$f" >"$U/$f"
done
# key UNIT SECTION KEY: the values of KEY in SECTION of UNIT, one word a line.
key() {
    sed -n "/^\[$2\]/,/^\[/p" "$U/$1" | sed -n "s/^$3=//p" | tr ' ' '\n' | sed '/^$/d'
}
# has UNIT SECTION KEY WORD...: KEY in SECTION of UNIT holds each WORD.
has() {
    unit=$1 sec=$2 k=$3; shift 3
    for w in "$@"; do
        key "$unit" "$sec" "$k" | grep -qxF -- "$w" || { echo "$unit [$sec] $k= lacks $w:"; key "$unit" "$sec" "$k"; return 1; }
    done
}

check "systemd-analyze verify passes on the three units (ExecStart on the build tree's accelvirt)" \
    eval "systemd-analyze verify --man=no '$U/accelvirt-watch.service' '$U/accelvirt-reconcile.service' '$U/accelvirt-reconcile.timer' >'$AV_TMP/v.out' 2>&1 && ! grep -v -e 'libvirtd.service' -e 'virtqemud.service' -e 'libvirt-guests.service' '$AV_TMP/v.out' | grep -q . || { cat '$AV_TMP/v.out'; false; }"
check "reconcile runs before libvirtd, virtqemud and libvirt-guests" \
    has accelvirt-reconcile.service Unit Before libvirtd.service virtqemud.service libvirt-guests.service
check "  ... after udev's coldplug, the modules loaded and the local file systems" \
    has accelvirt-reconcile.service Unit After systemd-udev-trigger.service systemd-modules-load.service local-fs.target
check "  ... pulls in none of them (ordering only: no Wants= or Requires=)" \
    eval "! grep -qE '^(Wants|Requires|BindsTo|Requisite)=' '$U/accelvirt-reconcile.service'"
check "  ... only once a policy is in the policy dir (ConditionDirectoryNotEmpty=)" \
    eval "key accelvirt-reconcile.service Unit ConditionDirectoryNotEmpty | grep -q '/accelvirt/policies\$'"
check "  ... a oneshot running 'accelvirt reconcile', wanted by multi-user.target" \
    eval "has accelvirt-reconcile.service Service Type oneshot && has accelvirt-reconcile.service Install WantedBy multi-user.target && key accelvirt-reconcile.service Service ExecStart | tr '\n' ' ' | grep -qx '$ACCELVIRT reconcile '"
check "  ... its scrub worker outlives it (KillMode=process), /sys writable (no ProtectKernelTunables=), the state dir writable" \
    eval "has accelvirt-reconcile.service Service KillMode process && ! grep -q '^ProtectKernelTunables=' '$U/accelvirt-reconcile.service' && key accelvirt-reconcile.service Service ReadWritePaths | grep -q '^-/.*/lib/accelvirt\$'"
check "  ... and no PrivateTmp= (systemd removes it when the oneshot stops, under the worker's scrub)" \
    eval "! grep -q '^PrivateTmp=' '$U/accelvirt-reconcile.service' && has accelvirt-reconcile.service Service ProtectSystem strict"
check "the timer runs the service, wanted by timers.target" \
    eval "has accelvirt-reconcile.timer Timer Unit accelvirt-reconcile.service && has accelvirt-reconcile.timer Install WantedBy timers.target && key accelvirt-reconcile.timer Timer OnUnitActiveSec | grep -q . && key accelvirt-reconcile.timer Timer OnBootSec | grep -q ."
# posts: the ExecStartPost= lines of the reconcile service, whole.
posts() { sed -n "/^\[Service\]/,/^\[/p" "$U/accelvirt-reconcile.service" | sed -n 's/^ExecStartPost=//p'; }
check "ExecStartPost writes a journal checkpoint when 10,000 entries came since the last, before the metrics, its failure ignored" \
    eval "posts >'$AV_TMP/posts' && head -1 '$AV_TMP/posts' | grep -qxF -- '-$ACCELVIRT journal checkpoint --min-entries 10000' && [ \"\$(wc -l <'$AV_TMP/posts')\" = 3 ]"
check "ExecStartPost archives the journal only when /etc/default/accelvirt sets a size or an age, after the checkpoint" \
    eval "sed -n 2p '$AV_TMP/posts' | grep -qF -- 'journal archive \$\${ACCELVIRT_JOURNAL_ARCHIVE_SIZE:+--min-size' && sed -n 2p '$AV_TMP/posts' | grep -qF -- 'ACCELVIRT_JOURNAL_ARCHIVE_DAYS:+--min-age' && sed -n 2p '$AV_TMP/posts' | grep -q '^-/bin/sh -c '"
# The metrics line: nothing when ACCELVIRT_METRICS_FILE is unset, the
# metrics command with the file when it is set (run as systemd would, $$
# being a literal $).
post() { posts | grep ' metrics ' | sed "s/^-//; s/ \$//; s/\\\$\\\$/\$/g"; }
check "ExecStartPost does nothing when ACCELVIRT_METRICS_FILE is unset" \
    eval "cmd=\$(post) && case \"\$cmd\" in /bin/sh\\ -c\\ *) ;; *) exit 1 ;; esac && script=\$(printf '%s' \"\$cmd\" | sed \"s/^\\/bin\\/sh -c '//; s/'\$//\") && env -u ACCELVIRT_METRICS_FILE sh -c \"\$script\" >'$AV_TMP/p.out' 2>&1 && [ ! -s '$AV_TMP/p.out' ]"
check "  ... and runs 'accelvirt metrics --output FILE' when it is set" \
    eval "script=\$(post | sed \"s/^\\/bin\\/sh -c '//; s/'\$//\") && printf '%s' \"\$script\" | grep -q 'accelvirt metrics --output \"\${ACCELVIRT_METRICS_FILE}\"'"
finish

#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# accelvirt tests: bash completion (completion/accelvirt), driven in bash as
# readline would: COMP_WORDS and COMP_CWORD set, _accelvirt called, COMPREPLY
# read.  Commands and options come from the program's --help; values from
# the policy dir, the pool, virsh (a stand-in on PATH) and fixed lists.
. "$AV_TEST_SRCDIR/lib.sh"

AV=$ACCELVIRT
POL="$AV_TEST_SRCDIR/../policies"
H2="$AV_TEST_HOSTS/two-socket-8gpu"
S="$AV_TMP/state"
COMPLETION="$AV_TEST_SRCDIR/../completion/accelvirt"

command -v bash >/dev/null || { echo "Bail out! bash is needed (apt-get install bash)"; exit 1; }
"$AV" --root "$H2" --policy-dir "$POL" --state-dir "$S" status >/dev/null
mkdir -p "$AV_TMP/bin"
printf '#!/bin/sh\n[ "$1" = -c ] && shift 2\n[ "$*" = "list --all --name" ] && printf "web-1\\nml-train\\n\\n"\n' >"$AV_TMP/bin/virsh"
chmod +x "$AV_TMP/bin/virsh"

# complete WORD... : what completing the last WORD offers, one a line, sorted.
complete_words() {
    PATH="$AV_TMP/bin:$PATH" bash -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _accelvirt; printf "%s\n" "${COMPREPLY[@]}" | sort' \
        completion "$COMPLETION" "$AV" "$@"
}
# offers "WANT ..." WORD...: the completion is exactly WANT (space-separated).
offers() {
    want=$(printf '%s\n' $1 | sort); shift
    got=$(complete_words "$@")
    [ "$got" = "$want" ] || { echo "want:" $want; echo "got:" $got; return 1; }
}

commands=$("$AV" --help | sed -n 's/^  \([a-z][a-z-]*\) .*/\1/p' | sort)
check "every command of accelvirt --help, and only those ($(echo $commands | wc -w))" \
    eval "[ \"\$(echo \$commands | wc -w)\" -ge 26 ] && offers '$(echo $commands)' ''"
check "a command's start" offers "accounting attach audit" a
check "a command's options, from its --help" offers "--count --connect" attach --c
check "limits and its --json" eval "offers 'limits' lim && offers '--json' limits --j"
check "global options before the command" offers "--state-dir" --st
check "accounting --by: the groupings" offers "domain project user profile device" accounting --by ""
check "accounting --by=pro (bash splits at '=')" offers "project profile" accounting --by = pro
check "policy: its subcommands" offers "check show" policy ""
check "policy show: the profiles of --policy-dir" \
    eval "offers '$("$AV" --policy-dir "$POL" --json policy show | python3 -c 'import json,sys; print(" ".join(p["name"] for p in json.load(sys.stdin)))')' --policy-dir '$POL' policy show ''"
check "attach DOMAIN: the domains virsh lists" offers "web-1 ml-train" attach ""
check "attach DOMAIN PROFILE: profiles of \$ACCELVIRT_POLICY_DIR" \
    eval "ACCELVIRT_POLICY_DIR='$POL' offers 'usb-ai-stick usb-ai-stick-coral usb-ai-stick-coral-ready' attach web-1 usb"
devices=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(" ".join(sorted({x[k] for x in d["devices"] for k in ("address","identity")})))' "$S/pool.json" 2>/dev/null)
check "scrub DEVICE: the pool's addresses and identities ($(echo $devices | wc -w))" \
    eval "[ -n '$devices' ] && offers '$devices' --state-dir '$S' scrub ''"
check "detach DOMAIN DEVICE" eval "offers '$devices' --state-dir '$S' detach web-1 ''"
check "quarantine clear DEVICE, --state-dir=DIR as bash splits it" eval "offers '$devices' --state-dir = '$S' quarantine clear ''"
check "scrub DEVICE, --state-dir=DIR in one word" eval "offers '$devices' --state-dir='$S' scrub ''"
check "no pool: no devices, no error" offers "" --state-dir "$AV_TMP/none" scrub ""
check "journal: verify, show, checkpoint and archive" offers "verify show checkpoint archive" journal ""
check "--connect: the URIs" offers "qemu:///system qemu:///session" -c ""
check "--state-dir: directories only" eval "mkdir -p '$AV_TMP/dirs/sa' && touch '$AV_TMP/dirs/sb' && offers '$AV_TMP/dirs/sa' --state-dir '$AV_TMP/dirs/s'"
check "list takes no argument" offers "" list ""

# Hostile words: a USB stick's serial (part of its identity in the pool) and a
# domain's name come from a tenant; completion offers them as they are and
# never runs or globs them.
mkdir -p "$AV_TMP/evil"
cat >"$AV_TMP/evil/pool.json" <<EOF
{"devices": [{"identity": "usb:1234:5678:serial:\$(touch \${IFS}$AV_TMP/PWNED1)", "address": "/*/*"},
             {"identity": "usb:1234:5678:serial:\`touch $AV_TMP/PWNED2\`", "address": "1-1"}]}
EOF
printf '#!/bin/sh\nprintf "%%s\\n" "\$(touch %s/PWNED3)" "/*" "web-1"\n' "$AV_TMP" >"$AV_TMP/bin/virsh"
check "a hostile serial in the pool: offered as it is, nothing run, nothing globbed" \
    eval "offers '1-1 /*/* usb:1234:5678:serial:\$(touch\ \${IFS}$AV_TMP/PWNED1) usb:1234:5678:serial:\`touch\ $AV_TMP/PWNED2\`' --state-dir '$AV_TMP/evil' scrub '' 2>/dev/null; [ ! -e '$AV_TMP/PWNED1' ] && [ ! -e '$AV_TMP/PWNED2' ]"
check "a hostile domain name from virsh: nothing run, nothing globbed" \
    eval "complete_words attach '' >'$AV_TMP/dom.out'; [ ! -e '$AV_TMP/PWNED3' ] && grep -qxF '/*' '$AV_TMP/dom.out' && grep -qxF 'web-1' '$AV_TMP/dom.out' && [ \$(wc -l <'$AV_TMP/dom.out') = 3 ]"
check "completion runs nothing that writes: the pool is unchanged" \
    eval "cp '$S/pool.json' '$AV_TMP/before' && complete_words --state-dir '$S' scrub '' >/dev/null && cmp -s '$AV_TMP/before' '$S/pool.json'"
for c in $commands; do
    opts=$("$AV" "$c" --help | sed -n 's/^  *\(-[a-zA-Z], \)\{0,1\}\(--[a-z][a-z-]*\)[= ].*/\2/p' | sort -u | tr '\n' ' ')
    check "$c --: each of its options ($(echo $opts | wc -w))" eval "[ -n '$opts' ] && offers '$opts' $c --"
done
finish

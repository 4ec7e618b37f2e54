# SPDX-License-Identifier: Apache-2.0
# tests/libvirt/harness.sh: a private, real libvirtd for the host libvirt tier.
# Sourced by bash test scripts (tests/libvirt/test-*.sh).
#
# Everything runs in a private mount namespace, so the host is never touched:
#
#   test script  --lv_enter-->  unshare -m --propagation private
#                                 tini -s  (subreaper: reaps the QEMUs that
#                                   |       libvirtd daemonises, across daemon restarts)
#                                   bash test script  (virsh runs here, in the namespace)
#                                     +- virtlogd -p /run/virtlogd.pid
#                                     +- libvirtd -p /run/libvirtd.pid
#
# In the namespace, fresh directories under $LV_WORK are bind-mounted over
# /etc/libvirt (a copy of the host's, with our settings and no domains,
# networks or hooks), /run (so /run/libvirt and the daemons' pid files are
# ours, and the host's D-Bus is out of reach), /var/lib/libvirt,
# /var/cache/libvirt and /var/log/libvirt. HOME and XDG dirs point into
# $LV_WORK too. Daemons and QEMUs are stopped by PID (never by name: another
# libvirtd may run on the host); leftover orphans of our tini are found by
# parent PID and mount namespace. $LV_WORK is removed at exit unless
# AV_LV_KEEP=1.
#
# Usage (see test-sequence.sh):
#   . harness.sh
#   lv_enter "$0" "$@"          # re-executes the script in the namespace
#   lv_setup                    # mounts, config; traps exit for cleanup
#   lv_install_hook FILE NAME   # into /etc/libvirt/hooks/qemu.d/NAME (before lv_start)
#   lv_private_dir HOSTDIR      # a fresh private dir over an existing host dir
#   lv_start                    # virtlogd + libvirtd, waits until virsh answers
#   lv_virsh ARGS...            # virsh -c qemu:///system, bounded in time
#   lv_stop_daemon              # stops libvirtd by PID (domains keep running)
#   lv_stop_all                 # destroys domains, stops everything by PID
#   lv_diag                     # daemon log tail, hook log (as TAP comments)

LV_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LV_URI=qemu:///system
# Generous bounds: these machines are noisy. Nothing is timed, only bounded.
LV_START_TIMEOUT=${AV_LV_START_TIMEOUT:-90}
LV_STOP_TIMEOUT=${AV_LV_STOP_TIMEOUT:-30}
LV_VIRSH_TIMEOUT=${AV_LV_VIRSH_TIMEOUT:-120}

# The host paths the daemon writes to; each gets a private directory.
LV_BIND_DIRS="/var/lib/libvirt /var/cache/libvirt /var/log/libvirt"

LV_LIBVIRTD_PID=
LV_VIRTLOGD_PID=
LV_STARTS=0

lv_log() { printf '# %s\n' "$*"; }
lv_die() {
	printf 'Bail out! %s\n' "$*"
	exit 1
}

# Prints each line of stdin as a TAP comment.
lv_comment() { sed 's/^/#   /'; }

lv_have_tools() {
	local b
	for b in libvirtd virtlogd virsh qemu-system-x86_64 tini unshare flock sha256sum timeout; do
		command -v "$b" >/dev/null 2>&1 || return 1
	done
	return 0
}

# lv_enter SCRIPT ARGS...: unless already there, install what is missing and
# re-execute SCRIPT in a private mount namespace under tini. Never returns
# outside the namespace.
lv_enter() {
	if [ "${AV_LV_IN_NS:-}" = 1 ]; then
		if [ "${AV_LV_TINI_PID:-}" != "$PPID" ]; then
			lv_die "harness: expected to run under our tini (pid ${AV_LV_TINI_PID:-?}), parent is $PPID"
		fi
		return 0
	fi
	[ "$(id -u)" = 0 ] || lv_die "the libvirt tier needs root (it runs a real libvirtd in a private mount namespace)"
	PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH
	export PATH
	if ! lv_have_tools; then
		lv_log "installing the tier's packages (tests/libvirt/install-deps.sh)"
		"$LV_HERE/install-deps.sh" 2>&1 | lv_comment
		lv_have_tools || lv_die "libvirtd, virtlogd, virsh, qemu-system-x86_64, tini, unshare missing after install-deps.sh"
	fi
	local script=$1
	shift
	# exec keeps our PID: it becomes tini's, the parent of the script in the namespace.
	export AV_LV_IN_NS=1 AV_LV_TINI_PID=$$
	exec unshare --mount --propagation private -- tini -s -- bash "$script" "$@"
}

lv_bind() { # SRC TARGET
	# -n: no note in /run/mount/utab (that would be on the host before /run is ours)
	mount -n --bind "$1" "$2" || lv_die "harness: cannot bind $1 over $2"
	mountpoint -q "$2" || lv_die "harness: $2 is not a mount point after binding"
}

# Writes a daemon config file of ours: only these KEY = VALUE lines, so no
# setting of the host's (libvirt's parser keeps the first of duplicate keys)
# changes the private daemon.
lv_conf() { # FILE LINES...
	local f=$1
	shift
	{
		printf '# accelvirt libvirt tier (tests/libvirt/harness.sh); everything else: defaults\n'
		printf '%s\n' "$@"
	} >"$f"
}

lv_setup() {
	[ "${AV_LV_IN_NS:-}" = 1 ] || lv_die "harness: lv_setup outside the private namespace (call lv_enter first)"
	# Our own mount namespace, or we would change the host.
	[ "$(readlink /proc/self/ns/mnt)" != "$(readlink /proc/1/ns/mnt)" ] ||
		lv_die "harness: not in a private mount namespace"
	local d
	for d in /etc/libvirt $LV_BIND_DIRS /run; do
		[ -d "$d" ] || lv_die "harness: $d missing on this host (run tests/libvirt/install-deps.sh)"
	done

	LV_WORK=$(mktemp -d "${TMPDIR:-/tmp}/accelvirt-libvirt.XXXXXX") || lv_die "mktemp failed"
	trap lv_cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	trap 'exit 129' HUP
	LV_RESULTS=$LV_WORK/results
	mkdir -p "$LV_WORK/etc" "$LV_WORK/run" "$LV_WORK/lib" "$LV_WORK/cache" "$LV_WORK/log" \
		"$LV_WORK/home" "$LV_RESULTS"

	# /etc/libvirt: a copy of the host's minus any state (no domains, networks
	# (the default one autostarts), hooks); the daemons' and the client's
	# config files are ours.
	cp -a /etc/libvirt/. "$LV_WORK/etc/" || lv_die "harness: cannot copy /etc/libvirt"
	rm -rf "$LV_WORK/etc/qemu" "$LV_WORK/etc/hooks" "$LV_WORK/etc/storage" \
		"$LV_WORK/etc/secrets" "$LV_WORK/etc/nodedev"
	mkdir -p "$LV_WORK/etc/qemu/networks/autostart" "$LV_WORK/etc/hooks/qemu.d"
	lv_conf "$LV_WORK/etc/libvirtd.conf" \
		'auth_unix_ro = "none"' \
		'auth_unix_rw = "none"' \
		'unix_sock_group = "root"' \
		'unix_sock_rw_perms = "0700"' \
		'log_filters = "1:util.hook 1:qemu.qemu_process 1:qemu.qemu_driver 1:qemu.qemu_saveimage"' \
		'log_outputs = "1:file:/var/log/libvirt/libvirtd.log"'
	# QEMU as root, no security driver, no cgroups, no per-QEMU /dev: the
	# tier proves hook sequencing, and must leave /sys/fs/cgroup alone.
	lv_conf "$LV_WORK/etc/qemu.conf" \
		'user = "root"' \
		'group = "root"' \
		'security_driver = "none"' \
		'cgroup_controllers = [ ]' \
		'namespaces = [ ]' \
		'stdio_handler = "logd"'
	lv_conf "$LV_WORK/etc/virtlogd.conf" \
		'log_outputs = "3:file:/var/log/libvirt/virtlogd.log"'
	lv_conf "$LV_WORK/etc/libvirt.conf"
	rm -f "$LV_WORK/etc/libvirt-admin.conf"
	printf 'RECORD_DIR=%s\n' "$LV_RESULTS" >"$LV_WORK/etc/hooks/accelvirt-test.env"
	: >"$LV_RESULTS/hook.log"

	# /run first: mount(8) keeps its own notes under /run/mount.
	lv_bind "$LV_WORK/run" /run
	mkdir -p /run/libvirt /run/lock
	lv_bind "$LV_WORK/etc" /etc/libvirt
	lv_bind "$LV_WORK/lib" /var/lib/libvirt
	lv_bind "$LV_WORK/cache" /var/cache/libvirt
	lv_bind "$LV_WORK/log" /var/log/libvirt
	[ /var/run/libvirt -ef /run/libvirt ] || lv_die "harness: /var/run/libvirt is not our /run/libvirt"

	export HOME="$LV_WORK/home" XDG_CONFIG_HOME="$LV_WORK/home/.config" \
		XDG_CACHE_HOME="$LV_WORK/home/.cache" XDG_RUNTIME_DIR="$LV_WORK/run/user"
	export LIBVIRT_DEFAULT_URI=$LV_URI
	unset LIBVIRT_LOG_OUTPUTS LIBVIRT_LOG_FILTERS LIBVIRT_DEBUG VIRSH_DEFAULT_CONNECT_URI
	export LC_ALL=C
}

# lv_private_dir HOSTDIR: a fresh, empty private directory over HOSTDIR (which
# must exist: creating it would change the host), for what a hook under test
# writes (e.g. /var/lib/accelvirt). Prints the directory's real path.
lv_private_dir() {
	local d
	[ -d "$1" ] || lv_die "harness: $1 does not exist on this host"
	d=$(mktemp -d "$LV_WORK/private.XXXXXX") || lv_die "mktemp failed"
	lv_bind "$d" "$1"
	echo "$d"
}

# lv_install_hook FILE NAME: install FILE as /etc/libvirt/hooks/qemu.d/NAME.
# libvirt looks for hooks only when the daemon starts: call before lv_start
# (or restart the daemon).
lv_install_hook() {
	install -m 0755 "$1" "/etc/libvirt/hooks/qemu.d/$2" || lv_die "harness: cannot install hook $1"
}

lv_pid_alive() { # PID: running, not a zombie
	local st
	[ -n "$1" ] && [ -r "/proc/$1/stat" ] || return 1
	st=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
	[ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# lv_stop_pid PID NAME: SIGTERM, bounded wait, then SIGKILL. Reaps our children.
lv_stop_pid() {
	local pid=$1 name=$2 i
	[ -n "$pid" ] || return 0
	if lv_pid_alive "$pid"; then
		kill -TERM "$pid" 2>/dev/null
		for ((i = 0; i < LV_STOP_TIMEOUT * 10; i++)); do
			lv_pid_alive "$pid" || break
			sleep 0.1
		done
		if lv_pid_alive "$pid"; then
			lv_log "harness: $name (pid $pid) ignored SIGTERM for ${LV_STOP_TIMEOUT}s, killing it"
			kill -KILL "$pid" 2>/dev/null
			for ((i = 0; i < 100; i++)); do
				lv_pid_alive "$pid" || break
				sleep 0.1
			done
		fi
	fi
	wait "$pid" 2>/dev/null
	return 0
}

lv_virsh() {
	timeout -k 10 "$LV_VIRSH_TIMEOUT" virsh -q -c "$LV_URI" "$@"
}

lv_start_virtlogd() {
	lv_pid_alive "$LV_VIRTLOGD_PID" && return 0
	env PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		virtlogd -p /run/virtlogd.pid </dev/null >>/var/log/libvirt/virtlogd.stderr 2>&1 &
	LV_VIRTLOGD_PID=$!
}

# Starts libvirtd (and virtlogd) and waits until virsh gets an answer.
lv_start() {
	local i
	lv_start_virtlogd
	LV_STARTS=$((LV_STARTS + 1))
	echo "=== libvirtd start $LV_STARTS ===" >>/var/log/libvirt/libvirtd.stderr
	# A short PATH: libvirt passes it to the hooks, and shows it in their errors.
	env PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		libvirtd -p /run/libvirtd.pid </dev/null >>/var/log/libvirt/libvirtd.stderr 2>&1 &
	LV_LIBVIRTD_PID=$!
	for ((i = 0; i < LV_START_TIMEOUT * 5; i++)); do
		if ! lv_pid_alive "$LV_LIBVIRTD_PID"; then
			wait "$LV_LIBVIRTD_PID"
			lv_log "harness: libvirtd (pid $LV_LIBVIRTD_PID) exited with status $? while starting"
			LV_LIBVIRTD_PID=
			lv_diag
			return 1
		fi
		if [ -S /run/libvirt/libvirt-sock ] &&
			timeout 20 virsh -q -c "$LV_URI" uri >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.2
	done
	lv_log "harness: libvirtd (pid $LV_LIBVIRTD_PID) did not answer within ${LV_START_TIMEOUT}s"
	lv_diag
	return 1
}

# Stops libvirtd by PID; running domains keep running (as after a daemon
# restart on a real host).
lv_stop_daemon() {
	lv_stop_pid "$LV_LIBVIRTD_PID" libvirtd
	LV_LIBVIRTD_PID=
}

# The PIDs of the QEMUs libvirt started, from its pid files in our /run.
lv_qemu_pids() {
	local f pid
	for f in /run/libvirt/qemu/*.pid; do
		[ -r "$f" ] || continue
		pid=$(cat "$f" 2>/dev/null)
		case "$pid" in '' | *[!0-9]*) continue ;; esac
		lv_pid_alive "$pid" || continue
		# guard against a reused PID: it must be a QEMU in our namespace
		case "$(readlink "/proc/$pid/exe" 2>/dev/null)" in */qemu-system-*) ;; *) continue ;; esac
		[ "$(readlink "/proc/$pid/ns/mnt")" = "$(readlink /proc/self/ns/mnt)" ] || continue
		echo "$pid"
	done
}

# Orphans re-parented to our tini (QEMUs, anything a daemon left behind),
# except this script. Only processes in our own mount namespace.
lv_orphans() {
	local p ppid myns
	myns=$(readlink /proc/self/ns/mnt)
	for p in /proc/[0-9]*; do
		p=${p#/proc/}
		[ "$p" = "$$" ] && continue
		ppid=$(sed 's/^.*) //' "/proc/$p/stat" 2>/dev/null | cut -d' ' -f2)
		[ "$ppid" = "${AV_LV_TINI_PID:-x}" ] || continue
		[ "$(readlink "/proc/$p/ns/mnt" 2>/dev/null)" = "$myns" ] || continue
		lv_pid_alive "$p" && echo "$p"
	done
}

# Everything we started, stopped by PID: domains destroyed through libvirt
# while it runs, then the daemons, then any QEMU or orphan left.
lv_stop_all() {
	local d pid
	if lv_pid_alive "$LV_LIBVIRTD_PID"; then
		for d in $(timeout 30 virsh -q -c "$LV_URI" list --name 2>/dev/null); do
			timeout 60 virsh -q -c "$LV_URI" destroy "$d" >/dev/null 2>&1
		done
	fi
	lv_stop_daemon
	for pid in $(lv_qemu_pids); do
		lv_stop_pid "$pid" qemu
	done
	lv_stop_pid "$LV_VIRTLOGD_PID" virtlogd
	LV_VIRTLOGD_PID=
	for pid in $(lv_orphans); do
		lv_log "harness: stopping leftover pid $pid: $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)"
		lv_stop_pid "$pid" leftover
	done
}

# lv_all_stopped: true when nothing we started is left.
lv_all_stopped() {
	! lv_pid_alive "$LV_LIBVIRTD_PID" && ! lv_pid_alive "$LV_VIRTLOGD_PID" &&
		[ -z "$(lv_qemu_pids)" ] && [ -z "$(lv_orphans)" ]
}

lv_diag() {
	lv_log "--- libvirtd stderr (tail) ---"
	tail -n 30 /var/log/libvirt/libvirtd.stderr 2>/dev/null | lv_comment
	lv_log "--- libvirtd.log (tail: errors, warnings, hook calls) ---"
	# less what every start of this private daemon logs (no dnsmasq, D-Bus,
	# DMI, cgroups or security driver here, on purpose)
	grep -E ': (error|warning) :|Calling hook' /var/log/libvirt/libvirtd.log 2>/dev/null |
		grep -vE 'dnsmasqCapsNewFromBinary|virGDBusGetSystemBus|DBus not available|udevGetDMIData|dmidecode|virSecurityManagerNew|virCgroupDetectControllers|is tainted: high-privileges' |
		tail -n 30 | cut -c1-400 | lv_comment
	lv_log "--- hook log ---"
	lv_comment <"$LV_RESULTS/hook.log" 2>/dev/null
	local f
	for f in /var/log/libvirt/qemu/*.log; do
		[ -r "$f" ] || continue
		lv_log "--- $f (tail) ---"
		tail -n 10 "$f" | lv_comment
	done
}

lv_cleanup() {
	local rc=$?
	trap - EXIT INT TERM HUP
	lv_stop_all
	if [ -n "${LV_WORK:-}" ] && [ -d "$LV_WORK" ]; then
		if [ "${AV_LV_KEEP:-}" = 1 ]; then
			lv_log "harness: kept $LV_WORK (AV_LV_KEEP=1)"
		else
			# Our mounts die with the namespace; what they show are plain files under $LV_WORK.
			rm -rf "$LV_WORK"
		fi
	fi
	exit "$rc"
}

# --- the hook log ---

# lv_hook_mark: the number of hook calls so far (pass it to lv_hook_since).
lv_hook_mark() { wc -l <"$LV_RESULTS/hook.log"; }

# lv_hook_since MARK [DOMAIN]: "OPERATION SUBOP EXTRA" of each call after MARK.
lv_hook_since() {
	tail -n +"$(($1 + 1))" "$LV_RESULTS/hook.log" |
		awk -v d="${2:-}" 'd == "" || $1 == d { print $2, $3, $4 }'
}

# lv_hook_xml_since MARK OP SUBOP: the file holding the XML of the first such call after MARK.
lv_hook_xml_since() {
	local f
	f=$(tail -n +"$(($1 + 1))" "$LV_RESULTS/hook.log" |
		awk -v o="$2" -v s="$3" '$2 == o && $3 == s { sub(/^xml=/, "", $7); print $7; exit }')
	[ -n "$f" ] && echo "$LV_RESULTS/$f"
}

# lv_hook_wait MARK "OP SUBOP" [SECONDS]: bounded wait for such a call after MARK.
lv_hook_wait() {
	local i lim=$((${3:-60} * 10))
	for ((i = 0; i < lim; i++)); do
		lv_hook_since "$1" | grep -qxF -- "$2 -" && return 0
		sleep 0.1
	done
	return 1
}

# The accelvirt hooks and workers ($HOOK_BIN, $WORKER_BIN) still running in our
# mount namespace, one PID a line; not the holders they fork (accelvirt-hold,
# which keep a dirty or quarantined device's VFIO group open until it is free;
# lv_cleanup ends them with the other orphans).
lv_accelvirt_procs() {
	local p myns
	myns=$(readlink /proc/self/ns/mnt)
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/ns/mnt" 2>/dev/null)" = "$myns" ] || continue
		[ "$(cat "$p/comm" 2>/dev/null)" = accelvirt-hold ] && continue
		case "$(readlink "$p/exe" 2>/dev/null)" in "$WORKER_BIN" | "$HOOK_BIN") echo "${p#/proc/}" ;; esac
	done
}

# Succeeds when no accelvirt hook or worker is left, waiting up to 10 s: a
# worker may still be exiting after it marked its device free.
lv_no_accelvirt_procs() {
	local i
	for ((i = 0; i < 100; i++)); do
		[ -z "$(lv_accelvirt_procs)" ] && return 0
		sleep 0.1
	done
	echo "still running: $(lv_accelvirt_procs)"
	return 1
}

/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt host-validate: is this host ready for accelvirt, before the
 * first domain fails?  After libvirt's virt-host-validate: one line per
 * check, PASS, WARN or FAIL, and what to do.  It reads (the host under
 * --root, the policy and state dirs) and changes nothing.
 *
 * FAIL is what makes a domain's start or a scrub fail (no IOMMU, no vfio
 * backend, the hook where libvirt does not look, a policy accelvirt
 * refuses, a managed device whose IOMMU group cannot be handed over); WARN
 * is what works but weakens the promise or its speed (interrupts not
 * remapped, no reconcile timer, no hugepages beside the devices, a switch
 * port without ACS). */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "pci/av-pci.h"
#include "pool/av-pool.h"
#include "vfio/av-vfio.h"
#include "util/av-json.h"

/* Where interrupt remapping is what isolates a device's interrupts (x86:
 * VT-d, AMD-Vi), vfio refuses a group without it; elsewhere (an Arm ITS)
 * /proc/interrupts shows no IR- and that is no fault. */
#if defined(__x86_64__) || defined(__i386__)
#define AV_CHECK_IR_FATAL 1
#else
#define AV_CHECK_IR_FATAL 0
#endif

typedef enum {
    AV_CHECK_PASS,
    AV_CHECK_WARN,
    AV_CHECK_FAIL,
} AvCheckResult;

static const char *const av_check_results[] = { "PASS", "WARN", "FAIL" };

typedef struct {
    char *id;
    AvCheckResult result;
    char *detail;                /* what was found */
    char *advice;                /* what to do, or NULL */
} AvCheck;

static void
av_check_free(AvCheck *c)
{
    g_free(c->id);
    g_free(c->detail);
    g_free(c->advice);
    g_free(c);
}

static void G_GNUC_PRINTF(5, 6)
av_check_add(GPtrArray *checks, const char *id, AvCheckResult result, const char *advice, const char *fmt, ...)
{
    AvCheck *c = g_new0(AvCheck, 1);
    va_list ap;

    va_start(ap, fmt);
    c->detail = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    c->id = g_strdup(id);
    c->result = result;
    c->advice = g_strdup(advice);
    g_ptr_array_add(checks, c);
}

/* The number of entries of the root-relative directory @path (-1: none). */
static int
av_check_count_dir(const AvRoot *root, const char *path)
{
    g_auto(GStrv) names = NULL;

    if (av_root_list_dir(root, path, &names) < 0)
        return -1;
    return (int)g_strv_length(names);
}

/* IOMMU: groups the kernel made, and the firmware table that describes it. */
static void
av_check_iommu(const AvRoot *root, GPtrArray *checks)
{
    g_autofree char *groups = av_sys_path("kernel/iommu_groups");
    g_autofree char *dmar = av_sys_path("firmware/acpi/tables/DMAR");
    g_autofree char *ivrs = av_sys_path("firmware/acpi/tables/IVRS");
    g_autofree char *cmdline_path = av_proc_path("cmdline");
    g_autofree char *cmdline = NULL;
    g_autofree char *noiommu_path = av_sys_path("module/vfio/parameters/enable_unsafe_noiommu_mode");
    g_autofree char *noiommu = NULL;
    const char *table = av_root_exists(root, dmar) ? " (ACPI DMAR: Intel VT-d)"
                        : av_root_exists(root, ivrs) ? " (ACPI IVRS: AMD-Vi)" : "";
    int n = av_check_count_dir(root, groups);

    (void)av_root_read_attr(root, noiommu_path, &noiommu);
    if (noiommu && (g_str_equal(noiommu, "Y") || g_str_equal(noiommu, "1"))) {
        av_check_add(checks, "iommu", AV_CHECK_FAIL,
                     "turn the IOMMU on and leave vfio's enable_unsafe_noiommu_mode off (modprobe.d, the "
                     "kernel's command line)",
                     "vfio runs in no-IOMMU mode (enable_unsafe_noiommu_mode): its %d groups isolate nothing, a "
                     "guest's device may read and write all of the host's memory", MAX(n, 0));
        return;
    }
    if (n > 0) {
        av_check_add(checks, "iommu", AV_CHECK_PASS, NULL, "the IOMMU is on: %d groups%s", n, table);
        return;
    }
    (void)av_root_read_attr(root, cmdline_path, &cmdline);
    av_check_add(checks, "iommu", AV_CHECK_FAIL,
                 "turn on VT-d (Intel) or AMD-Vi in the firmware's setup and boot with intel_iommu=on on Intel "
                 "(AMD turns it on by itself); /sys/kernel/iommu_groups then lists the groups",
                 "no IOMMU group: the IOMMU is off%s%s%s, and no device can be handed to a guest", table,
                 cmdline && (strstr(cmdline, "intel_iommu=off") || strstr(cmdline, "amd_iommu=off") ||
                             strstr(cmdline, "iommu=off")) ? "; the kernel's command line turns it off" : "",
                 *table ? " although the firmware describes one" : "");
}

/* Interrupt remapping: without it a guest's device could forge interrupts,
 * and vfio_iommu_type1 refuses groups unless allow_unsafe_interrupts. */
static void
av_check_interrupts(const AvRoot *root, gboolean wants_pci, GPtrArray *checks)
{
    g_autofree char *interrupts_path = av_proc_path("interrupts");
    g_autofree char *unsafe_path = av_sys_path("module/vfio_iommu_type1/parameters/allow_unsafe_interrupts");
    g_autofree char *interrupts = NULL;
    g_autofree char *unsafe = NULL;

    (void)av_root_read_attr(root, unsafe_path, &unsafe);
    if (unsafe && (g_str_equal(unsafe, "Y") || g_str_equal(unsafe, "1"))) {
        av_check_add(checks, "interrupt-remapping", AV_CHECK_WARN,
                     "remove allow_unsafe_interrupts=1 (modprobe.d, the kernel's command line) and turn on "
                     "interrupt remapping (intremap=on, x2APIC in the firmware)",
                     "vfio_iommu_type1 allows unsafe interrupts: a guest's device may send interrupts as any "
                     "device of the host");
        return;
    }
    if (av_root_read_file(root, interrupts_path, &interrupts, NULL) < 0) {
        av_check_add(checks, "interrupt-remapping", AV_CHECK_WARN, "run it on the host itself",
                     "cannot tell: no /proc/interrupts under the root");
        return;
    }
    if (strstr(interrupts, "IR-"))
        av_check_add(checks, "interrupt-remapping", AV_CHECK_PASS, NULL,
                     "interrupts are remapped (IR- in /proc/interrupts)");
    else
        av_check_add(checks, "interrupt-remapping", wants_pci && AV_CHECK_IR_FATAL ? AV_CHECK_FAIL : AV_CHECK_WARN,
                     "turn on interrupt remapping (intremap=on, x2APIC in the firmware)",
                     "no interrupt is remapped (no IR- in /proc/interrupts): vfio refuses a group unless "
                     "allow_unsafe_interrupts is set, so %s", wants_pci ? "a managed device's domain fails to start"
                     : "no device could be passed through");
}

/* vfio, vfio-pci and a backend (the type1 IOMMU driver or iommufd). */
static void
av_check_vfio(const AvRoot *root, const AvHost *host, const AvPolicy *policy, GPtrArray *checks)
{
    g_autofree char *vfio_pci = av_sys_path("bus/pci/drivers/vfio-pci");
    g_autofree char *type1 = av_sys_path("module/vfio_iommu_type1");
    g_autofree char *iommufd = av_dev_path("iommu");
    g_autofree char *vfio = av_sys_path("module/vfio");
    gboolean has_pci = av_root_exists(root, vfio_pci);
    gboolean has_type1 = av_root_exists(root, type1), has_iommufd = av_root_exists(root, iommufd);
    gboolean wants_pci = FALSE;

    for (guint i = 0; host && i < host->pci->len && !wants_pci; i++) {
        const AvProfile *p = av_policy_match_pci(policy, g_ptr_array_index(host->pci, i));

        wants_pci = p && p->attach != AV_ATTACH_MDEV && p->attach != AV_ATTACH_USB;
    }
    if (has_pci && (has_type1 || has_iommufd)) {
        av_check_add(checks, "vfio", AV_CHECK_PASS, NULL, "vfio-pci is loaded, with %s%s%s", has_type1 ?
                     "vfio_iommu_type1" : "", has_type1 && has_iommufd ? " and " : "",
                     has_iommufd ? "iommufd (/dev/iommu)" : "");
        return;
    }
    if (has_pci)
        av_check_add(checks, "vfio", AV_CHECK_FAIL, "modprobe vfio_iommu_type1 (or iommufd)",
                     "vfio-pci is loaded but neither vfio_iommu_type1 nor iommufd: no group can be opened");
    else
        av_check_add(checks, "vfio", wants_pci ? AV_CHECK_FAIL : AV_CHECK_WARN,
                     "modprobe vfio-pci (it brings vfio and vfio_iommu_type1) and list it in "
                     "/etc/modules-load.d/, so that it is there after a reboot",
                     "vfio-pci is not loaded%s: %s", av_root_exists(root, vfio) ? " (vfio is)" : "",
                     wants_pci ? "binding a managed device fails until it is" : "no managed device needs it yet");
}

/* The first directory from @path's own up to / (within @root) that someone
 * other than root could change: not root's, or writable by its group or by
 * others (a sticky directory too: in qemu.d anyone may add a hook that
 * libvirt runs as root).  NULL when every one is root's alone. */
static char *
av_check_hook_dir_chain(const AvRoot *root, const char *path)
{
    g_autofree char *dir = g_path_get_dirname(path);

    for (;;) {
        g_autofree char *host = av_root_host_path(root, dir);
        struct stat st;
        char *up;

        if (host && stat(host, &st) == 0 && (st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH))))
            return g_steal_pointer(&dir);
        if (strcmp(dir, "/") == 0)
            return NULL;
        up = g_path_get_dirname(dir);
        g_free(dir);
        dir = up;
    }
}

/* Another executable in qemu.d: libvirt runs each, in name order, as root. */
static char *
av_check_hook_neighbour(const AvRoot *root, const char *dir, const char *ours)
{
    g_autofree char *host = av_root_host_path(root, dir);
    g_autoptr(GDir) d = host ? g_dir_open(host, 0, NULL) : NULL;
    const char *name;

    while (d && (name = g_dir_read_name(d))) {
        g_autofree char *entry = g_build_filename(host, name, NULL);
        struct stat st;

        if (strcmp(name, ours) != 0 && stat(entry, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & S_IXUSR))
            return g_build_filename(dir, name, NULL);
    }
    return NULL;
}

/* The hook where libvirt looks for it, and another hook beside it. */
static void
av_check_hook(const AvRoot *root, GPtrArray *checks, gint64 *ret_mtime)
{
    const char *where = "/etc/libvirt/hooks/qemu.d/accelvirt";
    g_autofree char *resolved = NULL;
    g_autofree char *host_path = NULL;
    g_autofree char *legacy = av_root_host_path(root, "/etc/libvirt/hooks/qemu");
    struct stat st;
    int r;

    *ret_mtime = 0;
    r = av_root_resolve(root, where, &resolved);
    if (r < 0 || !(host_path = av_root_host_path(root, resolved)) || stat(host_path, &st) < 0) {
        av_check_add(checks, "hook", AV_CHECK_FAIL,
                     "install accelvirt (the Debian package, or make install from a tree configured with "
                     "--sysconfdir=/etc), then restart the libvirt daemon",
                     "no hook at %s: libvirt starts domains without accelvirt's checks", where);
        return;
    }
    if (!S_ISREG(st.st_mode) || !(st.st_mode & S_IXUSR) || st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH))) {
        av_check_add(checks, "hook", AV_CHECK_FAIL, "reinstall it: a regular file of root's, mode 0755",
                     "%s is %s", where, !S_ISREG(st.st_mode) ? "not a regular file"
                                       : !(st.st_mode & S_IXUSR) ? "not executable (libvirt skips it)"
                                       : st.st_uid != 0 ? "not root's" : "writable by others than root");
        return;
    }
    /* When it was installed: dpkg and make install keep a build's mtime,
     * but the ctime of the qemu.d entry (a link, lstat) and of what it
     * names is when it was put there. */
    *ret_mtime = (gint64)st.st_ctime;
    {
        g_autofree char *entry = av_root_host_path(root, where);
        struct stat lst;

        if (lstat(entry, &lst) == 0 && (gint64)lst.st_ctime > *ret_mtime)
            *ret_mtime = (gint64)lst.st_ctime;
    }
    {
        g_autofree char *open_dir = av_check_hook_dir_chain(root, where);

        if (!open_dir)
            open_dir = av_check_hook_dir_chain(root, resolved);
        if (open_dir) {
            av_check_add(checks, "hook", AV_CHECK_FAIL,
                         "make every directory above the hook root's and writable by root alone (chown root:root, "
                         "chmod go-w)",
                         "%s is not root's alone: whoever can write there can replace or add a hook that libvirt runs "
                         "as root",
                         open_dir);
            return;
        }
    }
    {
        g_autofree char *neighbour = av_check_hook_neighbour(root, "/etc/libvirt/hooks/qemu.d", "accelvirt");

        if (neighbour) {
            av_check_add(checks, "hook", AV_CHECK_WARN,
                         "make sure that hook binds, unbinds and resets none of the devices accelvirt manages",
                         "%s is installed; another hook, %s, runs beside it", where, neighbour);
            return;
        }
    }
    if (access(legacy, F_OK) == 0)
        av_check_add(checks, "hook", AV_CHECK_WARN,
                     "make sure that hook binds, unbinds and resets none of the devices accelvirt manages",
                     "%s is installed; another hook, /etc/libvirt/hooks/qemu, runs beside it", where);
    else
        av_check_add(checks, "hook", AV_CHECK_PASS, NULL, "%s is installed", where);
}

/* When the process @pid started, in Unix seconds: its start in clock ticks
 * after boot (field 22 of /proc/PID/stat, after the command in parentheses,
 * which may hold anything) plus the boot time (btime of /proc/stat).
 * FALSE when /proc cannot say (a tree without them). */
static gboolean
av_check_process_start(const AvRoot *root, guint64 pid, gint64 *ret_start)
{
    g_autofree char *stat_path = av_proc_path("%" G_GUINT64_FORMAT "/stat", pid);
    g_autofree char *stat_text = NULL;
    g_autofree char *boot_path = av_proc_path("stat");
    g_autofree char *boot_text = NULL;
    g_auto(GStrv) fields = NULL;
    const char *after, *btime;
    char *end = NULL;
    guint64 ticks = 0, boot = 0;
    long hz = sysconf(_SC_CLK_TCK);

    if (av_root_read_file(root, stat_path, &stat_text, NULL) < 0 || !(after = strrchr(stat_text, ')')) ||
        av_root_read_file(root, boot_path, &boot_text, NULL) < 0 || !(btime = strstr(boot_text, "\nbtime ")) ||
        hz <= 0)
        return FALSE;
    /* After ")": state (field 3) ... starttime (field 22), the 20th. */
    fields = g_strsplit(after + 1, " ", 0);
    if (g_strv_length(fields) < 21 || !g_ascii_string_to_unsigned(fields[20], 10, 0, G_MAXUINT64, &ticks, NULL))
        return FALSE;
    errno = 0;
    boot = g_ascii_strtoull(btime + 7, &end, 10);
    if (errno || end == btime + 7 || (*end != '\n' && *end != '\0') || boot > G_MAXINT32 * 4ull)
        return FALSE;
    *ret_start = (gint64)(boot + ticks / (guint64)hz);
    return TRUE;
}

/* The pid in /run/@name.pid when that process lives, else 0. */
static gint64
av_check_daemon_pid(const AvRoot *root, const char *name, gint64 *ret_since)
{
    g_autofree char *pid_path = av_run_path("%s.pid", name);
    g_autofree char *pid_host = av_root_host_path(root, pid_path);
    g_autofree char *comm_path = NULL;
    g_autofree char *comm = NULL;
    guint64 pid = 0;
    struct stat st;

    if (av_root_read_uint(root, pid_path, 10, &pid) < 0 || pid == 0 || pid > G_MAXINT32)
        return 0;
    comm_path = av_proc_path("%" G_GUINT64_FORMAT "/comm", pid);
    if (av_root_read_attr(root, comm_path, &comm) < 0 || !g_str_has_prefix(comm, name))
        return 0;
    if (!av_check_process_start(root, pid, ret_since))
        *ret_since = stat(pid_host, &st) == 0 ? (gint64)st.st_mtime : 0;
    return (gint64)pid;
}

/* Which libvirt daemon runs QEMU domains, and whether it started after the
 * hook was installed (libvirt reads its hooks when it starts). */
static void
av_check_daemon(const AvRoot *root, GPtrArray *checks, gint64 hook_mtime)
{
    gint64 since = 0, pid;
    const char *kind;

    if ((pid = av_check_daemon_pid(root, "virtqemud", &since)))
        kind = "virtqemud (the modular daemons)";
    else if ((pid = av_check_daemon_pid(root, "libvirtd", &since)))
        kind = "libvirtd (the monolithic daemon)";
    else {
        av_check_add(checks, "libvirt", AV_CHECK_WARN,
                     "start it: systemctl start virtqemud.socket (Debian 13) or libvirtd (Debian 12)",
                     "no libvirt daemon runs (neither /run/virtqemud.pid nor /run/libvirtd.pid names a live "
                     "process)");
        return;
    }
    if (hook_mtime && since && hook_mtime > since)
        av_check_add(checks, "libvirt", AV_CHECK_WARN,
                     "restart it (systemctl restart virtqemud, or libvirtd) so that it runs the hook",
                     "%s runs (pid %" G_GINT64_FORMAT ") but started before the hook was installed", kind, pid);
    else
        av_check_add(checks, "libvirt", AV_CHECK_PASS, NULL, "%s runs (pid %" G_GINT64_FORMAT ")", kind, pid);
}

/* The policy dir: trusted (its owner and mode, checked by the load) and
 * valid. */
static AvPolicy *
av_check_policy(const AvCli *cli, GPtrArray *checks)
{
    g_autoptr(GError) err = NULL;
    AvPolicy *policy = av_cli_load_policy(cli, &err);

    if (!policy) {
        av_check_add(checks, "policy", AV_CHECK_FAIL, "'accelvirt policy check' says what to change",
                     "the policy dir %s is refused: %s", cli->policy_dir, err->message);
        return NULL;
    }
    if (policy->profiles->len == 0)
        av_check_add(checks, "policy", AV_CHECK_WARN,
                     "copy a profile for your cards from /usr/share/accelvirt/policies and adjust it",
                     "the policy dir %s holds no profile: accelvirt manages no device", cli->policy_dir);
    else
        av_check_add(checks, "policy", AV_CHECK_PASS, NULL, "%u profiles in %s, trusted and valid",
                     policy->profiles->len, cli->policy_dir);
    return policy;
}

/* The state dir: root's, not writable by others, its pool readable. */
static void
av_check_state(const AvCli *cli, GPtrArray *checks)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(AvPool) pool = NULL;
    struct stat st;

    if (stat(cli->state_dir, &st) < 0) {
        av_check_add(checks, "state", AV_CHECK_PASS, NULL,
                     "the state dir %s does not exist yet: the first accelvirt command or hook call makes it",
                     cli->state_dir);
        return;
    }
    if (!S_ISDIR(st.st_mode) || st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH))) {
        av_check_add(checks, "state", AV_CHECK_FAIL, "chown root: and chmod go-w it",
                     "the state dir %s is %s", cli->state_dir, !S_ISDIR(st.st_mode) ? "not a directory"
                     : st.st_uid != 0 ? "not root's" : "writable by others than root");
        return;
    }
    pool = av_cli_open_pool(cli, NULL, AV_POOL_READ, &err);
    if (!pool) {
        av_check_add(checks, "state", AV_CHECK_FAIL, NULL, "the pool cannot be read: %s", err->message);
        return;
    }
    av_check_add(checks, "state", AV_CHECK_PASS, NULL, "the pool in %s holds %u devices", cli->state_dir,
                 av_pool_devices(pool)->len);
}

/* The reconcile timer and the watch service, enabled. */
static void
av_check_units(const AvRoot *root, GPtrArray *checks)
{
    static const struct {
        const char *wants;
        const char *unit;
        const char *why;
    } units[] = {
        { "timers.target.wants", "accelvirt-reconcile.timer", "puts the pool right at boot and every 15 minutes" },
        { "multi-user.target.wants", "accelvirt-watch.service", "sees a hot-plug behind accelvirt's back at once" },
    };

    for (gsize i = 0; i < G_N_ELEMENTS(units); i++) {
        g_autofree char *path = g_strdup_printf("/etc/systemd/system/%s/%s", units[i].wants, units[i].unit);
        g_autofree char *advice = g_strdup_printf("systemctl enable --now %s", units[i].unit);

        if (av_root_exists(root, path))
            av_check_add(checks, "units", AV_CHECK_PASS, NULL, "%s is enabled: it %s", units[i].unit, units[i].why);
        else
            av_check_add(checks, "units", AV_CHECK_WARN, advice, "%s is not enabled: nothing else %s",
                         units[i].unit, units[i].why);
    }
}

/* The managed PCI devices of @host passed through whole (not mdev parents,
 * not USB): borrowed. */
static GPtrArray *
av_check_managed(const AvHost *host, const AvPolicy *policy)
{
    GPtrArray *managed = g_ptr_array_new();

    for (guint i = 0; host && policy && i < host->pci->len; i++) {
        AvPciDevice *d = g_ptr_array_index(host->pci, i);
        const AvProfile *p = av_policy_match_pci(policy, d);

        if (p && p->attach != AV_ATTACH_MDEV && p->attach != AV_ATTACH_USB)
            g_ptr_array_add(managed, d);
    }
    return managed;
}

/* Hugepages reserved on each NUMA node that holds managed devices. */
static void
av_check_hugepages(const AvRoot *root, const GPtrArray *managed, GPtrArray *checks)
{
    g_autoptr(GArray) nodes = g_array_new(FALSE, FALSE, sizeof(int));
    g_autoptr(GString) without = g_string_new(NULL);

    for (guint i = 0; i < managed->len; i++) {
        const AvPciDevice *d = g_ptr_array_index(managed, i);
        gboolean seen = FALSE;

        for (guint k = 0; k < nodes->len && !seen; k++)
            seen = g_array_index(nodes, int, k) == d->numa_node;
        if (!seen && d->numa_node >= 0)
            g_array_append_val(nodes, d->numa_node);
    }
    if (nodes->len == 0) {
        av_check_add(checks, "hugepages", AV_CHECK_PASS, NULL, "no managed device on a known NUMA node");
        return;
    }
    for (guint k = 0; k < nodes->len; k++) {
        int node = g_array_index(nodes, int, k);
        g_autofree char *dir = av_sys_path("devices/system/node/node%d/hugepages", node);
        g_auto(GStrv) sizes = NULL;
        guint64 total = 0;

        if (av_root_list_dir(root, dir, &sizes) == 0) {
            for (guint s = 0; sizes[s]; s++) {
                g_autofree char *nr = g_strdup_printf("%s/%s/nr_hugepages", dir, sizes[s]);
                guint64 v = 0;

                if (av_root_read_uint(root, nr, 10, &v) == 0)
                    total += v;
            }
        }
        if (total == 0)
            g_string_append_printf(without, "%s%d", without->len ? ", " : "", node);
    }
    if (without->len)
        av_check_add(checks, "hugepages", AV_CHECK_WARN,
                     "reserve them (hugepagesz=1G hugepages=N on the kernel's command line, or each node's "
                     "nr_hugepages in sysfs) for domains pinned beside their devices",
                     "no hugepage reserved on NUMA node%s %s, where managed devices are", strchr(without->str, ',')
                     ? "s" : "", without->str);
    else
        av_check_add(checks, "hugepages", AV_CHECK_PASS, NULL, "hugepages reserved on every NUMA node of a managed "
                     "device (%u)", nodes->len);
}

#define AV_PCI_EXT_CAP_ID_ACS 0x000d
/* ACS Control: Source Validation, Request Redirect, Completion Redirect,
 * Upstream Forwarding (PCIe Base Spec 7.7.8.3), what isolates the
 * functions below a port. */
#define AV_ACS_CTRL_ISOLATE 0x001d

#define AV_PCI_CAP_ID_EXP 0x10
#define AV_PCI_EXP_TYPE_ROOT_PORT 0x4
#define AV_PCI_EXP_TYPE_DOWNSTREAM 0x6

typedef enum {
    AV_ACS_NOT_A_PORT,           /* not a root or downstream port: ACS there isolates nothing below */
    AV_ACS_UNKNOWN,              /* its extended configuration space cannot be read (not root) */
    AV_ACS_LACKING,
    AV_ACS_ISOLATES,
} AvAcsResult;

static guint16
av_check_word(const char *config, gsize off)
{
    return (guint16)((guint8)config[off] | (guint8)config[off + 1] << 8);
}

/* The PCIe port type of the @len bytes of configuration space at @config
 * (the PCI Express capability's bits 7:4), or -1: no capability list, no
 * PCI Express capability, a list that loops (48 steps at most). */
static int
av_check_port_type(const char *config, gsize len)
{
    gsize off;

    if (len < 0x40 || !(av_check_word(config, 0x06) & 0x10))
        return -1;
    off = (guint8)config[0x34] & 0xfc;
    for (guint walked = 0; walked < 48 && off >= 0x40 && off + 4 <= MIN(len, 256); walked++) {
        if ((guint8)config[off] == AV_PCI_CAP_ID_EXP)
            return (av_check_word(config, off + 2) >> 4) & 0xf;
        off = (guint8)config[off + 1] & 0xfc;
    }
    return -1;
}

/* Whether the bridge @address, when it is a root or downstream port,
 * isolates the functions below it: ACS with each of Source Validation,
 * Request and Completion Redirect and Upstream Forwarding that the port
 * implements turned on (the controls it lacks are not asked of it, as the
 * kernel's pci_acs_enabled() does not). */
static AvAcsResult
av_check_bridge_acs(const AvRoot *root, const char *address)
{
    g_autofree char *path = av_sys_path("bus/pci/devices/%s/config", address);
    g_autofree char *config = NULL;
    gsize len = 0, off;
    guint16 want;
    int type;

    if (av_root_read_file(root, path, &config, &len) < 0)
        return AV_ACS_UNKNOWN;
    type = av_check_port_type(config, len);
    if (type != AV_PCI_EXP_TYPE_ROOT_PORT && type != AV_PCI_EXP_TYPE_DOWNSTREAM)
        return len < 0x40 ? AV_ACS_UNKNOWN : AV_ACS_NOT_A_PORT;
    if (len <= 256)
        return AV_ACS_UNKNOWN;
    if (!av_pci_config_find_ext_cap((const guint8 *)config, len, AV_PCI_EXT_CAP_ID_ACS, &off) || off + 8 > len)
        return AV_ACS_LACKING;
    want = av_check_word(config, off + 4) & AV_ACS_CTRL_ISOLATE;
    if (!want)
        return AV_ACS_LACKING;
    return (av_check_word(config, off + 6) & want) == want ? AV_ACS_ISOLATES : AV_ACS_LACKING;
}

/* ACS on the ports above managed devices (each bridge once), and each
 * managed device's group viable. */
static void
av_check_isolation(const AvRoot *root, const AvHost *host, const AvPolicy *policy, const GPtrArray *managed,
                   GPtrArray *checks)
{
    g_autoptr(GHashTable) bridges = g_hash_table_new(g_str_hash, g_str_equal);
    g_autoptr(GString) lacking = g_string_new(NULL);
    g_autoptr(GString) unknown = g_string_new(NULL);
    g_autoptr(GString) bad = g_string_new(NULL);
    guint viable = 0, ports = 0;

    for (guint i = 0; i < managed->len; i++) {
        const AvPciDevice *d = g_ptr_array_index(managed, i);
        g_autoptr(GPtrArray) members = NULL;
        g_autoptr(GError) err = NULL;
        const AvPciDevice *up = d;

        /* The bridges above it, each once; a loop in a hostile tree ends. */
        for (guint depth = 0; up && up->parent_bridge && depth < 32; depth++) {
            const char *b = up->parent_bridge;
            AvAcsResult acs;

            up = av_host_find_pci(host, b);
            if (g_hash_table_contains(bridges, b))
                continue;
            g_hash_table_add(bridges, (gpointer)b);
            acs = av_check_bridge_acs(root, b);
            if (acs == AV_ACS_ISOLATES)
                ports++;
            else if (acs == AV_ACS_LACKING || acs == AV_ACS_UNKNOWN)
                g_string_append_printf(acs == AV_ACS_LACKING ? lacking : unknown, "%s%s",
                                       (acs == AV_ACS_LACKING ? lacking : unknown)->len ? ", " : "", b);
        }
        if (av_vfio_group_check(host, policy, d, &members, &err))
            viable++;
        else
            g_string_append_printf(bad, "%s%s", bad->len ? "; " : "", err->message);
    }
    if (lacking->len)
        av_check_add(checks, "acs", AV_CHECK_WARN,
                     "such a port puts the functions below it in one IOMMU group; a card there goes with its "
                     "neighbours or not at all (see the groups line)",
                     "no ACS isolation on the root or downstream port%s above managed devices: %s", strchr(lacking->str, ',') ? "s" : "",
                     lacking->str);
    else if (unknown->len)
        av_check_add(checks, "acs", AV_CHECK_WARN, "run it as root, on the host itself",
                     "cannot read the extended configuration space (past byte 256: root only) of %s",
                     unknown->str);
    else
        av_check_add(checks, "acs", AV_CHECK_PASS, NULL, "every root or downstream port above a managed device "
                     "isolates it (ACS), %u ports", ports);
    if (bad->len)
        av_check_add(checks, "groups", AV_CHECK_FAIL,
                     "'accelvirt list' shows each group; move the card, or change the profile to take the group's "
                     "other functions too", "%s", bad->str);
    else
        av_check_add(checks, "groups", AV_CHECK_PASS, NULL, "the IOMMU group of each managed device (%u) can be "
                     "handed to a guest", viable);
}

static json_t *
av_check_json(const AvCheck *c)
{
    json_t *o = json_pack("{s:s,s:s,s:s}", "check", c->id, "result", av_check_results[c->result], "detail",
                          c->detail);

    if (c->advice)
        json_object_set_new(o, "advice", json_string(c->advice));
    return o;
}

int
av_cli_cmd_host_validate(AvCli *cli, int argc, char **argv)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(AvRoot) root = NULL;
    g_autoptr(AvPolicy) policy = NULL;
    g_autoptr(AvHost) host = NULL;
    g_autoptr(GPtrArray) checks = g_ptr_array_new_with_free_func((GDestroyNotify)av_check_free);
    g_autoptr(GPtrArray) managed = NULL;
    gint64 hook_mtime = 0;
    guint counts[3] = { 0 };

    if (!av_cli_parse(cli, "host-validate", NULL,
                      "Whether this host is ready for accelvirt: the IOMMU and interrupt remapping, vfio, the hook "
                      "where libvirt looks for it, libvirt's daemon, the policy and state dirs, the units, "
                      "hugepages, ACS and the IOMMU groups of the managed devices.  One line per check, PASS, WARN "
                      "or FAIL and what to do; exit status 1 when anything FAILs.  Changes nothing.",
                      NULL, &argc, &argv))
        return AV_EXIT_USAGE;
    if (argc > 1)
        return av_cli_usage_error("'host-validate' takes no arguments, got '%s'", argv[1]);
    root = av_root_new_default(cli->root, &err);
    if (!root)
        return av_cli_fail(err);
    host = av_host_scan(root, &err);
    if (!host)
        return av_cli_fail(err);
    av_check_iommu(root, checks);
    policy = av_check_policy(cli, checks);
    managed = av_check_managed(host, policy);
    av_check_interrupts(root, managed->len > 0, checks);
    av_check_vfio(root, host, policy, checks);
    av_check_hook(root, checks, &hook_mtime);
    av_check_daemon(root, checks, hook_mtime);
    av_check_state(cli, checks);
    av_check_units(root, checks);
    av_check_hugepages(root, managed, checks);
    if (policy && managed->len)
        av_check_isolation(root, host, policy, managed, checks);
    else
        av_check_add(checks, "groups", AV_CHECK_PASS, NULL, "no managed PCI device to hand to a guest");

    for (guint i = 0; i < checks->len; i++)
        counts[((AvCheck *)g_ptr_array_index(checks, i))->result]++;
    if (cli->json) {
        json_t *arr = json_array();

        for (guint i = 0; i < checks->len; i++)
            json_array_append_new(arr, av_check_json(g_ptr_array_index(checks, i)));
        av_cli_print_json(json_pack("{s:o,s:i,s:i,s:i}", "checks", arr, "pass", counts[AV_CHECK_PASS], "warn",
                                    counts[AV_CHECK_WARN], "fail", counts[AV_CHECK_FAIL]));
    } else {
        for (guint i = 0; i < checks->len; i++) {
            const AvCheck *c = g_ptr_array_index(checks, i);
            g_autofree char *detail = av_cli_printable(c->detail);

            printf("%s  %-20s %s", av_check_results[c->result], c->id, detail);
            if (c->advice)
                printf("; %s", c->advice);
            printf("\n");
        }
        printf("%u passed, %u warnings, %u failed.\n", counts[AV_CHECK_PASS], counts[AV_CHECK_WARN],
               counts[AV_CHECK_FAIL]);
    }
    return counts[AV_CHECK_FAIL] ? AV_EXIT_FAILURE : AV_EXIT_OK;
}

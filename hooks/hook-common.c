/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: what the hook and the worker share: configuration, logging,
 * refusals, owners; and what more than one of the hook's operations uses:
 * the pool opened and the host scanned for them, devices taken, devices
 * and owners described for messages, the availability check, the driver
 * commands. */
#include "config.h"

#include "hook.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "fpga/av-bitstream.h"
#include "place/av-place.h"
#include "scrub/av-program.h"
#include "util/av-error.h"
#include "util/av-json.h"
#include "util/av-point.h"
#include "util/av-spawn.h"

#ifndef AV_WORKER_PATH
#define AV_WORKER_PATH "/usr/libexec/accelvirt/accelvirt-worker"
#endif

/* Frees @config.  NULL is a no-op. */
void
av_hook_config_free(AvHookConfig *config)
{
    if (!config)
        return;
    av_root_free(config->root);
    g_free(config->state_dir);
    g_free(config->policy_dir);
    g_free(config->worker_path);
    g_free(config);
}

/* The value of the environment variable @name, or NULL when it is unset or
 * empty.  Borrowed from the environment. */
static const char *
av_hook_getenv(const char *name)
{
    const char *value = g_getenv(name);

    return value && *value ? value : NULL;
}

/* See hook.h.  Caller frees. */
AvHookConfig *
av_hook_config_new(GError **error)
{
    g_autoptr(AvHookConfig) config = g_new0(AvHookConfig, 1);
    const char *state = av_hook_getenv("ACCELVIRT_STATE_DIR");
    const char *policy = av_hook_getenv("ACCELVIRT_POLICY_DIR");
    const char *worker = av_hook_getenv("ACCELVIRT_WORKER");

    config->root = av_root_new_default(NULL, error);
    if (!config->root)
        return NULL;
    if (!av_root_is_host(config->root) && !state) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "ACCELVIRT_ROOT is '%s' but ACCELVIRT_STATE_DIR is not set; a fake root is never "
                    "recorded in the host's state dir: give it a state dir of its own",
                    av_root_prefix(config->root));
        return NULL;
    }
    config->ops = av_kernel_ops_for(config->root);
    /* Absolute: the worker it starts runs in "/" (av_hook_spawn_worker()). */
    config->state_dir = g_canonicalize_filename(state ? state : AV_STATE_DIR, NULL);
    config->policy_dir = g_canonicalize_filename(policy ? policy : AV_POLICY_DIR, NULL);
    config->worker_path = g_strdup(worker ? worker : AV_WORKER_PATH);
    config->lock_timeout_ms = AV_HOOK_LOCK_TIMEOUT_MS;
    if (!av_root_is_host(config->root) && av_point_setting("lock-timeout-ms")) {
        guint64 ms = 0;

        if (g_ascii_string_to_unsigned(av_point_setting("lock-timeout-ms"), 10, 0, G_MAXINT, &ms, NULL))
            config->lock_timeout_ms = (int)ms;
    }
    return g_steal_pointer(&config);
}

/* --- logging ------------------------------------------------------------------ */

static char *av_hook_log_domain;

/* Appends @line to $ACCELVIRT_LOG_FILE when it is set (tests read it). */
static void
av_hook_log_file(int priority, const char *line)
{
    const char *path = av_hook_getenv("ACCELVIRT_LOG_FILE");
    g_autofree char *text = NULL;
    const char *level;
    int fd;

    if (!path)
        return;
    level = priority <= LOG_ERR ? "error" : priority == LOG_WARNING ? "warning"
          : priority == LOG_DEBUG ? "debug" : "info";
    text = g_strdup_printf("accelvirt[%d]: %s: %s\n", (int)getpid(), level, line);
    fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0600);
    if (fd < 0)
        return;
    if (write(fd, text, strlen(text)) < 0) {
        /* Nowhere left to say it. */
    }
    close(fd);
}

/* Logs @message at @priority, prefixed by the domain's name. */
static void
av_hook_log_message(int priority, const char *message)
{
    g_autofree char *line = NULL;

    if (av_hook_log_domain)
        line = g_strdup_printf("domain '%s': %s", av_hook_log_domain, message);
    else
        line = g_strdup(message);
    syslog(priority, "%s", line);
    av_hook_log_file(priority, line);
}

/* GLib's messages (g_warning() of the layers below) go to syslog, never to
 * stderr: libvirt would put them into its error (docs/hooks.rst). */
static GLogWriterOutput
av_hook_log_writer(GLogLevelFlags level, const GLogField *fields, gsize n_fields, gpointer data G_GNUC_UNUSED)
{
    const char *message = NULL;
    int priority;

    for (gsize i = 0; i < n_fields; i++) {
        if (g_str_equal(fields[i].key, "MESSAGE")) {
            message = fields[i].value;
            break;
        }
    }
    if (!message)
        return G_LOG_WRITER_HANDLED;
    if (level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL))
        priority = LOG_ERR;
    else if (level & G_LOG_LEVEL_WARNING)
        priority = LOG_WARNING;
    else if (level & G_LOG_LEVEL_DEBUG)
        return G_LOG_WRITER_HANDLED;
    else
        priority = LOG_INFO;
    av_hook_log_message(priority, message);
    return G_LOG_WRITER_HANDLED;
}

/* See hook.h. */
void
av_hook_log_init(void)
{
    openlog("accelvirt", LOG_PID, LOG_DAEMON);
    g_log_set_writer_func(av_hook_log_writer, NULL, NULL);
}

/* See hook.h. */
void
av_hook_log_set_domain(const char *domain_name)
{
    g_free(av_hook_log_domain);
    av_hook_log_domain = domain_name ? av_domain_quote(domain_name) : NULL;
}

/* See hook.h. */
void
av_hook_log(int priority, const char *fmt, ...)
{
    g_autofree char *message = NULL;
    va_list ap;

    va_start(ap, fmt);
    message = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    av_hook_log_message(priority, message);
}

/* See hook.h. */
int
av_hook_refuse(const char *message)
{
    g_autofree char *line = g_strdup(message);

    for (char *p = line; *p; p++)
        if ((guchar)*p < 0x20 || *p == 0x7f)
            *p = ' ';
    av_hook_log_message(LOG_ERR, line);
    fprintf(stderr, "accelvirt: %s\n", line);
    fflush(stderr);
    return 1;
}

/* See hook.h. */
int
av_hook_refusef(const char *fmt, ...)
{
    g_autofree char *message = NULL;
    va_list ap;

    va_start(ap, fmt);
    message = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    return av_hook_refuse(message);
}

static gboolean av_hook_worker_wanted;

/* See hook.h. */
void
av_hook_want_worker(void)
{
    av_hook_worker_wanted = TRUE;
}

/* See hook.h. */
void
av_hook_spawn_pending_worker(const AvHookConfig *config)
{
    g_autoptr(GError) error = NULL;

    if (!av_hook_worker_wanted)
        return;
    av_hook_worker_wanted = FALSE;
    if (!av_hook_spawn_worker(config, &error))
        av_hook_log(LOG_ERR, "cannot start the scrub worker '%s': %s; the devices stay dirty until a worker runs",
                    config->worker_path, error->message);
}

/* See hook.h. */
gboolean
av_hook_spawn_worker(const AvHookConfig *config, GError **error)
{
    /* The worker reads where to act from the environment it inherits and
     * runs in "/" (av_spawn_detached()): the dirs it is given are the
     * absolute ones this process acts on. */
    if (!av_root_is_host(config->root))
        g_setenv("ACCELVIRT_ROOT", av_root_prefix(config->root), TRUE);
    g_setenv("ACCELVIRT_STATE_DIR", config->state_dir, TRUE);
    g_setenv("ACCELVIRT_POLICY_DIR", config->policy_dir, TRUE);
    return av_spawn_detached(config->worker_path, error);
}

/* See hook.h: a stop point (util/av-point.h) on a fake root. */
void
av_hook_test_stop(const AvHookConfig *config, const char *point)
{
    if (!av_root_is_host(config->root))
        av_point_stop(point);
}

/* See hook.h. */
AvPool *
av_hook_pool_open(const AvHookConfig *config, GError **error)
{
    g_autoptr(AvPool) pool = av_pool_open(config->state_dir, AV_POOL_WRITE, config->lock_timeout_ms, error);
    g_autoptr(AvPoolUpkeep) upkeep = NULL;

    if (!pool) {
        g_prefix_error(error, "cannot open the pool: ");
        return NULL;
    }
    upkeep = av_pool_upkeep(pool, config->root, config->ops, error);
    if (!upkeep) {
        g_prefix_error(error, "cannot put right what processes that died left in the pool: ");
        return NULL;
    }
    for (guint i = 0; i < upkeep->notes->len; i++)
        av_hook_log(LOG_WARNING, "%s", (const char *)g_ptr_array_index(upkeep->notes, i));
    for (guint i = 0; i < upkeep->problems->len; i++)
        av_hook_log(LOG_ERR, "%s", (const char *)g_ptr_array_index(upkeep->problems, i));
    av_hook_test_stop(config, "upkeep-journalled");
    if (upkeep->changed && !av_pool_save(pool, error)) {
        g_prefix_error(error, "cannot save the pool: ");
        return NULL;
    }
    av_pool_upkeep_finish(upkeep);
    if (upkeep->dirtied)
        av_hook_want_worker();
    return g_steal_pointer(&pool);
}

/* See hook.h. */
AvOwner *
av_hook_owner_new(const AvDomain *domain)
{
    AvOwner *owner = av_owner_new(domain->uuid, domain->name);

    if (domain->is_nova) {
        owner->nova_instance = g_strdup(domain->uuid);
        owner->nova_project = g_strdup(domain->nova_project);
        owner->nova_user = g_strdup(domain->nova_user);
    }
    return owner;
}

/* See hook.h. */
AvOwner *
av_hook_owner_for(const AvDomain *domain, const AvPolicy *policy, const AvPool *pool, GError **error)
{
    g_autoptr(AvOwner) owner = av_hook_owner_new(domain);

    if (!av_pool_owner_resolve(pool, av_policy_owner_metadata_trusted(policy), owner, error))
        return NULL;
    return g_steal_pointer(&owner);
}

gboolean
av_hook_write_stdout(const char *data, gsize len, GError **error)
{
    gsize done = 0;

    while (done < len) {
        ssize_t n = write(STDOUT_FILENO, data + done, len - done);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            g_set_error(error, AV_ERROR, AV_ERROR_IO, "cannot write the domain XML back to libvirt: %s",
                        g_strerror(n < 0 ? errno : EIO));
            return FALSE;
        }
        done += (gsize)n;
    }
    return TRUE;
}

/* See hook.h.  Only the PCI functions @addresses are
 * read, with what their identities and IOMMU groups involve, the mdev
 * parents with @mdev_parents (av_host_scan_devices()), and with @usb every
 * USB device (a few dozen at most); if the pool agrees
 * with all of them
 * (av_pool_confirm(): reconciled with the whole host in this boot, nothing
 * news), that is all: the whole host is the business of the CLI,
 * `accelvirt reconcile` and the worker when its check after a scrub finds
 * what the pool does not agree with, not of every domain's start.
 * Otherwise (a function the pool holds is gone, anything the pool does not
 * agree with) the whole host is scanned and the pool reconciled with it.  News are bookkeeping
 * of their own, saved whatever the caller decides (the journal has them
 * already).  Returns a new AvHost or NULL with @error set. */
AvHost *
av_hook_scan_devices(const AvHookConfig *config, const AvPolicy *policy, AvPool *pool, const char *const *addresses,
                     gboolean mdev_parents, gboolean usb, GError **error)
{
    g_autoptr(AvHost) host = NULL;
    g_autofree char *why = NULL;
    gboolean changed = FALSE;

    host = av_host_scan_devices(config->root, addresses, mdev_parents, error);
    if (host && usb && !av_host_scan_devices_usb(config->root, host, error))
        g_clear_pointer(&host, av_host_free);
    if (!host) {
        g_prefix_error(error, "cannot scan the devices: ");
        return NULL;
    }
    /* A function not on the host is nothing of accelvirt's, unless the
     * pool has a device there: gone, which the whole scan records. */
    for (guint i = 0; addresses[i] && !why; i++) {
        if (!av_host_find_pci(host, addresses[i]) &&
            av_pool_find_address(pool, AV_DEVICE_KIND_PCI, addresses[i]))
            why = g_strdup_printf("%s is not on the host", addresses[i]);
    }
    if (!why && av_pool_confirm(pool, host, policy, &why)) {
        if (!av_pool_expire_claims(pool, g_get_real_time() / G_USEC_PER_SEC, &changed, error) ||
            (changed && !av_pool_save(pool, error))) {
            g_prefix_error(error, "cannot bring the pool up to date: ");
            return NULL;
        }
        return g_steal_pointer(&host);
    }
    av_hook_log(LOG_DEBUG, "scanning the whole host: %s", why);
    return av_hook_scan_host(config, policy, pool, error);
}

/* See hook.h. */
AvHost *
av_hook_scan_host(const AvHookConfig *config, const AvPolicy *policy, AvPool *pool, GError **error)
{
    g_autoptr(AvHost) host = av_host_scan(config->root, error);
    gboolean changed = FALSE;

    if (!host) {
        g_prefix_error(error, "cannot scan the host: ");
        return NULL;
    }
    if (!av_pool_reconcile(pool, host, policy, &changed, error) || (changed && !av_pool_save(pool, error))) {
        g_prefix_error(error, "cannot bring the pool up to date with the host: ");
        return NULL;
    }
    return g_steal_pointer(&host);
}

/* See hook.h. */
AvHost *
av_hook_scan_for(const AvHookConfig *config, const AvPolicy *policy, AvPool *pool, const AvDomain *domain,
                 GError **error)
{
    g_autoptr(GPtrArray) addresses = g_ptr_array_new();
    g_autoptr(GPtrArray) cards = g_ptr_array_new_with_free_func(g_free);
    gboolean mdevs = FALSE, usb = FALSE, netdevs = FALSE;

    for (guint i = 0; i < domain->hostdevs->len; i++) {
        const AvHostdev *h = g_ptr_array_index(domain->hostdevs, i);

        if (h->type == AV_HOSTDEV_MDEV)
            mdevs = TRUE;
        else if (h->type == AV_HOSTDEV_USB)
            usb = TRUE;
        else if (h->type == AV_HOSTDEV_PCI)
            g_ptr_array_add(addresses, h->pci_address);
        else if (h->type == AV_HOSTDEV_NETDEV) {
            /* The card that made the interface, pooled or not: one that a
             * profile matches but that is not pooled yet (hot-plugged, a
             * new policy file) is pooled by this scan, as a PCI hostdev's
             * device is, and so claimed or refused. */
            char *card = av_kernel_netdev_card(config->root, config->ops, h->netdev);

            netdevs = TRUE;
            if (card) {
                g_ptr_array_add(cards, card);
                g_ptr_array_add(addresses, card);
            }
        }
    }
    /* A direct interface names a network interface, not a device: every
     * PCI device of the pool is read, whose net/ says which card made it
     * (av_host_find_netdev()).  The pool's size, not the host's. */
    for (guint i = 0; netdevs && i < av_pool_devices(pool)->len; i++) {
        const AvPoolDevice *dev = g_ptr_array_index(av_pool_devices(pool), i);

        if (dev->kind == AV_DEVICE_KIND_PCI && dev->address)
            g_ptr_array_add(addresses, dev->address);
    }
    /* The PF of each placed VF: the VF may be gone (a reboot), and made
     * again on it (av_prepare_grow()). */
    for (guint i = 0; domain->placed && i < domain->placed->len; i++) {
        const AvPlacedDevice *placed = g_ptr_array_index(domain->placed, i);

        if (placed->pf_address)
            g_ptr_array_add(addresses, placed->pf_address);
    }
    g_ptr_array_add(addresses, NULL);
    return av_hook_scan_devices(config, policy, pool, (const char *const *)addresses->pdata, mdevs, usb, error);
}

/* --- describing things to the user ------------------------------------------- */

/* See hook.h. */
char *
av_hook_describe_owner(const AvOwner *owner)
{
    GString *s;

    if (!owner)
        return g_strdup("nobody");
    s = g_string_new(NULL);
    if (owner->domain_name)
        g_string_append_printf(s, "domain '%s'", owner->domain_name);
    if (owner->domain_uuid)
        g_string_append_printf(s, s->len ? " (%s)" : "domain %s", owner->domain_uuid);
    if (owner->nova_project)
        g_string_append_printf(s, "%sNova project %s", s->len ? ", " : "", owner->nova_project);
    if (owner->nova_user)
        g_string_append_printf(s, "%sNova user %s", s->len ? ", " : "", owner->nova_user);
    if (s->len == 0)
        g_string_append(s, "an unnamed owner");
    return g_string_free(s, FALSE);
}

/* See hook.h. */
char *
av_hook_describe_device(const AvPoolDevice *dev)
{
    if (dev->kind == AV_DEVICE_KIND_MDEV)
        return g_strdup_printf("mdev %s on %s", dev->identity + strlen("mdev:"),
                               dev->address ? dev->address : "no parent");
    if (dev->kind == AV_DEVICE_KIND_USB)
        return g_strdup_printf("USB %s (%s)", dev->address ? dev->address : "no port", dev->identity);
    return g_strdup_printf("%s (%s)", dev->address ? dev->address : "no address", dev->identity);
}

/* See hook.h. */
gboolean
av_hook_check_available(const AvPoolDevice *dev, const AvDomain *domain, GError **error)
{
    g_autofree char *what = NULL;
    g_autofree char *who = NULL;
    const char *advice;

    if (dev->state == AV_DEVICE_STATE_FREE)
        return TRUE;
    if (dev->state == AV_DEVICE_STATE_CLAIMED && dev->owner &&
        g_strcmp0(dev->owner->domain_uuid, domain->uuid) == 0)
        return TRUE;
    what = av_hook_describe_device(dev);
    who = av_hook_describe_owner(dev->owner);
    switch (dev->state) {
    case AV_DEVICE_STATE_CLAIMED:
    case AV_DEVICE_STATE_IN_USE:
        advice = dev->owner && g_strcmp0(dev->owner->domain_uuid, domain->uuid) == 0
                 ? "is the domain already running? stop it first"
                 : "give this domain another device, or stop that domain first";
        break;
    case AV_DEVICE_STATE_DIRTY:
    case AV_DEVICE_STATE_SCRUBBING:
        advice = "it is being scrubbed after its last use; try again when 'accelvirt status' shows it free";
        break;
    case AV_DEVICE_STATE_QUARANTINED:
        advice = "its scrub failed; an operator must check the device and free it";
        break;
    case AV_DEVICE_STATE_MISSING:
        advice = "it was not found on the host at the last scan; check the hardware";
        break;
    default:
        advice = "check 'accelvirt status'";
        break;
    }
    g_set_error(error, AV_ERROR, AV_ERROR_IN_USE, "device %s is %s, owner %s%s%s%s; %s",
                what, av_device_state_to_string(dev->state), who,
                dev->reason ? " (" : "", dev->reason ? dev->reason : "", dev->reason ? ")" : "", advice);
    return FALSE;
}

/* --- driver commands --------------------------------------------------------- */

/* The bitstream the pool's placement record of the domain @domain_uuid
 * says the device @identity must hold (its ACCELVIRT_BITSTREAM* variables
 * for a driver command), from the library; NULL when none (or the library
 * lost it: the command then runs without).  Caller frees. */
static AvBitstream *
av_hook_driver_bitstream(const AvHookConfig *config, AvPool *pool, const char *domain_uuid, const char *identity)
{
    const AvPoolPlacement *record = domain_uuid ? av_pool_placement_find(pool, domain_uuid) : NULL;

    for (guint i = 0; record && identity && i < record->items->len; i++) {
        const AvPlacedItem *item = g_ptr_array_index(record->items, i);

        if (item->bitstream && g_strcmp0(item->identity, identity) == 0)
            return av_bitstream_lookup(config->state_dir, item->bitstream, NULL);
    }
    return NULL;
}

/* The hook's budget for driver commands (AV_DRIVER_HOOK_BUDGET_S), one per
 * point, counted from its first command: the monotonic time (µs) it ends,
 * 0 before.  A test on a fake root may make it shorter (the setting
 * "driver-budget-s" of util/av-point.h, seconds). */
static gint64 av_hook_driver_deadline[AV_DRIVER_POINTS];

/* The seconds left of the hook's budget for @point (at least 1), or 0 when
 * it is spent. */
static guint
av_hook_driver_budget_left(const AvHookConfig *config, AvDriverPoint point)
{
    gint64 now = g_get_monotonic_time();
    gint64 left;

    if (av_hook_driver_deadline[point] == 0) {
        const char *test = av_point_setting("driver-budget-s");
        guint64 budget = AV_DRIVER_HOOK_BUDGET_S;

        if (test && !av_root_is_host(config->root))
            g_ascii_string_to_unsigned(test, 10, 1, AV_DRIVER_HOOK_BUDGET_S, &budget, NULL);
        av_hook_driver_deadline[point] = now + (gint64)budget * G_USEC_PER_SEC;
    }
    left = av_hook_driver_deadline[point] - now;
    return left <= 0 ? 0 : (guint)MAX((left + G_USEC_PER_SEC - 1) / G_USEC_PER_SEC, 1);
}

/* See hook.h. */
gboolean
av_hook_driver_run(const AvHookConfig *config, AvPool *pool, const AvProfile *profile, const char *address,
                   const char *identity, const char *domain_name, const char *domain_uuid, AvDriverPoint point,
                   GError **error)
{
    const AvDriverCommand *command = profile ? profile->drivers[point] : NULL;
    AvProgramTarget target = { .root = config->root, .state_dir = config->state_dir, .profile = profile,
                               .address = address, .identity = identity, .domain_name = domain_name,
                               .domain_uuid = domain_uuid, .group_fd = -1 };
    g_autoptr(json_t) report = NULL;
    g_autoptr(GError) journal_error = NULL;
    g_autoptr(AvBitstream) bitstream = NULL;
    gboolean ok;

    if (!command)
        return TRUE;
    if (command->timeout_s == 0 || command->timeout_s > AV_DRIVER_HOOK_TIMEOUT_MAX) {
        g_set_error(error, AV_ERROR, AV_ERROR_POLICY,
                    "the %s command of profile '%s' has a timeout of %u s; the hook runs one of at most %u s",
                    av_driver_point_to_string(point), profile->name, command->timeout_s,
                    AV_DRIVER_HOOK_TIMEOUT_MAX);
        return FALSE;
    }
    /* Bounded in all, not only each: the pool's lock is held meanwhile. */
    target.timeout_max_s = av_hook_driver_budget_left(config, point);
    if (target.timeout_max_s == 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                    "the %s command of profile '%s' for %s was not run: the hook's %u s for %s commands are spent "
                    "(the pool's lock is held meanwhile); give the profile a quicker one, or do the work in "
                    "on_assign or on_free",
                    av_driver_point_to_string(point), profile->name, address ? address : "(none)",
                    AV_DRIVER_HOOK_BUDGET_S, av_driver_point_to_string(point));
        return FALSE;
    }
    bitstream = av_hook_driver_bitstream(config, pool, domain_uuid, identity);
    ok = av_driver_run(&target, point, bitstream, &report, error);
    if (report) {
        if (!av_program_journal(pool, "driver", report, identity, domain_name, domain_uuid, "hook", &journal_error))
            av_hook_log(LOG_ERR, "cannot journal the %s command of %s: %s", av_driver_point_to_string(point),
                        address ? address : "(none)", journal_error->message);
    }
    if (ok)
        av_hook_log(LOG_INFO, "ran the %s command of profile '%s' for %s", av_driver_point_to_string(point),
                    profile->name, address ? address : "(none)");
    return ok;
}

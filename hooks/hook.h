/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the libvirt QEMU hook and its scrub worker.
 *
 * libvirt runs /etc/libvirt/hooks/qemu.d/accelvirt as
 *     accelvirt DOMAIN OPERATION SUB-OPERATION EXTRA
 * with the domain XML on stdin, and waits for it (libvirt's docs/hooks.rst).
 * The rules that shape this program, from that page:
 *   - a non-zero exit of "prepare begin", "start begin" or "started begin"
 *     stops the domain from starting, and libvirt puts the hook's stderr in
 *     its error: so a refusal is exactly one line on stderr, beginning
 *     "accelvirt: ", that says what to do, and nothing else is ever written
 *     to stderr;
 *   - "release end" is always called, also after a failed prepare;
 *   - only "migrate begin" and "restore begin" may print an XML on stdout;
 *   - the hook must not call back into libvirt (libvirtd waits for it and
 *     would deadlock): long work (scrubbing) goes to a detached worker.
 * libvirtd does not pass the environment the tests need: the root prefix,
 * state dir and policy dir come from ACCELVIRT_ROOT, ACCELVIRT_STATE_DIR and
 * ACCELVIRT_POLICY_DIR when set (tests run the hook through a wrapper that
 * sets them), else from the compiled defaults.
 * accelvirt-hook.c's main() hands each operation to its own file:
 * hook-prepare.c, hook-start.c, hook-release.c, hook-reconnect.c and
 * hook-remap.c ("restore begin", "migrate begin").  What more than one of
 * them uses, and what the worker (hook-worker.c) shares with the hook, is
 * in hook-common.c. */
#pragma once

#include <glib.h>

#include "domain/av-domain.h"
#include "lifecycle/av-lifecycle.h"
#include "policy/av-policy.h"
#include "pool/av-pool.h"
#include "util/av-root.h"
#include "vfio/av-kernel.h"

G_BEGIN_DECLS

/* How long a hook waits for the pool lock: hooks of other domains hold it
 * through their prepare, which binds devices and waits for udev. */
#define AV_HOOK_LOCK_TIMEOUT_MS 60000

/* Where the programs act, from the environment and the compiled defaults. */
typedef struct {
    AvRoot *root;
    const AvKernelOps *ops;      /* av_kernel_ops_for(): the real kernel on "/" */
    char *state_dir;
    char *policy_dir;
    char *worker_path;
    int lock_timeout_ms;         /* AV_HOOK_LOCK_TIMEOUT_MS; on a fake root, a test double
                                  * may shorten it (util/av-point.h) */
} AvHookConfig;

void av_hook_config_free(AvHookConfig *config);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvHookConfig, av_hook_config_free)

/* Reads the configuration: ACCELVIRT_ROOT (default "/"), ACCELVIRT_STATE_DIR
 * (default AV_STATE_DIR; required with a root other than "/", so that a fake
 * tree is never recorded in the host's state), ACCELVIRT_POLICY_DIR (default
 * AV_POLICY_DIR), ACCELVIRT_WORKER (default AV_WORKER_PATH). */
AvHookConfig *av_hook_config_new(GError **error);

/* Opens syslog ("accelvirt", LOG_PID, LOG_DAEMON) and routes every GLib
 * message there instead of stderr.  @domain_name (copied) prefixes the
 * messages once set with av_hook_log_set_domain().  When ACCELVIRT_LOG_FILE
 * is set, every message is also appended to that file (for tests). */
void av_hook_log_init(void);
void av_hook_log_set_domain(const char *domain_name);

/* Logs at the syslog @priority (LOG_ERR, LOG_WARNING, LOG_INFO). */
void av_hook_log(int priority, const char *fmt, ...) G_GNUC_PRINTF(2, 3);

/* A refusal: logs @message at LOG_ERR and writes "accelvirt: MESSAGE" as
 * one line to stderr (line breaks and control characters become spaces).
 * Returns the exit status 1. */
int av_hook_refuse(const char *message);
int av_hook_refusef(const char *fmt, ...) G_GNUC_PRINTF(1, 2);

/* Opens the pool of @config for writing (waiting up to
 * config->lock_timeout_ms for the lock), then puts right what processes
 * that died left in it (av_pool_upkeep(): prepares killed mid-way undone,
 * releases left for later carried out, devices of domains whose QEMU is
 * gone released), logging what it did; what cannot be done now is logged
 * and tried again by the next call.  Saves when that changed the pool;
 * when devices became dirty, the worker is started as the program ends
 * (av_hook_want_worker()).  Caller frees (which releases the lock).  NULL
 * with @error ("cannot open the pool: ..."). */
AvPool *av_hook_pool_open(const AvHookConfig *config, GError **error);

/* The host as far as the PCI functions @addresses (NULL-terminated) need
 * it, the mdev parents with @mdev_parents and every USB device with @usb,
 * with @pool (AV_POOL_WRITE)
 * brought up to date: only those are read when the pool, reconciled with
 * the whole host in this boot, agrees with them all (av_pool_confirm());
 * else the whole host is scanned and the pool reconciled with it.  What
 * changed is saved.  Returns a new AvHost (partial or not) or NULL with
 * @error set. */
AvHost *av_hook_scan_devices(const AvHookConfig *config, const AvPolicy *policy, AvPool *pool,
                             const char *const *addresses, gboolean mdev_parents, gboolean usb,
                             GError **error);

/* The whole host, with @pool (AV_POOL_WRITE) reconciled with it and saved
 * when that changed it.  Returns a new AvHost or NULL with @error set. */
AvHost *av_hook_scan_host(const AvHookConfig *config, const AvPolicy *policy, AvPool *pool, GError **error);

/* The host as far as @domain needs it (its PCI functions, the mdev
 * parents when it has mdevs, the USB devices when it has USB hostdevs),
 * with @pool brought up to date (av_hook_scan_devices()). */
AvHost *av_hook_scan_for(const AvHookConfig *config, const AvPolicy *policy, AvPool *pool, const AvDomain *domain,
                         GError **error);

/* Stop point: on a fake root, a test double (util/av-point.h; the test
 * builds' $ACCELVIRT_TEST_STOP=POINT) may make the program stop itself
 * (SIGSTOP) at POINT, holding what it holds (the pool lock), so that a test
 * can kill it there.  Never on the real root; a no-op in the installed
 * programs. */
void av_hook_test_stop(const AvHookConfig *config, const char *point);

/* The worker should run once this program has let the pool go: the hook's
 * main() starts it before it exits (av_hook_spawn_pending_worker()). */
void av_hook_want_worker(void);

/* Starts the worker when av_hook_want_worker() was called, logging a
 * failure.  For main(), after the operation. */
void av_hook_spawn_pending_worker(const AvHookConfig *config);

/* The owner a domain's devices get: its UUID and name, and when Nova wrote
 * it, the instance (the domain UUID), project and user.  Caller frees. */
AvOwner *av_hook_owner_new(const AvDomain *domain);

/* The owner a domain's devices are charged to: av_hook_owner_new(), less
 * the project and user of its metadata when @policy does not trust them
 * ("owner_metadata": false), with the project and user the operator pinned
 * in @pool's placement record of the domain (`accelvirt define
 * --project`) in their place.  NULL with AV_ERROR_UNSAFE when the
 * domain's metadata names another project or user than the pinned ones:
 * a domain does not charge another project.  Caller frees. */
AvOwner *av_hook_owner_for(const AvDomain *domain, const AvPolicy *policy, const AvPool *pool, GError **error);


/* "domain 'vm1' (UUID), Nova project P, user U" or "nobody".  Caller frees. */
char *av_hook_describe_owner(const AvOwner *owner);

/* "0000:17:00.0" or "mdev 6f2a... on 0000:17:00.0".  Caller frees. */
char *av_hook_describe_device(const AvPoolDevice *dev);

/* TRUE when @dev may go to @domain: free, or claimed for this very domain.
 * Otherwise sets @error to one sentence naming the device, its state and its
 * owner, and what to do. */
gboolean av_hook_check_available(const AvPoolDevice *dev, const AvDomain *domain, GError **error);

/* Runs the driver command of @point (the hook's: on_prepare, and the
 * on_release that undoes it when the prepare is refused)
 * of @profile for the device @address (pool identity @identity)
 * of the domain @domain_name (@domain_uuid), and journals the run in
 * @pool as event "driver" (av_driver_run()'s report, with the identity
 * and the domain).  libvirt waits for the hook: a command whose timeout is
 * above AV_DRIVER_HOOK_TIMEOUT_MAX is not run (the policy's parser refuses
 * it already) and fails.  TRUE at once when the profile has no command
 * there.  Borrows everything. */
gboolean av_hook_driver_run(const AvHookConfig *config, AvPool *pool, const AvProfile *profile, const char *address,
                            const char *identity, const char *domain_name, const char *domain_uuid,
                            AvDriverPoint point, GError **error);

/* One hostdev of the domain that accelvirt manages. */
typedef struct {
    const AvHostdev *hostdev;
    const AvProfile *profile;    /* borrowed from the policy */
    AvPoolDevice *pooldev;       /* borrowed from the pool; NULL for an mdev not pooled yet */
    const AvPciDevice *pci;      /* PCI: the device; mdev: its parent when it exists and is a PCI
                                  * device; borrowed from the host */
    char *identity;              /* mdev: "mdev:UUID" */
    gboolean mdev_exists;
    char *mdev_parent;           /* mdev: the name (/sys/class/mdev_bus) of the parent it lives on, or
                                  * of the one chosen at prepare: a PCI address, or such as "mtty" */
    int mdev_node;               /* mdev: that parent's NUMA node, -1 unknown */
    AvBindingMdev *mdev;         /* mdev: the one this prepare creates, or NULL; borrowed from its
                                  * binding */
    gboolean through_group;      /* PCI: the hostdev names a function no profile pools, which
                                  * shares its IOMMU group with @pooldev: the domain gets the
                                  * group as a whole, or nothing; @pci is @pooldev's function */
} AvManaged;

/* Finds the hostdevs of @domain accelvirt manages, against a reconciled
 * @pool: PCI hostdevs that the pool holds (a profile matches them, or they
 * are still held), PCI hostdevs of a function the pool does not hold but
 * whose IOMMU group it does (the group is owned as a
 * whole, so the domain claims its pool devices, or is refused), and mdev
 * hostdevs that the pool holds, that exist on a parent an mdev profile
 * matches, or that av:placement names with a profile.  Everything else is
 * never touched.  Fails on a hostdev accelvirt cannot hand over safely (a
 * PCI hostdev of an mdev parent or of its group, a placement naming an
 * unknown profile). */
gboolean av_hook_resolve(const AvHookConfig *config, const AvHost *host, const AvPolicy *policy, AvPool *pool, const AvDomain *domain,
                         GPtrArray **ret_managed, GError **error);

/* The operations.  Each returns the exit status; refusals through
 * av_hook_refuse(). */
int av_hook_prepare(const AvHookConfig *config, AvDomain *domain);
int av_hook_start(const AvHookConfig *config, const AvDomain *domain);
/* "release end" of the domain @domain_uuid named @domain_name; with
 * @domain_uuid NULL (its XML did not parse), by the name libvirt gives. */
int av_hook_release(const AvHookConfig *config, const char *domain_uuid, const char *domain_name);
int av_hook_reconnect(const AvHookConfig *config, const AvDomain *domain);

/* "restore begin" and "migrate begin" of a domain accelvirt placed (@xml,
 * @len: its XML as libvirt gave it, @op: "restore" or "migrate"): prints
 * on stdout the XML unchanged when every placed device is on this host and
 * free for it, else remapped to the same cards at their new bus addresses
 * or to a new placement of its requests (host-side facts only); refuses
 * when the requests cannot be placed. */
int av_hook_remap(const AvHookConfig *config, const AvDomain *domain, const char *xml, gsize len, const char *op);

/* Writes @len bytes of @data to stdout (libvirt reads the XML there). */
gboolean av_hook_write_stdout(const char *data, gsize len, GError **error);

/* Starts the scrub worker at config->worker_path, detached: double fork,
 * setsid, chdir /, every descriptor closed, stdin/stdout/stderr on
 * /dev/null, the environment passed through.  Returns once the middle
 * process has exited (at once). */
gboolean av_hook_spawn_worker(const AvHookConfig *config, GError **error);

/* The worker: scrubs every dirty device of the pool (and every device left
 * "scrubbing" by a worker that died), one at a time, until none is left.
 * Returns the exit status. */
int av_worker_run(const AvHookConfig *config);

G_END_DECLS

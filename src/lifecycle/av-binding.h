/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: what handing devices to a domain changes on the host, written
 * once for the hook's prepare (hooks/hook-prepare.c) and `accelvirt attach`
 * (src/cli/cli-attach.c), as libvirt's domain start and hot-plug both call
 * qemuHostdevPreparePCIDevices().
 *
 * A binding is planned under the pool's lock, before anything is touched:
 * the endpoints of the devices' IOMMU groups that go to a vfio driver
 * (vfio-pci or the variant a profile names, chosen now: a variant the
 * kernel offers and has not loaded refuses here), the NVIDIA vGPUs to make
 * on VFs of a "vgpu_type" profile, the mdevs to create, and the groups
 * whose /dev/vfio node must appear.  The caller records the plan in its
 * write-ahead record (av_binding_record()) and saves the pool; then
 * av_binding_apply() does it, in that order: binds, vGPUs, group nodes,
 * mdevs.  A failure is undone newest first (av_binding_undo()), and a
 * process killed half-way is undone from the record by the next holder of
 * the lock (av_pool_intents_undo()).  On success av_binding_commit() writes
 * into the pool where each endpoint goes back: a pool device's original
 * driver, a companion's (an endpoint no profile pools, such as a GPU's
 * audio function) on the pool device its caller named for the group (the
 * hook: the group's first pool device; attach: the device it placed). */
#pragma once

#include <glib.h>

#include "pci/av-pci.h"
#include "policy/av-policy.h"
#include "pool/av-pool.h"
#include "util/av-root.h"
#include "vfio/av-kernel.h"
#include "vfio/av-vfio.h"

G_BEGIN_DECLS

/* How long a bound group's /dev/vfio node may take to appear (udev may be
 * slow): av_binding_apply() waits this long for each. */
#define AV_BINDING_VFIO_NODE_TIMEOUT_MS 10000

/* Where a binding's notes go: @priority is a syslog(3) priority.  Every
 * kernel change is noted (LOG_INFO), a function kept on the vfio driver it
 * is on although its profile names another (LOG_WARNING), and each failure
 * of an undo (LOG_ERR, also in the error the undo returns). */
typedef void (*AvBindingNoteFunc)(gpointer data, int priority, const char *message);

/* An endpoint that goes to a vfio driver. */
typedef struct {
    char *address;
    char *original_driver;       /* planned: the driver the scan found, or NULL: none; once bound, the
                                  * driver av_vfio_bind() took it from */
    char *driver;                /* the vfio driver it goes to (av_vfio_choose_driver()) */
    char *first;                 /* the identity of the pool device the caller names for its group, where
                                  * it is recorded as a companion when no profile pools it; or NULL */
    int group;
    gboolean bound;
} AvBindingBind;

/* A VF of a "vgpu_type" profile: never bound (it stays on NVIDIA's driver,
 * its VFIO driver), its vGPU made after the binds (vfio/av-vgpu.h). */
typedef struct {
    char *address;
    char *type;                  /* the profile's "vgpu_type" */
    int group;
    gboolean made;               /* set before the write: one whose read-back fails is undone too */
} AvBindingVgpu;

/* An mdev to create on the parent chosen at the plan. */
typedef struct {
    char *uuid;
    char *parent;                /* its name in /sys/class/mdev_bus */
    char *type;
    char *profile;               /* the profile's name */
    char *identity;              /* "mdev:UUID" */
    int node;                    /* the parent's NUMA node, -1 unknown */
    gboolean created;
} AvBindingMdev;

typedef struct {
    const AvRoot *root;          /* borrowed */
    const AvKernelOps *ops;      /* borrowed */
    AvBindingNoteFunc note;
    gpointer note_data;
    const char *stop_bound_first; /* a test's stop point after the first bind (av_point_stop()), or NULL */
    GPtrArray *binds;            /* AvBindingBind*, in bind order */
    GPtrArray *vgpus;            /* AvBindingVgpu* */
    GPtrArray *mdevs;            /* AvBindingMdev* */
    GArray *groups;              /* int: the IOMMU groups whose /dev/vfio node apply waits for */
    AvVfioAliases *aliases;      /* modules.alias's vfio_pci: lines, read at the first endpoint planned */
    gboolean aliases_read;
} AvBinding;

/* An empty binding on @root through @ops (both borrowed for its life);
 * notes go to @note (NULL: nowhere). */
AvBinding *av_binding_new(const AvRoot *root, const AvKernelOps *ops, AvBindingNoteFunc note, gpointer note_data);
void av_binding_free(AvBinding *b);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvBinding, av_binding_free)

/* Plans the endpoint @address of IOMMU group @group (@first: the identity
 * of the pool device its companion record goes on, or NULL).  A function already on a
 * vfio driver stays there (an unbind blocks while a process holds it:
 * av_vfio_bind()), noted when its profile names another; a VF of a
 * "vgpu_type" profile stays on NVIDIA's driver, its vGPU planned with
 * @make_vgpu.  FALSE when the vfio driver it should go to cannot be used
 * (av_vfio_choose_driver()). */
gboolean av_binding_plan_endpoint(AvBinding *b, const AvHost *host, const AvPolicy *policy, const char *address,
                                  int group, const char *first, gboolean make_vgpu, GError **error);
/* Plans the vGPU of type @type on the VF @address (IOMMU group @group). */
void av_binding_add_vgpu(AvBinding *b, const char *address, const char *type, int group);
/* Plans the mdev @uuid of @type on @parent (NUMA node @node) for the
 * profile @profile.  Returns it, borrowed from @b. */
AvBindingMdev *av_binding_add_mdev(AvBinding *b, const char *uuid, const char *parent, const char *type,
                                   const char *profile, int node);
/* Whether @group is one av_binding_wait_group() named. */
gboolean av_binding_has_group(const AvBinding *b, int group);
/* Names @group as one whose /dev/vfio node apply waits for (once). */
void av_binding_wait_group(AvBinding *b, int group);

/* Adds the plan to the write-ahead record @intent: each bind with the
 * driver it was found on, each vGPU, each mdev.  The claims are the
 * caller's. */
void av_binding_record(const AvBinding *b, AvIntent *intent);

/* Binds the planned endpoints, makes the vGPUs, waits (up to
 * AV_BINDING_VFIO_NODE_TIMEOUT_MS each) for the nodes of the groups named,
 * creates the mdevs.  FALSE at the
 * first failure, what was done so far marked (bound, made, created) for
 * av_binding_undo(). */
gboolean av_binding_apply(AvBinding *b, GError **error);

/* Undoes what apply did, newest first: removes the mdevs it created,
 * destroys the vGPUs it made, gives the endpoints it bound back to their
 * drivers.  Tries everything; FALSE with the first failure.  What it undid
 * is marked undone, so a second call redoes only what failed. */
gboolean av_binding_undo(AvBinding *b, GError **error);
/* The same for the vGPUs and binds of IOMMU group @group only (a group
 * no endpoint was planned in, -1 among them, undoes nothing). */
gboolean av_binding_undo_group(AvBinding *b, int group, GError **error);
/* The same for the mdev of pool identity @identity only. */
gboolean av_binding_undo_mdev(AvBinding *b, const char *identity, GError **error);

/* After a successful apply, records in @pool where each bound endpoint goes
 * back: a pool device found on a host driver gets it as its original driver
 * (found on a vfio driver or on none, the pool's record, made while it was
 * free, is trusted instead); an endpoint no profile pools becomes a
 * companion of the pool device named @first at its plan.  The caller
 * saves. */
void av_binding_commit(const AvBinding *b, AvPool *pool);
/* Drops from @dev the companions of this binding that went back to their
 * drivers (av_binding_undo_group()). */
void av_binding_drop_companions(const AvBinding *b, AvPoolDevice *dev);

G_END_DECLS

/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: a PCI function's own health, as the kernel reports it
 *: its AER counters and its link.
 *
 * Kernel interfaces (Documentation/ABI/testing/sysfs-bus-pci-devices-aer,
 * sysfs-bus-pci): aer_dev_correctable, aer_dev_nonfatal and aer_dev_fatal
 * hold one "NAME COUNT" line per error type and a "TOTAL_ERR_COR",
 * "TOTAL_ERR_NONFATAL" or "TOTAL_ERR_FATAL" line; counts since the kernel
 * booted (or the device was hot-added).  current_link_speed and
 * max_link_speed read "8.0 GT/s PCIe" (or "Unknown"), current_link_width
 * and max_link_width a lane count.  A VF has no link of its own: its PF's
 * is read, and so are its PF's AER counters when the VF has none (a VF
 * without an AER capability reports its errors through its PF).  Every file is read under the AvRoot; a file that is absent is
 * "not reported" (no AER capability, no PCIe link), never an error; a file
 * that is present but does not parse is an error naming it. */
#pragma once

#include <glib.h>

#include "util/av-root.h"

G_BEGIN_DECLS

typedef struct {
    gboolean aer;                /* the aer_dev_* files exist (the device's, or its PF's) */
    char *aer_from;              /* the address whose AER counters were read (a VF's PF), or NULL */
    guint64 correctable;         /* TOTAL_ERR_COR */
    guint64 nonfatal;            /* TOTAL_ERR_NONFATAL */
    guint64 fatal;               /* TOTAL_ERR_FATAL */
    gboolean link;               /* the link files exist and give a speed and a width */
    double speed_gts;            /* current_link_speed in GT/s; 0 unknown */
    double max_speed_gts;        /* max_link_speed in GT/s; 0 unknown */
    guint width;                 /* current_link_width; 0 unknown (link down) */
    guint max_width;             /* max_link_width; 0 unknown */
    char *link_from;             /* the address whose link was read (a VF's PF), or NULL */
} AvPciHealth;

void av_pci_health_clear(AvPciHealth *health);

/* Reads the health of the PCI function @address (such as "0000:17:00.0")
 * into @ret (cleared first).  FALSE with @error when the device does not
 * exist or a file present does not parse. */
gboolean av_pci_health_read(const AvRoot *root, const char *address, AvPciHealth *ret, GError **error);

/* What is wrong with @health's link, in doubt wrong: "link down" (width
 * 0), with @speed_too "speed unknown" (current_link_speed "Unknown"),
 * "a degraded link" (narrower than its maximum, or with @speed_too slower),
 * or NULL when it is fine or not reported at all.  Static strings. */
const char *av_pci_health_link_problem(const AvPciHealth *health, gboolean speed_too);

/* TRUE when av_pci_health_link_problem() finds one. */
gboolean av_pci_health_link_degraded(const AvPciHealth *health, gboolean speed_too);

/* @health's link as "x8 of x16 at 16.0 of 16.0 GT/s" (a speed 0 shows as
 * "unknown").  Caller frees. */
char *av_pci_health_link_describe(const AvPciHealth *health);

G_END_DECLS

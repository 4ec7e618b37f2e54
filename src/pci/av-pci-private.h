/* accelvirt: internals shared by the files of src/pci. */
#pragma once

#include "av-pci.h"

G_BEGIN_DECLS

/* Scans /sys/bus/usb/devices under @root into AvUsbDevice* (sorted). */
gboolean av_usb_scan(const AvRoot *root, GPtrArray *ret_usb, GError **error);

/* Scans /sys/devices/system/node under @root into AvNumaNode* (sorted). */
gboolean av_numa_scan(const AvRoot *root, GPtrArray *ret_nodes, GError **error);

G_END_DECLS

/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: making and destroying an NVIDIA vGPU on an SR-IOV VF
 * (nvidia/current_vgpu_type; what is read is in src/pci/av-pci-vgpu.c). */
#ifndef AV_VGPU_H
#define AV_VGPU_H

#include <glib.h>

#include "util/av-root.h"
#include "vfio/av-kernel.h"

G_BEGIN_DECLS

/* Makes a vGPU of the type @spec (a profile's "vgpu_type": ID, full or
 * short name) on the VF @address: refuses, in one sentence and writing
 * nothing, a VF without NVIDIA's vGPU interface, one that has a vGPU
 * already, and a type its creatable_vgpu_types does not list now (naming
 * what it lists: a GPU serving one type at a time lists only that one);
 * then writes the type's ID and reads it back.  Stores the ID and the
 * type's name (caller frees) on success. */
gboolean av_vgpu_set_type(const AvRoot *root, const AvKernelOps *ops, const char *address, const char *spec,
                          guint *ret_id, char **ret_name, GError **error);

/* Destroys the vGPU of the VF @address: writes 0 to its current_vgpu_type
 * and reads 0 back (nothing written when it reads 0 already).  Stores the
 * type it had (0 for none) in *ret_was (may be NULL). */
gboolean av_vgpu_clear_type(const AvRoot *root, const AvKernelOps *ops, const char *address, guint *ret_was,
                            GError **error);

G_END_DECLS

#endif /* AV_VGPU_H */

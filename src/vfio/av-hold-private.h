/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: what the records of the holds (av-hold-record.c) give the
 * taking and dropping of a hold (av-hold.c), and nothing outside src/vfio.
 * Each is described where it is defined. */
#pragma once

#include "av-hold.h"

G_BEGIN_DECLS

char *av_hold_dir(const char *state_dir);
char *av_hold_path(const char *state_dir, int group);
int av_hold_proc_stat(const AvRoot *root, int pid, guint64 *ret_start, char **ret_comm);
gboolean av_hold_proc_is_holder(const AvRoot *root, int pid, guint64 start_time);
gboolean av_hold_process_matches(const AvHold *hold);
gboolean av_hold_is_live(const AvHold *hold, const char *boot_id);
gboolean av_hold_is_legacy_live(const AvHold *hold);
gboolean av_hold_read(const char *state_dir, int group, AvHold **ret_hold, GError **error);
char *av_hold_boot_id_or_null(const AvRoot *root);

G_END_DECLS

/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: programming a device with a bitstream of the library, and a
 * profile's driver commands (accelvirt-policy(5), PROGRAMMING and
 * DRIVER COMMANDS).
 *
 * Both run an operator's program (av_command_run()) whose argv template the
 * policy gives, after the same trust checks as a scrub's "command" step
 * (av_policy_check_scrub_argv(), at policy load and again here).  Nothing
 * here takes the pool's lock or writes the pool: callers record what was
 * done (av_pool_set_programmed(), av_pool_journal_append()). */
#pragma once

#include <glib.h>
#include <jansson.h>

#include "policy/av-policy.h"
#include "fpga/av-bitstream.h"
#include "pool/av-pool.h"
#include "util/av-root.h"

G_BEGIN_DECLS

/* The device a program or driver command is run for. */
typedef struct {
    const AvRoot *root;          /* where /sys is (the card and region are read there) */
    const char *state_dir;       /* the library's state dir */
    const AvProfile *profile;
    const char *address;         /* PCI address (an mdev's parent, a USB bus path for drivers) */
    const char *identity;        /* pool identity, or NULL */
    const char *domain_name;     /* the domain it is for (or had it), or NULL */
    const char *domain_uuid;     /* or NULL */
    int group_fd;                /* >= 0: the device's VFIO group file, passed as fd 3
                                  * (ACCELVIRT_VFIO_GROUP_FD=3); -1 none */
    guint timeout_max_s;         /* > 0: a driver command runs at most this long, whatever its own
                                  * timeout (what is left of the hook's budget); 0: its own */
} AvProgramTarget;

/* The card and region of the PCI device @address under @root, as the
 * placeholders {card} and {region} give them: a VF's PF and its index on
 * it (virtfnN); any other function, function 0 of its slot and its own
 * function number.  Caller frees both.  FALSE when @address is not a PCI
 * address. */
gboolean av_program_card_region(const AvRoot *root, const char *address, char **ret_card, char **ret_region,
                                GError **error);

/* Programs @target's device with @bitstream (taken from the library in
 * target->state_dir: av_bitstream_check() first) by the profile's
 * "program": its argv, then its "verify" argv when it has one, each
 * expanded (av_profile_argv_expand()), checked, and run with the program's
 * timeout.  The environment (both): ACCELVIRT_POINT ("program" or
 * "verify"), ACCELVIRT_DEVICE, ACCELVIRT_CARD, ACCELVIRT_REGION,
 * ACCELVIRT_IDENTITY, ACCELVIRT_PROFILE, ACCELVIRT_BITSTREAM (the file),
 * ACCELVIRT_BITSTREAM_SHA256, ACCELVIRT_BITSTREAM_NAME,
 * ACCELVIRT_FUNCTION_ID, ACCELVIRT_DOMAIN_NAME, ACCELVIRT_DOMAIN_UUID (set
 * only when known), ACCELVIRT_VFIO_GROUP_FD=3 with a group file.
 * @bitstream must fit the device (av_bitstream_fits(), checked here:
 * AV_ERROR_INVALID_INPUT otherwise).  Returns the record to keep
 * (av_pool_set_programmed(); by @by, "verified" saying which command
 * confirmed it), or NULL with @error.  *ret_report (may be NULL; caller
 * frees) gets {"point": "program", "address", "sha256", "name", "argv",
 * "ok", "seconds", "output", "verify": {...} or null, "error"} either
 * way, for the journal. */
AvProgrammed *av_program_run(const AvProgramTarget *target, const AvBitstream *bitstream, const char *by,
                             json_t **ret_report, GError **error);

/* The argv that av_program_run() would run for @target and @bitstream (the
 * profile's "program" template expanded), without running anything: two
 * devices whose argv are the same (the functions of one card, a template
 * naming only {card}) are programmed once.  A new vector (g_strfreev()), or
 * NULL with @error. */
char **av_program_argv(const AvProgramTarget *target, const AvBitstream *bitstream, GError **error);

/* Runs the profile's driver command of @point for @target, when it has
 * one (TRUE at once otherwise, *ret_report NULL).  @bitstream (may be
 * NULL) fills the bitstream's variables.  The environment is
 * av_program_run()'s with ACCELVIRT_POINT the point's name.  Returns FALSE
 * with @error (naming the point, the program and how it ended) when it
 * fails or times out.  *ret_report (may be NULL; caller frees) gets
 * {"point", "address", "profile", "argv", "ok", "seconds", "output",
 * "error"} when a command ran. */
gboolean av_driver_run(const AvProgramTarget *target, AvDriverPoint point, const AvBitstream *bitstream,
                       json_t **ret_report, GError **error);

/* Journals what a program or driver command did (@report: av_program_run()'s
 * or av_driver_run()'s, borrowed) as one @event entry ("program" or
 * "driver") of @pool, which the caller holds for writing: the report's own
 * fields, then the device's @identity, the domain it ran for (@domain_name,
 * @domain_uuid; either may be NULL, then left out) and @by, what ran it
 * ("hook", "scrub", "operator", "attach", "assign").  One shape wherever a
 * command runs: the hook, the worker and every CLI command journal it
 * here. */
gboolean av_program_journal(AvPool *pool, const char *event, const json_t *report, const char *identity,
                            const char *domain_name, const char *domain_uuid, const char *by, GError **error);

G_END_DECLS

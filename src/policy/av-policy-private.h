/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: what the files of src/policy share, and nothing outside it:
 * the parse's state (av-policy-parse.c), the checks on what it parsed
 * (av-policy-validate.c), the trust of the files that run as root
 * (av-policy-trust.c), the lookup of a profile by name (av-policy-match.c),
 * and at the bottom the names of the enums, the parse's error reporting,
 * ownership and the expansion of an argv template (av-policy-types.c).
 * Not installed, not for other layers: av-policy.h is the API. */
#pragma once

#include "av-policy.h"

/* ---- the parse (av-policy-parse.c) ---- */

typedef struct {
    const char *filename;
    const char *data;
    gsize len;
    const char *label;        /* "profile 'gpu'" or "profiles[3]", or NULL at the top level */
    gboolean check_files;     /* check the programs and templates that scrub steps name */
} PolicyParse;

gboolean type_fail(const PolicyParse *pp, const char *path, const char *display, const char *expected,
                   json_t *v, GError **error);
gboolean policy_add_data(AvPolicy *policy, const char *filename, const char *data, gsize len, gboolean check_files,
                         GError **error);

/* ---- the top-level "limits" (av-policy-limits.c) ---- */

/* The "limits" of the document @root into *ret_limits (a new array of
 * AvLimit*, empty when absent); each "profile" must be one of @policy's or
 * of @added (this file's).  FALSE at the first mistake. */
gboolean policy_parse_limits(const PolicyParse *pp, const AvPolicy *policy, GPtrArray *added, json_t *root,
                             GPtrArray **ret_limits, GError **error);

/* ---- the checks on a parsed profile (av-policy-validate.c) ---- */

gboolean nova_name_valid(const char *s);
gboolean nova_hostname_valid(const char *s);
gboolean scrub_method_fits(const PolicyParse *pp, const AvProfile *profile, AvScrubMethod method,
                           const char *method_name, const char *mpath, GError **error);
gboolean check_program_driver(const PolicyParse *pp, const AvProfile *profile, json_t *obj, const char *base,
                              GError **error);

/* ---- the files that policies name (av-policy-trust.c) ---- */

char *policy_read_trusted(const char *path, const char *what, gsize max, gsize *ret_len, GError **error);
gboolean check_argv_trusted(const json_t *argv, gboolean is_template, const char *what, guint *ret_bad,
                            GError **error);

/* ---- matching (av-policy-match.c) ---- */

const AvProfile *find_profile(GPtrArray *profiles, const char *name);

/* ---- the bottom: names, error reporting, ownership, argv templates (av-policy-types.c) ---- */

extern const char *const attach_names[];
extern const int attach_values[];
extern const char *const numa_names[];
extern const int numa_values[];
extern const char *const allocation_names[];
extern const int allocation_values[];
extern const char *const granularity_names[];
extern const int granularity_values[];
extern const char *const restore_names[];
extern const int restore_values[];
extern const char *const scrub_names[];
extern const int scrub_values[];
const char *enum_name(const char *const *names, const int *values, int value);

gboolean policy_fail(const PolicyParse *pp, const char *path, gboolean at_key, GError **error, const char *fmt, ...)
    G_GNUC_PRINTF(5, 6);
char *path_join(const char *base, const char *key);

/* FALSE at the first key of @obj (at the JSON path @path) not in
 * @allowed: "unknown key 'K'WHERE; expected one of A, B". */
gboolean check_keys(const PolicyParse *pp, json_t *obj, const char *path, const char *where,
                    const char *const *allowed, GError **error);

void av_scrub_step_free(AvScrubStep *step);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvScrubStep, av_scrub_step_free)
void av_companion_match_free(AvCompanionMatch *c);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvCompanionMatch, av_companion_match_free)
AvProfile *av_profile_new(void);

gboolean av_argv_expand_one(const char *text, const AvArgvValues *values, GString *out, GError **error);

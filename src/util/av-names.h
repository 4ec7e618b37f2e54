/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: strict formats of names that may reach a path or a log. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* TRUE when @uuid is a canonical lower-case UUID (8-4-4-4-12 hex digits), the
 * only form accepted before a path is built from it.  NULL is FALSE. */
gboolean av_uuid_is_valid(const char *uuid);

/* TRUE when @name is 1 to 64 characters of [A-Za-z0-9_.-] and of @extra
 * (such as ":"; NULL or "" for none), and neither "." nor "..": a name
 * that may become one path component.  NULL is FALSE. */
gboolean av_name_is_strict(const char *name, const char *extra);

/* TRUE when @id may be an OpenStack (Keystone) project or user id: 1 to 64
 * of [A-Za-z0-9_.@-], beginning with a letter or digit (32 hex digits in
 * practice).  NULL is FALSE. */
gboolean av_openstack_id_is_valid(const char *id);

/* TRUE when @type is an mdev type id such as "nvidia-35" or "mtty-2":
 * [A-Za-z0-9_.-], 1 to 64 characters, neither "." nor "..".  The only form
 * accepted before a path is built. */
gboolean av_mdev_type_id_is_valid(const char *type);

/* TRUE when @name is a network interface name accelvirt accepts: 1 to
 * IFNAMSIZ - 1 (15) bytes of ASCII letters, digits, '-', '_' and '.', not
 * "." or "..".  The kernel allows more (dev_valid_name(): anything but '/',
 * ':' and white space); the names go into domain XML, logs and programs'
 * environments, so the rest is refused. */
#define AV_NETDEV_NAME_MAX 16   /* IFNAMSIZ, the NUL included */
gboolean av_netdev_name_is_valid(const char *name);

/* TRUE when the kernel may hold an interface named @name (dev_valid_name():
 * 1 to 15 bytes, not "." or "..", no '/', ':' or white space).  A domain's
 * direct interface may name a host NIC so (accelvirt passes it through when
 * it is no pool card's); accelvirt itself only ever writes names that
 * av_netdev_name_is_valid() accepts. */
gboolean av_netdev_name_kernel_valid(const char *name);

/* TRUE when @driver is a PCI driver name such as "nvidia" or
 * "snd_hda_intel" (same rule as av_mdev_type_id_is_valid()). */
gboolean av_driver_name_is_valid(const char *driver);

/* The length of a scrub token (see av-pool.h): 128 random bits as hex. */
#define AV_SCRUB_TOKEN_LEN 32

/* TRUE when @token is AV_SCRUB_TOKEN_LEN lower-case hex digits.  NULL is
 * FALSE. */
gboolean av_scrub_token_is_valid(const char *token);

/* A new scrub token: AV_SCRUB_TOKEN_LEN lower-case hex digits from the
 * kernel's random source (getrandom(2)).  Caller frees.  NULL with AV_ERROR_IO
 * when no random bytes could be had. */
char *av_scrub_token_random(GError **error);

/* 2 * @n_bytes lower-case hex digits of @n_bytes random bytes from the
 * kernel's random source (getrandom(2)), for names nobody may guess (@what
 * says what for, in the error).  Caller frees.  NULL with AV_ERROR_IO when
 * no random bytes could be had. */
char *av_random_hex(gsize n_bytes, const char *what, GError **error);

/* The longest duration av_duration_parse() accepts: 10 years (3650 days). */
#define AV_DURATION_MAX_S (3650ull * 86400ull)

/* Parses a duration as policies and options write it: a positive whole
 * number followed by one unit, "s" (seconds), "m" (minutes), "h" (hours)
 * or "d" (days), such as "90m", "72h", "30d", "3600s", or a bare number
 * of seconds ("3600").  No sign, no space, no fraction, no zero; at most
 * AV_DURATION_MAX_S.  Sets *@ret_seconds and returns TRUE, or returns
 * FALSE and leaves it alone.  NULL is FALSE. */
gboolean av_duration_parse(const char *text, guint64 *ret_seconds);

/* The names of the FPGA image library (fpga/av-bitstream.h), checked
 * wherever they are read: policy, pool records, domain metadata. */
#define AV_BITSTREAM_FUNCTION_ID_MAX 128

/* TRUE when @s is 64 lower-case hex digits (a SHA-256). */
gboolean av_bitstream_sha256_is_valid(const char *s);

/* TRUE when @ref can name a bitstream: a name ([a-z0-9][a-z0-9._-]{0,62})
 * or 64 lower-case hex digits (a SHA-256). */
gboolean av_bitstream_ref_is_valid(const char *ref);

/* TRUE when @id is a function id: 1 to 128 bytes of [A-Za-z0-9._:-]. */
gboolean av_bitstream_function_id_is_valid(const char *id);

/* TRUE when @name is a valid bitstream name. */
gboolean av_bitstream_name_is_valid(const char *name);

G_END_DECLS

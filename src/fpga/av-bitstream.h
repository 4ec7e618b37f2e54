/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the bitstream library.
 *
 * FPGA images that profiles program into their devices ("program" in
 * accelvirt-policy(5)), kept content-addressed in the state dir:
 *
 *     STATE/bitstreams/            mode 0700
 *         index.json               {"bitstreams": [{"sha256", "name", "size", "added",
 *                                   "compatible": [...], "function_id", "description",
 *                                   "source"}]}, written atomically
 *         SHA256.bit               the image, mode 0600, its name its hex SHA-256
 *
 * Only root adds (`accelvirt bitstream add FILE`, from a trusted file:
 * av_file_check_trusted()); nothing is fetched from the network.  Callers
 * hold the pool's lock (AV_POOL_WRITE) around every change; readers may
 * read without it (the index is replaced atomically). */
#pragma once

#include <glib.h>
#include <jansson.h>

#include "policy/av-policy.h"
#include "pool/av-pool.h"

G_BEGIN_DECLS

#define AV_BITSTREAM_DIR "bitstreams"
/* The largest image accepted (the largest FPGA images are a few hundred MiB). */
#define AV_BITSTREAM_SIZE_MAX (4ull * 1024 * 1024 * 1024)

typedef struct {
    char *sha256;                /* 64 lower-case hex digits */
    char *name;                  /* [a-z0-9][a-z0-9._-]{0,62}, unique in the library */
    guint64 size;                /* bytes */
    gint64 added;                /* Unix seconds */
    GPtrArray *compatible;       /* char*: what it fits, each "VVVV:DDDD" (PCI vendor and device, lower-case
                                  * hex as lspci -n writes them) or "profile:NAME"; empty = anything the
                                  * profile programs */
    char *function_id;           /* the accelerated function it provides (free text, at most 128 bytes of
                                  * [A-Za-z0-9._:-]), or NULL */
    char *description;           /* or NULL */
    char *source;                /* the path it was added from (for people) */
} AvBitstream;

void av_bitstream_free(AvBitstream *bitstream);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvBitstream, av_bitstream_free)

/* TRUE when @entry is a valid "compatible" entry ("10ee:5004",
 * "0x10ee:0x5004" is normalised by av_bitstream_compatible_normalize(),
 * "profile:fpga-u250"). */
gboolean av_bitstream_compatible_is_valid(const char *entry);

/* @entry in its stored form ("10ee:5004", "profile:NAME"), or NULL when it
 * is not valid.  Caller frees. */
char *av_bitstream_compatible_normalize(const char *entry);

/* Every bitstream of the library in @state_dir (AvBitstream*, name order;
 * empty without a library).  FALSE with AV_ERROR_CORRUPT_STATE when the
 * index is bad, AV_ERROR_IO. */
gboolean av_bitstream_list(const char *state_dir, GPtrArray **ret_list, GError **error);

/* The bitstream @ref names (a name, or a SHA-256 in the library), or NULL
 * with AV_ERROR_NOT_FOUND ("no bitstream 'X' in the library; 'accelvirt
 * bitstream list' shows them") or an error of av_bitstream_list(). */
AvBitstream *av_bitstream_lookup(const char *state_dir, const char *ref, GError **error);

/* The path of @bitstream's file in @state_dir.  Caller frees. */
char *av_bitstream_path(const char *state_dir, const AvBitstream *bitstream);

/* Checks the file of @bitstream before a program uses it: a regular file
 * of the recorded size, owned by the state dir's owner, not writable by
 * others, whose SHA-256 is still its name.  FALSE with AV_ERROR_UNSAFE or
 * AV_ERROR_CORRUPT_STATE (one sentence naming it) otherwise. */
gboolean av_bitstream_check(const char *state_dir, const AvBitstream *bitstream, GError **error);

/* Adds the file @path (trusted: av_file_check_trusted(); a regular file of
 * 1 to AV_BITSTREAM_SIZE_MAX bytes) to the library as @name, copying it in
 * (hashed while copied; written atomically).  @compatible (may be NULL)
 * entries are normalised.  The same content under the same name is no
 * change (returns the entry); the same content under another name, or the
 * name taken by other content: AV_ERROR_IN_USE.  Returns the new entry
 * (caller frees), or NULL with @error. */
AvBitstream *av_bitstream_add(const char *state_dir, const char *path, const char *name,
                              const char *const *compatible, const char *function_id, const char *description,
                              GError **error);

/* Removes the bitstream @ref names (its file and its index entry). */
gboolean av_bitstream_remove(const char *state_dir, const char *ref, GError **error);

/* TRUE when @bitstream may be programmed into a device of the profile
 * @profile with PCI ids @vendor:@device: its compatible list is empty, or
 * names the profile or the ids. */
gboolean av_bitstream_fits(const AvBitstream *bitstream, const char *profile, guint16 vendor, guint16 device);

/* Why @bitstream may not leave the library now, one sentence naming who
 * needs it, or NULL when nothing does: a device of @pool recorded holding
 * it (AvPoolDevice->programmed), a placement record of @pool with an item
 * that must hold it (AvPlacedItem->bitstream), a profile of @policy whose
 * program's base names it (by name or sha256).  @pool and @policy are
 * borrowed, either may be NULL.  Caller frees. */
char *av_bitstream_in_use(const AvPool *pool, const AvPolicy *policy, const AvBitstream *bitstream);

/* @bitstream as `accelvirt bitstream list --json` writes it (and the
 * index keeps it).  Caller owns the reference. */
json_t *av_bitstream_to_json(const AvBitstream *bitstream);

G_END_DECLS

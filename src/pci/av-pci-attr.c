/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the formats and the sysfs attribute readers that every scanner
 * of src/pci shares (PCI, USB, NUMA, vGPU, variants): cpulists, PCI
 * addresses, one attribute of a sysfs directory.  It calls no scanner, so
 * the scanners stand on it and av-pci.c calls theirs without a circle. */
#include "config.h"

#include "av-pci-private.h"

#include <errno.h>
#include <string.h>

#include "util/av-error.h"

/* --- small parsers --- */

static gint
av_guint_cmp(gconstpointer a, gconstpointer b)
{
    guint x = *(const guint *)a, y = *(const guint *)b;

    return x < y ? -1 : x > y;
}

/* The largest CPU number accepted in a cpulist: far above any real host,
 * low enough that a hostile "0-4000000000" cannot exhaust memory. */
#define AV_CPULIST_MAX_CPU 65535u
/* And the most numbers a list may expand to, duplicates included. */
#define AV_CPULIST_MAX_ENTRIES (1u << 20)

/* Parses one decimal CPU number of a cpulist; FALSE when malformed. */
static gboolean
av_cpulist_number(const char *s, guint *ret)
{
    guint64 v;

    if (!*s || !g_ascii_isdigit(*s))
        return FALSE;
    if (!g_ascii_string_to_unsigned(s, 10, 0, AV_CPULIST_MAX_CPU, &v, NULL))
        return FALSE;
    *ret = (guint)v;
    return TRUE;
}

/* Parses a kernel cpulist, as printed by bitmap_print_to_pagebuf() for
 * Documentation/ABI/stable/sysfs-devices-node "cpulist": comma-separated
 * numbers and ranges "A-B" (A <= B).  An empty list (a memory-only node)
 * gives an empty array.  Duplicates are merged.  The caller owns *ret_cpus,
 * which is untouched on failure. */
gboolean
av_cpulist_parse(const char *cpulist, GArray **ret_cpus, GError **error)
{
    g_autoptr(GArray) cpus = g_array_new(FALSE, FALSE, sizeof(guint));
    g_auto(GStrv) parts = NULL;
    g_autofree char *copy = NULL;

    if (!cpulist) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "missing CPU list");
        return FALSE;
    }
    copy = g_strstrip(g_strdup(cpulist));
    if (*copy) {
        parts = g_strsplit(copy, ",", -1);
        for (guint i = 0; parts[i]; i++) {
            char *dash = strchr(parts[i], '-');
            guint lo, hi;

            if (dash) {
                *dash = '\0';
                if (!av_cpulist_number(parts[i], &lo) || !av_cpulist_number(dash + 1, &hi) || lo > hi)
                    goto bad;
            } else {
                if (!av_cpulist_number(parts[i], &lo))
                    goto bad;
                hi = lo;
            }
            if (cpus->len + (hi - lo) > AV_CPULIST_MAX_ENTRIES)
                goto bad;
            for (guint c = lo; c <= hi; c++)
                g_array_append_val(cpus, c);
        }
        g_array_sort(cpus, av_guint_cmp);
        if (cpus->len > 1) {
            guint n = 1;

            for (guint i = 1; i < cpus->len; i++)
                if (g_array_index(cpus, guint, i) != g_array_index(cpus, guint, n - 1))
                    g_array_index(cpus, guint, n++) = g_array_index(cpus, guint, i);
            g_array_set_size(cpus, n);
        }
    }
    *ret_cpus = g_steal_pointer(&cpus);
    return TRUE;

bad:
    g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                "malformed CPU list '%s': expected numbers and ranges such as '0-3,8,10-11'", cpulist);
    return FALSE;
}

/* TRUE when the first @n characters of @s are lower-case hex digits. */
static gboolean
av_is_hex_field(const char *s, guint n)
{
    for (guint i = 0; i < n; i++)
        if (!g_ascii_isxdigit(s[i]) || g_ascii_isupper(s[i]))
            return FALSE;
    return TRUE;
}

/* Accepts "dddd:bb:ss.f" as the kernel names PCI functions (pci_name():
 * "%04x:%02x:%02x.%d"): the domain has at least 4 digits, and more when it
 * is above 0xffff, as the domains Intel VMD creates for the devices behind
 * it ("10000:e1:00.0"); PCI domains are 32 bits, so at most 8. */
gboolean
av_pci_address_is_valid(const char *address)
{
    const char *colon;
    gsize domain_len;
    guint slot;

    if (!address || !(colon = strchr(address, ':')))
        return FALSE;
    domain_len = (gsize)(colon - address);
    if (domain_len < 4 || domain_len > 8 || strlen(address) != domain_len + 8)
        return FALSE;
    if (!av_is_hex_field(address, (guint)domain_len))
        return FALSE;
    /* "%04x" pads to 4 digits only: "0ffff" or "00000" is no kernel name. */
    if (domain_len > 4 && address[0] == '0')
        return FALSE;
    address = colon;
    if (address[0] != ':' || !av_is_hex_field(address + 1, 2) || address[3] != ':' ||
        !av_is_hex_field(address + 4, 2) || address[6] != '.')
        return FALSE;
    slot = (guint)g_ascii_xdigit_value(address[4]) * 16 + (guint)g_ascii_xdigit_value(address[5]);
    if (slot > 0x1f)
        return FALSE;
    return address[7] >= '0' && address[7] <= '7';
}

/* --- attribute readers (see av-pci-private.h) --- */

int
av_attr_read_hex(const AvRoot *root, const char *dir, const char *attr, guint64 max, guint64 *ret)
{
    g_autofree char *path = g_strconcat(dir, "/", attr, NULL);
    guint64 v;
    int r;

    r = av_root_read_uint(root, path, 16, &v);
    if (r < 0)
        return r;
    if (v > max)
        return -ERANGE;
    *ret = v;
    return 0;
}

int
av_attr_read_uint(const AvRoot *root, const char *dir, const char *attr, guint *ret)
{
    g_autofree char *path = g_strconcat(dir, "/", attr, NULL);
    guint64 v;
    int r;

    r = av_root_read_uint(root, path, 10, &v);
    if (r < 0)
        return r;
    if (v > G_MAXUINT)
        return -ERANGE;
    *ret = (guint)v;
    return 0;
}

char *
av_attr_read_optional(const AvRoot *root, const char *dir, const char *attr)
{
    g_autofree char *path = g_strconcat(dir, "/", attr, NULL);
    char *value = NULL;

    if (av_root_read_attr(root, path, &value) < 0)
        return NULL;
    return value;
}

int
av_attr_read_numa_node(const AvRoot *root, const char *dir)
{
    g_autofree char *path = g_strconcat(dir, "/numa_node", NULL);
    gint64 node;

    if (av_root_read_int(root, path, &node) == 0 && node >= 0 && node <= G_MAXINT)
        return (int)node;
    return -1;
}

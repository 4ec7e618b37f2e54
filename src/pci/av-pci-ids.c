/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: vendor and device names from pci.ids, the PCI ID Repository's
 * list (https://pci-ids.ucw.cz/; Debian's package pci.ids puts it at
 * /usr/share/misc/pci.ids, where libpciaccess and pciutils read it).
 *
 * The format, as the file's own header gives it:
 *   vendor  vendor_name
 *   <TAB>device  device_name
 *   <TAB><TAB>subvendor subdevice  subsystem_name
 * ids in four lower-case hex digits, two spaces before a name, '#' comments,
 * and the device classes at the end ("C 03  Display controller").
 *
 * Names are for people (list, status); nothing decides by them.  One pass
 * over the file names every device of a scan, keeping only the lines of the
 * vendors it holds.  $ACCELVIRT_PCI_IDS names another file: the tests ship
 * theirs, so that what they expect does not follow the distribution's
 * pci.ids (Debian 13's names devices Debian 12's does not). */
#include "config.h"

#include "av-pci-private.h"

#include <string.h>

/* Debian's, libpciaccess's and pciutils' place for it. */
#define AV_PCI_IDS_PATH "/usr/share/misc/pci.ids"
/* The file is about 1.4 MB today; a larger one is not read. */
#define AV_PCI_IDS_MAX (64 * 1024 * 1024)

/* The four hex digits at @p, then two spaces and at least one byte of a
 * name, all before @end: the id into *ret, TRUE. */
static gboolean
av_pci_ids_parse_id(const char *p, const char *end, guint16 *ret)
{
    guint v = 0;

    if (end - p < 7)
        return FALSE;
    for (int i = 0; i < 4; i++) {
        int d = g_ascii_xdigit_value(p[i]);

        if (d < 0)
            return FALSE;
        v = v << 4 | (guint)d;
    }
    if (p[4] != ' ' || p[5] != ' ' || p[6] == '\0')
        return FALSE;
    *ret = (guint16)v;
    return TRUE;
}

/* The name after the id of the line @p (up to @end, trailing white space
 * removed, control characters, C0 and C1, dropped), or NULL when it is not
 * UTF-8: it goes to terminals and JSON.  Caller frees. */
static char *
av_pci_ids_name_of(const char *p, const char *end)
{
    g_autoptr(GString) name = g_string_sized_new((gsize)(end - p));
    const char *c;

    if (!g_utf8_validate(p, end - p, NULL))
        return NULL;
    for (c = p; c < end; c = g_utf8_next_char(c)) {
        gunichar u = g_utf8_get_char(c);

        if (u >= 0x20 && !(u >= 0x7f && u <= 0x9f))
            g_string_append_unichar(name, u);
    }
    while (name->len > 0 && name->str[name->len - 1] == ' ')
        g_string_truncate(name, name->len - 1);
    return g_string_free(g_steal_pointer(&name), FALSE);
}

/* See av-pci-private.h. */
void
av_pci_ids_name(GPtrArray *devices)
{
    const char *path = g_getenv("ACCELVIRT_PCI_IDS");
    g_autoptr(GHashTable) vendors = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
    g_autoptr(GHashTable) names = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
    g_autoptr(GMappedFile) file = NULL;
    const char *p, *end;
    gboolean wanted = FALSE;
    guint16 vendor = 0;

    if (!devices || devices->len == 0)
        return;
    if (!path || !*path)
        path = AV_PCI_IDS_PATH;
    for (guint i = 0; i < devices->len; i++) {
        const AvPciDevice *dev = g_ptr_array_index(devices, i);

        g_hash_table_insert(vendors, GUINT_TO_POINTER(dev->vendor_id), NULL);
    }
    /* Absent, unreadable or too large: no names, as without pci.ids. */
    file = g_mapped_file_new(path, FALSE, NULL);
    if (!file || g_mapped_file_get_length(file) > AV_PCI_IDS_MAX)
        return;
    p = g_mapped_file_get_contents(file);
    end = p ? p + g_mapped_file_get_length(file) : NULL;
    while (p && p < end) {
        const char *eol = memchr(p, '\n', (gsize)(end - p));
        const char *line = p;
        guint16 id;

        if (!eol)
            eol = end;
        p = eol + 1;
        if (eol - line < 7 || line[0] == '#')
            continue;
        if (line[0] == 'C' && line[1] == ' ')
            break; /* the classes: no vendor follows */
        if (line[0] != '\t') {
            wanted = av_pci_ids_parse_id(line, eol, &vendor) &&
                     g_hash_table_contains(vendors, GUINT_TO_POINTER(vendor));
            if (wanted)
                g_hash_table_insert(vendors, GUINT_TO_POINTER(vendor), av_pci_ids_name_of(line + 6, eol));
            continue;
        }
        if (wanted && line[1] != '\t' && av_pci_ids_parse_id(line + 1, eol, &id))
            g_hash_table_insert(names, GUINT_TO_POINTER((guint)vendor << 16 | id), av_pci_ids_name_of(line + 7, eol));
    }
    for (guint i = 0; i < devices->len; i++) {
        AvPciDevice *dev = g_ptr_array_index(devices, i);
        const char *v = g_hash_table_lookup(vendors, GUINT_TO_POINTER(dev->vendor_id));
        const char *d = g_hash_table_lookup(names, GUINT_TO_POINTER((guint)dev->vendor_id << 16 | dev->device_id));

        g_free(dev->vendor_name);
        dev->vendor_name = g_strdup(v);
        g_free(dev->device_name);
        dev->device_name = g_strdup(d);
    }
}

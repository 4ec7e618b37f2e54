/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: a PCI function's AER counters and link (see av-health.h).
 *
 * Kernel interfaces: Documentation/ABI/testing/sysfs-bus-pci-devices-aer
 * (aer_dev_correctable, aer_dev_fatal, aer_dev_nonfatal: one "NAME COUNT"
 * line per error type, then TOTAL_ERR_COR, TOTAL_ERR_FATAL or
 * TOTAL_ERR_NONFATAL), Documentation/ABI/testing/sysfs-bus-pci
 * (current_link_speed, max_link_speed: "16.0 GT/s PCIe", "8 GT/s" on older
 * kernels, "Unknown"; current_link_width, max_link_width: a lane count, 0
 * while the link is down). */
#include "config.h"

#include "av-health.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pci/av-pci.h"
#include "util/av-error.h"

/* See av-health.h. */
void
av_pci_health_clear(AvPciHealth *health)
{
    g_free(health->link_from);
    g_free(health->aer_from);
    memset(health, 0, sizeof(*health));
}

/* An error naming the file @path of @address that does not parse.  FALSE. */
static gboolean G_GNUC_PRINTF(4, 5)
health_fail(const char *address, const char *path, GError **error, const char *fmt, ...)
{
    g_autofree char *msg = NULL;
    va_list ap;

    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "cannot read the health of %s: '%s' %s", address, path, msg);
    return FALSE;
}

/* Reads the attribute @name of the device directory @dir: 0 and the
 * trimmed contents, -ENOENT when absent (not reported), else an error
 * naming the file (-EIO). */
static int
health_read(const AvRoot *root, const char *address, const char *dir, const char *name, char **ret_text,
            GError **error)
{
    g_autofree char *path = g_strdup_printf("%s/%s", dir, name);
    int r = av_root_read_attr(root, path, ret_text);

    if (r == -ENOENT)
        return r;
    if (r < 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_IO, "cannot read the health of %s: cannot read '%s': %s", address, path,
                    g_strerror(-r));
        return -EIO;
    }
    return 0;
}

/* The TOTAL_@total line of an aer_dev_* file's @text; every line must be
 * "NAME COUNT" (sysfs-bus-pci-devices-aer). */
static gboolean
aer_total(const char *address, const char *path, const char *text, const char *total, guint64 *ret_count,
          GError **error)
{
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    gboolean found = FALSE;
    guint64 count = 0;

    for (guint i = 0; lines[i]; i++) {
        const char *space = strchr(lines[i], ' ');
        guint64 n;

        if (!space || space == lines[i] || strchr(space + 1, ' ') ||
            !g_ascii_string_to_unsigned(space + 1, 10, 0, G_MAXUINT64, &n, NULL))
            return health_fail(address, path, error, "line %u is not 'NAME COUNT': '%s'", i + 1, lines[i]);
        if ((gsize)(space - lines[i]) == strlen(total) && strncmp(lines[i], total, strlen(total)) == 0) {
            found = TRUE;
            count = n;
        }
    }
    if (!found)
        return health_fail(address, path, error, "has no %s line", total);
    *ret_count = count;
    return TRUE;
}

/* A link speed: "16.0 GT/s PCIe", "8 GT/s", "2.5 GT/s"; "Unknown" (and
 * older kernels' "Unknown speed") give 0. */
static gboolean
parse_speed(const char *address, const char *path, const char *text, double *ret_gts, GError **error)
{
    const char *p = text;
    const char *end;
    char *num_end = NULL;
    double v;

    if (g_str_has_prefix(text, "Unknown")) {
        *ret_gts = 0;
        return TRUE;
    }
    for (; g_ascii_isdigit(*p) || *p == '.'; p++)
        ;
    end = p;
    if (end == text || !(g_str_equal(end, " GT/s") || g_str_has_prefix(end, " GT/s ")))
        return health_fail(address, path, error, "is not a link speed such as '16.0 GT/s PCIe': '%s'", text);
    v = g_ascii_strtod(text, &num_end);
    if (num_end != end || !(v > 0 && v < 1e6))
        return health_fail(address, path, error, "is not a link speed such as '16.0 GT/s PCIe': '%s'", text);
    *ret_gts = v;
    return TRUE;
}

static gboolean
parse_width(const char *address, const char *path, const char *text, guint *ret_width, GError **error)
{
    guint64 n;

    if (!g_ascii_string_to_unsigned(text, 10, 0, 64, &n, NULL))
        return health_fail(address, path, error, "is not a lane count from 0 to 64: '%s'", text);
    *ret_width = (guint)n;
    return TRUE;
}

/* Reads the link of the device directory @dir into @h: h->link only when
 * all four files are there (a device without a PCIe link has none). */
static gboolean
read_link(const AvRoot *root, const char *address, const char *dir, AvPciHealth *h, GError **error)
{
    static const char *const names[] = { "current_link_speed", "max_link_speed", "current_link_width",
                                         "max_link_width" };
    char *texts[G_N_ELEMENTS(names)] = { NULL };
    gboolean ok = TRUE;
    int missing = 0;

    for (gsize i = 0; i < G_N_ELEMENTS(names) && ok; i++) {
        int r = health_read(root, address, dir, names[i], &texts[i], error);

        if (r == -ENOENT)
            missing++;
        else if (r < 0)
            ok = FALSE;
    }
    if (ok && missing == 0) {
        g_autofree char *p0 = g_strdup_printf("%s/%s", dir, names[0]);
        g_autofree char *p1 = g_strdup_printf("%s/%s", dir, names[1]);
        g_autofree char *p2 = g_strdup_printf("%s/%s", dir, names[2]);
        g_autofree char *p3 = g_strdup_printf("%s/%s", dir, names[3]);

        ok = parse_speed(address, p0, texts[0], &h->speed_gts, error) &&
             parse_speed(address, p1, texts[1], &h->max_speed_gts, error) &&
             parse_width(address, p2, texts[2], &h->width, error) &&
             parse_width(address, p3, texts[3], &h->max_width, error);
        h->link = ok;
    }
    for (gsize i = 0; i < G_N_ELEMENTS(names); i++)
        g_free(texts[i]);
    return ok;
}

/* Reads the AER counters of the device directory @dir (of @address) into
 * @h: h->aer when the three aer_dev_* files are there. */
static gboolean
read_aer(const AvRoot *root, const char *address, const char *dir, AvPciHealth *h, GError **error)
{
    static const struct {
        const char *file;
        const char *total;
        gsize offset;
    } aer[] = {
        { "aer_dev_correctable", "TOTAL_ERR_COR", G_STRUCT_OFFSET(AvPciHealth, correctable) },
        { "aer_dev_nonfatal", "TOTAL_ERR_NONFATAL", G_STRUCT_OFFSET(AvPciHealth, nonfatal) },
        { "aer_dev_fatal", "TOTAL_ERR_FATAL", G_STRUCT_OFFSET(AvPciHealth, fatal) },
    };
    int present = 0;
    int r;

    for (gsize i = 0; i < G_N_ELEMENTS(aer); i++) {
        g_autofree char *text = NULL;
        g_autofree char *path = g_strdup_printf("%s/%s", dir, aer[i].file);

        r = health_read(root, address, dir, aer[i].file, &text, error);
        if (r == -ENOENT)
            continue;
        if (r < 0)
            return FALSE;
        if (!aer_total(address, path, text, aer[i].total, G_STRUCT_MEMBER_P(h, aer[i].offset), error))
            return FALSE;
        present++;
    }
    /* The kernel makes the three files together (pcie_aer_attr_group);
     * one or two of them is a tree that cannot be trusted. */
    if (present != 0 && present != (int)G_N_ELEMENTS(aer)) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "cannot read the health of %s: only %d of the files "
                    "aer_dev_correctable, aer_dev_nonfatal and aer_dev_fatal are in '%s'", address, present, dir);
        return FALSE;
    }
    h->aer = present != 0;
    return TRUE;
}

/* See av-health.h. */
gboolean
av_pci_health_read(const AvRoot *root, const char *address, AvPciHealth *ret, GError **error)
{
    g_autofree char *dir = NULL;
    g_autofree char *physfn = NULL;
    g_autofree char *link_dir = NULL;
    AvPciHealth h = { 0 };
    int r;

    av_pci_health_clear(ret);
    if (!av_pci_address_is_valid(address)) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "cannot read the health of '%s': not a PCI address "
                    "such as 0000:17:00.0", address);
        return FALSE;
    }
    dir = av_sys_path("bus/pci/devices/%s", address);
    if (!av_root_exists(root, dir)) {
        g_set_error(error, AV_ERROR, AV_ERROR_NOT_FOUND, "cannot read the health of %s: no such PCI device", address);
        return FALSE;
    }
    if (!read_aer(root, address, dir, &h, error))
        return FALSE;

    /* A VF has no link of its own: its PF's (sysfs-bus-pci: physfn). */
    {
        g_autofree char *physfn_path = g_strdup_printf("%s/physfn", dir);

        r = av_root_link_name(root, physfn_path, &physfn);
        if (r < 0 && r != -ENOENT) {
            g_set_error(error, AV_ERROR, AV_ERROR_IO, "cannot read the health of %s: cannot resolve '%s': %s",
                        address, physfn_path, g_strerror(-r));
            return FALSE;
        }
        if (physfn && !av_pci_address_is_valid(physfn)) {
            g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "cannot read the health of %s: '%s' names '%s', "
                        "not a PCI function", address, physfn_path, physfn);
            return FALSE;
        }
    }
    link_dir = physfn ? av_sys_path("bus/pci/devices/%s", physfn) : g_strdup(dir);
    /* A VF without AER counters of its own: its PF's, which the errors
     * of a VF without an AER capability are reported on. */
    if (physfn && !h.aer) {
        if (!read_aer(root, physfn, link_dir, &h, error))
            return FALSE;
        if (h.aer)
            h.aer_from = g_strdup(physfn);
    }
    if (!read_link(root, physfn ? physfn : address, link_dir, &h, error)) {
        av_pci_health_clear(&h);
        return FALSE;
    }
    if (physfn)
        h.link_from = g_steal_pointer(&physfn);
    *ret = h;
    return TRUE;
}

/* See av-health.h. */
const char *
av_pci_health_link_problem(const AvPciHealth *health, gboolean speed_too)
{
    if (!health->link)
        return NULL;
    if (health->width == 0)
        return "link down";
    if (speed_too && health->speed_gts <= 0)
        return "speed unknown";
    if (health->max_width > 0 && health->width < health->max_width)
        return "a degraded link";
    if (speed_too && health->max_speed_gts > 0 && health->speed_gts < health->max_speed_gts)
        return "a degraded link";
    return NULL;
}

/* See av-health.h. */
gboolean
av_pci_health_link_degraded(const AvPciHealth *health, gboolean speed_too)
{
    return av_pci_health_link_problem(health, speed_too) != NULL;
}

static void
append_speed(GString *out, double gts)
{
    if (gts > 0)
        g_string_append_printf(out, "%.1f", gts);
    else
        g_string_append(out, "unknown");
}

/* See av-health.h. */
char *
av_pci_health_link_describe(const AvPciHealth *health)
{
    GString *out = g_string_new(NULL);

    g_string_append_printf(out, "x%u of x%u at ", health->width, health->max_width);
    append_speed(out, health->speed_gts);
    g_string_append(out, " of ");
    append_speed(out, health->max_speed_gts);
    g_string_append(out, " GT/s");
    return g_string_free(out, FALSE);
}

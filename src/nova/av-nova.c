/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the Nova configuration of this host's managed devices (issue
 * 18).  Nova's rules are cited by file from openstack/nova (HEAD 00a0304,
 * 33.0.0-373; release tags 31.0.0 = 2025.1, 32.0.0 = 2025.2). */
#include "config.h"

#include <string.h>

#include "nova/av-nova.h"
#include "util/av-error.h"

static void
av_nova_spec_free(AvNovaSpec *spec)
{
    if (!spec)
        return;
    g_free(spec->profile);
    g_free(spec->address);
    g_free(spec->resource_class);
    g_free(spec->traits);
    g_free(spec);
}

static void
av_nova_alias_free(AvNovaAlias *alias)
{
    if (!alias)
        return;
    g_free(alias->name);
    g_free(alias->resource_class);
    g_free(alias);
}

static void
av_nova_mdev_type_free(AvNovaMdevType *t)
{
    if (!t)
        return;
    g_free(t->type);
    g_free(t->mdev_class);
    g_ptr_array_unref(t->addresses);
    g_ptr_array_unref(t->profiles);
    g_free(t);
}

static void
av_nova_provider_free(AvNovaProvider *p)
{
    if (!p)
        return;
    g_free(p->name);
    g_ptr_array_unref(p->traits);
    g_free(p);
}

void
av_nova_config_free(AvNovaConfig *config)
{
    if (!config)
        return;
    g_free(config->host);
    g_ptr_array_unref(config->specs);
    g_ptr_array_unref(config->aliases);
    g_ptr_array_unref(config->mdev_types);
    g_ptr_array_unref(config->providers);
    g_ptr_array_unref(config->notes);
    g_free(config);
}

/* ---- names ---- */

/* os-resource-classes' standard classes that a device can be
 * (os_resource_classes/__init__.py STANDARDS; nova/compute/
 * pci_placement_translator.py:95-134 keeps a standard class as written). */
static const char *const av_nova_standard_classes[] = {
    "PCI_DEVICE", "SRIOV_NET_VF", "VGPU", "VGPU_DISPLAY_HEAD", "PGPU", "FPGA", NULL,
};

static gboolean
av_nova_upper_name(const char *s, gsize max)
{
    gsize n = strlen(s);

    if (n == 0 || n > max)
        return FALSE;
    return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == n;
}

/* Placement's resource class schema: ^CUSTOM_[A-Z0-9_]+$, maxLength 255
 * (placement/schemas/resource_class.py).  Nova does not normalise a name
 * that already starts with CUSTOM_ (pci_placement_translator.py:95-134), so
 * it must be right as written. */
gboolean
av_nova_resource_class_is_valid(const char *name)
{
    if (!name || !av_nova_upper_name(name, 255))
        return FALSE;
    if (g_str_has_prefix(name, "CUSTOM_"))
        return strlen(name) > strlen("CUSTOM_");
    return g_strv_contains(av_nova_standard_classes, name);
}

/* Placement's trait schema: 1 to 255 characters (placement/schemas/
 * trait.py); Nova upper-cases and normalises the rest
 * (pci_placement_translator.py:51-76), so only ^[A-Z0-9_]{1,255}$ goes
 * through unchanged. */
gboolean
av_nova_trait_is_valid(const char *name)
{
    return name && av_nova_upper_name(name, 255);
}

/* ---- building ---- */

static char *av_nova_join(const GPtrArray *strings, const char *sep);

static gboolean
av_nova_profile_scrubs(const AvProfile *p)
{
    for (guint i = 0; p->scrub && i < p->scrub->len; i++) {
        const AvScrubStep *s = g_ptr_array_index(p->scrub, i);

        if (s->method != AV_SCRUB_METHOD_NONE)
            return TRUE;
    }
    return FALSE;
}

/* The profile's resource class, else Nova's default for the device:
 * f"CUSTOM_PCI_{vendor_id}_{product_id}".upper()
 * (pci_placement_translator.py:117). */
static char *
av_nova_resource_class(const AvProfile *p, guint16 vendor, guint16 product)
{
    if (p->resource_class)
        return g_strdup(p->resource_class);
    /* A vGPU VF: a class of its type, so that flavors ask for the type
     * ("L40S-2Q" gives CUSTOM_VGPU_L40S_2Q; "NVIDIA L40S-2Q" the same). */
    if (p->vgpu_type) {
        const char *space = strrchr(p->vgpu_type, ' ');
        GString *rc = g_string_new("CUSTOM_VGPU_");

        for (const char *c = space ? space + 1 : p->vgpu_type; *c && rc->len < 255; c++)
            g_string_append_c(rc, g_ascii_isalnum(*c) ? g_ascii_toupper(*c) : '_');
        return g_string_free(rc, FALSE);
    }
    return g_strdup_printf("CUSTOM_PCI_%04X_%04X", vendor, product);
}

/* The traits of device_spec: a comma-separated string that Nova splits on
 * "," without stripping blanks (pci_placement_translator.py:51-76). */
static char *
av_nova_traits(const AvProfile *p)
{
    if (!p->traits || p->traits->len == 0)
        return NULL;
    return av_nova_join(p->traits, ",");
}

/* Sets @error (AV_ERROR_FAILED, a printf format) and is FALSE. */
#define av_nova_fail(error, ...) (g_set_error((error), AV_ERROR, AV_ERROR_FAILED, __VA_ARGS__), FALSE)

static AvNovaSpec *
av_nova_find_spec(GPtrArray *specs, const char *address)
{
    for (guint i = 0; i < specs->len; i++) {
        AvNovaSpec *s = g_ptr_array_index(specs, i);

        if (g_str_equal(s->address, address))
            return s;
    }
    return NULL;
}

static int
av_nova_spec_compare(gconstpointer a, gconstpointer b)
{
    const AvNovaSpec *x = *(AvNovaSpec *const *)a;
    const AvNovaSpec *y = *(AvNovaSpec *const *)b;

    return av_pci_address_key_compare(x->address_key, x->address, y->address_key, y->address);
}

static gboolean
av_nova_check_names(const AvProfile *p, const char *rc, const char *what, GError **error)
{
    if (!av_nova_resource_class_is_valid(rc))
        return av_nova_fail(error,
                            "profile '%s': resource class '%s' of %s is not one Placement takes: give the profile a "
                            "\"resource_class\" of CUSTOM_ and A-Z, 0-9 and '_' (at most 255 characters) or a "
                            "standard class (PCI_DEVICE, PGPU, VGPU, FPGA, SRIOV_NET_VF)",
                            p->name, rc, what);
    for (guint i = 0; p->traits && i < p->traits->len; i++) {
        const char *t = g_ptr_array_index(p->traits, i);

        if (!av_nova_trait_is_valid(t))
            return av_nova_fail(error,
                                "profile '%s': trait '%s' is not one Placement takes: change it to 1 to 255 "
                                "characters of A-Z, 0-9 and '_' (custom traits start with CUSTOM_)",
                                p->name, t);
    }
    return TRUE;
}

/* A device_spec for a device of a "vfio-pci" profile. */
static gboolean
av_nova_add_pci(AvNovaConfig *c, const AvProfile *p, const AvPciDevice *d, GError **error)
{
    AvNovaSpec *s;

    s = av_nova_find_spec(c->specs, d->address);
    if (s && g_str_equal(s->device_type, "type-VF"))
        /* PlacementPciDependentDeviceException (pci_placement_translator.py) */
        return av_nova_fail(error,
                            "PF %s is in [pci] itself (profile '%s') and so are its VFs (profile '%s'): Nova refuses "
                            "a PF together with its VFs; take the PF or its VFs, not both",
                            d->address, p->name, s->profile);
    if (s)
        return av_nova_fail(error, "device %s is matched by two device_spec entries: make one profile take it",
                            d->address);
    s = g_new0(AvNovaSpec, 1);
    s->profile = g_strdup(p->name);
    s->address = g_strdup(d->address);
    s->address_key = av_pci_address_key(s->address);
    s->vendor_id = d->vendor_id;
    s->product_id = d->device_id;
    /* libvirt reports an SR-IOV capable function as a PF, Nova's type-PF. */
    s->device_type = d->sriov_capable ? "type-PF" : "type-PCI";
    s->resource_class = av_nova_resource_class(p, d->vendor_id, d->device_id);
    s->traits = av_nova_traits(p);
    /* one_time_use: "Only type-PCI and type-PF devices may set
     * one_time_use" (pci_placement_translator.py:193-197). */
    s->one_time_use = av_nova_profile_scrubs(p);
    s->devices = 1;
    g_ptr_array_add(c->specs, s);
    return av_nova_check_names(p, s->resource_class, d->address, error);
}

/* A VF of a "sriov-vf" profile: counted on the device_spec of its PF,
 * which Nova's exact PF address form matches VF by VF
 * (nova/pci/devspec.py:245-268, WhitelistPciAddress.match). */
static gboolean
av_nova_add_vf(AvNovaConfig *c, const AvProfile *p, const char *pf, guint16 vendor, guint16 product,
               gboolean count, GError **error)
{
    AvNovaSpec *s = av_nova_find_spec(c->specs, pf);
    g_autofree char *rc = av_nova_resource_class(p, vendor, product);
    g_autofree char *traits = av_nova_traits(p);

    if (s && !g_str_equal(s->device_type, "type-VF"))
        /* PlacementPciDependentDeviceException (pci_placement_translator.py) */
        return av_nova_fail(error,
                            "PF %s is in [pci] itself (profile '%s') and so are its VFs (profile '%s'): Nova refuses "
                            "a PF together with its VFs; take the PF or its VFs, not both",
                            pf, s->profile, p->name);
    if (s && (!g_str_equal(s->resource_class, rc) || g_strcmp0(s->traits, traits) != 0))
        /* PlacementPciMixed{ResourceClass,Traits}Exception */
        return av_nova_fail(error,
                            "VFs of PF %s are taken by profiles '%s' (%s%s%s) and '%s' (%s%s%s): Nova needs one "
                            "resource class and one set of traits for all VFs of a PF; give them the same or let "
                            "one profile take them",
                            pf, s->profile, s->resource_class, s->traits ? ", " : "", s->traits ? s->traits : "",
                            p->name, rc, traits ? ", " : "", traits ? traits : "");
    if (s && !g_str_equal(s->profile, p->name))
        return av_nova_fail(error,
                            "VFs of PF %s are taken by profiles '%s' and '%s': Nova matches the VFs of a PF by the "
                            "PF's address, one device_spec for all of them; let one profile take them",
                            pf, s->profile, p->name);
    if (!s) {
        s = g_new0(AvNovaSpec, 1);
        s->profile = g_strdup(p->name);
        s->address = g_strdup(pf);
        s->address_key = av_pci_address_key(s->address);
        s->vendor_id = vendor;
        s->product_id = product;
        s->device_type = "type-VF";
        s->resource_class = g_steal_pointer(&rc);
        s->traits = g_steal_pointer(&traits);
        s->one_time_use = FALSE;
        g_ptr_array_add(c->specs, s);
        if (!av_nova_check_names(p, s->resource_class, pf, error))
            return FALSE;
    }
    if (count)
        s->devices++;
    return TRUE;
}

/* Every VF of a PF spec must be a VF of its profile: Nova hands out every
 * VF the PF's address matches. */
static gboolean
av_nova_check_vfs(const AvNovaConfig *c, const AvPolicy *policy, const AvHost *host, GError **error)
{
    for (guint i = 0; i < c->specs->len; i++) {
        const AvNovaSpec *s = g_ptr_array_index(c->specs, i);
        const AvPciDevice *pf;

        if (!g_str_equal(s->device_type, "type-VF"))
            continue;
        pf = av_host_find_pci(host, s->address);
        for (guint j = 0; pf && pf->virtfns && j < pf->virtfns->len; j++) {
            const char *vf = g_ptr_array_index(pf->virtfns, j);
            const AvPciDevice *d = av_host_find_pci(host, vf);
            const AvProfile *p = d ? av_policy_match_pci(policy, d) : NULL;

            if (!p || !g_str_equal(p->name, s->profile)) {
                g_autofree char *who = p ? g_strdup_printf("profile '%s' takes it", p->name)
                                         : g_strdup("no profile takes it");

                return av_nova_fail(error,
                                    "device %s is matched by the device_spec of profile '%s' (by its PF %s's "
                                    "address, which matches every VF of the PF) but %s: let profile '%s' take "
                                    "every VF of %s",
                                    vf, s->profile, s->address, who, s->profile, s->address);
            }
        }
    }
    return TRUE;
}

static const char *
av_nova_numa_policy(AvNumaPolicy numa)
{
    /* nova/pci/request.py _ALIAS_SCHEMA numa_policy: required, legacy,
     * preferred, socket. */
    switch (numa) {
    case AV_NUMA_STRICT:
        return "required";
    case AV_NUMA_PREFERRED:
        return "preferred";
    case AV_NUMA_NONE:
    default:
        return "legacy";
    }
}

/* One alias per profile in [pci]: one resource class and one device type
 * for all its specs (with [filter_scheduler] pci_in_placement an alias
 * name may have one entry only, nova/pci/request.py:124-234). */
static gboolean
av_nova_add_aliases(AvNovaConfig *c, const AvPolicy *policy, GError **error)
{
    g_autoptr(GHashTable) names = g_hash_table_new(g_str_hash, g_str_equal);

    for (guint i = 0; i < policy->profiles->len; i++) {
        const AvProfile *p = g_ptr_array_index(policy->profiles, i);
        const AvNovaSpec *first = NULL;
        AvNovaAlias *a;

        for (guint j = 0; j < c->specs->len; j++) {
            const AvNovaSpec *s = g_ptr_array_index(c->specs, j);

            if (!g_str_equal(s->profile, p->name))
                continue;
            if (!first) {
                first = s;
                continue;
            }
            if (!g_str_equal(s->resource_class, first->resource_class))
                return av_nova_fail(error,
                                    "profile '%s' matches devices of two resource classes (%s at %s, %s at %s): one "
                                    "alias asks for one; give the profile a \"resource_class\"",
                                    p->name, first->resource_class, first->address, s->resource_class, s->address);
            if (!g_str_equal(s->device_type, first->device_type))
                return av_nova_fail(error,
                                    "profile '%s' matches a %s (%s) and a %s (%s): one alias asks for one device "
                                    "type; split the profile",
                                    p->name, first->device_type, first->address, s->device_type, s->address);
        }
        if (!first)
            continue;
        if (g_hash_table_contains(names, p->name))
            return av_nova_fail(error, "two aliases are named '%s': rename one of the profiles", p->name);
        g_hash_table_add(names, p->name);
        a = g_new0(AvNovaAlias, 1);
        a->name = g_strdup(p->name);
        a->resource_class = g_strdup(first->resource_class);
        a->device_type = first->device_type;
        a->numa_policy = av_nova_numa_policy(p->numa);
        g_ptr_array_add(c->aliases, a);
    }
    return TRUE;
}

static AvNovaMdevType *
av_nova_find_mdev_type(GPtrArray *types, const char *type)
{
    for (guint i = 0; i < types->len; i++) {
        AvNovaMdevType *t = g_ptr_array_index(types, i);

        if (g_str_equal(t->type, type))
            return t;
    }
    return NULL;
}

static AvNovaProvider *
av_nova_provider(GPtrArray *providers, const char *name)
{
    AvNovaProvider *p;

    for (guint i = 0; i < providers->len; i++) {
        p = g_ptr_array_index(providers, i);
        if (g_strcmp0(p->name, name) == 0)
            return p;
    }
    p = g_new0(AvNovaProvider, 1);
    p->name = g_strdup(name);
    p->traits = g_ptr_array_new_with_free_func(g_free);
    g_ptr_array_add(providers, p);
    return p;
}

static void
av_nova_provider_add_trait(AvNovaProvider *p, const char *trait)
{
    if (!g_ptr_array_find_with_equal_func(p->traits, trait, g_str_equal, NULL))
        g_ptr_array_add(p->traits, g_strdup(trait));
}

static int
av_nova_str_compare(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int
av_nova_mdev_type_compare(gconstpointer a, gconstpointer b)
{
    return strcmp((*(AvNovaMdevType *const *)a)->type, (*(AvNovaMdevType *const *)b)->type);
}

/* An mdev parent of an "mdev" profile: [devices] enabled_mdev_types and
 * [mdev_TYPE] device_addresses, mdev_class (nova/conf/devices.py:19-116);
 * its provider in the provider config is named as the libvirt driver
 * names a pGPU's: '%s_%s' % (nodename, pgpu_dev_id), the dev id being
 * libvirt's node device name, "pci_0000_84_00_0"
 * (nova/virt/libvirt/driver.py:10120-10149, _ensure_pgpu_providers). */
static gboolean
av_nova_add_mdev(AvNovaConfig *c, const AvProfile *p, const AvMdevParent *mp, GHashTable *noted, GError **error)
{
    const char *mdev_class = p->resource_class ? p->resource_class : "VGPU";
    AvNovaMdevType *t;
    AvNovaProvider *prov;
    g_autofree char *nodedev = NULL;

    if (!mp->pci_address) {
        g_ptr_array_add(c->notes, g_strdup_printf(
            "mdev parent '%s' of profile '%s' is left out: [mdev_%s] device_addresses takes PCI addresses only.",
            mp->name, p->name, p->mdev_type));
        return TRUE;
    }
    /* [mdev_TYPE] mdev_class: regex ^(VGPU|CUSTOM_[A-Z0-9_]+)$, max_length
     * 255 (nova/conf/devices.py:98-106). */
    if (!g_str_equal(mdev_class, "VGPU") &&
        !(g_str_has_prefix(mdev_class, "CUSTOM_") && av_nova_resource_class_is_valid(mdev_class)))
        return av_nova_fail(error,
                            "profile '%s': resource class '%s' cannot be an mdev_class, which Nova takes as VGPU or "
                            "CUSTOM_ and A-Z, 0-9, '_': change the profile's \"resource_class\"",
                            p->name, mdev_class);
    t = av_nova_find_mdev_type(c->mdev_types, p->mdev_type);
    if (!t) {
        t = g_new0(AvNovaMdevType, 1);
        t->type = g_strdup(p->mdev_type);
        t->mdev_class = g_strdup(mdev_class);
        t->addresses = g_ptr_array_new_with_free_func(g_free);
        t->profiles = g_ptr_array_new_with_free_func(g_free);
        g_ptr_array_add(c->mdev_types, t);
    } else if (!g_str_equal(t->mdev_class, mdev_class)) {
        return av_nova_fail(error,
                            "profiles '%s' and '%s' both make mdev type %s, as %s and %s: [mdev_%s] has one "
                            "mdev_class; give them the same \"resource_class\"",
                            (const char *)g_ptr_array_index(t->profiles, 0), p->name, t->type, t->mdev_class,
                            mdev_class, t->type);
    }
    if (!g_ptr_array_find_with_equal_func(t->profiles, p->name, g_str_equal, NULL))
        g_ptr_array_add(t->profiles, g_strdup(p->name));
    g_ptr_array_add(t->addresses, g_strdup(mp->pci_address));
    c->devices++;

    nodedev = g_strdup_printf("%s_pci_%s", c->host, mp->pci_address);
    for (char *q = nodedev + strlen(c->host) + 1; *q; q++)
        if (*q == ':' || *q == '.')
            *q = '_';
    prov = NULL;
    for (guint i = 0; p->traits && i < p->traits->len; i++) {
        const char *tr = g_ptr_array_index(p->traits, i);

        if (!g_str_has_prefix(tr, "CUSTOM_")) {
            /* provider_config.py:241-310: "only custom traits are allowed" */
            if (!g_hash_table_contains(noted, tr)) {
                g_hash_table_add(noted, (gpointer)tr);
                g_ptr_array_add(c->notes, g_strdup_printf(
                    "trait %s of profile '%s' is left out of the provider config, which takes CUSTOM_ traits only.",
                    tr, p->name));
            }
            continue;
        }
        if (!prov)
            prov = av_nova_provider(c->providers, nodedev);
        av_nova_provider_add_trait(prov, tr);
    }
    return TRUE;
}

AvNovaConfig *
av_nova_config_build(const AvPolicy *policy, const AvHost *host, const char *hostname, GError **error)
{
    g_autoptr(AvNovaConfig) c = g_new0(AvNovaConfig, 1);
    g_autoptr(GHashTable) used = g_hash_table_new(g_str_hash, g_str_equal);
    g_autoptr(GHashTable) noted = g_hash_table_new(g_str_hash, g_str_equal);
    g_autoptr(GHashTable) vf_noted = g_hash_table_new(g_str_hash, g_str_equal);
    g_autoptr(GHashTable) usb_noted = g_hash_table_new(g_str_hash, g_str_equal);
    gboolean any_spec = FALSE;

    c->host = g_strdup(hostname);
    c->specs = g_ptr_array_new_with_free_func((GDestroyNotify)av_nova_spec_free);
    c->aliases = g_ptr_array_new_with_free_func((GDestroyNotify)av_nova_alias_free);
    c->mdev_types = g_ptr_array_new_with_free_func((GDestroyNotify)av_nova_mdev_type_free);
    c->providers = g_ptr_array_new_with_free_func((GDestroyNotify)av_nova_provider_free);
    c->notes = g_ptr_array_new_with_free_func(g_free);
    (void)av_nova_provider(c->providers, NULL);   /* the compute node, first */

    for (guint i = 0; i < host->pci->len; i++) {
        const AvPciDevice *d = g_ptr_array_index(host->pci, i);
        const AvProfile *p = av_policy_match_pci(policy, d);
        const AvProfile *maker = av_policy_match_sriov_pf(policy, d);

        if (p && p->attach == AV_ATTACH_VFIO_PCI) {
            if (!av_nova_add_pci(c, p, d, error))
                return NULL;
            c->devices++;
            g_hash_table_add(used, p->name);
        } else if (p && p->attach == AV_ATTACH_SRIOV_VF && d->physfn) {
            if (!av_nova_add_vf(c, p, d->physfn, d->vendor_id, d->device_id, TRUE, error))
                return NULL;
            c->devices++;
            if (p->vgpu_type && !g_hash_table_contains(used, p->name))
                g_ptr_array_add(c->notes, g_strdup_printf(
                    "profile '%s' makes an NVIDIA vGPU of type '%s' on each VF it gives (the hook writes the VF's "
                    "current_vgpu_type at prepare and 0 after its scrub): one resource class for the VFs of a "
                    "GPU, so one type per GPU; the VFs stay on NVIDIA's driver, which libvirt accepts for a "
                    "managed='no' hostdev from 10.0 on.", p->name, p->vgpu_type));
            g_hash_table_add(used, p->name);
        }
        /* A PF whose VFs the profile makes on demand may have none yet. */
        if (maker && maker->attach == AV_ATTACH_SRIOV_VF && d->sriov_vf_device_set) {
            if (!av_nova_add_vf(c, maker, d->address, d->vendor_id, d->sriov_vf_device, FALSE, error))
                return NULL;
            g_hash_table_add(used, maker->name);
        }
    }
    if (!av_nova_check_vfs(c, policy, host, error))
        return NULL;
    g_ptr_array_sort(c->specs, av_nova_spec_compare);
    for (guint i = 0; i < c->specs->len; i++) {
        const AvNovaSpec *s = g_ptr_array_index(c->specs, i);
        const AvProfile *p = av_policy_find(policy, s->profile);

        any_spec = TRUE;
        if (g_str_equal(s->device_type, "type-VF") && p && av_nova_profile_scrubs(p) &&
            !g_hash_table_contains(vf_noted, p->name)) {
            g_hash_table_add(vf_noted, p->name);
            g_ptr_array_add(c->notes, g_strdup_printf(
                "profile '%s' scrubs its VFs, but Nova cannot mark VFs one_time_use: accelvirt's hook still "
                "refuses a VF until its scrub is verified.", p->name));
        }
    }
    /* A device of a PF spec's VFs must not be in another spec: a PF and
     * its VFs both configured (checked as each spec came). */
    if (!av_nova_add_aliases(c, policy, error))
        return NULL;

    for (guint i = 0; host->mdev_parents && i < host->mdev_parents->len; i++) {
        const AvMdevParent *mp = g_ptr_array_index(host->mdev_parents, i);
        const AvProfile *p = av_policy_match_mdev_parent(policy, mp);

        if (!p || p->attach != AV_ATTACH_MDEV)
            continue;
        if (mp->pci_address && av_nova_find_spec(c->specs, mp->pci_address)) {
            (void)av_nova_fail(error, "device %s is an mdev parent of profile '%s' and in [pci] too: take it whole "
                               "or by its mdevs, not both", mp->pci_address, p->name);
            return NULL;
        }
        if (!av_nova_add_mdev(c, p, mp, noted, error))
            return NULL;
        if (mp->pci_address)
            g_hash_table_add(used, p->name);
    }
    g_ptr_array_sort(c->mdev_types, av_nova_mdev_type_compare);
    for (guint i = 0; i < c->mdev_types->len; i++) {
        AvNovaMdevType *t = g_ptr_array_index(c->mdev_types, i);

        g_ptr_array_sort(t->addresses, av_nova_str_compare);
    }

    for (guint i = 0; i < host->usb->len; i++) {
        const AvUsbDevice *u = g_ptr_array_index(host->usb, i);
        const AvProfile *p = av_policy_match_usb(policy, u);

        if (p && !g_hash_table_contains(usb_noted, p->name)) {
            g_hash_table_add(usb_noted, p->name);
            g_ptr_array_add(c->notes, g_strdup_printf(
                "profile '%s' (usb) is left out: Nova passes no USB devices.", p->name));
        }
    }

    if (g_hash_table_size(used) == 0) {
        (void)av_nova_fail(error, "nothing for Nova on this host: no \"vfio-pci\", \"sriov-vf\" or \"mdev\" profile "
                           "matches a device here (see 'accelvirt list --managed')");
        return NULL;
    }
    c->profiles = g_hash_table_size(used);
    if (any_spec)
        g_ptr_array_insert(c->notes, 0, g_strdup(
            "Nova >= 31.0.0 (2025.1) is needed for the \"managed\" tag, 32.0.0 (2025.2) for \"one_time_use\"; "
            "accelvirt's hook binds the devices to vfio-pci, hence \"managed\": \"no\"."));
    /* The compute node is said to scrub only when every profile here does:
     * a flavor that requires the trait must not land on a device passed on
     * unscrubbed. */
    {
        g_autoptr(GPtrArray) unscrubbed = g_ptr_array_new();
        GHashTableIter it;
        gpointer name;

        g_hash_table_iter_init(&it, used);
        while (g_hash_table_iter_next(&it, &name, NULL)) {
            const AvProfile *p = av_policy_find(policy, name);

            if (p && !av_nova_profile_scrubs(p))
                g_ptr_array_add(unscrubbed, name);
        }
        g_ptr_array_sort(unscrubbed, av_nova_str_compare);
        if (unscrubbed->len == 0) {
            av_nova_provider_add_trait(g_ptr_array_index(c->providers, 0), AV_NOVA_SCRUBBED_TRAIT);
        } else {
            g_autofree char *list = av_nova_join(unscrubbed, "', '");

            g_ptr_array_add(c->notes, g_strdup_printf(
                "the compute node does not get " AV_NOVA_SCRUBBED_TRAIT " in the provider config: profile%s '%s' "
                "%s not scrub.", unscrubbed->len == 1 ? "" : "s", list, unscrubbed->len == 1 ? "does" : "do"));
        }
    }
    return g_steal_pointer(&c);
}

/* ---- output ---- */

static json_t *
av_nova_spec_json(const AvNovaSpec *s)
{
    json_t *o = json_object();
    g_autofree char *vendor = g_strdup_printf("%04x", s->vendor_id);
    g_autofree char *product = g_strdup_printf("%04x", s->product_id);

    /* vendor_id, product_id: 4 lower-case hex digits, as Nova rewrites
     * them ('%04x', nova/pci/devspec.py:67-84, 295-306).  Never
     * physical_network (such devices are not reported to Placement,
     * pci_placement_translator.py:492-497), devname (refused with
     * report_in_placement, 684-693) or remote_managed (VFs for Neutron). */
    json_object_set_new(o, "address", json_string(s->address));
    json_object_set_new(o, "vendor_id", json_string(vendor));
    json_object_set_new(o, "product_id", json_string(product));
    json_object_set_new(o, "resource_class", json_string(s->resource_class));
    if (s->traits)
        json_object_set_new(o, "traits", json_string(s->traits));
    /* "managed": "no": the operator binds the device to vfio-pci
     * (nova/conf/pci.py:240-254; 31.0.0). */
    json_object_set_new(o, "managed", json_string("no"));
    /* one_time_use needs report_in_placement (devspec.py:327-333; 32.0.0). */
    if (s->one_time_use)
        json_object_set_new(o, "one_time_use", json_string("true"));
    return o;
}

static json_t *
av_nova_alias_json(const AvNovaAlias *a)
{
    /* nova/pci/request.py:73-121, _ALIAS_SCHEMA (additionalProperties:
     * False). */
    return json_pack("{s:s,s:s,s:s,s:s}", "name", a->name, "resource_class", a->resource_class, "device_type",
                     a->device_type, "numa_policy", a->numa_policy);
}

static char *
av_nova_json_line(json_t *o)
{
    char *s = json_dumps(o, JSON_PRESERVE_ORDER);

    json_decref(o);
    return s;
}

char *
av_nova_spec_to_string(const AvNovaSpec *spec)
{
    return av_nova_json_line(av_nova_spec_json(spec));
}

char *
av_nova_alias_to_string(const AvNovaAlias *alias)
{
    return av_nova_json_line(av_nova_alias_json(alias));
}

static char *
av_nova_join(const GPtrArray *strings, const char *sep)
{
    GString *s = g_string_new(NULL);

    for (guint i = 0; i < strings->len; i++)
        g_string_append_printf(s, "%s%s", i ? sep : "", (const char *)g_ptr_array_index(strings, i));
    return g_string_free(s, FALSE);
}

char *
av_nova_config_to_conf(const AvNovaConfig *c, const char *policy_dir, const char *provider_note)
{
    GString *out = g_string_new(NULL);

    g_string_append_printf(out, "# accelvirt nova config: for host %s, from the policies in %s (%u profile%s, %u "
                           "device%s)\n", c->host, policy_dir, c->profiles, c->profiles == 1 ? "" : "s",
                           c->devices, c->devices == 1 ? "" : "s");
    for (guint i = 0; i < c->notes->len; i++)
        g_string_append_printf(out, "# %s\n", (const char *)g_ptr_array_index(c->notes, i));
    if (provider_note)
        g_string_append_printf(out, "# %s\n", provider_note);
    if (c->specs->len > 0) {
        g_string_append(out, "[pci]\nreport_in_placement = True\n");
        for (guint i = 0; i < c->specs->len; i++) {
            g_autofree char *line = av_nova_spec_to_string(g_ptr_array_index(c->specs, i));

            g_string_append_printf(out, "device_spec = %s\n", line);
        }
        for (guint i = 0; i < c->aliases->len; i++) {
            g_autofree char *line = av_nova_alias_to_string(g_ptr_array_index(c->aliases, i));

            g_string_append_printf(out, "alias = %s\n", line);
        }
        g_string_append(out, "\n[filter_scheduler]\npci_in_placement = True\n");
    }
    if (c->mdev_types->len > 0) {
        g_autoptr(GPtrArray) types = g_ptr_array_new();

        for (guint i = 0; i < c->mdev_types->len; i++)
            g_ptr_array_add(types, ((AvNovaMdevType *)g_ptr_array_index(c->mdev_types, i))->type);
        {
            g_autofree char *list = av_nova_join(types, ",");

            g_string_append_printf(out, "%s[devices]\nenabled_mdev_types = %s\n", c->specs->len ? "\n" : "", list);
        }
        for (guint i = 0; i < c->mdev_types->len; i++) {
            const AvNovaMdevType *t = g_ptr_array_index(c->mdev_types, i);
            g_autofree char *addrs = av_nova_join(t->addresses, ",");

            g_string_append_printf(out, "\n[mdev_%s]\ndevice_addresses = %s\nmdev_class = %s\n", t->type, addrs,
                                   t->mdev_class);
        }
    }
    return g_string_free(out, FALSE);
}

json_t *
av_nova_provider_config_json(const AvNovaConfig *c)
{
    json_t *providers = json_array();

    /* nova/compute/provider_config.py SCHEMA_V1: identification has exactly
     * one of uuid ($COMPUTE_NODE allowed) or name; traits.additional only
     * CUSTOM_ traits; each provider once. */
    for (guint i = 0; i < c->providers->len; i++) {
        const AvNovaProvider *p = g_ptr_array_index(c->providers, i);
        json_t *traits;

        if (p->traits->len == 0)
            continue;
        traits = json_array();
        for (guint j = 0; j < p->traits->len; j++)
            json_array_append_new(traits, json_string(g_ptr_array_index(p->traits, j)));
        json_array_append_new(providers,
                              json_pack("{s:o,s:{s:o}}", "identification",
                                        p->name ? json_pack("{s:s}", "name", p->name)
                                                : json_pack("{s:s}", "uuid", "$COMPUTE_NODE"),
                                        "traits", "additional", traits));
    }
    return json_pack("{s:{s:s},s:o}", "meta", "schema_version", "1.0", "providers", providers);
}

json_t *
av_nova_config_to_json(const AvNovaConfig *c)
{
    json_t *o = json_object();
    json_t *specs = json_array();
    json_t *aliases = json_array();
    json_t *types = json_array();
    json_t *mdev = json_object();
    json_t *notes = json_array();

    for (guint i = 0; i < c->specs->len; i++)
        json_array_append_new(specs, av_nova_spec_json(g_ptr_array_index(c->specs, i)));
    for (guint i = 0; i < c->aliases->len; i++)
        json_array_append_new(aliases, av_nova_alias_json(g_ptr_array_index(c->aliases, i)));
    for (guint i = 0; i < c->mdev_types->len; i++) {
        const AvNovaMdevType *t = g_ptr_array_index(c->mdev_types, i);
        json_t *addrs = json_array();

        for (guint j = 0; j < t->addresses->len; j++)
            json_array_append_new(addrs, json_string(g_ptr_array_index(t->addresses, j)));
        json_array_append_new(types, json_string(t->type));
        json_object_set_new(mdev, t->type, json_pack("{s:o,s:s}", "device_addresses", addrs, "mdev_class",
                                                     t->mdev_class));
    }
    for (guint i = 0; i < c->notes->len; i++)
        json_array_append_new(notes, json_string(g_ptr_array_index(c->notes, i)));
    json_object_set_new(o, "host", json_string(c->host));
    json_object_set_new(o, "profiles", json_integer(c->profiles));
    json_object_set_new(o, "device_count", json_integer(c->devices));
    json_object_set_new(o, "device_spec", specs);
    json_object_set_new(o, "alias", aliases);
    json_object_set_new(o, "devices", json_pack("{s:o,s:o}", "enabled_mdev_types", types, "mdev", mdev));
    json_object_set_new(o, "provider_config", av_nova_provider_config_json(c));
    json_object_set_new(o, "notes", notes);
    return o;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: what OpenStack Nova's configuration needs for this host's
 * managed devices (`accelvirt nova config`): [pci] device_spec
 * and alias entries, [devices] mdev types, and a provider config for what
 * device_spec cannot say, checked against Nova's own rules before any of it
 * is shown.  Built from the policy and a host scan only: no sysfs, no
 * libvirt, no output (the CLI prints and writes). */
#pragma once

#include <glib.h>
#include <jansson.h>

#include "pci/av-pci.h"
#include "policy/av-policy.h"

G_BEGIN_DECLS

/* One [pci] device_spec entry: one managed device by its exact address, or
 * for a "sriov-vf" profile one PF by its address, which Nova takes to mean
 * the PF's VFs (nova/pci/devspec.py, WhitelistPciAddress.match). */
typedef struct {
    char *profile;
    char *address;               /* "0000:81:00.0" */
    guint64 address_key;         /* av_pci_address_key(@address), for sorting */
    guint16 vendor_id;           /* the device's, for a PF spec its VFs' */
    guint16 product_id;
    const char *device_type;     /* "type-PCI", "type-PF" or "type-VF" (static) */
    char *resource_class;        /* the profile's, else CUSTOM_PCI_<VENDOR>_<PRODUCT> */
    char *traits;                /* the profile's traits joined with ",", or NULL */
    gboolean one_time_use;       /* the profile scrubs and the device is type-PCI or type-PF */
    guint devices;               /* devices it stands for: 1, or the PF's managed VFs */
} AvNovaSpec;

/* One [pci] alias entry: one per profile with devices in [pci]. */
typedef struct {
    char *name;                  /* the profile's name */
    char *resource_class;
    const char *device_type;     /* static */
    const char *numa_policy;     /* "required", "preferred" or "legacy" (static) */
} AvNovaAlias;

/* One [mdev_TYPE] section. */
typedef struct {
    char *type;
    char *mdev_class;            /* "VGPU" or the profiles' CUSTOM_ class */
    GPtrArray *addresses;        /* char*: the parents' PCI addresses, sorted */
    GPtrArray *profiles;         /* char*: the profiles of the type */
} AvNovaMdevType;

/* One provider of the provider config: by name, or the compute node
 * ($COMPUTE_NODE) when @name is NULL. */
typedef struct {
    char *name;
    GPtrArray *traits;           /* char*: CUSTOM_ traits, no duplicates */
} AvNovaProvider;

typedef struct {
    char *host;                  /* the hypervisor hostname providers are named after */
    guint profiles;              /* profiles that contribute something */
    guint devices;               /* devices configured (VFs one by one, mdev parents) */
    GPtrArray *specs;            /* AvNovaSpec* in address order */
    GPtrArray *aliases;          /* AvNovaAlias* in profile order */
    GPtrArray *mdev_types;       /* AvNovaMdevType* in type order */
    GPtrArray *providers;        /* AvNovaProvider*: the compute node first */
    GPtrArray *notes;            /* char*: what was left out and why, one sentence each */
} AvNovaConfig;

void av_nova_config_free(AvNovaConfig *config);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvNovaConfig, av_nova_config_free)

/* The trait every compute node gets in the provider config: its devices are
 * scrubbed by accelvirt between tenants. */
#define AV_NOVA_SCRUBBED_TRAIT "CUSTOM_ACCELVIRT_SCRUBBED"

/* TRUE when @name is a resource class Placement takes: ^CUSTOM_[A-Z0-9_]+$
 * and at most 255 characters, or one of os-resource-classes' standard
 * classes that suit a device (PCI_DEVICE, SRIOV_NET_VF, VGPU, PGPU, FPGA,
 * VGPU_DISPLAY_HEAD). */
gboolean av_nova_resource_class_is_valid(const char *name);

/* TRUE when @name is a trait Placement takes: ^[A-Z0-9_]{1,255}$. */
gboolean av_nova_trait_is_valid(const char *name);

/* Builds the configuration of @host (borrowed, a scan) for @policy
 * (borrowed), the providers named after @hostname, and checks it against
 * Nova's rules.  NULL with AV_ERROR_FAILED and one sentence naming the
 * profile or device and what to change when a rule is broken, or when there
 * is nothing Nova could use (no "vfio-pci", "sriov-vf" or "mdev" profile
 * with a device here).  Caller frees. */
AvNovaConfig *av_nova_config_build(const AvPolicy *policy, const AvHost *host, const char *hostname,
                                   GError **error);

/* The value of a device_spec or alias line: one line of JSON, keys in
 * Nova's documented order.  Caller frees. */
char *av_nova_spec_to_string(const AvNovaSpec *spec);
char *av_nova_alias_to_string(const AvNovaAlias *alias);

/* The nova.conf fragment: "# accelvirt nova config: ..." header naming
 * @policy_dir (borrowed), notes as "# " lines, [pci], [filter_scheduler],
 * [devices] and [mdev_TYPE] sections; @provider_note (may be NULL) is one
 * more comment line.  Caller frees. */
char *av_nova_config_to_conf(const AvNovaConfig *config, const char *policy_dir, const char *provider_note);

/* The provider config (nova/compute/provider_config.py SCHEMA_V1) as JSON:
 * {"meta": {"schema_version": "1.0"}, "providers": [{"identification":
 * {"name"|"uuid": ...}, "traits": {"additional": [...]}}]}.  New reference. */
json_t *av_nova_provider_config_json(const AvNovaConfig *config);

/* Everything as JSON: {"host", "device_spec": [...], "alias": [...],
 * "devices": {"enabled_mdev_types": [...], "mdev": {TYPE: {...}}},
 * "provider_config": {...}, "notes": [...]}.  New reference. */
json_t *av_nova_config_to_json(const AvNovaConfig *config);

G_END_DECLS

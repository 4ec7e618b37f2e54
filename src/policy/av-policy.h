/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: policies, the profiles an operator writes in the policy dir.
 *
 * *.json files read in name order; each holds {"profiles": [...]}.  The format
 * is documented in accelvirt-policy(5).  This layer never touches sysfs or
 * libvirt: it matches devices already scanned. */
#pragma once

#include <glib.h>
#include <jansson.h>

#include "pci/av-pci.h"

G_BEGIN_DECLS

typedef enum {
    AV_ATTACH_VFIO_PCI,
    AV_ATTACH_MDEV,
    AV_ATTACH_SRIOV_VF,
    AV_ATTACH_USB,
    AV_ATTACH_NETDEV,            /* a card reached through a network interface its host driver makes (an
                                  * IP-over-PCIe card): it stays on that driver; the domain gets the
                                  * interface as <interface type='direct'> in mode passthrough */
} AvAttach;

typedef enum {
    AV_NUMA_NONE,
    AV_NUMA_PREFERRED,
    AV_NUMA_STRICT,
} AvNumaPolicy;

typedef enum {
    AV_ALLOCATION_PACK,
    AV_ALLOCATION_SPREAD,
} AvAllocation;

typedef enum {
    AV_GRANULARITY_FUNCTION,
    AV_GRANULARITY_REGION,
    AV_GRANULARITY_CARD,
} AvGranularity;

typedef enum {
    AV_RESTORE_ON_RELEASE,
    AV_RESTORE_KEEP_VFIO,
} AvRestoreDriver;

typedef enum {
    AV_SCRUB_METHOD_NONE,
    AV_SCRUB_METHOD_COMMAND,
    AV_SCRUB_METHOD_VFIO_ZERO,
    AV_SCRUB_METHOD_RESET,
    AV_SCRUB_METHOD_ROM_CHECK,
    AV_SCRUB_METHOD_VM,
    AV_SCRUB_METHOD_USB_RESET,       /* attach usb only: a port reset through usbfs */
    AV_SCRUB_METHOD_USB_REAUTHORIZE, /* attach usb only: authorized 0 then 1, the device re-enumerates */
    AV_SCRUB_METHOD_PROGRAM_BASE,    /* profiles with "program" and its "base": the base image back, first step */
    AV_SCRUB_METHOD_USB_POWER_CYCLE, /* attach usb only: the hub port's power off and on ("disable" 1 then 0) */
} AvScrubMethod;

/* One scrub step: the method and its options (validated, as written plus the
 * defaults of accelvirt-policy(5)). */
typedef struct {
    AvScrubMethod method;
    json_t *options;             /* the whole step object, validated, with the defaults of
                                  * "timeout" and "verify" filled in; owned by the step */
    guint timeout_s;             /* "timeout" option (or its default), 0 when the method has none */
} AvScrubStep;

/* One entry of a profile's "companions": the other functions of the card
 * that belong to the accelerator (a GPU's HDMI audio, USB-C and UCSI
 * functions) and may go to the guest with it, unbound from their host
 * driver.  Every given key must match. */
typedef struct {
    gboolean vendor_set;
    guint16 vendor;
    GArray *devices;             /* guint16 device ids; empty = any */
    gboolean class_set;
    guint32 class_code;          /* compared under class_mask, as match.class */
    guint32 class_mask;
} AvCompanionMatch;

/* Where a profile's "program" runs (accelvirt-policy(5), PROGRAMMING). */
typedef enum {
    AV_PROGRAM_DRIVER_VFIO,      /* "vfio-pci": the device on vfio-pci (the profile keeps it there,
                                  * "restore_driver": "keep-vfio"), the program gets its group file as fd 3 */
    AV_PROGRAM_DRIVER_HOST,      /* "host": the device on its host driver (xclmgmt, dfl-pci), where the
                                  * vendor's tools find it; the program gets no fd */
} AvProgramDriver;

/* A profile's "program": how its devices are programmed with a bitstream of
 * the library.  The argv templates hold placeholders
 * (av_profile_argv_expand()). */
typedef struct {
    json_t *argv;                /* array of strings, the template; argv[0] an absolute path */
    json_t *verify;              /* "verify": a template whose exit 0 says the device holds the
                                  * bitstream (read back), or NULL */
    guint timeout_s;             /* "timeout", default 600, at most 86400 */
    char *base;                  /* "base": the bitstream (library name or sha256) the scrub's
                                  * "program-base" step restores, or NULL */
    AvProgramDriver driver;      /* "driver", default "vfio-pci" */
} AvProgram;

void av_program_free(AvProgram *program);

/* TRUE when @program's argv names the device it programs ({address} or
 * {region}); one that does not programs the whole card, which only a
 * profile (and a request) of granularity "card" may ask for. */
gboolean av_program_names_device(const AvProgram *program);

/* The lifecycle points of a profile's driver commands ("on_prepare",
 * in the hook, bounded; "on_release": in the scrub job, for every release,
 * and in the hook, bounded, to undo an on_prepare of a refused prepare;
 * "on_assign": in the CLI when it gives a device to a domain; "on_free": in
 * the worker after a verified scrub). */
typedef enum {
    AV_DRIVER_ON_PREPARE,
    AV_DRIVER_ON_RELEASE,
    AV_DRIVER_ON_ASSIGN,
    AV_DRIVER_ON_FREE,
    AV_DRIVER_POINTS,
} AvDriverPoint;

/* The longest timeout of a driver command the hook runs (on_prepare,
 * on_release): libvirt waits for the hook. */
#define AV_DRIVER_HOOK_TIMEOUT_MAX 30u

/* What one hook call may spend on driver commands in all, for each of its
 * two points (its on_prepare commands; its on_release commands, those of a
 * refused prepare's undo included): the pool's lock is held meanwhile, and
 * every other domain's start and stop waits. */
#define AV_DRIVER_HOOK_BUDGET_S 60u

/* One driver command: {"argv": [...], "timeout": S}. */
typedef struct {
    json_t *argv;                /* array of strings, a template (av_profile_argv_expand()) */
    guint timeout_s;             /* default 10 in the hook, 300 elsewhere */
} AvDriverCommand;

void av_driver_command_free(AvDriverCommand *command);

/* The values of the placeholders of a template.  NULL members are left out:
 * a template naming one is refused (av_profile_argv_expand()). */
typedef struct {
    const char *address;         /* {address}: the device's PCI address (an mdev's parent, a USB bus path) */
    const char *card;            /* {card}: the card's address: a VF's PF, else function 0 of its slot */
    const char *region;          /* {region}: a VF's index on its PF, else the PCI function number */
    const char *bitstream;       /* {bitstream}: the library file's path */
    const char *sha256;          /* {sha256}: the bitstream's hex SHA-256 */
    const char *function_id;     /* {function_id}: the bitstream's function id */
    const char *identity;        /* {identity}: the pool identity */
    const char *domain_name;     /* {domain_name} */
    const char *domain_uuid;     /* {domain_uuid} */
    const char *profile;         /* {profile} */
} AvArgvValues;

/* Expands the template @argv (a JSON array of strings, validated at policy
 * load: only the placeholders above, written "{name}", no other brace)
 * with @values.  A new NULL-terminated vector (g_strfreev()), or NULL with
 * AV_ERROR_POLICY when the template names a placeholder whose value is
 * NULL.  With @values NULL it only checks the template (the policy's
 * parser does) and returns it unexpanded. */
char **av_profile_argv_expand(const json_t *argv, const AvArgvValues *values, GError **error);

/* The name of a point as the policy writes it ("on_prepare", ...). */
const char *av_driver_point_to_string(AvDriverPoint point);

/* "health" (accelvirt-policy(5), HEALTH): the limits past which
 * a device of the profile is quarantined instead of handed to the next
 * tenant, checked by the worker before it frees a device and by reconcile
 * on free devices.  A count limit is the most allowed ("fatal_aer": 0
 * quarantines at the first fatal AER error); -1: not checked. */
typedef enum {
    AV_HEALTH_LINK_IGNORE,       /* default: the link is reported, never judged */
    AV_HEALTH_LINK_WARN,         /* a degraded link is journalled and shown, the device still freed */
    AV_HEALTH_LINK_QUARANTINE,   /* a degraded link quarantines */
} AvHealthLinkAction;

typedef struct {
    gboolean set;                /* the profile has "health" */
    gint64 fatal_aer;            /* "fatal_aer": most fatal AER errors (aer_dev_fatal TOTAL_ERR_FATAL); -1 */
    gint64 nonfatal_aer;         /* "nonfatal_aer" (aer_dev_nonfatal TOTAL_ERR_NONFATAL); -1 */
    gint64 correctable_aer;      /* "correctable_aer" (aer_dev_correctable TOTAL_ERR_COR); -1 */
    AvHealthLinkAction degraded_link; /* "degraded_link": "quarantine", "warn" or "ignore" */
    gboolean link_speed;         /* "link_speed": "check": a current speed below the maximum counts as
                                  * degraded too; default "ignore" (width only: GPUs lower their link
                                  * speed when idle) */
    gint64 reset_failures;       /* "reset_failures": most failed reset steps since enrolment; -1 */
    gint64 scrub_failures;       /* "scrub_failures": most failed scrubs since enrolment; -1 */
} AvHealthLimits;

typedef struct {
    char *name;                  /* unique across all files: [a-z0-9][a-z0-9._-]{0,62} */
    char *source_file;           /* the file it came from */
    int source_line;             /* line of the profile object in that file */

    /* match: every given key must match */
    gboolean match_vendor_set;
    guint16 match_vendor;        /* PCI vendor, or USB idVendor for attach "usb" */
    GArray *match_devices;       /* guint16: device ids (USB idProduct for "usb"); empty = any */
    gboolean match_class_set;
    guint32 match_class;         /* compared under match_class_mask */
    guint32 match_class_mask;    /* "0x0302" matches base+sub (mask 0xffff00), "0x030200" all 24 bits */
    gboolean match_subsystem_vendor_set;
    guint16 match_subsystem_vendor;
    gboolean match_subsystem_device_set;
    guint16 match_subsystem_device;
    GPtrArray *match_addresses;  /* char*: PCI addresses or USB bus paths; empty = any */
    GPtrArray *match_mdev_parents; /* char*: attach "mdev" only: names of /sys/class/mdev_bus
                                    * ("mtty", "0000:17:00.0") the profile takes, instead of
                                    * PCI ids; empty = match by PCI ids */
    GPtrArray *match_pfs;        /* char*: attach "sriov-vf" only: addresses of the PFs whose VFs the
                                  * profile takes ("pf"); empty = any PF */

    GPtrArray *companions;       /* AvCompanionMatch*: attach "vfio-pci" only; empty = none */

    AvAttach attach;
    char *mdev_type;             /* attach "mdev": the type id to create, else NULL */
    char *vfio_driver;           /* "vfio_driver" (attach "vfio-pci", "sriov-vf"): "vfio-pci" or a variant's
                                  * module ("mlx5_vfio_pci"); NULL = "auto", what modules.alias offers
                                  * (av_vfio_choose_driver()) */
    char *vgpu_type;             /* "vgpu_type" (attach "sriov-vf" only): the NVIDIA vGPU type made on the VF
                                  * at prepare and destroyed after its scrub (av-vgpu.h), as an ID or a name;
                                  * NULL: none (the VF is bound to a vfio driver as any other) */
    AvNumaPolicy numa;
    AvAllocation allocation;
    AvGranularity granularity;
    GPtrArray *scrub;            /* AvScrubStep*, in order; empty means no step (like "none") */
    AvRestoreDriver restore_driver;
    gboolean hide_hypervisor;
    char *resource_class;        /* Nova resource class such as "CUSTOM_GPU_A100", or NULL */
    GPtrArray *traits;           /* char*: Nova traits */
    char *description;           /* "description", or NULL */
    guint64 memory;              /* "memory": the device's memory in bytes (what a scrub must clear); 0 unknown */
    /* attach "sriov-vf": the VFs accelvirt makes (accelvirt-policy(5), "vfs") */
    guint vfs;                   /* "vfs": N, the count each PF of the profile offers; 0 = unset */
    gboolean vfs_on_demand;      /* "vfs": "on-demand": as many as domains need, up to sriov_totalvfs */
    gboolean vfs_shrink;         /* "vfs_shrink": back to @vfs (0 on demand) once every VF is free */
    double min_coverage;         /* "min_coverage": the least share (0 to 1) of @memory a scrub must clear,
                                  * or 0 when the profile asks for none */
    guint64 max_lease_s;         /* "max_lease": the longest a domain may hold a device of the profile
                                  * before `accelvirt stale` reports it ("72h", "30d" or seconds);
                                  * 0 = no limit */
    AvHealthLimits health;       /* "health"; .set FALSE when absent */
    AvProgram *program;          /* "program", or NULL: its devices are not programmed */
    AvDriverCommand *drivers[AV_DRIVER_POINTS]; /* "on_prepare", ...: NULL when absent */
    int placement_sync;          /* "placement_sync": 1 true, 0 false, -1 absent (the policy's "nova"
                                  * says); true only with attach "vfio-pci" or "sriov-vf" */
    GArray *runtime_ids;         /* guint32 (idVendor << 16 | idProduct): "runtime_ids", attach "usb" only:
                                  * the ids a stick of the profile may present while a domain holds it
                                  * (its firmware loaded); never while it is free; empty = none */
} AvProfile;

void av_profile_free(AvProfile *profile);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvProfile, av_profile_free)

/* The policy's top-level "nova" object (accelvirt-policy(5), NOVA; issue
 * 18): at most one file of the policy dir has one. */
typedef struct {
    gboolean placement_sync;     /* "placement_sync", default false: keep Placement's "reserved" of the
                                  * devices' resource providers true (src/nova/av-placement-sync.h) */
    char *cloud;                 /* "cloud": the clouds.yaml entry, or NULL ($OS_CLOUD) */
    char *hypervisor_hostname;   /* "hypervisor_hostname", or NULL (gethostname()) */
    gboolean owner_metadata_ignored; /* "owner_metadata": false: a domain's <nova:owner> is not what its
                                  * devices are charged to, only the owner the operator pinned
                                  * (`accelvirt define --project`) */
    char *source_file;           /* the file that has it */
} AvNovaSettings;

void av_nova_settings_free(AvNovaSettings *nova);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvNovaSettings, av_nova_settings_free)

/* The period of a "max_device_hours" limit: calendar periods in UTC
 * (accelvirt-policy(5), LIMITS). */
typedef enum {
    AV_LIMIT_PERIOD_NONE,        /* no "period": a "max_devices" limit alone */
    AV_LIMIT_PERIOD_DAY,         /* from 00:00 UTC */
    AV_LIMIT_PERIOD_WEEK,        /* from Monday 00:00 UTC (ISO 8601 weeks) */
    AV_LIMIT_PERIOD_MONTH,       /* from the 1st, 00:00 UTC */
    AV_LIMIT_PERIODS,
} AvLimitPeriod;

/* One entry of a policy's top-level "limits" (accelvirt-policy(5),
 * LIMITS): what the owner's domains may hold on this host. */
typedef struct {
    char *project;               /* "owner": {"project"}: the project the devices are charged to, or NULL */
    char *user;                  /* "owner": {"user"}, or NULL; at least one of the two is set */
    char *profile;               /* "profile", or NULL: the owner's devices of every profile together */
    gint64 max_devices;          /* "max_devices", -1 when absent */
    gint64 max_device_hours;     /* "max_device_hours", -1 when absent */
    AvLimitPeriod period;        /* "period" (with max_device_hours only), else NONE */
    char *source_file;           /* the file that has it */
} AvLimit;

void av_limit_free(AvLimit *limit);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvLimit, av_limit_free)

/* "day", "week", "month" ("none" for AV_LIMIT_PERIOD_NONE). */
const char *av_limit_period_to_string(AvLimitPeriod period);

/* The Unix time the period @period that holds @now began (UTC); @now
 * itself for AV_LIMIT_PERIOD_NONE. */
gint64 av_limit_period_start(AvLimitPeriod period, gint64 now);

/* TRUE when @limit's owner is @project and @user: each id the limit names
 * equals the one given (NULL never equals). */
gboolean av_limit_owner_matches(const AvLimit *limit, const char *project, const char *user);

/* "project 'P'", "user 'U'" or "project 'P' user 'U'" (caller frees). */
char *av_limit_describe_owner(const AvLimit *limit);

/* @limit as written in the policy, normalised (new reference). */
json_t *av_limit_to_json(const AvLimit *limit);

typedef struct {
    char *dir;                   /* the directory read, or NULL */
    GPtrArray *files;            /* char*: files read, in order */
    GPtrArray *profiles;         /* AvProfile*, in file-name order then array order */
    AvNovaSettings *nova;        /* the "nova" object of one file, or NULL */
    GPtrArray *limits;           /* AvLimit*: the "limits" of every file, in file-name order */
} AvPolicy;

void av_policy_free(AvPolicy *policy);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvPolicy, av_policy_free)

/* Reads every *.json file of @dir in name order (strcmp; other names and
 * hidden files are ignored).  A missing directory is an empty policy (nothing
 * is managed).  The first bad file fails the whole load: the error
 * (AV_ERROR_POLICY) reads "FILE:LINE:COLUMN: what is wrong", pointing at the
 * offending value.  Everything a policy makes accelvirt run or read as root
 * must be trusted (av_file_check_trusted(): owned by root or the state
 * dir's owner, writable by nobody else, nor in a directory that is): the
 * directory, each file (a link's directory and its target alike), each
 * "command" step's program (av_policy_check_scrub_program()) and each "vm"
 * step's template (av_policy_read_scrub_template()), and the programs of
 * each "program" and driver command with their absolute-path arguments
 * that name no placeholder (one not installed yet where only root could
 * put it); AV_ERROR_UNSAFE otherwise, at "FILE:LINE:COLUMN: " of the
 * step's value for a program or template.  Returns a new AvPolicy or NULL. */
AvPolicy *av_policy_load_dir(const char *dir, GError **error);

/* Parses one policy document @data of @len bytes, reporting errors against
 * @filename.  Appends its profiles to @policy (checking names are unique
 * across the policy).  The programs and templates that its steps name are
 * not looked at (av_policy_load_dir() checks them; the scrub checks them
 * again before it uses them).  Returns FALSE with @error set, and @policy
 * unchanged, on a bad document. */
gboolean av_policy_add_data(AvPolicy *policy, const char *filename, const char *data, gsize len, GError **error);

/* The placeholder of a "vm" step's template that becomes the device's
 * <hostdev>, and the largest template read. */
#define AV_POLICY_HOSTDEV_PLACEHOLDER "@HOSTDEV@"
#define AV_POLICY_TEMPLATE_MAX (1024u * 1024u)

/* Checks the program @path of a "command" step, which runs as root: trusted
 * (av_file_check_trusted()), a regular file, executable.  Called at policy
 * load and again right before it runs.  FALSE with AV_ERROR_UNSAFE (another
 * user could change it), AV_ERROR_NOT_FOUND (it does not exist) or
 * AV_ERROR_POLICY (not an executable regular file).  Borrows @path. */
gboolean av_policy_check_scrub_program(const char *path, GError **error);

/* Checks the argv (a JSON array of strings) of a "command" step: its
 * program as av_policy_check_scrub_program() does, and every later element
 * that is an absolute path to something that exists (a script an
 * interpreter runs, "python3 /usr/libexec/scrub.py") as trusted
 * (av_file_check_trusted()).  Arguments that only contain a path
 * ("--script=/x") are not looked at.  On failure *ret_bad is the index of
 * the element at fault. */
gboolean av_policy_check_scrub_argv(const json_t *argv, guint *ret_bad, GError **error);

/* Reads the template @path of a "vm" step, which root hands to libvirt:
 * trusted (av_file_check_trusted()), a regular file of at most
 * AV_POLICY_TEMPLATE_MAX bytes, UTF-8 without NUL, holding
 * AV_POLICY_HOSTDEV_PLACEHOLDER outside its XML comments (the shipped
 * template names it in its own; where else it is, only the running scrub
 * domain's live XML tells: see src/scrub/av-scrub-vm.c), and whose boot
 * images (<kernel>, <initrd>, <loader>, disk and filesystem sources) are
 * trusted too: the image is the scrubber.  Called at policy load and again right
 * before the scrub VM is made from it.  Returns its text (caller frees), or
 * NULL with AV_ERROR_UNSAFE, AV_ERROR_NOT_FOUND, AV_ERROR_POLICY or
 * AV_ERROR_IO.  Borrows @path. */
char *av_policy_read_scrub_template(const char *path, GError **error);

/* The largest "vfs" count: SR-IOV's TotalVFs is a 16-bit register (PCIe
 * Base Spec 9.3.3.5). */
#define AV_POLICY_VFS_MAX 65535u

/* TRUE when @profile makes VFs ("vfs" set: a count or "on-demand"). */
gboolean av_profile_makes_vfs(const AvProfile *profile);

/* The VF count @profile wants on each of its PFs when no domain asks for
 * more: its "vfs" N, or 0 on demand (what "vfs_shrink" goes back to). */
guint av_profile_vfs_base(const AvProfile *profile);

/* The first "sriov-vf" profile with "vfs" that makes VFs on the PF @pf
 * (accelvirt-policy(5), MAKING VFS), or NULL: @pf is SR-IOV capable, no VF
 * itself, its vendor is the profile's match.vendor, its sriov_vf_device is
 * in match.device (when listed), its address in match.pf (when listed),
 * its class and subsystem ids match the profile's (a VF carries its PF's).
 * Borrowed from @policy. */
const AvProfile *av_policy_match_sriov_pf(const AvPolicy *policy, const AvPciDevice *pf);

/* A new empty policy (no directory, no file, no profile). */
AvPolicy *av_policy_new(void);

/* The first profile matching the PCI device @dev, or NULL.  A VF matches a
 * profile with attach "sriov-vf" by its own ids.  Borrowed from @policy.
 * Which functions each attach can match (accelvirt-policy(5), MATCHING):
 * "vfio-pci" only functions that are not VFs (dev->physfn == NULL);
 * "sriov-vf" only VFs; "mdev" only mdev parents offering the profile's
 * mdev_type (in dev->mdev_types), PF or VF alike, and when the profile
 * names its parents ("mdev_parent") only those named; "usb" never a PCI
 * device.
 * Bridges (base class 0x06) never match. */
const AvProfile *av_policy_match_pci(const AvPolicy *policy, const AvPciDevice *dev);

/* The first "mdev" profile that takes the mdev parent @parent, or NULL.
 * A PCI parent (parent->pci set) goes through av_policy_match_pci(), whose
 * answer counts only when its attach is "mdev"; any other parent (such as
 * the virtual "mtty") is taken by the first "mdev" profile that names it in
 * "match": {"mdev_parent": [...]} and whose mdev_type it offers.  Borrowed
 * from @policy. */
const AvProfile *av_policy_match_mdev_parent(const AvPolicy *policy, const AvMdevParent *parent);

/* TRUE when @dev is a function that @profile's "companions" name (by class
 * or ids).  Says nothing of where @dev sits: av_vfio_group_check() also
 * wants it on the card of the profile's device. */
gboolean av_profile_names_companion(const AvProfile *profile, const AvPciDevice *dev);

/* TRUE when the "usb" profile @profile lists @vendor:@product among its
 * "runtime_ids" (what a stick of it presents once a tenant loaded its
 * firmware).  FALSE for NULL. */
gboolean av_profile_runtime_id(const AvProfile *profile, guint16 vendor, guint16 product);

/* The first "usb" profile matching the USB device @dev, or NULL. */
const AvProfile *av_policy_match_usb(const AvPolicy *policy, const AvUsbDevice *dev);

/* TRUE when @name is a valid profile name: [a-z0-9][a-z0-9._-]{0,62}. */
gboolean av_profile_name_is_valid(const char *name);

/* The profile named @name, or NULL.  Borrowed. */
const AvProfile *av_policy_find(const AvPolicy *policy, const char *name);

/* Parses a size as the policy's "memory" takes it: a whole number of bytes,
 * or a string of a number and a unit ("48GiB", "80 GB", "256 MiB"; B, KiB,
 * MiB, GiB, TiB as powers of 1024, kB, MB, GB, TB as powers of 1000).
 * Returns FALSE for anything else, 0, or a size of 2^63 bytes or more. */
gboolean av_policy_parse_size(const char *text, guint64 *ret_bytes);

/* What `accelvirt policy check` warns of @profile: scrub steps that
 * cannot clear the memory of the device it matches (accelvirt-policy(5),
 * WHAT CLEARS A DEVICE), a "program" without a "program-base" step, and
 * programs of "program" or driver commands that are not installed (yet:
 * the load takes them where only root could put them).  A new array of
 * messages (char*), empty when there is nothing to say. */
GPtrArray *av_profile_scrub_warnings(const AvProfile *profile);

/* Whether the devices of @profile have their Placement "reserved" kept
 * true: the profile's "placement_sync" when given, else the
 * policy's "nova" "placement_sync"; never for attach "mdev" or "usb". */
gboolean av_policy_placement_sync(const AvPolicy *policy, const AvProfile *profile);

/* Whether a domain's own <nova:owner> metadata (project, user) is what its
 * devices' time is charged to when the operator pinned no owner: the
 * policy's "nova" "owner_metadata", default true. */
gboolean av_policy_owner_metadata_trusted(const AvPolicy *policy);

/* The longest "hypervisor_hostname": Placement's resource provider names
 * are at most 200 characters, and Nova's device providers are named
 * "HOSTNAME_0000:00:00.0". */
#define AV_NOVA_HOSTNAME_MAX 187

/* Lower-case names for output and for the policy files. */
const char *av_attach_to_string(AvAttach attach);
const char *av_numa_policy_to_string(AvNumaPolicy numa);
const char *av_allocation_to_string(AvAllocation allocation);
const char *av_granularity_to_string(AvGranularity granularity);
const char *av_restore_driver_to_string(AvRestoreDriver restore);

/* TRUE for a "vfio_driver" value: "auto", "vfio-pci" ("vfio_pci"), or a
 * variant's module name ([a-z0-9_]+_vfio_pci, at most 64 characters). */
gboolean av_vfio_driver_choice_is_valid(const char *name);
const char *av_scrub_method_to_string(AvScrubMethod method);

/* The profile as JSON (the normalised form, for `accelvirt policy show`). */
json_t *av_profile_to_json(const AvProfile *profile);

G_END_DECLS

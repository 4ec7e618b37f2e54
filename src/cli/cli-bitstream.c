/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt bitstream and program: the bitstream library and programming
 * a device by hand (accelvirt(1), BITSTREAMS).
 *
 *   bitstream add FILE --name NAME [--compatible ID[,ID...]] [--function-id ID] [--description TEXT]
 *   bitstream list
 *   bitstream remove NAME|SHA256
 *   program DEVICE BITSTREAM [--force]
 *
 * DEVICE is a PCI address or a pool identity; BITSTREAM a library name or
 * SHA-256.  The library's changes are made under the pool's write lock and
 * journalled ("bitstream-added", "bitstream-removed"); a program run is
 * journalled as "program" with av_program_run()'s report. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "fpga/av-bitstream.h"
#include "scrub/av-program.h"
#include "util/av-error.h"
#include "util/av-json.h"
#include "vfio/av-kernel.h"
#include "vfio/av-vfio.h"
#include "util/av-names.h"

/* The pool devices of @pool recorded holding @sha256, as JSON objects
 * {"address", "identity", "state", "since", "by"}. */
static json_t *
av_cli_bitstream_holders(const AvPool *pool, const char *sha256)
{
    json_t *held = json_array();

    for (guint i = 0; pool && i < av_pool_devices(pool)->len; i++) {
        const AvPoolDevice *dev = g_ptr_array_index(av_pool_devices(pool), i);

        if (!dev->programmed || !g_str_equal(dev->programmed->sha256, sha256))
            continue;
        json_array_append_new(held, json_pack("{s:s?,s:s,s:s,s:I,s:s?}", "address", dev->address, "identity",
                                               dev->identity, "state", av_device_state_to_string(dev->state),
                                               "since", (json_int_t)dev->programmed->since, "by",
                                               dev->programmed->by));
    }
    return held;
}

/* Says that @ref cannot name a bitstream; returns AV_EXIT_USAGE. */
static int
av_cli_bitstream_bad_ref(const char *ref)
{
    return av_cli_usage_error("'%s' cannot name a bitstream (a name of [a-z0-9._-], or a SHA-256 of 64 hex digits); "
                              "'accelvirt bitstream list' shows them", ref);
}

/* The journal fields of a library change of @bitstream. */
static json_t *
av_cli_bitstream_fields(const AvBitstream *bitstream, const char *operator_name)
{
    json_t *fields = av_bitstream_to_json(bitstream);

    json_object_del(fields, "added");
    json_object_del(fields, "description");
    json_object_set_new(fields, "operator", json_string(operator_name));
    return fields;
}

/* --- bitstream add -------------------------------------------------------------- */

static int
av_cli_bitstream_add(AvCli *cli, int argc, char **argv)
{
    g_autofree char *name = NULL;
    g_auto(GStrv) compatible_opts = NULL;
    g_autofree char *function_id = NULL;
    g_autofree char *description = NULL;
    const GOptionEntry entries[] = {
        { "name", 0, 0, G_OPTION_ARG_STRING, &name, "The bitstream's name in the library ([a-z0-9._-])", "NAME" },
        { "compatible", 0, 0, G_OPTION_ARG_STRING_ARRAY, &compatible_opts,
          "What it fits: PCI ids VVVV:DDDD or profile:NAME, comma-separated, repeatable (default: anything a "
          "profile programs)", "ID[,ID...]" },
        { "function-id", 0, 0, G_OPTION_ARG_STRING, &function_id,
          "The accelerated function it provides ([A-Za-z0-9._:-])", "ID" },
        { "description", 0, 0, G_OPTION_ARG_STRING, &description, "A line for people", "TEXT" },
        { NULL },
    };
    g_autoptr(GPtrArray) compatible = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(AvRoot) root = NULL;
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(AvBitstream) before = NULL;
    g_autoptr(AvBitstream) added = NULL;
    g_autoptr(json_t) fields = NULL;
    g_autoptr(GError) err = NULL;
    g_autofree char *operator_name = av_cli_operator();
    gboolean unchanged;

    if (!av_cli_parse(cli, "bitstream add", "FILE --name NAME",
                      "Copy FILE, a root-owned FPGA image that only root can change, into the bitstream library "
                      "of the state dir, named by its SHA-256.  Nothing is fetched from the network.",
                      entries, &argc, &argv))
        return AV_EXIT_USAGE;
    if (argc != 2)
        return av_cli_usage_error("'bitstream add' needs one FILE; see 'accelvirt bitstream add --help'");
    if (!name)
        return av_cli_usage_error("'bitstream add' needs --name NAME; see 'accelvirt bitstream add --help'");
    if (!av_bitstream_name_is_valid(name))
        return av_cli_usage_error("'%s' is not a bitstream name: 1 to 63 of [a-z0-9._-], starting with a letter "
                                  "or digit", name);
    for (char **o = compatible_opts; o && *o; o++) {
        g_auto(GStrv) parts = g_strsplit(*o, ",", -1);

        for (char **p = parts; *p; p++) {
            if (!av_bitstream_compatible_is_valid(*p))
                return av_cli_usage_error("'%s' is not a --compatible entry: PCI ids VVVV:DDDD (as lspci -n writes "
                                          "them) or profile:NAME", *p);
            g_ptr_array_add(compatible, g_strdup(*p));
        }
    }
    g_ptr_array_add(compatible, NULL);

    root = av_root_new_default(cli->root, &err);
    if (!root)
        return av_cli_fail(err);
    pool = av_cli_open_pool(cli, root, AV_POOL_WRITE, &err);
    if (!pool)
        return av_cli_fail(err);
    before = av_bitstream_lookup(cli->state_dir, name, &err);
    if (!before && !g_error_matches(err, AV_ERROR, AV_ERROR_NOT_FOUND))
        return av_cli_fail(err);
    g_clear_error(&err);
    added = av_bitstream_add(cli->state_dir, argv[1], name, (const char *const *)compatible->pdata, function_id,
                             description, &err);
    if (!added)
        return av_cli_fail(err);
    unchanged = before && g_str_equal(before->sha256, added->sha256);
    if (!unchanged) {
        fields = av_cli_bitstream_fields(added, operator_name);
        if (!av_pool_journal_append(pool, "bitstream-added", fields, &err)) {
            g_autoptr(GError) undo = NULL;

            /* Nothing in the library that the journal does not tell. */
            if (!av_bitstream_remove(cli->state_dir, added->sha256, &undo))
                g_prefix_error(&err, "(and removing it again failed: %s) ", undo->message);
            return av_cli_fail(err);
        }
    }
    if (cli->json) {
        json_t *out = av_bitstream_to_json(added);

        json_object_set_new(out, "changed", json_boolean(!unchanged));
        av_cli_print_json(out);
    } else if (unchanged) {
        printf("bitstream '%s' (sha256 %s) is in the library already: nothing changed\n", added->name,
               added->sha256);
    } else {
        g_autofree char *size = g_format_size(added->size);

        printf("added bitstream '%s': sha256 %s, %s\n", added->name, added->sha256, size);
    }
    return AV_EXIT_OK;
}

/* --- bitstream list ------------------------------------------------------------- */

static int
av_cli_bitstream_list(AvCli *cli, int argc, char **argv)
{
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(GPtrArray) list = NULL;
    g_autoptr(GError) err = NULL;
    g_autoptr(json_t) out = json_array();

    if (!av_cli_parse(cli, "bitstream list", NULL,
                      "Show the bitstreams of the library: name, SHA-256, size, what they fit, the function they "
                      "provide, and the pool devices recorded holding each now.",
                      NULL, &argc, &argv))
        return AV_EXIT_USAGE;
    if (argc != 1)
        return av_cli_usage_error("'bitstream list' takes no argument; see 'accelvirt bitstream list --help'");
    pool = av_cli_open_pool(cli, NULL, AV_POOL_READ, &err);
    if (!pool)
        return av_cli_fail(err);
    if (!av_bitstream_list(cli->state_dir, &list, &err))
        return av_cli_fail(err);
    for (guint i = 0; i < list->len; i++) {
        const AvBitstream *b = g_ptr_array_index(list, i);
        json_t *e = av_bitstream_to_json(b);

        json_object_set_new(e, "held_by", av_cli_bitstream_holders(pool, b->sha256));
        json_array_append_new(out, e);
    }
    if (cli->json) {
        av_cli_print_json(json_pack("{s:O}", "bitstreams", out));
        return AV_EXIT_OK;
    }
    if (list->len == 0) {
        printf("The bitstream library is empty; 'accelvirt bitstream add FILE --name NAME' adds one.\n");
        return AV_EXIT_OK;
    }
    printf("%-24s %-12s %10s  %-24s %-16s %s\n", "NAME", "SHA256", "SIZE", "COMPATIBLE", "FUNCTION", "HELD BY");
    for (guint i = 0; i < list->len; i++) {
        const AvBitstream *b = g_ptr_array_index(list, i);
        json_t *held = json_object_get(json_array_get(out, i), "held_by");
        g_autoptr(GString) compatible = g_string_new(NULL);
        g_autoptr(GString) holders = g_string_new(NULL);
        g_autofree char *size = g_format_size(b->size);
        size_t k;
        json_t *h;

        for (guint c = 0; c < b->compatible->len; c++)
            g_string_append_printf(compatible, "%s%s", c ? "," : "", (const char *)g_ptr_array_index(b->compatible, c));
        json_array_foreach(held, k, h) {
            const char *address = json_string_value(json_object_get(h, "address"));

            g_string_append_printf(holders, "%s%s", k ? "," : "",
                                   address ? address : json_string_value(json_object_get(h, "identity")));
        }
        printf("%-24s %-12.12s %10s  %-24s %-16s %s\n", b->name, b->sha256, size, compatible->len ? compatible->str : "any",
               b->function_id ? b->function_id : "-", holders->len ? holders->str : "-");
    }
    return AV_EXIT_OK;
}

/* --- bitstream remove ----------------------------------------------------------- */

static int
av_cli_bitstream_remove(AvCli *cli, int argc, char **argv)
{
    g_autoptr(AvRoot) root = NULL;
    g_autoptr(AvPolicy) policy = NULL;
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(AvBitstream) b = NULL;
    g_autoptr(json_t) fields = NULL;
    g_autoptr(GError) err = NULL;
    g_autofree char *operator_name = av_cli_operator();
    g_autofree char *why = NULL;

    if (!av_cli_parse(cli, "bitstream remove", "NAME|SHA256",
                      "Remove a bitstream from the library: refused while a pool device is recorded holding it, a "
                      "domain was placed with it, or a profile's program restores it as its base.",
                      NULL, &argc, &argv))
        return AV_EXIT_USAGE;
    if (argc != 2)
        return av_cli_usage_error("'bitstream remove' needs one NAME or SHA256; see 'accelvirt bitstream list'");
    if (!av_bitstream_ref_is_valid(argv[1]))
        return av_cli_bitstream_bad_ref(argv[1]);
    if (!av_cli_open(cli, &root, &policy, &err))
        return av_cli_fail(err);
    pool = av_cli_open_pool(cli, root, AV_POOL_WRITE, &err);
    if (!pool)
        return av_cli_fail(err);
    b = av_bitstream_lookup(cli->state_dir, argv[1], &err);
    if (!b)
        return av_cli_fail(err);
    why = av_bitstream_in_use(pool, policy, b);
    if (why) {
        g_set_error(&err, AV_ERROR, AV_ERROR_IN_USE, "cannot remove bitstream '%s': %s", b->name, why);
        return av_cli_fail(err);
    }
    fields = av_cli_bitstream_fields(b, operator_name);
    if (!av_bitstream_remove(cli->state_dir, b->sha256, &err) ||
        !av_pool_journal_append(pool, "bitstream-removed", fields, &err))
        return av_cli_fail(err);
    if (cli->json)
        av_cli_print_json(json_pack("{s:s,s:s,s:b}", "name", b->name, "sha256", b->sha256, "removed", TRUE));
    else
        printf("removed bitstream '%s' (sha256 %s)\n", b->name, b->sha256);
    return AV_EXIT_OK;
}

/* See cli.h. */
int
av_cli_cmd_bitstream(AvCli *cli, int argc, char **argv)
{
    static const char usage[] = "'bitstream' takes 'add FILE --name NAME', 'list' or 'remove NAME|SHA256'; see "
                                "'accelvirt bitstream --help'";

    /* The subcommand stands right after "bitstream"; its options follow. */
    if (argc >= 2 && g_str_equal(argv[1], "add"))
        return av_cli_bitstream_add(cli, argc - 1, argv + 1);
    if (argc >= 2 && g_str_equal(argv[1], "list"))
        return av_cli_bitstream_list(cli, argc - 1, argv + 1);
    if (argc >= 2 && g_str_equal(argv[1], "remove"))
        return av_cli_bitstream_remove(cli, argc - 1, argv + 1);
    if (argc >= 2 && argv[1][0] != '-')
        return av_cli_usage_error("unknown 'bitstream' subcommand '%s'; %s", argv[1], usage + strlen("'bitstream' "));
    if (!av_cli_parse(cli, "bitstream", "add|list|remove ...",
                      "The library of FPGA images that profiles program into their devices:\n"
                      "  add FILE --name NAME [--compatible ID[,ID...]] [--function-id ID] [--description TEXT]\n"
                      "  list\n"
                      "  remove NAME|SHA256\n"
                      "'accelvirt bitstream SUBCOMMAND --help' shows a subcommand's options.",
                      NULL, &argc, &argv))
        return AV_EXIT_USAGE;
    return av_cli_usage_error("%s", usage);
}

/* --- program -------------------------------------------------------------------- */

/* See cli.h. */
int
av_cli_cmd_program(AvCli *cli, int argc, char **argv)
{
    gboolean force = FALSE;
    const GOptionEntry entries[] = {
        { "force", 0, 0, G_OPTION_ARG_NONE, &force, "Program it even when it is recorded holding the bitstream", NULL },
        { NULL },
    };
    g_autoptr(AvRoot) root = NULL;
    g_autoptr(AvPolicy) policy = NULL;
    g_autoptr(AvHost) host = NULL;
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(AvBitstream) bitstream = NULL;
    g_autoptr(AvPciDevice) pci = NULL;
    g_autoptr(AvOwner) owner = NULL;
    g_autoptr(GPtrArray) items = g_ptr_array_new_with_free_func((GDestroyNotify)av_placed_item_free);
    g_autoptr(GPtrArray) bitstreams = g_ptr_array_new();
    g_autoptr(GHashTable) assign = NULL;
    g_autoptr(GError) err = NULL;
    g_autoptr(GError) failure = NULL;
    g_autofree char *operator_name = av_cli_operator();
    g_autofree char *uuid = g_uuid_string_random();
    g_autofree char *owner_name = NULL;
    g_autofree char *identity = NULL, *address = NULL;
    const AvProfile *profile;
    AvPlacedItem *item;
    AvPoolDevice *dev;

    if (!av_cli_parse(cli, "program", "DEVICE BITSTREAM",
                      "Program a free pool device (a PCI address or a pool identity) with a bitstream of the "
                      "library (a name or a SHA-256) by its profile's \"program\": the device is claimed for you "
                      "meanwhile, and the pool records what it holds once the program (and its verify command) "
                      "exited 0.  A device recorded holding that bitstream already is skipped unless --force.",
                      entries, &argc, &argv))
        return AV_EXIT_USAGE;
    if (argc != 3)
        return av_cli_usage_error("'program' needs a DEVICE and a BITSTREAM; see 'accelvirt program --help'");
    if (!av_bitstream_ref_is_valid(argv[2]))
        return av_cli_bitstream_bad_ref(argv[2]);
    root = av_root_new_default(cli->root, &err);
    if (!root)
        return av_cli_fail(err);

    if (!av_cli_device_known(cli, argv[1], &err))
        return av_cli_fail(err);
    /* Under the pool lock: check, claim, forget what it held, save. */
    pool = av_cli_open_synced_pool(cli, &host, &policy, &err);
    if (!pool)
        return av_cli_fail(err);
    dev = av_cli_find_device(pool, argv[1], &err);
    if (!dev)
        return av_cli_fail(err);
    bitstream = av_bitstream_lookup(cli->state_dir, argv[2], &err);
    if (!bitstream)
        return av_cli_fail(err);
    profile = dev->profile ? av_policy_find(policy, dev->profile) : NULL;
    if (dev->kind != AV_DEVICE_KIND_PCI || !dev->address || !profile || !profile->program) {
        g_set_error(&err, AV_ERROR, AV_ERROR_POLICY,
                    "device %s (%s) is not programmed: its profile '%s' has no \"program\" (accelvirt-policy(5), "
                    "PROGRAMMING)",
                    dev->address ? dev->address : "-", dev->identity, dev->profile ? dev->profile : "(none)");
        return av_cli_fail(err);
    }
    if (dev->state != AV_DEVICE_STATE_FREE) {
        g_autofree char *holder = NULL;

        if (dev->owner)
            holder = g_strdup_printf(" for domain '%s'", dev->owner->domain_name ? dev->owner->domain_name
                                                     : dev->owner->domain_uuid ? dev->owner->domain_uuid : "?");
        g_set_error(&err, AV_ERROR, AV_ERROR_STATE,
                    "device %s (%s) is %s%s: only a free device is programmed by hand; 'accelvirt status' shows "
                    "it",
                    dev->address, dev->identity, av_device_state_to_string(dev->state), holder ? holder : "");
        return av_cli_fail(err);
    }
    if (dev->programmed && g_str_equal(dev->programmed->sha256, bitstream->sha256) && !force) {
        if (cli->json)
            av_cli_print_json(json_pack("{s:s,s:s,s:s,s:s,s:s,s:s?}", "address", dev->address, "identity",
                                        dev->identity, "name", bitstream->name, "sha256", bitstream->sha256, "result",
                                        "already-holds", "by", dev->programmed->by));
        else
            printf("%s already holds bitstream '%s' (sha256 %.12s…, programmed by %s): nothing to do; --force "
                   "programs it again\n",
                   dev->address, bitstream->name, bitstream->sha256, dev->programmed->by ? dev->programmed->by : "?");
        return AV_EXIT_OK;
    }
    pci = av_pci_device_scan(root, dev->address, &err);
    if (!pci)
        return av_cli_fail(err);
    if (!av_bitstream_fits(bitstream, profile->name, pci->vendor_id, pci->device_id)) {
        g_set_error(&err, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "bitstream '%s' does not fit device %s (%04x:%04x, profile '%s'); 'accelvirt bitstream list' "
                    "says what each fits",
                    bitstream->name, dev->address, pci->vendor_id, pci->device_id, profile->name);
        return av_cli_fail(err);
    }
    /* What av_cli_assign() checks again once the device is claimed, first
     * here: a refusal changes nothing. */
    if (profile->program->driver == AV_PROGRAM_DRIVER_VFIO) {
        int fd = av_cli_program_group_open(root, pci, &err);

        if (fd < 0)
            return av_cli_fail(err);
        close(fd);
    } else if (av_pci_driver_is_vfio(pci->driver)) {
        g_set_error(&err, AV_ERROR, AV_ERROR_STATE,
                    "device %s is on vfio-pci, but its profile's program (driver \"host\") needs it on its host "
                    "driver; 'accelvirt status' shows it",
                    dev->address);
        return av_cli_fail(err);
    }
    owner_name = g_strdup_printf("accelvirt program (operator %s)", operator_name);
    owner = av_owner_new(uuid, owner_name);
    /* Claimed for the operator meanwhile (av_cli_assign() makes the claim
     * last past the program's timeouts: a killed CLI's claim expires). */
    if (!av_pool_claim(pool, dev, owner, g_get_real_time() / G_USEC_PER_SEC + 60, &err) ||
        (force && !av_pool_set_programmed(pool, dev, NULL, "programmed again (--force)", &err)))
        return av_cli_fail(err);
    identity = g_strdup(dev->identity);
    address = g_strdup(dev->address);
    item = g_new0(AvPlacedItem, 1);
    item->profile = g_strdup(profile->name);
    item->attach = profile->attach;
    item->identity = g_strdup(identity);
    item->pci_address = g_strdup(address);
    item->vf_index = -1;
    item->numa_node = -1;
    item->bitstream = g_strdup(bitstream->sha256);
    g_ptr_array_add(items, item);
    g_ptr_array_add(bitstreams, bitstream);
    assign = g_hash_table_new(g_str_hash, g_str_equal); /* no on_assign: no domain gets it */
    if (!av_cli_assign(cli, root, policy, &pool, owner, items, bitstreams, assign, "operator", NULL, &failure) &&
        !pool)
        return av_cli_fail(failure);

    /* The claim goes back, whatever happened, while it is still ours. */
    dev = av_pool_find(pool, identity);
    if (dev && dev->state == AV_DEVICE_STATE_CLAIMED && dev->owner && g_strcmp0(dev->owner->domain_uuid, uuid) == 0 &&
        !av_pool_transition(pool, dev, AV_DEVICE_STATE_FREE, NULL, NULL, &err))
        return av_cli_fail(err);
    if (!av_pool_save(pool, &err))
        return av_cli_fail(err);
    if (failure)
        return av_cli_fail(failure);
    if (cli->json)
        av_cli_print_json(json_pack("{s:s,s:s,s:s,s:s,s:s,s:s?}", "address", address, "identity", identity, "name",
                                    bitstream->name, "sha256", bitstream->sha256, "result", "programmed", "verified",
                                    dev && dev->programmed ? dev->programmed->verified : NULL));
    else
        printf("programmed %s with '%s' (sha256 %.12s…): %s\n", address, bitstream->name, bitstream->sha256,
               dev && dev->programmed && dev->programmed->verified ? dev->programmed->verified : "done");
    return AV_EXIT_OK;
}

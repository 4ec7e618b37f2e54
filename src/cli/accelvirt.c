/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the command.
 *
 *   accelvirt [GLOBAL OPTIONS] COMMAND [OPTIONS] [ARGS]
 *
 * See accelvirt(1). */
#include "config.h"

#include <locale.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "nova/av-placement.h"
#include "scrub/av-scrub.h"
#include "util/av-version.h"

typedef struct {
    const char *name;
    int (*run)(AvCli *cli, int argc, char **argv);
    const char *summary;
} AvCommand;

static const AvCommand commands[] = {
    { "list", av_cli_cmd_list, "Show the host's PCI and USB devices, NUMA nodes and matching profiles" },
    { "status", av_cli_cmd_status, "Reconcile the pool with the host and show every managed device" },
    { "policy", av_cli_cmd_policy, "Check or show the policy profiles (policy check | policy show [NAME])" },
    { "rewrite", av_cli_cmd_rewrite, "Place a domain's accelerator requests and print the placed XML" },
    { "define", av_cli_cmd_define, "Place, reserve the devices and define the domain in libvirt" },
    { "start", av_cli_cmd_start, "Start a defined domain, placing it again if its devices are gone" },
    { "undefine", av_cli_cmd_undefine, "Undefine a domain and give back its reserved devices" },
    { "plan", av_cli_cmd_plan, "Where a domain would go, with its guest topology (plan FILE); fragmentation (plan --defrag)" },
    { "journal", av_cli_cmd_journal, "Verify the journal's hash chain, show its entries or write a checkpoint (journal verify|show [DEVICE]|checkpoint)" },
    { "enroll", av_cli_cmd_enroll, "Record the option ROM hash of free or quarantined devices (enroll [--replace] DEVICE... | --all)" },
    { "scrub", av_cli_cmd_scrub, "Run a device's scrub steps by hand (scrub DEVICE)" },
    { "quarantine", av_cli_cmd_quarantine, "List quarantined devices or clear one (quarantine [list|clear DEVICE])" },
    { "release", av_cli_cmd_release, "Release a gone domain's devices: in-use -> dirty, scrubbed (release DOMAIN|DEVICE)" },
    { "attach", av_cli_cmd_attach, "Hot-plug accelerators of a profile into a running domain (attach DOMAIN PROFILE)" },
    { "detach", av_cli_cmd_detach, "Hot-unplug a running domain's accelerators: dirty, then scrubbed (detach DOMAIN DEVICE)" },
    { "reconcile", av_cli_cmd_reconcile, "Put the pool right with the host and start the scrubs it owes" },
    { "stale", av_cli_cmd_stale, "Devices held by stopped, paused or gone domains, past a lease or claim (stale [--release])" },
    { "health", av_cli_cmd_health, "Each managed device's AER counters, link and failures, against its profile (health [DEVICE])" },
    { "accounting", av_cli_cmd_accounting, "Device-hours by domain, project, user, profile or device, from the journal" },
    { "limits", av_cli_cmd_limits, "Each owner's devices and device-hours against the policy's limits" },
    { "metrics", av_cli_cmd_metrics, "The pool, scrubs and device health in Prometheus text format (metrics [--output FILE])" },
    { "nova", av_cli_cmd_nova, "What nova.conf needs for the managed devices, checked against Nova's rules (nova config [--provider-config FILE])" },
    { "placement", av_cli_cmd_placement, "Keep Nova's Placement true about the devices (placement sync | status)" },
    { "audit", av_cli_cmd_audit, "Compare running domains' live devices with the pool once (audit [--dry-run])" },
    { "bitstream", av_cli_cmd_bitstream, "The library of FPGA images (bitstream add FILE --name NAME | list | remove NAME)" },
    { "program", av_cli_cmd_program, "Program a free device with a bitstream of the library (program DEVICE BITSTREAM)" },
    { "watch", av_cli_cmd_watch, "Keep the pool true at libvirt's device events (watch [--once]): a service" },
    { "host-validate", av_cli_cmd_host_validate, "Whether this host is ready: IOMMU, vfio, the hook, libvirt, policy, units, ACS, groups (PASS, WARN or FAIL each)" },
};

static void
av_print_help(FILE *out)
{
    fprintf(out,
            "Usage: accelvirt [OPTIONS] COMMAND [ARGS]\n"
            "\n"
            "Accelerators as safe, shared resources on KVM hosts.\n"
            "\n"
            "Commands:\n");
    for (gsize i = 0; i < G_N_ELEMENTS(commands); i++)
        fprintf(out, "  %-13s %s\n", commands[i].name, commands[i].summary);
    fprintf(out,
            "\n"
            "Options (also accepted after the command):\n"
            "  --root DIR          read /sys, /dev and /proc under DIR ($ACCELVIRT_ROOT)\n"
            "  --state-dir DIR     pool, lock and journal ($ACCELVIRT_STATE_DIR, " AV_STATE_DIR ")\n"
            "  --policy-dir DIR    policy files ($ACCELVIRT_POLICY_DIR, " AV_POLICY_DIR ")\n"
            "  -c, --connect URI   libvirt URI ($ACCELVIRT_CONNECT, qemu:///system)\n"
            "  --json              machine-readable output\n"
            "  -v, --verbose       debug messages\n"
            "  --version           print the version, the optional parts built in, the license\n"
            "\n"
            "'accelvirt COMMAND --help' shows a command's options; see accelvirt(1).\n");
}

int
main(int argc, char **argv)
{
    AvCli cli = { 0 };
    gboolean version = FALSE;
    gboolean help = FALSE;
    g_autoptr(GOptionContext) ctx = NULL;
    g_autoptr(GError) err = NULL;
    GOptionEntry extra[] = {
        { "version", 0, 0, G_OPTION_ARG_NONE, &version, "Print the version", NULL },
        { "help", 'h', 0, G_OPTION_ARG_NONE, &help, "Show help", NULL },
        { NULL },
    };
    int status;

    setlocale(LC_ALL, "");
    /* `accelvirt scrub` runs "vm" steps: this program links libvirt. */
    av_scrub_vm_register();

    /* First the global options before the command; parsing stops at the
     * command name so that its own options reach it untouched. */
    ctx = g_option_context_new(NULL);
    g_option_context_set_help_enabled(ctx, FALSE);
    g_option_context_set_strict_posix(ctx, TRUE);
    g_option_context_add_main_entries(ctx, av_cli_global_entries(&cli), NULL);
    g_option_context_add_main_entries(ctx, extra, NULL);
    if (!g_option_context_parse(ctx, &argc, &argv, &err))
        return av_cli_usage_error("%s; see 'accelvirt --help'", err->message);
    if (version) {
        g_autofree char *placement = av_placement_client_version();
        g_autofree char *text = av_version_text("accelvirt", placement);

        fputs(text, stdout);
        return AV_EXIT_OK;
    }
    if (help || argc < 2) {
        av_print_help(help ? stdout : stderr);
        return help ? AV_EXIT_OK : AV_EXIT_USAGE;
    }
    for (gsize i = 0; i < G_N_ELEMENTS(commands); i++) {
        if (g_str_equal(argv[1], commands[i].name)) {
            status = commands[i].run(&cli, argc - 1, argv + 1);
            /* The pool is let go: dirty devices may have their worker now. */
            av_cli_spawn_pending_worker(&cli);
            g_free(cli.root);
            g_free(cli.state_dir);
            g_free(cli.policy_dir);
            g_free(cli.connect);
            return status;
        }
    }
    return av_cli_usage_error("unknown command '%s'; see 'accelvirt --help' for the commands", argv[1]);
}

/* accelvirt policy check|show and journal verify. */
#include "config.h"

#include <stdio.h>

#include "cli.h"
#include "pool/av-pool.h"
#include "util/av-json.h"

static int
av_policy_check(AvCli *cli, const AvPolicy *policy)
{
    if (cli->json) {
        json_t *o = json_object();
        json_t *files = json_array();

        for (guint i = 0; i < policy->files->len; i++)
            json_array_append_new(files, json_string(g_ptr_array_index(policy->files, i)));
        json_object_set_new(o, "policy_dir", json_string(cli->policy_dir));
        json_object_set_new(o, "valid", json_true());
        json_object_set_new(o, "files", files);
        json_object_set_new(o, "profiles", json_integer(policy->profiles->len));
        av_cli_print_json(o);
        return AV_EXIT_OK;
    }
    if (policy->files->len == 0) {
        printf("%s: no policy files; accelvirt manages no device on this host.\n", cli->policy_dir);
        return AV_EXIT_OK;
    }
    printf("%s: %u profile%s in %u file%s, all valid.\n", cli->policy_dir, policy->profiles->len,
           policy->profiles->len == 1 ? "" : "s", policy->files->len, policy->files->len == 1 ? "" : "s");
    for (guint i = 0; i < policy->profiles->len; i++) {
        const AvProfile *p = g_ptr_array_index(policy->profiles, i);
        g_autofree char *base = g_path_get_basename(p->source_file);

        printf("  %-24s  %-9s  %s:%d\n", p->name, av_attach_to_string(p->attach), base, p->source_line);
    }
    return AV_EXIT_OK;
}

static int
av_policy_show(AvCli *cli, const AvPolicy *policy, const char *name)
{
    json_t *arr = json_array();

    for (guint i = 0; i < policy->profiles->len; i++) {
        const AvProfile *p = g_ptr_array_index(policy->profiles, i);

        if (!name || g_str_equal(name, p->name))
            json_array_append_new(arr, av_profile_to_json(p));
    }
    if (name && json_array_size(arr) == 0) {
        json_decref(arr);
        return av_cli_usage_error("no profile named '%s' in %s; 'accelvirt policy check' lists them",
                                  name, cli->policy_dir);
    }
    av_cli_print_json(arr);
    return AV_EXIT_OK;
}

int
av_cli_cmd_policy(AvCli *cli, int argc, char **argv)
{
    g_autoptr(AvPolicy) policy = NULL;
    g_autoptr(GError) err = NULL;

    if (!av_cli_parse(cli, "policy", "check | show [NAME]",
                      "Check every policy file (the first error names the file, line and column) "
                      "or show the profiles in their normalised form.",
                      NULL, &argc, &argv))
        return AV_EXIT_USAGE;
    if (argc < 2 || (!g_str_equal(argv[1], "check") && !g_str_equal(argv[1], "show")))
        return av_cli_usage_error("'policy' needs 'check' or 'show [NAME]'");
    if (argc > (g_str_equal(argv[1], "show") ? 3 : 2))
        return av_cli_usage_error("too many arguments for 'policy %s'", argv[1]);

    policy = av_cli_load_policy(cli, &err);
    if (!policy)
        return av_cli_fail(err);
    if (g_str_equal(argv[1], "check"))
        return av_policy_check(cli, policy);
    return av_policy_show(cli, policy, argc > 2 ? argv[2] : NULL);
}

int
av_cli_cmd_journal(AvCli *cli, int argc, char **argv)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(AvPool) pool = NULL;
    guint64 entries = 0;

    if (!av_cli_parse(cli, "journal", "verify",
                      "Check that the journal's entries follow each other (sequence numbers) and that "
                      "each carries the SHA-256 of the one before (tamper evidence).",
                      NULL, &argc, &argv))
        return AV_EXIT_USAGE;
    if (argc != 2 || !g_str_equal(argv[1], "verify"))
        return av_cli_usage_error("'journal' needs 'verify'");
    /* Under the shared lock, so that no line is read while a writer appends it. */
    pool = av_cli_open_pool(cli, NULL, AV_POOL_READ, &err);
    if (!pool)
        return av_cli_fail(err);
    if (!av_journal_verify(cli->state_dir, &entries, &err))
        return av_cli_fail(err);
    if (cli->json) {
        json_t *o = json_object();

        json_object_set_new(o, "valid", json_true());
        json_object_set_new(o, "entries", json_integer((json_int_t)entries));
        av_cli_print_json(o);
    } else {
        printf("%s/journal.jsonl: %" G_GUINT64_FORMAT " entries, chain intact.\n", cli->state_dir, entries);
    }
    return AV_EXIT_OK;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the libvirt QEMU hook, installed as
 * /etc/libvirt/hooks/qemu.d/accelvirt.  See hook.h for libvirt's rules
 * (docs/hooks.rst) and accelvirt(1). */
#include "config.h"

#include "hook.h"

#include <errno.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "domain/av-rewrite.h"
#include "util/av-error.h"
#include "util/av-version.h"

/* TRUE when @domain carries a placement accelvirt wrote: an <av:placement>
 * entry with a ua-accelvirt alias.  Anything else (no metadata, a placement
 * written by hand without aliases) goes through "migrate begin" and
 * "restore begin" untouched. */
static gboolean
av_hook_is_placed(const AvDomain *domain)
{
    for (guint i = 0; domain->placed && i < domain->placed->len; i++) {
        const AvPlacedDevice *p = g_ptr_array_index(domain->placed, i);

        if (p->alias && g_str_has_prefix(p->alias, AV_REWRITE_ALIAS_PREFIX))
            return TRUE;
    }
    return FALSE;
}

/* TRUE when @domain has a hostdev accelvirt may manage (PCI, mdev or USB), a
 * direct interface (a card of attach netdev), or an ethernet interface's
 * target (which may sit on a card: av_hook_resolve() checks it). */
static gboolean
av_hook_has_hostdevs(const AvDomain *domain)
{
    for (guint i = 0; i < domain->hostdevs->len; i++) {
        const AvHostdev *h = g_ptr_array_index(domain->hostdevs, i);

        if (h->type == AV_HOSTDEV_PCI || h->type == AV_HOSTDEV_MDEV || h->type == AV_HOSTDEV_USB ||
            h->type == AV_HOSTDEV_NETDEV)
            return TRUE;
    }
    return domain->ethernet_targets && domain->ethernet_targets->len > 0;
}

/* The state dir of the hook's pool, as av_hook_config_new() finds it.
 * Borrowed from the environment or static. */
static const char *
av_hook_state_dir(void)
{
    const char *state = g_getenv("ACCELVIRT_STATE_DIR");

    return state && *state ? state : AV_STATE_DIR;
}

/* The fast path: TRUE when the domain of @xml, which
 * libvirt calls the hook about as @name, has nothing to do with accelvirt:
 * no hostdev accelvirt may manage, none of accelvirt's metadata (read
 * leniently: nothing else in the XML is looked at, so nothing else can
 * refuse it), and the pool names nothing of it (the domain
 * index: a stat(2) or two, no lock, no pool.json read).  Then every
 * operation is done: no lock, no scan, no policy, no log.  FALSE sends the
 * call the long way, whose strict parse says what is wrong with an XML
 * the first look could not read. */
static gboolean
av_hook_passes_through(const char *name, const char *xml, gsize len)
{
    g_auto(AvDomainPeek) peek = { 0 };

    if (!av_domain_peek(xml, len, &peek, NULL))
        return FALSE;
    if (peek.may_manage || !peek.name || !peek.uuid || strcmp(peek.name, name) != 0)
        return FALSE;
    return av_pool_index_names(av_hook_state_dir(), peek.uuid) == AV_POOL_NAMES_NO;
}

/* Reads and drops what is left on stdin, so that libvirt, still writing
 * the XML, never meets a closed pipe. */
static void
av_hook_drain_stdin(void)
{
    char buf[65536];

    for (;;) {
        ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
    }
}

/* "release end" of a domain whose XML does not parse (too large, too
 * deep...): libvirt calls it once, so it must not be refused.  The devices are found by the name libvirt gives as argv[1],
 * which the pool recorded with their owner. */
static int
av_hook_release_unparsed(const char *name, const GError *problem)
{
    g_autoptr(AvHookConfig) config = NULL;
    g_autoptr(GError) error = NULL;
    int status;

    av_hook_log(LOG_WARNING, "release end: the domain XML cannot be read (%s); releasing by the name libvirt "
                "gives", problem->message);
    config = av_hook_config_new(&error);
    if (!config)
        return av_hook_refuse(error->message);
    status = av_hook_release(config, NULL, name);
    av_hook_spawn_pending_worker(config);
    return status;
}

int
main(int argc, char **argv)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(AvHookConfig) config = NULL;
    g_autoptr(AvDomain) domain = NULL;
    g_autofree char *xml = NULL;
    const char *name, *op, *sub;
    gboolean prepare, start, release, reconnect, remap;
    int status;
    gsize len = 0;

    /* Only alone: libvirt always passes four arguments, and a domain may
     * be named "--version"; its prepare must still run. */
    if (argc == 2 && g_str_equal(argv[1], "--version")) {
        g_autofree char *text = av_version_text("accelvirt-hook", "not in the hook (it links no libcurl; "
                                                "'accelvirt placement sync' has it)");

        fputs(text, stdout);
        return 0;
    }
    av_hook_log_init();
    if (argc < 4)
        return av_hook_refuse("usage: accelvirt DOMAIN OPERATION SUB-OPERATION EXTRA, with the domain "
                              "XML on stdin; libvirt runs this program from /etc/libvirt/hooks/qemu.d");
    name = argv[1];
    op = argv[2];
    sub = argv[3];
    av_hook_log_set_domain(name);

    /* "migrate begin" and "restore begin" may hand libvirt a rewritten XML
     * on stdout (docs/hooks.rst): what they print is the domain's XML. */
    remap = (g_str_equal(op, "migrate") || g_str_equal(op, "restore")) && g_str_equal(sub, "begin");
    prepare = g_str_equal(op, "prepare") && g_str_equal(sub, "begin");
    start = (g_str_equal(op, "start") || g_str_equal(op, "started")) && g_str_equal(sub, "begin");
    release = g_str_equal(op, "release") && g_str_equal(sub, "end");
    reconnect = g_str_equal(op, "reconnect") && g_str_equal(sub, "begin");
    if (!prepare && !start && !release && !reconnect && !remap) {
        /* Read what libvirt writes all the same, so that it never meets a
         * closed pipe. */
        av_hook_drain_stdin();
        return 0;
    }

    if (av_domain_read_fd(STDIN_FILENO, &xml, &len, &error) && av_hook_passes_through(name, xml, len)) {
        /* "migrate begin" and "restore begin": the XML back byte for byte. */
        if (remap)
            return av_hook_write_stdout(xml, len, &error) ? 0 : av_hook_refuse(error->message);
        return 0;
    }

    /* Release and reconnect find the domain's devices by its UUID: what its
     * own metadata says (which a running domain may change) must not stop
     * them, or the devices would never be scrubbed. */
    if (error ||
        !(domain = av_domain_parse_flags(xml, len,
                                         release || reconnect ? AV_DOMAIN_PARSE_METADATA_BEST_EFFORT
                                                              : AV_DOMAIN_PARSE_DEFAULT,
                                         &error))) {
        g_autofree char *quoted = av_domain_quote(name);

        /* What libvirt wrote past the limit must not meet a closed pipe. */
        av_hook_drain_stdin();
        if (release)
            return av_hook_release_unparsed(name, error);
        return av_hook_refusef("refusing the domain XML of '%s' given to '%s %s': %s", quoted, op, sub,
                               error->message);
    }
    if (domain->metadata_problem)
        av_hook_log(LOG_WARNING, "%s %s of domain '%s': its metadata is left out: %s", op, sub, domain->name,
                    domain->metadata_problem);
    if (g_strcmp0(domain->name, name) != 0) {
        g_autofree char *a = av_domain_quote(name);
        g_autofree char *b = av_domain_quote(domain->name);
        return av_hook_refusef("the hook was called for domain '%s' but the XML on its stdin is of "
                               "domain '%s'; libvirt passes the domain's own XML: check how the hook is run",
                               a, b);
    }
    if (remap) {
        /* Without a placement of accelvirt's: back byte for byte. */
        if (!av_hook_is_placed(domain))
            return av_hook_write_stdout(xml, len, &error) ? 0 : av_hook_refuse(error->message);
        if (!domain->uuid)
            return av_hook_refusef("the XML of domain '%s' has no <uuid>; libvirt always gives one: "
                                   "check how the hook is run", domain->name);
        config = av_hook_config_new(&error);
        if (!config)
            return av_hook_refuse(error->message);
        return av_hook_remap(config, domain, xml, len, op);
    }
    /* Release: nothing to do when the pool surely names nothing of the
     * domain (the domain index), hostdevs or not: no marker, no lock. */
    if (release && domain->uuid && av_pool_index_names(av_hook_state_dir(), domain->uuid) == AV_POOL_NAMES_NO)
        return 0;
    /* Otherwise a domain without hostdevs has nothing to prepare, start or
     * reconnect; its release goes on (a device detached while it ran is
     * still its own). */
    if (!av_hook_has_hostdevs(domain) && !release)
        return 0;
    if (!domain->uuid && !release)
        return av_hook_refusef("the XML of domain '%s' has no <uuid>; libvirt always gives one: "
                               "check how the hook is run", domain->name);

    config = av_hook_config_new(&error);
    if (!config)
        return av_hook_refuse(error->message);
    if (prepare)
        status = av_hook_prepare(config, domain);
    else if (start)
        status = av_hook_start(config, domain);
    else if (release)
        status = av_hook_release(config, domain->uuid, domain->name);
    else
        status = av_hook_reconnect(config, domain);
    /* The pool is let go: the worker may have it now. */
    av_hook_spawn_pending_worker(config);
    return status;
}

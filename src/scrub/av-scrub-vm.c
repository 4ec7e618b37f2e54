/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the scrub method "vm", seed 000's "cleaning image".
 *
 * Boots a short-lived scrub VM as a transient libvirt domain from the step's
 * template, with the released PCI function attached (managed='no': it is on
 * vfio-pci already), and waits for it to power off within the step's
 * timeout.  The image contract (accelvirt-policy(5)): the image powers the
 * VM off only when its scrub succeeded; on any failure it panics (or
 * reboots, or hangs).  So:
 *
 *   stopped, reason "shutdown", no reboot seen   success
 *   a reboot (on_reboot must be "restart")        failure: destroyed at once
 *   stopped, reason "crashed" (pvpanic)           failure
 *   destroyed by someone else, failed, ...        failure
 *   still running at the timeout                  failure: destroyed
 *
 * libvirt 9.0 reports a guest reset under on_reboot "destroy" exactly like a
 * guest power-off (stopped, "shutdown"), so the template must keep libvirt's
 * default on_reboot "restart": the reboot event is then seen and the domain
 * destroyed.  The method refuses a template that says otherwise.
 *
 * The device is scrubbing while this runs, which accelvirt's own hook would
 * refuse to any domain: the scrub domain's metadata carries the device's
 * scrub token (<av:accelerators><av:scrub token=/>, from the pool), and the
 * hook lets that domain, and only it, have the device (hooks/hook-prepare.c).
 *
 * The step passes only when the scrub VM really had the device: the template
 * must hold @HOSTDEV@ (checked at policy load and again here), the device
 * must be a PCI function, and once the domain runs its live XML must show a
 * <hostdev type='pci'> whose source address is exactly the device's; if not,
 * it is destroyed and the step fails.  What the live XML showed goes into
 * the step's report ("live_hostdevs").
 *
 * The domain's name is random for each scrub (accelvirt-scrub- and 16 hex
 * digits from getrandom), so that nobody can take it first by defining a
 * domain of that name, and events are matched by its UUID (the one the pool
 * made for this scrub), never by its name.
 *
 * This runs in the detached worker (or `accelvirt scrub`), never in the hook:
 * the hook must not call libvirt.  The domain is started with
 * VIR_DOMAIN_START_AUTODESTROY, so that it dies with our connection if the
 * worker does (libvirt's test driver, whose domains live in this process
 * only, has no such flag: tests/test-scrub.c runs the method on it). */
#include "config.h"

#include "av-scrub-private.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <libxml/parser.h>
#include <libxml/tree.h>

#include "util/av-error.h"
#include "util/av-libvirt-casts.h"
#include "util/av-json.h"
#include "util/av-names.h"

#define AV_SCRUB_VM_CONNECT_DEFAULT "qemu:///system"
/* The event loop wakes at least this often to check the domain and the clock. */
#define AV_SCRUB_VM_TICK_MS 200
/* The scrub domain's name: this prefix and AV_SCRUB_VM_NAME_RANDOM random
 * bytes as hex. */
#define AV_SCRUB_VM_NAME_PREFIX "accelvirt-scrub-"
#define AV_SCRUB_VM_NAME_RANDOM 8
/* After the domain is gone from libvirt, how long to wait for its stop event
 * (events and replies travel separately). */
#define AV_SCRUB_VM_GRACE_US (3 * G_USEC_PER_SEC)

/* What the event callbacks saw of our domain, known by its UUID. */
typedef struct {
    const char *uuid;
    gboolean stopped;
    int stop_detail;             /* virDomainEventStoppedDetailType */
    gboolean rebooted;
    gboolean crashed;            /* a VIR_DOMAIN_EVENT_CRASHED (panicked) */
} AvScrubVmWatch;

static void
av_scrub_vm_silence(void *data, virErrorPtr e)
{
    (void)data;
    (void)e;
}

static gpointer
av_scrub_vm_event_init(gpointer data)
{
    (void)data;
    /* Before any connection is opened, or the remote driver has no events. */
    virSetErrorFunc(NULL, av_scrub_vm_silence);
    return GINT_TO_POINTER(virEventRegisterDefaultImpl() == 0);
}

static void
av_scrub_vm_tick(int timer, void *opaque)
{
    (void)timer;
    (void)opaque;
}

/* TRUE when the event's @dom is our scrub domain: by its UUID, which the
 * pool made for this scrub; a name anyone may give to any domain. */
static gboolean
av_scrub_vm_is_ours(virDomainPtr dom, const AvScrubVmWatch *watch)
{
    char uuid[VIR_UUID_STRING_BUFLEN];

    return virDomainGetUUIDString(dom, uuid) == 0 && g_ascii_strcasecmp(uuid, watch->uuid) == 0;
}

static int
av_scrub_vm_on_lifecycle(virConnectPtr conn, virDomainPtr dom, int event, int detail, void *opaque)
{
    AvScrubVmWatch *watch = opaque;

    (void)conn;
    if (!av_scrub_vm_is_ours(dom, watch))
        return 0;
    if (event == VIR_DOMAIN_EVENT_CRASHED)
        watch->crashed = TRUE;
    if (event == VIR_DOMAIN_EVENT_STOPPED && !watch->stopped) {
        watch->stopped = TRUE;
        watch->stop_detail = detail;
    }
    return 0;
}

static void
av_scrub_vm_on_reboot(virConnectPtr conn, virDomainPtr dom, void *opaque)
{
    AvScrubVmWatch *watch = opaque;

    (void)conn;
    if (av_scrub_vm_is_ours(dom, watch))
        watch->rebooted = TRUE;
}

/* libvirt's last error as a sentence, or a default. */
static const char *
av_scrub_vm_virt_message(void)
{
    const virError *e = virGetLastError();

    return e && e->message ? e->message : "libvirt gave no reason";
}

static const char *
av_scrub_vm_stop_reason(int detail)
{
    switch (detail) {
    case VIR_DOMAIN_EVENT_STOPPED_SHUTDOWN: return "shutdown";
    case VIR_DOMAIN_EVENT_STOPPED_DESTROYED: return "destroyed";
    case VIR_DOMAIN_EVENT_STOPPED_CRASHED: return "crashed";
    case VIR_DOMAIN_EVENT_STOPPED_MIGRATED: return "migrated";
    case VIR_DOMAIN_EVENT_STOPPED_SAVED: return "saved";
    case VIR_DOMAIN_EVENT_STOPPED_FAILED: return "failed";
    case VIR_DOMAIN_EVENT_STOPPED_FROM_SNAPSHOT: return "from-snapshot";
    default: return "unknown";
    }
}

/* The <hostdev> of the PCI function @address ("DDDD:BB:SS.F"), or NULL when
 * @address is not one. */
static char *
av_scrub_vm_hostdev(const char *address)
{
    unsigned int dom, bus, slot, fn;
    int end = 0;

    if (!address || sscanf(address, "%4x:%2x:%2x.%1x%n", &dom, &bus, &slot, &fn, &end) != 4 ||
        address[end] != '\0' || strlen(address) != 12)
        return NULL;
    return g_strdup_printf("<hostdev mode='subsystem' type='pci' managed='no'><source>"
                           "<address domain='0x%04x' bus='0x%02x' slot='0x%02x' function='0x%x'/>"
                           "</source></hostdev>",
                           dom, bus, slot, fn);
}

/* Replaces every @key in @text with @value (already escaped).  Caller frees. */
static char *
av_scrub_vm_replace(const char *text, const char *key, const char *value)
{
    g_auto(GStrv) parts = g_strsplit(text, key, -1);

    return g_strjoinv(value, parts);
}

/* The first element child of @parent named @name, or NULL. */
static xmlNodePtr
av_scrub_vm_child(xmlNodePtr parent, const char *name)
{
    for (xmlNodePtr n = parent ? parent->children : NULL; n; n = n->next)
        if (n->type == XML_ELEMENT_NODE && xmlStrcmp(n->name, BAD_CAST name) == 0)
            return n;
    return NULL;
}

/* The text of the child element @name of @root, or NULL when absent (caller
 * frees with xmlFree). */
static xmlChar *
av_scrub_vm_child_text(xmlNodePtr root, const char *name)
{
    xmlNodePtr n = av_scrub_vm_child(root, name);

    return n ? xmlNodeGetContent(n) : NULL;
}

/* The most of a scrub VM's console log read for its coverage lines: its
 * end. */
#define AV_SCRUB_VM_CONSOLE_TAIL (1024 * 1024)

/* The file the domain @xml logs its first serial console to: a serial's
 * <log file=> or a file serial's <source path=>; NULL when none (caller
 * frees). */
static char *
av_scrub_vm_console_path(const char *xml)
{
    xmlDocPtr doc = xmlReadMemory(xml, (int)strlen(xml), "scrub-vm.xml", NULL, XML_PARSE_NONET | XML_PARSE_NOBLANKS);
    xmlNodePtr devices;
    char *path = NULL;

    if (!doc)
        return NULL;
    devices = av_scrub_vm_child(xmlDocGetRootElement(doc), "devices");
    for (xmlNodePtr n = devices ? devices->children : NULL; n && !path; n = n->next) {
        xmlNodePtr log, source;
        xmlChar *type, *file = NULL;

        if (n->type != XML_ELEMENT_NODE || xmlStrcmp(n->name, BAD_CAST "serial") != 0)
            continue;
        log = av_scrub_vm_child(n, "log");
        source = av_scrub_vm_child(n, "source");
        type = xmlGetProp(n, BAD_CAST "type");
        if (log)
            file = xmlGetProp(log, BAD_CAST "file");
        else if (source && type && xmlStrcmp(type, BAD_CAST "file") == 0)
            file = xmlGetProp(source, BAD_CAST "path");
        if (file && file[0] == '/')
            path = g_strdup((const char *)file);
        xmlFree(file);
        xmlFree(type);
    }
    xmlFreeDoc(doc);
    return path;
}

/* The coverage the scrub VM @name's image printed on its console (its
 * "accelvirt-coverage:" lines, av_scrub_coverage_parse(), every device the
 * VM had), or NULL: no log, or one that could be another's (its file name
 * does not hold the scrub domain's random name, so another scrub or anyone
 * who made the file first could have written it; not a regular file of
 * root's with one link), no such line.  Reads the last
 * AV_SCRUB_VM_CONSOLE_TAIL bytes only; virtlogd may write the image's last
 * lines a moment after the domain stopped, so a log without a line is read
 * again for up to a second.  What the guest wrote is data: only well-formed
 * lines count, and they remain the guest's word (accelvirt-policy(5),
 * COVERAGE). */
static json_t *
av_scrub_vm_console_coverage(const char *path, const char *name)
{
    g_autofree char *base = g_path_get_basename(path);

    if (!strstr(base, name))
        return NULL;
    for (guint attempt = 0; attempt < 5; attempt++) {
        g_autofree char *data = NULL;
        json_t *coverage;
        struct stat st;
        off_t from;
        ssize_t n;
        int fd;

        if (attempt)
            g_usleep(200 * 1000);
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW);
        if (fd < 0)
            continue;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_nlink != 1) {
            close(fd);
            return NULL;
        }
        from = st.st_size > AV_SCRUB_VM_CONSOLE_TAIL ? st.st_size - AV_SCRUB_VM_CONSOLE_TAIL : 0;
        data = g_malloc0(AV_SCRUB_VM_CONSOLE_TAIL + 1);
        n = pread(fd, data, AV_SCRUB_VM_CONSOLE_TAIL, from);
        close(fd);
        if (n <= 0)
            continue;
        data[n] = '\0';
        /* A NUL in the log ends what is read. */
        coverage = av_scrub_coverage_parse(data, NULL);
        if (coverage)
            return coverage;
    }
    return NULL;
}

/* The accelvirt namespace of domain metadata (av:accelerators). */
#define AV_SCRUB_VM_NS "urn:accelvirt:domain:1"

/* Adds <av:accelerators><av:scrub token= identity=/></av:accelerators> to
 * the first <metadata> of @root (made when absent), and makes the domain's
 * <uuid> @uuid: what the hook checks before it lets this domain have a
 * device that is being scrubbed.  libvirt keeps one top-level element per
 * namespace, so a template that has metadata of accelvirt's own namespace
 * is refused. */
static gboolean
av_scrub_vm_add_token(xmlNodePtr root, const char *token, const char *uuid, const char *identity,
                      const char *template_path, GError **error)
{
    xmlNodePtr metadata = NULL, uuid_node = NULL, accelerators, scrub;
    xmlNsPtr ns;

    for (xmlNodePtr n = root->children; n; n = n->next) {
        if (n->type != XML_ELEMENT_NODE || n->ns)
            continue;
        if (!metadata && xmlStrcmp(n->name, BAD_CAST "metadata") == 0)
            metadata = n;
        if (!uuid_node && xmlStrcmp(n->name, BAD_CAST "uuid") == 0)
            uuid_node = n;
    }
    /* The hook wants the UUID the pool made with the token, whatever the
     * template says (or does not say) there. */
    if (!uuid_node)
        uuid_node = xmlNewChild(root, NULL, BAD_CAST "uuid", NULL);
    xmlNodeSetContent(uuid_node, BAD_CAST uuid);
    if (!metadata)
        metadata = xmlNewChild(root, NULL, BAD_CAST "metadata", NULL);
    for (xmlNodePtr n = metadata->children; n; n = n->next) {
        if (n->type == XML_ELEMENT_NODE && n->ns && n->ns->href &&
            xmlStrcmp(n->ns->href, BAD_CAST AV_SCRUB_VM_NS) == 0) {
            g_set_error(error, AV_ERROR, AV_ERROR_POLICY,
                        "the scrub VM template '%s' has metadata in accelvirt's namespace (%s); remove it, "
                        "accelvirt writes its own", template_path, AV_SCRUB_VM_NS);
            return FALSE;
        }
    }
    accelerators = xmlNewChild(metadata, NULL, BAD_CAST "accelerators", NULL);
    ns = xmlNewNs(accelerators, BAD_CAST AV_SCRUB_VM_NS, BAD_CAST "av");
    xmlSetNs(accelerators, ns);
    scrub = xmlNewChild(accelerators, ns, BAD_CAST "scrub", NULL);
    xmlNewProp(scrub, BAD_CAST "token", BAD_CAST token);
    xmlNewProp(scrub, BAD_CAST "identity", BAD_CAST (identity ? identity : ""));
    return TRUE;
}

/* Checks that @xml is a <domain> whose lifecycle actions keep the image
 * contract observable: on_poweroff destroy, on_reboot restart (a reboot is
 * then an event, not a look-alike of a power-off), on_crash destroy or
 * coredump-destroy.  Absent elements take libvirt's defaults, which are
 * exactly these.  With a @token, adds it and @uuid (av_scrub_vm_add_token()).
 * Returns the domain XML to start (caller frees), or NULL with @error. */
static char *
av_scrub_vm_finish(const char *xml, const char *template_path, const char *token, const char *uuid,
                   const char *identity, GError **error)
{
    static const struct {
        const char *element;
        const char *allowed[3];
    } rules[] = {
        { "on_poweroff", { "destroy", NULL } },
        { "on_reboot", { "restart", NULL } },
        { "on_crash", { "destroy", "coredump-destroy", NULL } },
    };
    xmlDocPtr doc;
    xmlNodePtr root;
    gboolean ok = TRUE;
    char *ret = NULL;

    doc = xmlReadMemory(xml, (int)strlen(xml), template_path, NULL,
                        XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
    if (!doc) {
        g_set_error(error, AV_ERROR, AV_ERROR_POLICY, "the scrub VM template '%s' is not well-formed XML",
                    template_path);
        return NULL;
    }
    root = xmlDocGetRootElement(doc);
    if (!root || xmlStrcmp(root->name, BAD_CAST "domain") != 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_POLICY, "the scrub VM template '%s' is not a <domain>",
                    template_path);
        xmlFreeDoc(doc);
        return NULL;
    }
    for (guint i = 0; ok && i < G_N_ELEMENTS(rules); i++) {
        xmlChar *value = av_scrub_vm_child_text(root, rules[i].element);
        g_autofree char *v = value ? g_strstrip(g_strdup((const char *)value)) : NULL;
        gboolean allowed = v == NULL;

        for (guint j = 0; !allowed && rules[i].allowed[j]; j++)
            allowed = strcmp(v, rules[i].allowed[j]) == 0;
        if (!allowed) {
            g_set_error(error, AV_ERROR, AV_ERROR_POLICY,
                        "the scrub VM template '%s' says <%s>%s</%s>; the image contract needs <%s>%s</%s> "
                        "(see accelvirt-policy(5), method vm)",
                        template_path, rules[i].element, v, rules[i].element, rules[i].element,
                        rules[i].allowed[0], rules[i].element);
            ok = FALSE;
        }
        xmlFree(value);
    }
    if (ok && token)
        ok = av_scrub_vm_add_token(root, token, uuid, identity, template_path, error);
    if (ok) {
        xmlChar *out = NULL;
        int len = 0;

        xmlDocDumpMemoryEnc(doc, &out, &len, "UTF-8");
        if (out)
            ret = g_strndup((const char *)out, (gsize)len);
        else
            g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "cannot write the scrub VM's domain XML");
        xmlFree(out);
    }
    xmlFreeDoc(doc);
    return ret;
}

/* The domain XML: the template with its placeholders filled in, every value
 * escaped for XML; @hostdev, the device's <hostdev>, for @HOSTDEV@.  Caller
 * frees. */
static char *
av_scrub_vm_xml(const char *template_text, const AvScrubTarget *target, const char *name, const char *uuid,
                const char *hostdev)
{
    g_autofree char *e_name = g_markup_escape_text(name, -1);
    g_autofree char *e_uuid = g_markup_escape_text(uuid, -1);
    g_autofree char *e_identity = g_markup_escape_text(target->identity ? target->identity : "", -1);
    g_autofree char *xml = g_strdup(template_text);
    char *next;

    next = av_scrub_vm_replace(xml, "@NAME@", e_name);
    g_free(xml);
    xml = next;
    next = av_scrub_vm_replace(xml, "@UUID@", e_uuid);
    g_free(xml);
    xml = next;
    next = av_scrub_vm_replace(xml, "@IDENTITY@", e_identity);
    g_free(xml);
    xml = next;
    next = av_scrub_vm_replace(xml, AV_POLICY_HOSTDEV_PLACEHOLDER, hostdev);
    g_free(xml);
    xml = next;
    return g_steal_pointer(&xml);
}

/* The value of the attribute @name of @node as a number (libvirt writes
 * "0x17"), or -1 when absent or not a number. */
static gint64
av_scrub_vm_attr_number(xmlNodePtr node, const char *name)
{
    xmlChar *v = xmlGetProp(node, BAD_CAST name);
    gint64 n = -1;

    if (v) {
        const char *text = (const char *)v;
        char *end = NULL;
        guint64 u;

        errno = 0;
        u = g_ascii_strtoull(text, &end, 0);
        if (*text && end && *end == '\0' && errno == 0 && u <= G_MAXINT32)
            n = (gint64)u;
        xmlFree(v);
    }
    return n;
}

/* Reads the live domain XML @xml of the running scrub domain: appends to
 * @seen the PCI address ("DDDD:BB:SS.F") of every <hostdev type='pci'> of
 * its <devices>, and returns TRUE when one is @address (lower case) exactly.
 * FALSE as well when @xml does not parse. */
static gboolean
av_scrub_vm_live_has_device(const char *xml, const char *address, json_t *seen)
{
    xmlDocPtr doc = xmlReadMemory(xml, (int)strlen(xml), "live.xml", NULL,
                                  XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
    xmlNodePtr root = doc ? xmlDocGetRootElement(doc) : NULL;
    xmlNodePtr devices = NULL;
    gboolean found = FALSE;

    if (root && xmlStrcmp(root->name, BAD_CAST "domain") == 0)
        devices = av_scrub_vm_child(root, "devices");
    for (xmlNodePtr n = devices ? devices->children : NULL; n; n = n->next) {
        xmlChar *type, *mode;
        xmlNodePtr a;
        gboolean pci;
        gint64 d, b, sl, f;
        g_autofree char *seen_address = NULL;

        if (n->type != XML_ELEMENT_NODE || xmlStrcmp(n->name, BAD_CAST "hostdev") != 0)
            continue;
        type = xmlGetProp(n, BAD_CAST "type");
        mode = xmlGetProp(n, BAD_CAST "mode");
        pci = type && xmlStrcmp(type, BAD_CAST "pci") == 0 && (!mode || xmlStrcmp(mode, BAD_CAST "subsystem") == 0);
        xmlFree(type);
        xmlFree(mode);
        a = av_scrub_vm_child(av_scrub_vm_child(n, "source"), "address");
        if (!pci || !a)
            continue;
        d = av_scrub_vm_attr_number(a, "domain");
        b = av_scrub_vm_attr_number(a, "bus");
        sl = av_scrub_vm_attr_number(a, "slot");
        f = av_scrub_vm_attr_number(a, "function");
        if (d < 0 || d > 0xffff || b < 0 || b > 0xff || sl < 0 || sl > 0x1f || f < 0 || f > 7)
            continue;
        seen_address = g_strdup_printf("%04x:%02x:%02x.%x", (unsigned)d, (unsigned)b, (unsigned)sl, (unsigned)f);
        json_array_append_new(seen, json_string(seen_address));
        if (g_str_equal(seen_address, address))
            found = TRUE;
    }
    xmlFreeDoc(doc);
    return found;
}

gboolean
av_scrub_method_vm(AvScrubContext *ctx, char **ret_message, GError **error)
{
    static GOnce event_once = G_ONCE_INIT;
    const AvScrubTarget *target = ctx->target;
    const char *template_path = json_string_value(json_object_get(ctx->step->options, "template"));
    const char *uri = g_getenv("ACCELVIRT_CONNECT");
    guint timeout_s = ctx->step->timeout_s;
    g_autofree char *template_text = NULL;
    g_autofree char *hostdev = NULL;
    g_autofree char *address = NULL;
    g_autofree char *random = NULL;
    g_autofree char *name = NULL;
    g_autofree char *uuid = target->scrub_domain_uuid ? g_strdup(target->scrub_domain_uuid) : g_uuid_string_random();
    g_autofree char *filled = NULL;
    g_autofree char *xml = NULL;
    g_autoptr(GError) local = NULL;
    AvScrubVmWatch watch = { 0 };
    virConnectPtr conn = NULL;
    virDomainPtr dom = NULL;
    int cb_lifecycle = -1, cb_reboot = -1, timer = -1;
    unsigned int create_flags = VIR_DOMAIN_START_AUTODESTROY;
    gboolean ok = FALSE, running = FALSE;
    const char *reason = NULL;
    gint64 start, deadline, gone_at = 0;
    double seconds = 0;

    if (!uri || !*uri)
        uri = AV_SCRUB_VM_CONNECT_DEFAULT;
    if (!template_path || !g_path_is_absolute(template_path)) {
        g_set_error(&local, AV_ERROR, AV_ERROR_POLICY, "the step has no absolute 'template'");
        goto out;
    }
    /* Checked at policy load, and again now: the template, or a directory
     * above it, may have changed since. */
    template_text = av_policy_read_scrub_template(template_path, &local);
    if (!template_text)
        goto out;
    /* A PCI function only: an mdev's parent or a USB device is never handed
     * to the scrub VM, and no device, no pass (accelvirt-policy(5)). */
    if (!target->mdev_uuid)
        hostdev = av_scrub_vm_hostdev(target->address);
    if (!hostdev) {
        g_set_error(&local, AV_ERROR, AV_ERROR_POLICY,
                    "the vm method gives the scrub VM a whole PCI function, and device %s (%s) is none; not scrubbed",
                    target->address ? target->address : "-", target->mdev_uuid ? target->mdev_uuid : "not a PCI address");
        goto out;
    }
    address = g_ascii_strdown(target->address, -1);
    random = av_random_hex(AV_SCRUB_VM_NAME_RANDOM, "the scrub VM's name", &local);
    if (!random)
        goto out;
    name = g_strconcat(AV_SCRUB_VM_NAME_PREFIX, random, NULL);
    watch.uuid = uuid;
    filled = av_scrub_vm_xml(template_text, target, name, uuid, hostdev);
    xml = av_scrub_vm_finish(filled, template_path, target->scrub_token, uuid, target->identity, &local);
    if (!xml)
        goto out;
    json_object_set_new(ctx->entry, "domain", json_string(name));
    json_object_set_new(ctx->entry, "uuid", json_string(uuid));
    json_object_set_new(ctx->entry, "uri", json_string(uri));
    json_object_set_new(ctx->entry, "hostdev", json_string(address));

    if (!GPOINTER_TO_INT(g_once(&event_once, av_scrub_vm_event_init, NULL))) {
        g_set_error(&local, AV_ERROR, AV_ERROR_FAILED, "cannot start libvirt's event loop: %s",
                    av_scrub_vm_virt_message());
        goto out;
    }
    conn = virConnectOpen(uri);
    if (!conn) {
        g_set_error(&local, AV_ERROR, AV_ERROR_FAILED, "cannot connect to libvirt at '%s' (is libvirtd running? "
                    "ACCELVIRT_CONNECT names another URI): %s", uri, av_scrub_vm_virt_message());
        goto out;
    }
    /* Registered before the domain exists: no early event is missed. */
    AV_LIBVIRT_CALLBACK_CASTS_BEGIN
    cb_lifecycle = virConnectDomainEventRegisterAny(conn, NULL, VIR_DOMAIN_EVENT_ID_LIFECYCLE,
                                                    VIR_DOMAIN_EVENT_CALLBACK(av_scrub_vm_on_lifecycle),
                                                    &watch, NULL);
    cb_reboot = virConnectDomainEventRegisterAny(conn, NULL, VIR_DOMAIN_EVENT_ID_REBOOT,
                                                 VIR_DOMAIN_EVENT_CALLBACK(av_scrub_vm_on_reboot), &watch, NULL);
    AV_LIBVIRT_CALLBACK_CASTS_END
    timer = virEventAddTimeout(AV_SCRUB_VM_TICK_MS, av_scrub_vm_tick, NULL, NULL);
    if (cb_lifecycle < 0 || cb_reboot < 0 || timer < 0) {
        g_set_error(&local, AV_ERROR, AV_ERROR_FAILED, "cannot watch the scrub VM's events on '%s': %s", uri,
                    av_scrub_vm_virt_message());
        goto out;
    }

    /* The test driver's domains live in this process only, and it has no
     * autodestroy. */
    if (g_strcmp0(virConnectGetType(conn), "TEST") == 0)
        create_flags = 0;
    start = g_get_monotonic_time();
    deadline = start + (gint64)timeout_s * G_USEC_PER_SEC;
    dom = virDomainCreateXML(conn, xml, create_flags);
    if (!dom) {
        g_set_error(&local, AV_ERROR, AV_ERROR_FAILED, "cannot start the scrub VM '%s' from '%s' on '%s': %s", name,
                    template_path, uri, av_scrub_vm_virt_message());
        goto out;
    }
    running = TRUE;
    /* It passes only if it really has the device: libvirt's live XML of the
     * running domain must show it. */
    {
        char *live = virDomainGetXMLDesc(dom, 0);
        json_t *seen = json_array();
        gboolean has = live && av_scrub_vm_live_has_device(live, address, seen);

        json_object_set_new(ctx->entry, "live_hostdevs", seen);
        if (!has) {
            g_autofree char *list = av_json_dump_compact(seen);

            reason = "no-device";
            if (!live)
                g_set_error(&local, AV_ERROR, AV_ERROR_FAILED,
                            "cannot read the live XML of the scrub VM '%s' (%s), so it is not known to have had "
                            "device %s; destroyed", name, av_scrub_vm_virt_message(), address);
            else
                g_set_error(&local, AV_ERROR, AV_ERROR_FAILED,
                            "the scrub VM '%s' runs without device %s: its live XML has no <hostdev type='pci'> "
                            "of that address (PCI hostdevs seen: %s); destroyed", name, address,
                            json_array_size(seen) ? list : "none");
            if (virDomainDestroy(dom) == 0)
                running = FALSE;
            free(live);
            goto out;
        }
        free(live);
    }

    for (;;) {
        gint64 now;
        int state = 0, st_reason = 0;

        if (virEventRunDefaultImpl() < 0) {
            g_set_error(&local, AV_ERROR, AV_ERROR_FAILED, "libvirt's event loop failed: %s",
                        av_scrub_vm_virt_message());
            break;
        }
        now = g_get_monotonic_time();
        seconds = (double)(now - start) / G_USEC_PER_SEC;
        if (watch.rebooted) {
            virDomainDestroy(dom);
            running = FALSE;
            reason = "rebooted";
            g_set_error(&local, AV_ERROR, AV_ERROR_FAILED,
                        "the scrub VM '%s' rebooted after %.1f s instead of powering off (the image reports a failed "
                        "scrub so); destroyed", name, seconds);
            break;
        }
        if (watch.stopped) {
            running = FALSE;
            reason = watch.crashed ? "crashed" : av_scrub_vm_stop_reason(watch.stop_detail);
            if (watch.stop_detail == VIR_DOMAIN_EVENT_STOPPED_SHUTDOWN && !watch.crashed) {
                ok = TRUE;
            } else if (watch.crashed || watch.stop_detail == VIR_DOMAIN_EVENT_STOPPED_CRASHED) {
                g_set_error(&local, AV_ERROR, AV_ERROR_FAILED,
                            "the scrub VM '%s' crashed after %.1f s (the image panicked: a failed scrub)", name,
                            seconds);
            } else {
                g_set_error(&local, AV_ERROR, AV_ERROR_FAILED,
                            "the scrub VM '%s' stopped after %.1f s without powering off (reason: %s)", name,
                            seconds, reason);
            }
            break;
        }
        if (!virConnectIsAlive(conn)) {
            g_set_error(&local, AV_ERROR, AV_ERROR_FAILED,
                        "lost the connection to libvirt at '%s' while the scrub VM '%s' ran (it is destroyed "
                        "with the connection)", uri, name);
            running = FALSE;
            break;
        }
        if (!gone_at && virDomainGetState(dom, &state, &st_reason, 0) < 0) {
            const virError *e = virGetLastError();

            if (e && e->code == VIR_ERR_NO_DOMAIN)
                gone_at = now;    /* its stop event may still be on its way */
        }
        if (gone_at && now - gone_at > AV_SCRUB_VM_GRACE_US) {
            running = FALSE;
            reason = "unknown";
            g_set_error(&local, AV_ERROR, AV_ERROR_FAILED,
                        "the scrub VM '%s' is gone after %.1f s and libvirt gave no stop event: not a proven "
                        "power-off", name, seconds);
            break;
        }
        if (now >= deadline) {
            if (virDomainDestroy(dom) == 0)
                running = FALSE;
            reason = "timeout";
            g_set_error(&local, AV_ERROR, AV_ERROR_FAILED,
                        "the scrub VM '%s' did not power off within %u s; destroyed", name, timeout_s);
            break;
        }
    }

out:
    if (dom && running)
        virDomainDestroy(dom);
    if (reason)
        json_object_set_new(ctx->entry, "reason", json_string(reason));
    /* What the image said it cleared, from its console log, when it ran. */
    if (dom) {
        g_autofree char *console = av_scrub_vm_console_path(xml);
        json_t *coverage = console && name ? av_scrub_vm_console_coverage(console, name) : NULL;

        json_object_set_new(ctx->entry, "console_log", av_json_string_or_null(console));
        if (coverage)
            json_object_set_new(ctx->entry, "coverage", coverage);
    }
    if (timer >= 0)
        virEventRemoveTimeout(timer);
    if (conn && cb_lifecycle >= 0)
        virConnectDomainEventDeregisterAny(conn, cb_lifecycle);
    if (conn && cb_reboot >= 0)
        virConnectDomainEventDeregisterAny(conn, cb_reboot);
    if (dom)
        virDomainFree(dom);
    if (conn)
        virConnectClose(conn);
    if (!ok) {
        *ret_message = g_strdup(local->message);
        g_propagate_error(error, g_steal_pointer(&local));
        return FALSE;
    }
    *ret_message = g_strdup_printf("the scrub VM '%s' had device %s and powered off after %.1f s", name, address,
                                   seconds);
    return TRUE;
}

/* See av-scrub.h. */
void
av_scrub_vm_register(void)
{
    av_scrub_method_set(AV_SCRUB_METHOD_VM, av_scrub_method_vm);
}

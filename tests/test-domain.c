/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt tests: the domain XML reader (src/domain/av-domain.c).
 *
 * The realistic domains are tests/data/domains/NAME.xml: a hand-written libvirt
 * domain, one in the shape Nova writes, one accelvirt placed.  Then hostile
 * input, each refused with AV_ERROR_INVALID_INPUT and words a user can act
 * on, and a short fuzz run (AV_TEST_FUZZ_COUNT mutations per domain, 3000
 * unless set; set it small under valgrind). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "av-test.h"
#include "domain/av-domain.h"
#include "util/av-error.h"

static const char *const domain_files[] = { "libvirt-hostdevs.xml", "nova-instance.xml", "accelvirt-placed.xml" };

/* ---- helpers ---- */

static char *
load_domain(const char *file, gsize *ret_len)
{
    g_autofree char *rel = g_build_filename("data", "domains", file, NULL);
    g_autofree char *path = av_test_srcdir_path(rel);
    g_autoptr(GError) err = NULL;
    char *xml = NULL;

    g_file_get_contents(path, &xml, ret_len, &err);
    g_assert_no_error(err);
    return xml;
}

static AvDomain *
parse_file(const char *file)
{
    g_autofree char *xml = NULL;
    g_autoptr(GError) err = NULL;
    gsize len = 0;
    AvDomain *dom;

    xml = load_domain(file, &len);
    dom = av_domain_parse(xml, len, &err);
    g_assert_no_error(err);
    g_assert_nonnull(dom);
    return dom;
}

static const AvHostdev *
hostdev(const AvDomain *dom, guint i)
{
    g_assert_cmpuint(i, <, dom->hostdevs->len);
    return g_ptr_array_index(dom->hostdevs, i);
}

/* Asserts that @xml is refused with AV_ERROR_INVALID_INPUT and a message
 * holding every word of the NULL-terminated list. */
static void
expect_invalid_len(const char *xml, gsize len, ...)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(AvDomain) dom = av_domain_parse(xml, len, &err);
    const char *word;
    va_list ap;

    g_assert_null(dom);
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_test_message("refused: %s", err->message);
    /* one line, no control characters, bounded */
    for (const char *p = err->message; *p; p++)
        g_assert_cmpint((guchar)*p, >=, 0x20);
    g_assert_cmpuint(strlen(err->message), <, 600);
    va_start(ap, len);
    while ((word = va_arg(ap, const char *))) {
        if (!strstr(err->message, word))
            g_error("'%s' is not in the message '%s'", word, err->message);
    }
    va_end(ap);
}

#define expect_invalid(xml, ...) expect_invalid_len((xml), strlen(xml), __VA_ARGS__, NULL)

/* Asserts that @xml parses, with its pinning and NUMA tuning left out and
 * a pinning_problem holding every word of the NULL-terminated list, and
 * that what acts on the pinning says so (issue 19). */
static void
expect_pinning_problem_words(const char *xml, ...)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(AvDomain) dom = av_domain_parse(xml, strlen(xml), &err);
    g_autoptr(GArray) cpus = NULL;
    gboolean all = FALSE;
    const char *word;
    va_list ap;

    g_assert_no_error(err);
    g_assert_nonnull(dom);
    g_assert_nonnull(dom->pinning_problem);
    g_test_message("left out: %s", dom->pinning_problem);
    g_assert_null(dom->vcpu_cpuset);
    g_assert_null(dom->emulatorpin);
    g_assert_null(dom->numatune_memory_nodeset);
    g_assert_cmpuint(dom->vcpupins->len, ==, MAX(dom->vcpus, 1));
    for (guint i = 0; i < dom->vcpupins->len; i++)
        g_assert_null(g_ptr_array_index(dom->vcpupins, i));
    va_start(ap, xml);
    while ((word = va_arg(ap, const char *))) {
        if (!strstr(dom->pinning_problem, word))
            g_error("'%s' is not in the problem '%s'", word, dom->pinning_problem);
    }
    va_end(ap);
    g_assert_false(av_domain_vcpu_cpus(dom, &cpus, &all, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_assert_nonnull(strstr(err->message, dom->pinning_problem));
}

#define expect_pinning_problem(xml, ...) expect_pinning_problem_words((xml), __VA_ARGS__, NULL)

/* A domain with @devices inside <devices> and @extra after <name>. */
static char *
domain_with(const char *extra, const char *devices)
{
    return g_strdup_printf("<domain type='kvm'><name>t</name>%s<devices>%s</devices></domain>", extra, devices);
}

static void
expect_devices_invalid(const char *devices, const char *w1, const char *w2)
{
    g_autofree char *xml = domain_with("", devices);

    expect_invalid_len(xml, strlen(xml), w1, w2, NULL);
}

static AvDomain *
parse_ok(const char *xml)
{
    g_autoptr(GError) err = NULL;
    AvDomain *dom = av_domain_parse(xml, strlen(xml), &err);

    g_assert_no_error(err);
    g_assert_nonnull(dom);
    return dom;
}

/* ---- realistic domains ---- */

static void
test_libvirt_hostdevs(void)
{
    g_autoptr(AvDomain) dom = parse_file("libvirt-hostdevs.xml");
    g_autoptr(GArray) cpus = NULL;
    g_autoptr(GError) err = NULL;
    gboolean all_pinned = TRUE;
    const AvHostdev *h;

    g_assert_cmpstr(dom->name, ==, "render-farm-01");
    g_assert_cmpstr(dom->uuid, ==, "8e1b3c4d-5f60-4718-9a2b-3c4d5e6f7081");
    g_assert_false(dom->is_nova);
    g_assert_null(dom->nova_name);
    g_assert_cmpuint(dom->vcpus, ==, 4);
    g_assert_cmpstr(dom->vcpu_cpuset, ==, "0-7,^3");
    g_assert_cmpstr(dom->vcpu_placement, ==, "static");
    g_assert_cmpuint(dom->vcpupins->len, ==, 4);
    g_assert_null(dom->emulatorpin);
    g_assert_null(dom->numatune_memory_mode);
    g_assert_cmpint(dom->placement_node, ==, -1);
    g_assert_cmpuint(dom->placed->len, ==, 0);

    /* scsi and capabilities hostdevs and the network interface are not there */
    g_assert_cmpuint(dom->hostdevs->len, ==, 4);
    h = hostdev(dom, 0);
    g_assert_cmpint(h->type, ==, AV_HOSTDEV_PCI);
    g_assert_false(h->managed);
    g_assert_false(h->is_interface);
    g_assert_cmpstr(h->pci_address, ==, "0000:3b:00.0");
    g_assert_cmpstr(h->alias, ==, "ua-gpu0");
    h = hostdev(dom, 1);
    g_assert_cmpint(h->type, ==, AV_HOSTDEV_PCI);
    g_assert_true(h->managed);
    g_assert_cmpstr(h->pci_address, ==, "0000:af:1f.7"); /* decimal and upper-case hex accepted */
    g_assert_null(h->alias);
    h = hostdev(dom, 2);
    g_assert_cmpint(h->type, ==, AV_HOSTDEV_MDEV);
    g_assert_cmpstr(h->mdev_uuid, ==, "c2177883-f1bb-47f0-914d-32a22e3a8804");
    g_assert_cmpstr(h->mdev_model, ==, "vfio-pci");
    g_assert_cmpstr(h->alias, ==, "ua-vgpu0");
    g_assert_null(h->pci_address);
    h = hostdev(dom, 3);
    g_assert_cmpint(h->type, ==, AV_HOSTDEV_USB);
    g_assert_true(h->managed);
    g_assert_cmphex(h->usb_vendor, ==, 0x03e7);
    g_assert_cmphex(h->usb_product, ==, 0x2485);
    g_assert_cmpint(h->usb_bus, ==, 1);
    g_assert_cmpint(h->usb_device, ==, 7);

    /* no vcpupin: every vCPU runs on <vcpu cpuset=> */
    g_assert_true(av_domain_vcpu_cpus(dom, &cpus, &all_pinned, &err));
    g_assert_no_error(err);
    g_assert_true(all_pinned);
    g_assert_cmpuint(cpus->len, ==, 7);
    g_assert_cmpuint(g_array_index(cpus, guint, 2), ==, 2);
    g_assert_cmpuint(g_array_index(cpus, guint, 3), ==, 4);
}

static void
test_nova_instance(void)
{
    g_autoptr(AvDomain) dom = parse_file("nova-instance.xml");
    g_autoptr(GArray) cpus = NULL;
    g_autoptr(GError) err = NULL;
    gboolean all_pinned = FALSE;
    const AvHostdev *h;

    g_assert_cmpstr(dom->name, ==, "instance-0000002a");
    g_assert_cmpstr(dom->uuid, ==, "a1f6e0f4-2c9b-4a57-8d3e-6b1f0c2d9e77");
    g_assert_true(dom->is_nova);
    g_assert_cmpstr(dom->nova_name, ==, "cern-ml-train-7");
    g_assert_cmpstr(dom->nova_user, ==, "4c5a1d2e8f9b4e3a9d7c6b5a4f3e2d1c");
    g_assert_cmpstr(dom->nova_project, ==, "9f8e7d6c5b4a49382716050403020100");
    g_assert_cmpuint(dom->vcpus, ==, 4);
    g_assert_null(dom->vcpu_cpuset);
    g_assert_null(dom->vcpu_placement);
    g_assert_cmpuint(dom->vcpupins->len, ==, 4);
    g_assert_cmpstr(g_ptr_array_index(dom->vcpupins, 0), ==, "4");
    g_assert_cmpstr(g_ptr_array_index(dom->vcpupins, 3), ==, "7");
    g_assert_cmpstr(dom->emulatorpin, ==, "4-7");
    g_assert_cmpstr(dom->numatune_memory_mode, ==, "strict");
    g_assert_cmpstr(dom->numatune_memory_nodeset, ==, "0");

    /* the SR-IOV VF of <interface type='hostdev'>, then the <hostdev> */
    g_assert_cmpuint(dom->hostdevs->len, ==, 2);
    h = hostdev(dom, 0);
    g_assert_cmpint(h->type, ==, AV_HOSTDEV_PCI);
    g_assert_true(h->is_interface);
    g_assert_true(h->managed);
    g_assert_cmpstr(h->pci_address, ==, "0000:5e:02.3");
    h = hostdev(dom, 1);
    g_assert_cmpint(h->type, ==, AV_HOSTDEV_PCI);
    g_assert_false(h->is_interface);
    g_assert_true(h->managed);
    g_assert_cmpstr(h->pci_address, ==, "0000:17:00.0");
    g_assert_cmpint(h->usb_bus, ==, -1);

    g_assert_true(av_domain_vcpu_cpus(dom, &cpus, &all_pinned, &err));
    g_assert_true(all_pinned);
    g_assert_cmpuint(cpus->len, ==, 4);
    g_assert_cmpuint(g_array_index(cpus, guint, 0), ==, 4);
    g_assert_cmpuint(g_array_index(cpus, guint, 3), ==, 7);
}

static void
test_accelvirt_placed(void)
{
    g_autoptr(AvDomain) dom = parse_file("accelvirt-placed.xml");
    g_autoptr(GArray) cpus = NULL;
    g_autoptr(GError) err = NULL;
    gboolean all_pinned = FALSE;
    const AvPlacedDevice *p;

    g_assert_cmpstr(dom->uuid, ==, "3f2504e0-4f89-41d3-9a0c-0305e82c3301");
    g_assert_false(dom->is_nova);
    g_assert_cmpint(dom->placement_node, ==, 1);
    g_assert_cmpuint(dom->placed->len, ==, 2);
    p = g_ptr_array_index(dom->placed, 0);
    g_assert_cmpstr(p->profile, ==, "gpu-passthrough");
    g_assert_cmpstr(p->pci_address, ==, "0000:af:00.0");
    g_assert_null(p->mdev_uuid);
    g_assert_cmpstr(p->alias, ==, "ua-accelvirt-0");
    p = g_ptr_array_index(dom->placed, 1);
    g_assert_cmpstr(p->profile, ==, "vgpu-a10");
    g_assert_null(p->pci_address);
    g_assert_cmpstr(p->mdev_uuid, ==, "6f2a0b1c-9d8e-4f7a-8b6c-5d4e3f2a1b0c");
    g_assert_cmpstr(p->alias, ==, "ua-accelvirt-1");

    g_assert_cmpuint(dom->hostdevs->len, ==, 2);
    g_assert_cmpstr(hostdev(dom, 0)->pci_address, ==, "0000:af:00.0");
    g_assert_false(hostdev(dom, 0)->managed);
    g_assert_cmpstr(hostdev(dom, 1)->mdev_uuid, ==, "6f2a0b1c-9d8e-4f7a-8b6c-5d4e3f2a1b0c");
    g_assert_cmpstr(dom->numatune_memory_nodeset, ==, "1");

    g_assert_true(av_domain_vcpu_cpus(dom, &cpus, &all_pinned, &err));
    g_assert_true(all_pinned);
    g_assert_cmpuint(cpus->len, ==, 3);
    g_assert_cmpuint(g_array_index(cpus, guint, 2), ==, 26);
}

static void
test_minimal(void)
{
    g_autoptr(AvDomain) dom = parse_ok("<?xml version='1.0' encoding='UTF-8'?>\n<domain><name>x</name></domain>");
    g_autoptr(AvDomain) latin = NULL;
    g_autoptr(GArray) cpus = NULL;
    gboolean all_pinned = TRUE;

    g_assert_null(dom->uuid);
    g_assert_cmpuint(dom->vcpus, ==, 0);
    g_assert_cmpuint(dom->vcpupins->len, ==, 1);
    g_assert_cmpuint(dom->hostdevs->len, ==, 0);
    g_assert_true(av_domain_vcpu_cpus(dom, &cpus, &all_pinned, NULL));
    g_assert_false(all_pinned);
    g_assert_cmpuint(cpus->len, ==, 0);

    /* a declared encoding is honoured; values come out UTF-8 */
    latin = parse_ok("<?xml version='1.0' encoding='ISO-8859-1'?><domain><name>caf\xe9</name></domain>");
    g_assert_cmpstr(latin->name, ==, "caf\xc3\xa9");
}

static void
test_partial_pins(void)
{
    g_autoptr(AvDomain) dom = parse_ok("<domain><name>p</name><vcpu>3</vcpu>"
                                       "<cputune><vcpupin vcpu='2' cpuset='9'/></cputune>"
                                       "<cputune><vcpupin vcpu='0' cpuset=' 1 - 2 , 4 '/></cputune></domain>");
    g_autoptr(GArray) cpus = NULL;
    gboolean all_pinned = TRUE;

    /* every <cputune> counts, as libvirt's ./cputune/vcpupin */
    g_assert_cmpstr(g_ptr_array_index(dom->vcpupins, 0), ==, " 1 - 2 , 4 ");
    g_assert_null(g_ptr_array_index(dom->vcpupins, 1));
    g_assert_true(av_domain_vcpu_cpus(dom, &cpus, &all_pinned, NULL));
    g_assert_false(all_pinned);
    g_assert_cmpuint(cpus->len, ==, 4);
}

/* ---- cpusets ---- */

static void
test_cpuset(void)
{
    static const struct {
        const char *set;
        const char *expect; /* the numbers, or NULL: refused */
    } cases[] = {
        { "0-3,8,^2", "0 1 3 8" },
        { "^2,0-3", "0 1 2 3" }, /* left to right, as libvirt */
        { "7", "7" },
        { "8191", "8191" },
        { "0,16383", "0 16383" }, /* libvirt's VIR_DOMAIN_CPUMASK_LEN, issue 19 */
        { "0,", "0" },
        { " 1 ,2 ", "1 2" },
        { "007", "7" },
        { "16384", NULL },
        { "99999999999999999999999", NULL },
        { "-1", NULL },
        { "3-1", NULL },
        { "^0-3", NULL },
        { "0-3,^0-3", NULL },
        { "^1", NULL },
        { "", NULL },
        { " ", NULL },
        { ",", NULL },
        { "0x3", NULL },
        { "1;2", NULL },
        { "1-", NULL },
        { "a", NULL },
        { "0-16383,../etc", NULL },
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GArray) set = NULL;
        g_autoptr(GError) err = NULL;
        gboolean ok = av_domain_cpuset_parse(cases[i].set, AV_DOMAIN_CPU_MAX, &set, &err);

        if (!cases[i].expect) {
            if (ok)
                g_error("cpuset '%s' was accepted", cases[i].set);
            g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
            g_assert_nonnull(strstr(err->message, "cpuset '"));
            continue;
        }
        g_assert_no_error(err);
        {
            g_autoptr(GString) got = g_string_new(NULL);

            for (guint j = 0; j < set->len; j++)
                g_string_append_printf(got, "%s%u", j ? " " : "", g_array_index(set, guint, j));
            g_assert_cmpstr(got->str, ==, cases[i].expect);
        }
    }
    {
        g_autoptr(GArray) set = NULL;
        g_autoptr(GError) err = NULL;

        g_assert_false(av_domain_cpuset_parse("16384", AV_DOMAIN_NODE_MAX, &set, &err));
        g_assert_nonnull(strstr(err->message, "above 16383"));
    }
}

static void
test_quote(void)
{
    g_autofree char *a = av_domain_quote("a\nb\x1b[31m\xe2\x80\xae" "c");
    g_autofree char *b = av_domain_quote("0123456789012345678901234567890123456789012345678901234567890123456789");
    g_autofree char *c = av_domain_quote("\xff\xfe");

    g_assert_cmpstr(a, ==, "a?b?[31m?c");
    g_assert_cmpuint(g_utf8_strlen(b, -1), ==, 67);
    g_assert_true(g_str_has_suffix(b, "..."));
    g_assert_cmpstr(c, ==, "??");
}

/* ---- hostile documents ---- */

static void
test_billion_laughs(void)
{
    static const char xml[] =
        "<?xml version='1.0'?>\n"
        "<!DOCTYPE domain [\n"
        " <!ENTITY lol 'lol'>\n"
        " <!ENTITY lol1 '&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;'>\n"
        " <!ENTITY lol2 '&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;'>\n"
        " <!ENTITY lol3 '&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;'>\n"
        " <!ENTITY lol4 '&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;'>\n"
        " <!ENTITY lol5 '&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;'>\n"
        " <!ENTITY lol6 '&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;'>\n"
        " <!ENTITY lol7 '&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;'>\n"
        " <!ENTITY lol8 '&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;'>\n"
        " <!ENTITY lol9 '&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;'>\n"
        "]>\n"
        "<domain><name>&lol9;</name><description attr='&lol9;'>&lol9;</description></domain>\n";
    gint64 start = g_get_monotonic_time();

    expect_invalid(xml, "DOCTYPE", "line 2");
    g_assert_cmpint(g_get_monotonic_time() - start, <, G_USEC_PER_SEC / 2);
}

static void
test_doctype(void)
{
    /* XXE */
    expect_invalid("<?xml version='1.0'?><!DOCTYPE domain [<!ENTITY x SYSTEM 'file:///etc/passwd'>]>"
                   "<domain><name>&x;</name></domain>",
                   "DOCTYPE");
    /* external DTD, network DTD, parameter entities */
    expect_invalid("<!DOCTYPE domain SYSTEM '/etc/passwd'><domain><name>a</name></domain>", "DOCTYPE");
    expect_invalid("<!DOCTYPE domain PUBLIC 'x' 'http://127.0.0.1:1/x.dtd'><domain><name>a</name></domain>",
                   "DOCTYPE");
    expect_invalid("<!DOCTYPE domain [<!ENTITY % p SYSTEM 'file:///etc/shadow'> %p;]><domain/>", "DOCTYPE");
    /* an undeclared entity without a DOCTYPE is a parse error */
    expect_invalid("<domain><name>&x;</name></domain>", "does not parse", "line 1");
}

static void
test_oversize(void)
{
    gsize len = AV_DOMAIN_XML_MAX + 1;
    g_autofree char *big = g_malloc(len);
    gint64 start = g_get_monotonic_time();

    /* refused before parsing: garbage past the first bytes is never looked at */
    memset(big, 'A', len);
    expect_invalid_len(big, len, "8388609 bytes", "8388608", NULL);
    g_assert_cmpint(g_get_monotonic_time() - start, <, G_USEC_PER_SEC / 10);
    expect_invalid_len("", 0, "empty", NULL);
}

static void
test_deep(void)
{
    GString *s = g_string_new("<domain><name>d</name><metadata>");

    for (int i = 0; i < 5000; i++)
        g_string_append(s, "<a>");
    for (int i = 0; i < 5000; i++)
        g_string_append(s, "</a>");
    g_string_append(s, "</metadata></domain>");
    expect_invalid(s->str, "does not parse", "depth");
    g_string_free(s, TRUE);
}

static void
test_garbage(void)
{
    static const char binary[] = "\x00\x01\x02\xff\xfe<domain>\x80\x81</domain>";
    char random_bytes[4096];

    expect_invalid_len(binary, sizeof(binary) - 1, "does not parse", NULL);
    expect_invalid("<domain><name>\xc3\x28</name></domain>", "does not parse", "UTF-8");
    expect_invalid("<domain><name>a\x01</name></domain>", "does not parse");
    expect_invalid("<domain><name>abc</name><devi", "does not parse", "line 1");
    expect_invalid("<domain><name>abc</name>\n<devices>\n</domain>", "does not parse", "line 3");
    expect_invalid("not xml at all", "does not parse");
    expect_invalid("<domain><name>a</name></domain><domain/>", "does not parse");
    expect_invalid("<domain mode='a' mode='b'><name>a</name></domain>", "does not parse", "redefined");
    for (gsize i = 0; i < sizeof(random_bytes); i++)
        random_bytes[i] = (char)g_test_rand_int_range(0, 256);
    expect_invalid_len(random_bytes, sizeof(random_bytes), "does not parse", NULL);
    /* the libxml2 message quoting the document is sanitised and bounded */
    {
        g_autofree char *long_name = g_strnfill(5000, 'n');
        g_autofree char *xml = g_strdup_printf("<domain><%s\x1b></domain>", long_name);

        expect_invalid(xml, "does not parse");
    }
}

static void
test_root(void)
{
    expect_invalid("<notdomain><name>a</name></notdomain>", "root element", "<notdomain>", "not <domain>");
    expect_invalid("<x:domain xmlns:x='urn:x'><name>a</name></x:domain>", "root element", "namespace");
    expect_invalid("<domain><uuid>1</uuid></domain>", "no <name>");
    expect_invalid("<domain><name>a/b</name></domain>", "domain name", "a/b");
    expect_invalid("<domain><name></name></domain>", "domain name");
    expect_invalid("<domain><name>a&#10;b</name></domain>", "domain name", "a?b");
    expect_invalid("<domain><name>a</name><uuid>../../etc/passwd</uuid></domain>", "<uuid>", "../../etc/passwd");
    expect_invalid("<domain><name>a</name><uuid>8e1b3c4d-5f60-4718-9a2b-3c4d5e6f708</uuid></domain>", "<uuid>");
}

static void
test_pci_addresses(void)
{
#define PCI(dom, bus, slot, fn) \
    "<hostdev mode='subsystem' type='pci'><source><address domain='" dom "' bus='" bus "' slot='" slot \
    "' function='" fn "'/></source></hostdev>"
    expect_devices_invalid(PCI("0x0000", "0x3b", "0x2g", "0x0"), "hostdev 1: PCI address slot '0x2g'",
                           "between 0 and 0x1f");
    expect_devices_invalid(PCI("0x0000", "0x3b", "0x20", "0x0"), "slot '0x20'", "0x1f");
    expect_devices_invalid(PCI("0x0000", "0x100", "0x00", "0x0"), "bus '0x100'", "0xff");
    expect_devices_invalid(PCI("0x10000", "0x00", "0x00", "0x0"), "domain '0x10000'", "0xffff");
    expect_devices_invalid(PCI("0x0000", "0x00", "0x00", "8"), "function '8'", "between 0 and 7");
    expect_devices_invalid(PCI("0x0000", "../", "0x00", "0"), "bus '../'", NULL);
    expect_devices_invalid(PCI("0x0000", "/", "0x00", "0"), "bus '/'", NULL);
    expect_devices_invalid(PCI("0x0000", "%2f", "0x00", "0"), "bus '%2f'", NULL);
    expect_devices_invalid(PCI("0x0000", "-1", "0x00", "0"), "bus '-1'", NULL);
    expect_devices_invalid(PCI("0x0000", "18446744073709551617", "0x00", "0"), "bus '18446744073709551617'",
                           NULL);
    expect_devices_invalid(PCI("0xffffffffffffffffffff0000", "0", "0", "0"), "domain", NULL);
    expect_devices_invalid(PCI("0x0000", "0x", "0x00", "0"), "bus '0x'", NULL);
    expect_devices_invalid(PCI("0x0000", " 0x3b", "0x00", "0"), "bus ' 0x3b'", NULL);
    expect_devices_invalid(PCI("0x0000", "+1", "0x00", "0"), "bus '+1'", NULL);
    /* octal to libvirt: refused rather than read differently */
    expect_devices_invalid(PCI("0x0000", "010", "0x00", "0"), "bus '010'", "leading zero");
    expect_devices_invalid(PCI("0x0000", "0x3b", "0x00", "0&#10;"), "function '0?'", NULL);
#undef PCI
    {
        g_autofree char *long_value = g_strnfill(10000, '9');
        g_autofree char *devices = g_strdup_printf(
            "<hostdev type='pci'><source><address bus='%s'/></source></hostdev>", long_value);
        g_autofree char *xml = domain_with("", devices);

        expect_invalid(xml, "hostdev 1", "...");
    }
    /* absent attributes are 0, absent mode is 'subsystem', as in libvirt */
    {
        g_autofree char *xml = domain_with("", "<hostdev type='pci'><source><address bus='0x3'/></source></hostdev>");
        g_autoptr(AvDomain) dom = parse_ok(xml);

        g_assert_cmpuint(dom->hostdevs->len, ==, 1);
        g_assert_cmpstr(hostdev(dom, 0)->pci_address, ==, "0000:03:00.0");
        g_assert_false(hostdev(dom, 0)->managed);
    }
}

static void
test_hostdev_shapes(void)
{
    expect_devices_invalid("<hostdev mode='subsystem' type='pci' managed='yes'/>", "hostdev 1", "<source>");
    expect_devices_invalid("<hostdev mode='subsystem' type='pci'><source/></hostdev>", "hostdev 1", "<address>");
    expect_devices_invalid("<hostdev mode='subsystem' type='pci'><source><address bus='1'/></source>"
                           "<source><address bus='2'/></source></hostdev>",
                           "more than one <source>", NULL);
    expect_devices_invalid("<hostdev mode='subsystem' type='pci'><source><address bus='1'/><address bus='2'/>"
                           "</source></hostdev>",
                           "more than one <address>", NULL);
    expect_devices_invalid("<hostdev mode='subsystem' type='pci' xmlns:x='urn:x'><source><x:address bus='1'/>"
                           "</source></hostdev>",
                           "namespace", NULL);
    expect_devices_invalid("<hostdev mode='subsystem' type='pci' managed='maybe'><source><address/></source></hostdev>",
                           "managed 'maybe'", NULL);
    expect_devices_invalid("<hostdev mode='bogus' type='pci'/>", "mode 'bogus'", NULL);
    expect_devices_invalid("<hostdev mode='subsystem'/>", "hostdev 1", "type");
    expect_devices_invalid("<hostdev type='scsi'/><hostdev type='pci'><source><address/></source>"
                           "<alias name='../x'/></hostdev>",
                           "hostdev 2: alias name '../x'", NULL);
    /* mdev */
    expect_devices_invalid("<hostdev mode='subsystem' type='mdev' model='vfio-pci'><source>"
                           "<address uuid='../../../../sys/kernel'/></source></hostdev>",
                           "mdev address uuid '../../../../sys/kernel'", "not a UUID");
    expect_devices_invalid("<hostdev mode='subsystem' type='mdev' model='vfio-pci'><source>"
                           "<address uuid='c2177883-f1bb-47f0-914d-32a22e3a880/'/></source></hostdev>",
                           "uuid 'c2177883-f1bb-47f0-914d-32a22e3a880/'", NULL);
    expect_devices_invalid("<hostdev mode='subsystem' type='mdev' model='vfio-pci'><source/></hostdev>",
                           "uuid '(null)'", NULL);
    expect_devices_invalid("<hostdev mode='subsystem' type='mdev'><source><address "
                           "uuid='c2177883-f1bb-47f0-914d-32a22e3a8804'/></source></hostdev>",
                           "mdev model '(null)'", NULL);
    /* usb */
    expect_devices_invalid("<hostdev mode='subsystem' type='usb'><source><vendor id='0x103e7'/>"
                           "<product id='1'/></source></hostdev>",
                           "USB vendor id '0x103e7'", NULL);
    expect_devices_invalid("<hostdev mode='subsystem' type='usb'><source><vendor id='0x03e7'/></source></hostdev>",
                           "<vendor> and <product>", NULL);
    expect_devices_invalid("<hostdev mode='subsystem' type='usb'><source/></hostdev>", "<address>", NULL);
    expect_devices_invalid("<hostdev mode='subsystem' type='usb'><source><address bus='1' device='../2'/>"
                           "</source></hostdev>",
                           "USB address device '../2'", NULL);
    expect_devices_invalid("<hostdev mode='subsystem' type='usb'><source><address bus='-1' device='2'/>"
                           "</source></hostdev>",
                           "USB address bus '-1'", NULL);
    /* interface type='hostdev' */
    expect_devices_invalid("<interface type='hostdev'><source><address type='pci' bus='0x1g'/></source></interface>",
                           "interface 1: PCI address bus '0x1g'", NULL);
    expect_devices_invalid("<interface type='hostdev'/>", "interface 1", "<source>");

    /* ignored: capabilities mode, unknown types, hostdevs outside <devices>, other namespaces */
    {
        g_autofree char *xml = domain_with(
            "<metadata><hostdev type='pci'/></metadata>",
            "<hostdev mode='capabilities' type='misc'><source><char>/dev/input/event3</char></source></hostdev>"
            "<hostdev mode='subsystem' type='scsi_host'><source protocol='vhost' wwpn='naa.5'/></hostdev>"
            "<hostdev mode='subsystem' type='future'/>"
            "<x:hostdev xmlns:x='urn:x' type='pci'/>"
            "<interface type='network'><source network='default'/></interface>");
        g_autoptr(AvDomain) dom = parse_ok(xml);

        g_assert_cmpuint(dom->hostdevs->len, ==, 0);
    }
    /* every <devices>, as libvirt's ./devices/hostdev */
    {
        g_autoptr(AvDomain) dom = parse_ok(
            "<domain><name>a</name><devices/><devices><hostdev type='pci'><source><address slot='0x1'/></source>"
            "</hostdev></devices></domain>");

        g_assert_cmpuint(dom->hostdevs->len, ==, 1);
        g_assert_cmpstr(hostdev(dom, 0)->pci_address, ==, "0000:00:01.0");
    }
}

static void
test_cputune(void)
{
    expect_pinning_problem("<domain><name>a</name><vcpu>2</vcpu><cputune><vcpupin vcpu='2' cpuset='1'/></cputune></domain>",
                   "vcpupin vcpu '2'", "between 0 and 1");
    expect_pinning_problem("<domain><name>a</name><cputune><vcpupin vcpu='1' cpuset='1'/></cputune></domain>",
                   "vcpupin vcpu '1'", "between 0 and 0");
    expect_pinning_problem("<domain><name>a</name><vcpu>2</vcpu><cputune><vcpupin vcpu='1' cpuset='1'/>"
                   "<vcpupin vcpu='1' cpuset='2'/></cputune></domain>",
                   "vCPU 1", "twice");
    expect_pinning_problem("<domain><name>a</name><vcpu>2</vcpu><cputune><vcpupin vcpu='-1' cpuset='1'/></cputune></domain>",
                   "vcpupin vcpu '-1'", NULL);
    expect_pinning_problem("<domain><name>a</name><vcpu>2</vcpu><cputune><vcpupin vcpu='99999999999' cpuset='1'/>"
                   "</cputune></domain>",
                   "vcpupin vcpu '99999999999'", NULL);
    expect_pinning_problem("<domain><name>a</name><vcpu>2</vcpu><cputune><vcpupin vcpu='0' cpuset='0-3,x'/></cputune></domain>",
                   "vcpupin for vCPU 0", "cpuset '0-3,x'", "such as");
    expect_pinning_problem("<domain><name>a</name><vcpu>2</vcpu><cputune><vcpupin vcpu='0'/></cputune></domain>",
                   "vCPU 0", "no cpuset");
    expect_pinning_problem("<domain><name>a</name><vcpu>2</vcpu><cputune><vcpupin vcpu='0' cpuset='0-100000'/></cputune>"
                   "</domain>",
                   "above 16383");
    expect_pinning_problem("<domain><name>a</name><cputune><emulatorpin cpuset='1'/><emulatorpin cpuset='2'/></cputune></domain>",
                   "more than one <emulatorpin>");
    expect_pinning_problem("<domain><name>a</name><cputune><emulatorpin cpuset='^1'/></cputune></domain>",
                   "emulatorpin cpuset '^1'", "selects nothing");
    expect_pinning_problem("<domain><name>a</name><vcpu>0</vcpu></domain>", "<vcpu> '0'", "between 1 and 16384");
    expect_pinning_problem("<domain><name>a</name><vcpu>16385</vcpu></domain>", "<vcpu> '16385'");
    expect_pinning_problem("<domain><name>a</name><vcpu>four</vcpu></domain>", "<vcpu> 'four'");
    expect_pinning_problem("<domain><name>a</name><vcpu cpuset='1-'>2</vcpu></domain>", "<vcpu> cpuset '1-'");
    expect_pinning_problem("<domain><name>a</name><vcpu placement='numad'>2</vcpu></domain>", "placement 'numad'");
    expect_pinning_problem("<domain><name>a</name><numatune><memory mode='strict' nodeset='0-16384'/></numatune></domain>",
                   "nodeset '0-16384'", "above 16383");
    expect_pinning_problem("<domain><name>a</name><numatune><memory mode='strictest' nodeset='0'/></numatune></domain>",
                   "mode 'strictest'");
    expect_pinning_problem("<domain><name>a</name><numatune/><numatune/></domain>", "more than one <numatune>");
    /* As libvirt reads them (issue 19): base 10 with leading zeros, CPU ids
     * up to 16383, node ids past the kernel's 1023. */
    {
        g_autoptr(AvDomain) dom = parse_ok("<domain><name>a</name><vcpu cpuset='0-3,^2,9000'>02</vcpu><cputune>"
                                           "<vcpupin vcpu='01' cpuset='0,16383'/>"
                                           "<emulatorpin cpuset='8192-8200,16000'/></cputune>"
                                           "<numatune><memory mode='strict' nodeset='0-1,2000'/></numatune></domain>");
        g_autoptr(GArray) cpus = NULL;
        gboolean all = FALSE;

        g_assert_null(dom->pinning_problem);
        g_assert_cmpuint(dom->vcpus, ==, 2);
        g_assert_cmpstr(g_ptr_array_index(dom->vcpupins, 1), ==, "0,16383");
        g_assert_cmpstr(dom->numatune_memory_nodeset, ==, "0-1,2000");
        g_assert_true(av_domain_vcpu_cpus(dom, &cpus, &all, NULL));
        g_assert_true(all);
        g_assert_cmpuint(cpus->len, ==, 5); /* 0 1 3 9000 16383 */
        g_assert_cmpuint(g_array_index(cpus, guint, 4), ==, 16383);
    }
    {
        g_autoptr(AvDomain) dom = parse_ok("<domain><name>a</name><vcpu current='1'>\n 2\n</vcpu>"
                                           "<numatune><memory placement='auto' mode='interleave'/></numatune></domain>");

        g_assert_cmpuint(dom->vcpus, ==, 2);
        g_assert_cmpstr(dom->numatune_memory_mode, ==, "interleave");
        g_assert_cmpstr(dom->numatune_memory_placement, ==, "auto");
        g_assert_null(dom->numatune_memory_nodeset);
    }
}

static void
test_metadata(void)
{
#define NOVA(inner) \
    "<domain><name>a</name><metadata><nova:instance xmlns:nova='http://openstack.org/xmlns/libvirt/nova/1.1'>" \
    inner "</nova:instance></metadata></domain>"
#define AV(inner) \
    "<domain><name>a</name><metadata><av:accelerators xmlns:av='urn:accelvirt:domain:1'>" inner \
    "</av:accelerators></metadata></domain>"
    expect_invalid(NOVA("<nova:owner><nova:user uuid='../../root'>x</nova:user></nova:owner>"),
                   "nova:user uuid '../../root'", NULL);
    expect_invalid(NOVA("<nova:owner><nova:project uuid='a b'>x</nova:project></nova:owner>"),
                   "nova:project uuid 'a b'", NULL);
    expect_invalid(AV("<av:placement node='-1'/>"), "av:placement node '-1'", NULL);
    expect_invalid(AV("<av:placement node='16384'/>"), "node '16384'", NULL);
    expect_invalid(AV("<av:placement/><av:placement/>"), "more than one <av:placement>", NULL);
    expect_invalid(AV("<av:placement><av:device profile='gpu' address='0000:17:00.0/../..'/></av:placement>"),
                   "av:device address '0000:17:00.0/../..'", NULL);
    expect_invalid(AV("<av:placement><av:device profile='gpu' address='0000:17:20.0'/></av:placement>"),
                   "address '0000:17:20.0'", NULL);
    expect_invalid(AV("<av:placement><av:device profile='../gpu' address='0000:17:00.0'/></av:placement>"),
                   "profile '../gpu'", NULL);
    expect_invalid(AV("<av:placement><av:mdev profile='v' uuid='x/y'/></av:placement>"), "av:mdev uuid 'x/y'", NULL);
    /* an SR-IOV VF's PF and index (issue 13): both or neither, well formed */
    expect_invalid(AV("<av:placement><av:device profile='q' address='0000:6b:00.5' pf='../6b' vf='4'/></av:placement>"),
                   "av:device pf '../6b'", NULL);
    expect_invalid(AV("<av:placement><av:device profile='q' address='0000:6b:00.5' pf='0000:6b:00.0'/></av:placement>"),
                   "av:device has pf= without vf=", NULL);
    expect_invalid(AV("<av:placement><av:device profile='q' address='0000:6b:00.5' vf='4'/></av:placement>"),
                   "av:device has vf= without pf=", NULL);
    expect_invalid(AV("<av:placement><av:device profile='q' address='0000:6b:00.5' pf='0000:6b:00.0' vf='65535'/></av:placement>"),
                   "av:device vf '65535'", NULL);
    expect_invalid(AV("<av:placement><av:device profile='q' address='0000:6b:00.5' pf='0000:6b:00.0' vf='-1'/></av:placement>"),
                   "av:device vf '-1'", NULL);
    {
        g_autoptr(AvDomain) dom = parse_ok(AV("<av:placement><av:device profile='q' address='0000:6B:00.5' pf='0000:6B:00.0' "
                                              "vf='4'/><av:device profile='g' address='0000:17:00.0'/></av:placement>"));
        const AvPlacedDevice *vf = g_ptr_array_index(dom->placed, 0);
        const AvPlacedDevice *gpu = g_ptr_array_index(dom->placed, 1);

        g_assert_cmpstr(vf->pf_address, ==, "0000:6b:00.0");
        g_assert_cmpint(vf->vf_index, ==, 4);
        g_assert_null(gpu->pf_address);
        g_assert_cmpint(gpu->vf_index, ==, -1);
    }
    expect_invalid(AV("<av:scrub/>"), "av:scrub has no token", NULL);
    expect_invalid(AV("<av:scrub token='0123456789abcdef0123456789abcdeg'/>"), "is not 32 lower-case hex digits", NULL);
    expect_invalid(AV("<av:scrub token='0123456789abcdef0123456789abcdef0'/>"), "is not 32 lower-case hex", NULL);
    expect_invalid(AV("<av:scrub token='0123456789abcdef0123456789abcdef'/><av:scrub token='0123456789abcdef0123456789abcdef'/>"),
                   "more than one <av:scrub>", NULL);
    {
        /* the mark of accelvirt's scrub VM; its identity is informative text, made safe */
        g_autoptr(AvDomain) dom = parse_ok(AV("<av:scrub token='0123456789abcdef0123456789abcdef' identity='dsn:x&#10;y'/>"));

        g_assert_cmpstr(dom->scrub_token, ==, "0123456789abcdef0123456789abcdef");
        g_assert_cmpstr(dom->scrub_identity, ==, "dsn:x?y");
    }
    {
        /* release and reconnect: a bad metadata is left out, the rest read */
        static const char *const xml =
            "<domain><name>a</name><uuid>6f2a0b1c-9d8e-4f7a-8b6c-5d4e3f2a1b0c</uuid><metadata>"
            "<av:accelerators xmlns:av='urn:accelvirt:domain:1'><av:placement node='1'/><av:scrub token='x'/>"
            "</av:accelerators></metadata></domain>";
        g_autoptr(GError) err = NULL;
        g_autoptr(AvDomain) dom = av_domain_parse_flags(xml, strlen(xml), AV_DOMAIN_PARSE_METADATA_BEST_EFFORT, &err);

        g_assert_no_error(err);
        g_assert_cmpstr(dom->uuid, ==, "6f2a0b1c-9d8e-4f7a-8b6c-5d4e3f2a1b0c");
        g_assert_cmpint(dom->placement_node, ==, -1);
        g_assert_null(dom->scrub_token);
        g_assert_nonnull(strstr(dom->metadata_problem, "av:scrub token 'x'"));
    }
    {
        /* in another namespace it is not accelvirt's */
        g_autoptr(AvDomain) dom = parse_ok("<domain><name>a</name><metadata><av:accelerators xmlns:av='urn:other'>"
                                           "<av:scrub token='0123456789abcdef0123456789abcdef'/></av:accelerators>"
                                           "</metadata></domain>");

        g_assert_null(dom->scrub_token);
    }
    expect_invalid(AV("<av:placement><av:mdev profile='v' uuid='6f2a0b1c-9d8e-4f7a-8b6c-5d4e3f2a1b0c' "
                      "alias='a b'/></av:placement>"),
                   "alias 'a b'", NULL);
    {
        /* a display name is free text: kept, but made safe */
        g_autoptr(AvDomain) dom = parse_ok(NOVA("<nova:name>evil&#155;[2J&#10;name&#9;x</nova:name>"));

        g_assert_true(dom->is_nova);
        g_assert_cmpstr(dom->nova_name, ==, "evil?[2J?name?x");
        g_assert_null(dom->nova_user);
    }
    {
        /* another Nova namespace version, or the right names in no namespace, are not Nova */
        g_autoptr(AvDomain) dom = parse_ok("<domain><name>a</name><metadata>"
                                           "<nova:instance xmlns:nova='http://openstack.org/xmlns/libvirt/nova/9.9'/>"
                                           "<instance/><accelerators><placement node='x'/></accelerators>"
                                           "</metadata></domain>");

        g_assert_false(dom->is_nova);
        g_assert_cmpint(dom->placement_node, ==, -1);
    }
#undef NOVA
#undef AV
}

/* ---- reading a descriptor ---- */

/* Interfaces the hook checks beyond hostdevs (review M2, L3): an ethernet
 * interface's target is kept, a direct interface may name any interface the
 * kernel allows. */
static void
test_interfaces_ethernet(void)
{
    static const char xml[] =
        "<domain><name>e</name><devices>"
        "<interface type='ethernet'><target dev='macvtap3' managed='no'/></interface>"
        "<interface type='ethernet'><target dev='a/b'/></interface>"
        "<interface type='ethernet'/>"
        "<interface type='direct'><source dev='br@lan+1' mode='bridge'/></interface>"
        "</devices></domain>";
    static const char bad[] = "<domain><name>e</name><devices><interface type='direct'><source dev='eth:0'/>"
                              "</interface></devices></domain>";
    g_autoptr(GError) err = NULL;
    g_autoptr(AvDomain) dom = av_domain_parse(xml, strlen(xml), &err);
    g_autoptr(AvDomain) none = NULL;

    g_assert_no_error(err);
    g_assert_cmpuint(dom->ethernet_targets->len, ==, 1);
    g_assert_cmpstr(g_ptr_array_index(dom->ethernet_targets, 0), ==, "macvtap3");
    g_assert_cmpuint(dom->hostdevs->len, ==, 1);
    g_assert_cmpstr(((const AvHostdev *)g_ptr_array_index(dom->hostdevs, 0))->netdev, ==, "br@lan+1");
    none = av_domain_parse(bad, strlen(bad), &err);
    g_assert_null(none);
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
}

static void
test_read_fd(void)
{
    g_autofree char *dir = av_test_tmpdir();
    g_autofree char *path = g_build_filename(dir, "big.xml", NULL);
    g_autofree char *data = g_malloc(AV_DOMAIN_XML_MAX + 1);
    int pipefd[2];

    /* a pipe */
    {
        g_autofree char *xml = NULL;
        g_autoptr(GError) err = NULL;
        gsize len = 0;

        g_assert_cmpint(pipe(pipefd), ==, 0);
        g_assert_cmpint(write(pipefd[1], "<domain/>", 9), ==, 9);
        close(pipefd[1]);
        g_assert_true(av_domain_read_fd(pipefd[0], &xml, &len, &err));
        close(pipefd[0]);
        g_assert_cmpuint(len, ==, 9);
        g_assert_cmpstr(xml, ==, "<domain/>");
    }
    /* exactly the limit, then one byte more */
    memset(data, ' ', AV_DOMAIN_XML_MAX + 1);
    for (int extra = 0; extra <= 1; extra++) {
        g_autofree char *xml = NULL;
        g_autoptr(GError) err = NULL;
        gsize len = 0;
        int fd;

        g_assert_true(g_file_set_contents(path, data, AV_DOMAIN_XML_MAX + extra, NULL));
        fd = open(path, O_RDONLY | O_CLOEXEC);
        g_assert_cmpint(fd, >=, 0);
        if (extra == 0) {
            g_assert_true(av_domain_read_fd(fd, &xml, &len, &err));
            g_assert_cmpuint(len, ==, AV_DOMAIN_XML_MAX);
            g_assert_cmpint(xml[len], ==, '\0');
        } else {
            g_assert_false(av_domain_read_fd(fd, &xml, &len, &err));
            g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
            g_assert_null(xml);
        }
        close(fd);
    }
    /* a bad descriptor */
    {
        g_autofree char *xml = NULL;
        g_autoptr(GError) err = NULL;
        gsize len = 0;

        g_assert_false(av_domain_read_fd(-1, &xml, &len, &err));
        g_assert_error(err, AV_ERROR, AV_ERROR_IO);
    }
    av_test_tmpdir_remove(dir);
}

/* ---- fuzz ---- */

static const char *const fuzz_tokens[] = {
    "<!DOCTYPE d [<!ENTITY a 'b'>]>", "&a;", "&#0;", "0x", "../", "/", "%2f", "-1", "99999999999999999999",
    "<hostdev mode='subsystem' type='pci'>", "</source>", "<source>", "'", "\"", "<", ">", "\xff", "\xc3",
    "<![CDATA[", "]]>", "<?pi?>", "<!--", "-->", "^", ",", "xmlns:x='urn:x'",
};

static void
fuzz_one(const char *xml, gsize len)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(AvDomain) dom = av_domain_parse(xml, len, &err);

    if (!dom) {
        g_assert_nonnull(err);
        g_assert_true(err->domain == AV_ERROR);
        return;
    }
    g_assert_no_error(err);
    /* what came out is what the hook may build paths from: strict shapes only */
    for (guint i = 0; i < dom->hostdevs->len; i++) {
        const AvHostdev *h = hostdev(dom, i);

        if (h->pci_address)
            g_assert_cmpuint(strlen(h->pci_address), ==, 12);
        if (h->mdev_uuid)
            g_assert_cmpuint(strlen(h->mdev_uuid), ==, 36);
        g_assert_true(!h->pci_address || !strchr(h->pci_address, '/'));
        g_assert_true(!h->mdev_uuid || !strchr(h->mdev_uuid, '/'));
    }
    {
        g_autoptr(GArray) cpus = NULL;
        g_autoptr(GError) err2 = NULL;
        gboolean all = FALSE;

        /* a pinning that could not be read is said, never half-read */
        g_assert_true(av_domain_vcpu_cpus(dom, &cpus, &all, &err2) == (dom->pinning_problem == NULL));
    }
}

static void
test_fuzz(void)
{
    const char *count_env = g_getenv("AV_TEST_FUZZ_COUNT");
    guint count = count_env ? (guint)g_ascii_strtoull(count_env, NULL, 10) : 3000;
    gint64 start = g_get_monotonic_time();

    for (gsize f = 0; f < G_N_ELEMENTS(domain_files); f++) {
        gsize len = 0;
        g_autofree char *xml = load_domain(domain_files[f], &len);
        guint step = count < 100 ? 97 : 1;

        /* every truncation (every 97th under a small count) */
        for (gsize cut = 0; cut < len; cut += step)
            fuzz_one(xml, cut);
        for (guint n = 0; n < count; n++) {
            g_autoptr(GString) m = g_string_new_len(xml, (gssize)len);
            guint edits = (guint)g_test_rand_int_range(1, 5);

            for (guint e = 0; e < edits; e++) {
                gsize pos = (gsize)g_test_rand_int_range(0, (gint32)m->len);

                switch (g_test_rand_int_range(0, 4)) {
                case 0:
                    m->str[pos] = (char)g_test_rand_int_range(0, 256);
                    break;
                case 1: {
                    gsize cut = (gsize)g_test_rand_int_range(1, 16);

                    g_string_erase(m, (gssize)pos, (gssize)MIN(cut, m->len - pos));
                    break;
                }
                case 2:
                    g_string_insert(m, (gssize)pos,
                                    fuzz_tokens[g_test_rand_int_range(0, G_N_ELEMENTS(fuzz_tokens))]);
                    break;
                default:
                    m->str[pos] = "0123456789abcdefxX-/.:'\"<>&;^, "[g_test_rand_int_range(0, 31)];
                    break;
                }
                if (m->len == 0)
                    break;
            }
            fuzz_one(m->str, m->len);
        }
    }
    g_test_message("fuzz: %u mutations per domain in %.2f s", count,
                   (double)(g_get_monotonic_time() - start) / G_USEC_PER_SEC);
}

/* The first look of the hook (av_domain_peek()): name, UUID, and whether
 * accelvirt may have anything to do with the domain; nothing else read, so
 * nothing else refuses it (issue 19); the document's own limits hold. */
static void
test_peek(void)
{
    static const struct {
        const char *devices;
        const char *metadata;
        gboolean may_manage;
    } cases[] = {
        { "", "", FALSE },
        { "<hostdev mode='subsystem' type='usb'><source><vendor id='0xzzzz'/></source></hostdev>", "", TRUE },
        { "<hostdev mode='subsystem' type='scsi'/><hostdev type='scsi_host'/>", "", FALSE },
        { "<hostdev mode='capabilities' type='storage'/>", "", FALSE },
        { "<interface type='network'/><disk type='file'/>", "", FALSE },
        { "<hostdev mode='subsystem' type='pci'/>", "", TRUE },
        { "<hostdev type='pci' managed='yes'/>", "", TRUE },
        { "<hostdev mode='subsystem' type='mdev' model='vfio-ccw'/>", "", TRUE },
        { "<hostdev mode='subsystem'/>", "", TRUE },
        { "<hostdev mode='subsystem' type='frobnicate'/>", "", TRUE },
        { "<interface type='hostdev'/>", "", TRUE },
        { "<x:hostdev xmlns:x='urn:x' type='pci'/>", "", FALSE },
        { "", "<metadata><o:x xmlns:o='urn:other'/></metadata>", FALSE },
        { "", "<metadata><av:accelerators xmlns:av='urn:accelvirt:domain:1'/></metadata>", TRUE },
        { "", "<metadata/><metadata><av:accelerators xmlns:av='urn:accelvirt:domain:1'/></metadata>", FALSE },
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *xml = g_strdup_printf(
            "<domain type='kvm'><name> odd\tname </name><uuid> 8F1C8A3C58C74D5E9A0B6C2A1F0E9D11 </uuid>"
            "<vcpu>02</vcpu><cputune><vcpupin vcpu='9' cpuset='0,16383'/></cputune>"
            "<numatune><memory nodeset='0-99999'/></numatune>%s<devices>%s</devices></domain>",
            cases[i].metadata, cases[i].devices);
        g_auto(AvDomainPeek) peek = { 0 };
        g_autoptr(GError) err = NULL;

        g_assert_true(av_domain_peek(xml, strlen(xml), &peek, &err));
        g_assert_no_error(err);
        g_assert_cmpstr(peek.name, ==, " odd\tname ");
        g_assert_cmpstr(peek.uuid, ==, "8f1c8a3c-58c7-4d5e-9a0b-6c2a1f0e9d11");
        if (peek.may_manage != cases[i].may_manage)
            g_error("case %" G_GSIZE_FORMAT " (%s%s): may_manage %d", i, cases[i].devices, cases[i].metadata,
                    peek.may_manage);
    }
    {
        static const char *const refused[] = {
            "", "<domain><name>x</name>", "<!DOCTYPE domain><domain/>", "<vm><name>x</name></vm>",
        };
        static const char no_uuid[] = "<domain><name>x</name><uuid>not-a-uuid</uuid></domain>";
        g_auto(AvDomainPeek) peek = { 0 };

        for (gsize i = 0; i < G_N_ELEMENTS(refused); i++) {
            g_autoptr(GError) err = NULL;

            g_assert_false(av_domain_peek(refused[i], strlen(refused[i]), &peek, &err));
            g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
            g_assert_null(peek.name);
        }
        g_assert_true(av_domain_peek(no_uuid, strlen(no_uuid), &peek, NULL));
        g_assert_cmpstr(peek.name, ==, "x");
        g_assert_null(peek.uuid);
        g_assert_false(peek.may_manage);
    }
}

/* The domains a topology rewrite writes (tests/xml/out/topo-*.xml, issue
 * 16) as the hook reads them: every hostdev of the placement with its alias
 * (a guest <address> beside its source changes nothing), the placement's
 * entries with their cell=, the cell pinning; the controllers and the
 * <qemu:override> are none of the hook's business. */
static void
test_topology_placed(void)
{
    static const struct {
        const char *name;
        guint hostdevs;
        guint pins;
        const char *pin0;
    } cases[] = {
        { "topo-two-cells", 3, 4, "0-3" },
        { "topo-switch", 2, 4, "0-3" },
        { "topo-cliques", 5, 8, "0-3" },
        { "topo-mirror", 2, 2, "8-11,40-43" },
        { "topo-hotplug", 3, 4, "0-3" },
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *rel = g_strdup_printf("xml/out/%s.xml", cases[i].name);
        g_autofree char *path = av_test_srcdir_path(rel);
        gsize len = 0;
        g_autofree char *xml = NULL;
        g_autoptr(GError) err = NULL;
        g_autoptr(AvDomain) dom = NULL;
        g_auto(AvDomainPeek) peek = { 0 };

        g_assert_true(g_file_get_contents(path, &xml, &len, &err));
        dom = av_domain_parse(xml, len, &err);
        g_assert_no_error(err);
        g_assert_nonnull(dom);
        g_assert_cmpuint(dom->hostdevs->len, ==, cases[i].hostdevs);
        g_assert_cmpuint(dom->placed->len, ==, cases[i].hostdevs);
        for (guint j = 0; j < dom->hostdevs->len; j++) {
            const AvHostdev *h = g_ptr_array_index(dom->hostdevs, j);
            const AvPlacedDevice *d = g_ptr_array_index(dom->placed, j);
            g_autofree char *alias = g_strdup_printf("ua-accelvirt-%u", j);

            g_assert_cmpint(h->type, ==, AV_HOSTDEV_PCI);
            g_assert_false(h->managed);
            g_assert_cmpstr(h->alias, ==, alias);
            g_assert_cmpstr(d->alias, ==, alias);
            g_assert_cmpstr(d->pci_address, ==, h->pci_address);
        }
        g_assert_null(dom->pinning_problem);
        g_assert_cmpuint(dom->vcpupins->len, ==, cases[i].pins);
        g_assert_cmpstr(g_ptr_array_index(dom->vcpupins, 0), ==, cases[i].pin0);
        g_assert_true(av_domain_peek(xml, len, &peek, &err));
        g_assert_no_error(err);
        g_assert_true(peek.may_manage);
    }
}

/* ---- the lenient reader of live XML (av-domain-live.c) ---- */

/* The devices and problems av_domain_live_hostdevs() gives @xml, as one
 * line: "pci:ADDR[i] mdev:UUID usb:VVVV:PPPP@BUS.DEV | PROBLEM; ...". */
static char *
live_summary(const char *xml)
{
    g_autoptr(GPtrArray) devs = NULL;
    g_autoptr(GPtrArray) problems = NULL;
    g_autoptr(GError) err = NULL;
    g_autoptr(GString) out = g_string_new(NULL);

    if (!av_domain_live_hostdevs(xml, strlen(xml), &devs, &problems, &err))
        return g_strdup_printf("error: %s", err->message);
    for (guint i = 0; i < devs->len; i++) {
        const AvHostdev *h = g_ptr_array_index(devs, i);

        if (out->len)
            g_string_append_c(out, ' ');
        if (h->type == AV_HOSTDEV_PCI)
            g_string_append_printf(out, "pci:%s%s", h->pci_address, h->is_interface ? "i" : "");
        else if (h->type == AV_HOSTDEV_MDEV)
            g_string_append_printf(out, "mdev:%s", h->mdev_uuid);
        else
            g_string_append_printf(out, "usb:%04x:%04x@%d.%d", h->usb_vendor, h->usb_product, h->usb_bus,
                                   h->usb_device);
    }
    for (guint i = 0; i < problems->len; i++)
        g_string_append_printf(out, "%s%s", i == 0 ? " | " : "; ", (const char *)g_ptr_array_index(problems, i));
    return g_string_free(g_steal_pointer(&out), FALSE);
}

#define LIVE_PCI(bus) "<source><address domain='0x0000' bus='" bus "' slot='0x00' function='0x0'/></source>"

static void
test_live_hostdevs(void)
{
    static const struct {
        const char *devices;
        const char *want;
    } cases[] = {
        /* What the strict parser refuses hides nothing here. */
        { "<hostdev mode='subsystem' type='pci' managed='maybe'>" LIVE_PCI("0xca") "<alias name='ua-"
          "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
          "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
          "'/><alias name='second'/></hostdev>",
          "pci:0000:ca:00.0" },
        /* Every source and every address: two readers may pick two. */
        { "<hostdev type='pci'>" LIVE_PCI("0x17") LIVE_PCI("0x31") "</hostdev>", "pci:0000:17:00.0 pci:0000:31:00.0" },
        { "<hostdev type='pci'><source><address bus='23'/><address bus='010' slot='0x1f' function='7'/></source>"
          "</hostdev>",
          "pci:0000:17:00.0 pci:0000:08:1f.7" },
        { "<interface type='hostdev'>" LIVE_PCI("0x4b") "<alias name='net 0'/></interface>"
          "<interface type='network'/>",
          "pci:0000:4b:00.0i" },
        { "<hostdev type='mdev' model='bogus'><source><address uuid='4B20D080-1B54-4048-85B3-A6A62D165C01'/>"
          "</source></hostdev>",
          "mdev:4b20d080-1b54-4048-85b3-a6a62d165c01" },
        { "<hostdev type='usb'><source><vendor id='0x03e7'/><product id='0x2485'/><address bus='1' device='3'/>"
          "</source></hostdev>",
          "usb:03e7:2485@1.3" },
        /* Not a device of the kinds accelvirt manages. */
        { "<hostdev mode='capabilities' type='storage'><source><block>/dev/sdf1</block></source></hostdev>"
          "<hostdev type='scsi'/>",
          "" },
        /* What names a device and cannot be told is said, never dropped. */
        { "<hostdev type='pci'><source><address bus='0x1ff'/></source></hostdev>" "<hostdev type='pci'>" LIVE_PCI("0xca")
          "</hostdev>",
          "pci:0000:ca:00.0 | hostdev 1: PCI address bus '0x1ff' is not a number this reader takes (line 1)" },
        { "<hostdev type='pci'/>", " | hostdev 1: no <source><address> names its PCI device (line 1)" },
        { "<hostdev/>", " | hostdev 1: it has no type (line 1)" },
        { "<hostdev type='quantum'/>", " | hostdev 1: its type 'quantum' is not one this reader knows (line 1)" },
        { "<hostdev type='mdev'><source><address uuid='nope'/></source></hostdev>",
          " | hostdev 1: mdev address uuid 'nope' is not a UUID (line 1)" },
        { "<hostdev type='usb'><source/></hostdev>",
          " | hostdev 1: neither a vendor and product nor a bus and device name its USB device (line 1)" },
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *xml = g_strdup_printf("<domain type='kvm'><name>%s</name><devices>%s</devices>"
                                               "<metadata><bad:x xmlns:bad='urn:x'><unclosed/></bad:x></metadata>"
                                               "</domain>",
                                               "a/name with a slash", cases[i].devices);
        g_autofree char *got = live_summary(xml);

        g_assert_cmpstr(got, ==, cases[i].want);
    }
    {
        /* A prefix never declared (libvirt keeps such metadata of a running
         * domain): the strict parser refuses, the live reader still reads. */
        const char *xml = "<domain type='kvm'><name>ns</name><metadata><t:x xmlns:t='urn:t'><q:z/></t:x></metadata>"
                          "<devices><hostdev type='pci'>" LIVE_PCI("0xca") "</hostdev></devices></domain>";
        g_autofree char *got = live_summary(xml);
        g_autoptr(GError) err = NULL;
        g_autoptr(AvDomain) strict = av_domain_parse(xml, strlen(xml), &err);

        g_assert_null(strict);
        g_assert_cmpstr(got, ==, "pci:0000:ca:00.0");
    }
    {
        g_autofree char *got = live_summary("<domain><devices>");

        g_assert_true(g_str_has_prefix(got, "error: the domain XML does not parse"));
    }
    {
        g_autofree char *got = live_summary("<notadomain/>");

        g_assert_cmpstr(got, ==, "error: the root element is not <domain>");
    }
}

int
main(int argc, char **argv)
{
    av_test_init(&argc, &argv);
    g_test_add_func("/domain/libvirt-hostdevs", test_libvirt_hostdevs);
    g_test_add_func("/domain/nova-instance", test_nova_instance);
    g_test_add_func("/domain/accelvirt-placed", test_accelvirt_placed);
    g_test_add_func("/domain/minimal", test_minimal);
    g_test_add_func("/domain/peek", test_peek);
    g_test_add_func("/domain/topology-placed", test_topology_placed);
    g_test_add_func("/domain/partial-pins", test_partial_pins);
    g_test_add_func("/domain/cpuset", test_cpuset);
    g_test_add_func("/domain/quote", test_quote);
    g_test_add_func("/domain/hostile/billion-laughs", test_billion_laughs);
    g_test_add_func("/domain/hostile/doctype", test_doctype);
    g_test_add_func("/domain/hostile/oversize", test_oversize);
    g_test_add_func("/domain/hostile/deep", test_deep);
    g_test_add_func("/domain/hostile/garbage", test_garbage);
    g_test_add_func("/domain/hostile/root", test_root);
    g_test_add_func("/domain/hostile/pci-addresses", test_pci_addresses);
    g_test_add_func("/domain/hostile/hostdev-shapes", test_hostdev_shapes);
    g_test_add_func("/domain/hostile/cputune", test_cputune);
    g_test_add_func("/domain/hostile/metadata", test_metadata);
    g_test_add_func("/domain/read-fd", test_read_fd);
    g_test_add_func("/domain/interfaces-ethernet", test_interfaces_ethernet);
    g_test_add_func("/domain/live-hostdevs", test_live_hostdevs);
    g_test_add_func("/domain/fuzz", test_fuzz);
    return g_test_run();
}

/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt fuzzing: the domain XML, as the hook and the CLI read it.
 *
 * Every input goes through av_domain_parse_flags() with each flag value,
 * av_domain_requests(), av_domain_placement() and av_domain_unplace(), and
 * what parsed through the derived helpers (vCPU cpusets, quoting).
 * Properties:
 *   - a document that parses strictly parses in best-effort mode too, with
 *     the same name, UUID and hostdevs and no metadata problem;
 *   - best-effort parsing fails only where the strict one fails;
 *   - av_domain_unplace() of its own output changes nothing;
 *   - the lenient reader of live XML (av_domain_live_hostdevs(), the audit's)
 *     reads every document that parses strictly and names every device the
 *     strict parser names. */
#include "config.h"

#include "fuzz.h"

#include <string.h>

#include "domain/av-domain.h"
#include "domain/av-rewrite.h"
#include "pool/av-pool-placement.h"

static void
av_fuzz_domain_facts(const AvDomain *domain)
{
    g_autoptr(GArray) cpus = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *quoted = av_domain_quote(domain->name);
    gboolean all_pinned = FALSE;

    av_fuzz_assert(quoted != NULL);
    if (av_domain_vcpu_cpus(domain, &cpus, &all_pinned, &error))
        av_fuzz_assert(cpus != NULL);
    else
        av_fuzz_assert(error != NULL && cpus == NULL);
    for (const char *const *s = (const char *const[]){ domain->emulatorpin, domain->numatune_memory_nodeset,
                                                       domain->vcpu_cpuset, NULL };
         *s; s++) {
        g_autoptr(GArray) set = NULL;
        g_autoptr(GError) e = NULL;

        if (av_domain_cpuset_parse(*s, AV_DOMAIN_CPU_MAX, &set, &e))
            av_fuzz_assert(set->len > 0);
    }
}

/* TRUE when @list (AvHostdev* of the live reader) names what @h names. */
static gboolean
av_fuzz_live_names(const GPtrArray *list, const AvHostdev *h)
{
    for (guint i = 0; i < list->len; i++) {
        const AvHostdev *l = g_ptr_array_index(list, i);

        if (l->type != h->type)
            continue;
        if (h->type == AV_HOSTDEV_PCI && g_strcmp0(l->pci_address, h->pci_address) == 0)
            return TRUE;
        if (h->type == AV_HOSTDEV_MDEV && g_strcmp0(l->mdev_uuid, h->mdev_uuid) == 0)
            return TRUE;
        if (h->type == AV_HOSTDEV_USB && l->usb_vendor == h->usb_vendor && l->usb_product == h->usb_product)
            return TRUE;
    }
    return FALSE;
}

/* The lenient reader of live XML (what the audit and watch use): never
 * fails on a document that parses strictly, and names at least every
 * device the strict parser names (nothing is hidden from the audit that
 * the hook would act on); its problems are sentences. */
static void
av_fuzz_live(const char *xml, size_t size, const AvDomain *strict)
{
    g_autoptr(GPtrArray) list = NULL;
    g_autoptr(GPtrArray) problems = NULL;
    g_autoptr(GError) error = NULL;
    gboolean ok = av_domain_live_hostdevs(xml, size, &list, &problems, &error);

    av_fuzz_assert(ok == (error == NULL));
    if (strict)
        av_fuzz_assert(ok);
    if (!ok)
        return;
    for (guint i = 0; i < problems->len; i++)
        av_fuzz_assert(*(const char *)g_ptr_array_index(problems, i) != '\0');
    for (guint i = 0; strict && i < strict->hostdevs->len; i++)
        av_fuzz_assert(av_fuzz_live_names(list, g_ptr_array_index(strict->hostdevs, i)));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *xml = (const char *)data;
    g_autoptr(AvDomain) strict = NULL;
    g_autoptr(AvDomain) lenient = NULL;
    g_autoptr(GError) strict_err = NULL;
    g_autoptr(GError) lenient_err = NULL;
    g_autoptr(GPtrArray) requests = NULL;
    g_autoptr(AvPlacement) placement = NULL;
    g_autofree char *unplaced = NULL;
    g_autoptr(GError) error = NULL;

    strict = av_domain_parse_flags(xml, size, AV_DOMAIN_PARSE_DEFAULT, &strict_err);
    lenient = av_domain_parse_flags(xml, size, AV_DOMAIN_PARSE_METADATA_BEST_EFFORT, &lenient_err);
    av_fuzz_assert((strict == NULL) == (strict_err != NULL));
    av_fuzz_assert((lenient == NULL) == (lenient_err != NULL));
    if (strict) {
        av_fuzz_assert(lenient != NULL);
        av_fuzz_assert(lenient->metadata_problem == NULL);
        av_fuzz_assert(g_strcmp0(strict->name, lenient->name) == 0);
        av_fuzz_assert(g_strcmp0(strict->uuid, lenient->uuid) == 0);
        av_fuzz_assert(strict->hostdevs->len == lenient->hostdevs->len);
        av_fuzz_domain_facts(strict);
    }
    if (lenient)
        av_fuzz_domain_facts(lenient);
    av_fuzz_live(xml, size, strict);

    requests = av_domain_requests(xml, size, &error);
    av_fuzz_assert(requests != NULL || error != NULL);
    g_clear_error(&error);
    placement = av_domain_placement(xml, size, &error);
    av_fuzz_assert(placement != NULL || error != NULL);
    g_clear_error(&error);

    unplaced = av_domain_unplace(xml, size, &error);
    if (unplaced) {
        g_autofree char *again = av_domain_unplace(unplaced, strlen(unplaced), NULL);

        av_fuzz_assert(again != NULL && strcmp(again, unplaced) == 0);
    }
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the scrub worker, started detached by the hook at "release
 * end" (see hook-worker.c).  Unlike the hook it links libvirt
 * (libaccelvirt-virt.a), for the "vm" scrub method.  It takes no arguments: the root prefix, state
 * dir and policy dir come from the environment the hook passed on, as for
 * the hook itself. */
#include "config.h"

#include "hook.h"
#include "scrub/av-scrub.h"

int
main(int argc, char **argv)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(AvHookConfig) config = NULL;

    (void)argv;
    av_hook_log_init();
    av_hook_log_set_domain(NULL);
    /* The worker links libvirt, the hook never does: "vm" steps run here. */
    av_scrub_vm_register();
    if (argc != 1)
        return av_hook_refuse("usage: accelvirt-worker (no arguments; the hook starts it)");
    config = av_hook_config_new(&error);
    if (!config)
        return av_hook_refuse(error->message);
    return av_worker_run(config);
}

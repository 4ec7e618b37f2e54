/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt-scrub-bars: the BAR scrubber of accelvirt's scrub image
 * (scrub/image/build; the image contract of accelvirt-policy(5), method "vm").
 *
 * Runs inside the scrub VM.  For every passed-through PCI endpoint (below), or
 * the ones named with --device, it enables the function (sysfs "enable"),
 * zeroes every prefetchable memory BAR through the sysfs resourceN file
 * (mmap MAP_SHARED, in windows), reads every byte back, and prints one line
 * per device on stdout, the coverage contract that accelvirt parses:
 *
 *   accelvirt-coverage: device=ADDR method=bars cleared=BYTES memory=unknown verified=yes|no [KEY=VALUE...]
 *
 * cleared is the number of bytes written and read back as zero; further keys:
 * bars=2,4 (the BARs zeroed, or "none"), size=BYTES (their total size), and
 * on a failure failed=BARS and reason=WORD.  Details go to stderr, one line
 * each, beginning "accelvirt-scrub-bars: ".  Exit status: 0 when at least one
 * device was chosen and every chosen BAR was zeroed and read back as zero; 1
 * otherwise (no device found is a failure: a scrub VM without its device must
 * never pass); 2 on a usage error.
 *
 * A passed-through endpoint is a PCI function, as the guest's kernel lists it
 * under /sys/bus/pci/devices, that is
 *   - of header type 0 (an endpoint: bridges, header types 1 and 2, are the
 *     machine's own, and libvirt adds a root port in front of a hostdev on q35),
 *   - not a host or ISA bridge by its class (0x0600, 0x0601), and
 *   - not a device that QEMU itself emulates for the machine: any function of
 *     vendor 0x1b36 (Red Hat's id for QEMU's own devices: pcie-root-port,
 *     qemu-xhci, pvpanic-pci, pci-serial, qxl, ...), the chipset functions of
 *     i440FX/PIIX and Q35/ICH9 and the other Intel devices QEMU models (the
 *     table below), QEMU's VGA adapters (1234:1111, 1013:00b8, 15ad:0405), and
 *     virtio functions (1af4:1000-107f) whose subsystem vendor is 0x1af4.
 * The rule fails closed: a function the table does not know (a NIC that an
 * operator's template adds, say) is taken as passed through, and with no
 * prefetchable memory BAR to clear it fails the scrub (reason=no-memory-bar);
 * name the device with --device (accelvirt.device= on the image's command
 * line) in such a template.  Header type and subsystem ids come from the
 * function's config space ("config", Documentation/ABI/testing/sysfs-bus-pci).
 *
 * What is zeroed: every BAR whose line in "resource" has IORESOURCE_MEM
 * (0x200) and IORESOURCE_PREFETCH (0x2000) (include/linux/ioport.h):
 * prefetchable memory has no side effects on reads and writes, unlike the
 * register BARs, which are left alone.  A prefetchable BAR that the guest's
 * kernel left unassigned (IORESOURCE_UNSET or IORESOURCE_DISABLED) cannot be
 * reached, and fails the device (reason=unassigned).  Writes go through
 * resourceN_wc (write-combining, far faster on real hardware) when the kernel
 * offers it, reads through resourceN.  In each window, a canary word is
 * written first and must read back: a BAR whose writes do not reach memory
 * that reads return (memory decoding off, a device gone, an unbacked range,
 * which QEMU reads as zeros) fails instead of passing on zeros it never
 * wrote (reason=canary).  A bus error while the BAR is mapped (SIGBUS) fails
 * the device too (reason=bus-error).
 *
 * With the vendor's driver bound to the device the kernel (CONFIG_IO_STRICT_DEVMEM)
 * refuses the mapping of the BARs that driver claimed (reason=mmap): the
 * image runs this only when no vendor driver loaded, or no GPU scrubber is in
 * the image.  The BAR is a window, not necessarily the device's memory
 * (memory=unknown): on NVIDIA GPUs BAR1 is mapped through the GPU's own MMU
 * and its contents are not VRAM without the driver.
 *
 * Plain C, no library beyond libc: scrub/image/build links it statically for
 * the image; `make check` builds it as a check program and runs it on fake
 * sysfs trees (--sysfs, tests/test-scrub-bars.sh). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* include/linux/ioport.h */
#define AV_IORESOURCE_MEM 0x00000200ULL
#define AV_IORESOURCE_PREFETCH 0x00002000ULL
#define AV_IORESOURCE_DISABLED 0x10000000ULL
#define AV_IORESOURCE_UNSET 0x20000000ULL
/* include/uapi/linux/pci_regs.h */
#define AV_PCI_HEADER_TYPE 0x0e
#define AV_PCI_SUBSYSTEM_VENDOR_ID 0x2c
#define AV_PCI_STD_NUM_BARS 6

#define AV_MAX_DEVICES 64
#define AV_WINDOW_DEFAULT (64UL << 20)
/* "AVCANARY" as a little-endian word: written first in each window, it must
 * read back before the window is zeroed. */
#define AV_CANARY 0x5952414e41435641ULL

typedef struct {
    const char *address;          /* "DDDD:BB:SS.F", the directory's name */
    char dir[4096];
    unsigned vendor, device, class_code;
} AvFunction;

/* A device's result, for its coverage line. */
typedef struct {
    uint64_t cleared;             /* bytes written and read back as zero */
    uint64_t size;                /* the total size of the chosen BARs */
    char bars[64];                /* "2,4" */
    char failed[64];              /* the BARs that failed, "" when none */
    const char *reason;           /* the first failure's reason, a word */
} AvResult;

static const char *prog = "accelvirt-scrub-bars";

/* The devices QEMU emulates for the machine itself, by vendor and device id
 * (QEMU's include/hw/pci/pci_ids.h); never a passed-through function. */
static const struct {
    unsigned vendor, device;
    const char *what;
} own_devices[] = {
    { 0x8086, 0x1237, "i440FX host bridge" },
    { 0x8086, 0x7000, "PIIX3 ISA bridge" },
    { 0x8086, 0x7010, "PIIX3 IDE" },
    { 0x8086, 0x7020, "PIIX3 USB (UHCI)" },
    { 0x8086, 0x7110, "PIIX4 ISA bridge" },
    { 0x8086, 0x7111, "PIIX4 IDE" },
    { 0x8086, 0x7112, "PIIX4 USB (UHCI)" },
    { 0x8086, 0x7113, "PIIX4 power management (ACPI)" },
    { 0x8086, 0x29c0, "Q35 host bridge (MCH)" },
    { 0x8086, 0x2918, "ICH9 LPC/ISA bridge" },
    { 0x8086, 0x2922, "ICH9 SATA (AHCI)" },
    { 0x8086, 0x2930, "ICH9 SMBus" },
    { 0x8086, 0x2934, "ICH9 USB (UHCI)" },
    { 0x8086, 0x2935, "ICH9 USB (UHCI)" },
    { 0x8086, 0x2936, "ICH9 USB (UHCI)" },
    { 0x8086, 0x2937, "ICH9 USB (UHCI)" },
    { 0x8086, 0x2938, "ICH9 USB (UHCI)" },
    { 0x8086, 0x2939, "ICH9 USB (UHCI)" },
    { 0x8086, 0x293a, "ICH9 USB (EHCI)" },
    { 0x8086, 0x293c, "ICH9 USB (EHCI)" },
    { 0x8086, 0x24cd, "ICH4 USB (EHCI)" },
    { 0x8086, 0x25ab, "6300ESB watchdog" },
    { 0x8086, 0x2415, "AC'97 audio" },
    { 0x8086, 0x2668, "ICH6 HD audio" },
    { 0x8086, 0x293e, "ICH9 HD audio" },
    { 0x1234, 0x1111, "QEMU standard VGA" },
    { 0x1013, 0x00b8, "QEMU Cirrus VGA" },
    { 0x15ad, 0x0405, "QEMU VMware SVGA" },
};

static void
usage(FILE *f)
{
    fprintf(f,
            "usage: %s [--sysfs DIR] [--device ADDR]... [--window BYTES] [--list]\n"
            "\n"
            "Zeroes every prefetchable memory BAR of every passed-through PCI endpoint of\n"
            "this (scrub) VM through sysfs resourceN, reads every byte back, and prints one\n"
            "line per device:\n"
            "  accelvirt-coverage: device=ADDR method=bars cleared=BYTES memory=unknown verified=yes|no ...\n"
            "Exit 0 only when a device was found and every chosen BAR reads back as zero.\n"
            "\n"
            "  --sysfs DIR      the sysfs mount (default /sys; tests give a fake tree)\n"
            "  --device ADDR    only this function (DDDD:BB:SS.F; repeatable), whatever it is\n"
            "  --window BYTES   map and zero BARs in windows of this size (a multiple of the\n"
            "                   page size; default 64 MiB)\n"
            "  --list           print which functions would be chosen, and why not the others;\n"
            "                   change nothing (exit 1 when none would be)\n"
            "\n"
            "A passed-through endpoint: header type 0, not a host or ISA bridge, not one of\n"
            "the devices QEMU emulates for the machine (vendor 1b36, the i440FX/Q35 chipset,\n"
            "QEMU's VGA adapters, QEMU's own virtio functions). See accelvirt-policy(5).\n",
            prog);
}

/* Reads the small sysfs attribute @dir/@name into @buf.  Returns 0 or -errno. */
static int
read_attr(const char *dir, const char *name, char *buf, size_t size)
{
    char path[4352];
    int fd;
    ssize_t n;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    n = read(fd, buf, size - 1);
    if (n < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    close(fd);
    buf[n] = '\0';
    return 0;
}

/* The hexadecimal number in the attribute @dir/@name ("0x1af4\n"), or -1. */
static long
read_hex(const char *dir, const char *name)
{
    char buf[64], *end;
    unsigned long v;

    if (read_attr(dir, name, buf, sizeof(buf)) < 0)
        return -1;
    errno = 0;
    v = strtoul(buf, &end, 16);
    if (errno || end == buf)
        return -1;
    return (long)v;
}

/* Reads the first @size bytes of the function's config space into @buf.
 * Returns 0, or -errno (-EIO when the file is shorter). */
static int
read_config(const char *dir, unsigned char *buf, size_t size)
{
    char path[4352];
    int fd;
    ssize_t n;

    snprintf(path, sizeof(path), "%s/config", dir);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    n = pread(fd, buf, size, 0);
    close(fd);
    if (n < 0)
        return -errno;
    return (size_t)n < size ? -EIO : 0;
}

/* NULL when @f is a passed-through endpoint, else why not (static text). */
static const char *
not_passed_through(const AvFunction *f, char *why, size_t why_size)
{
    unsigned char cfg[64];
    unsigned subsystem_vendor;

    if (read_config(f->dir, cfg, sizeof(cfg)) < 0)
        return "its config space cannot be read";
    if ((cfg[AV_PCI_HEADER_TYPE] & 0x7f) != 0) {
        snprintf(why, why_size, "header type %u (a bridge)", cfg[AV_PCI_HEADER_TYPE] & 0x7fu);
        return why;
    }
    if ((f->class_code >> 8) == 0x0600)
        return "a host bridge (class 0x0600)";
    if ((f->class_code >> 8) == 0x0601)
        return "an ISA bridge (class 0x0601)";
    if (f->vendor == 0x1b36)
        return "one of QEMU's own devices (vendor 0x1b36)";
    for (size_t i = 0; i < sizeof(own_devices) / sizeof(own_devices[0]); i++)
        if (own_devices[i].vendor == f->vendor && own_devices[i].device == f->device) {
            snprintf(why, why_size, "QEMU's %s", own_devices[i].what);
            return why;
        }
    subsystem_vendor = cfg[AV_PCI_SUBSYSTEM_VENDOR_ID] | (unsigned)cfg[AV_PCI_SUBSYSTEM_VENDOR_ID + 1] << 8;
    if (f->vendor == 0x1af4 && f->device >= 0x1000 && f->device <= 0x107f && subsystem_vendor == 0x1af4)
        return "one of QEMU's own virtio devices (1af4:1000-107f, subsystem vendor 0x1af4)";
    return NULL;
}

/* Fills @f from the directory of the function @address under @devices.
 * Returns 0 or -errno (the function does not exist: -ENOENT). */
static int
function_load(AvFunction *f, const char *devices, const char *address)
{
    struct stat st;
    long v;

    memset(f, 0, sizeof(*f));
    f->address = address;
    if (snprintf(f->dir, sizeof(f->dir), "%s/%s", devices, address) >= (int)sizeof(f->dir))
        return -ENAMETOOLONG;
    if (stat(f->dir, &st) < 0)
        return -errno;
    if (!S_ISDIR(st.st_mode))
        return -ENOTDIR;
    v = read_hex(f->dir, "vendor");
    f->vendor = v < 0 ? 0xffffu : (unsigned)v;
    v = read_hex(f->dir, "device");
    f->device = v < 0 ? 0xffffu : (unsigned)v;
    v = read_hex(f->dir, "class");
    f->class_code = v < 0 ? 0xffffffu : (unsigned)v;
    return 0;
}

static void
list_append(char *list, size_t size, int bar)
{
    size_t len = strlen(list);

    snprintf(list + len, size - len, "%s%d", len ? "," : "", bar);
}

static void
fail_bar(AvResult *r, int bar, const char *reason)
{
    if (!r->reason)
        r->reason = reason;
    list_append(r->failed, sizeof(r->failed), bar);
}

static sigjmp_buf bus_error_jump;
static volatile sig_atomic_t bus_error_armed;

static void
on_bus_error(int sig)
{
    if (bus_error_armed)
        siglongjmp(bus_error_jump, 1);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* The mappings of the window being scrubbed, and where it is: static, so
 * that they are known after a siglongjmp from the SIGBUS handler. */
static struct {
    volatile uint64_t *w, *r;     /* MAP_FAILED when not mapped */
    uint64_t len;
    uint64_t at;                  /* the offset being read or written */
    uint64_t zeros;               /* bytes of this BAR read back as zero */
} win;

static void
window_unmap(void)
{
    if (win.r != MAP_FAILED && win.r != win.w)
        munmap((void *)win.r, win.len);
    if (win.w != MAP_FAILED)
        munmap((void *)win.w, win.len);
    win.w = win.r = MAP_FAILED;
}

/* Zeroes BAR @bar of @f, @size bytes, through @wpath (writes) and @rpath
 * (reads; the same file or not), window by window, and reads it back.
 * Adds the bytes read back as zero to @r->cleared.  Returns 0, or -1 with
 * the reason in @r. */
static int
zero_bar(const AvFunction *f, int bar, const char *wpath, const char *rpath, uint64_t size, uint64_t window,
         AvResult *r)
{
    int same = strcmp(wpath, rpath) == 0;
    int wfd, rfd;
    volatile int ret = -1;

    win.w = win.r = MAP_FAILED;
    win.zeros = 0;
    wfd = open(wpath, O_RDWR | O_SYNC | O_CLOEXEC);
    rfd = same ? wfd : open(rpath, O_RDONLY | O_SYNC | O_CLOEXEC);
    if (wfd < 0 || rfd < 0) {
        fprintf(stderr, "%s: %s BAR%d: cannot open %s: %s\n", prog, f->address, bar,
                wfd < 0 ? wpath : rpath, strerror(errno));
        fail_bar(r, bar, "open");
        goto out;
    }
    if (sigsetjmp(bus_error_jump, 1)) {
        bus_error_armed = 0;
        fprintf(stderr, "%s: %s BAR%d: bus error (SIGBUS) at offset 0x%" PRIx64 " of 0x%" PRIx64
                " bytes: the BAR cannot be read or written there\n", prog, f->address, bar, win.at, size);
        fail_bar(r, bar, "bus-error");
        goto out;
    }
    ret = 0;
    for (uint64_t off = 0; off < size; off += win.len) {
        uint64_t words, nonzero = 0, first_bad = UINT64_MAX;
        volatile uint64_t *w, *rd;

        win.len = size - off < window ? size - off : window;
        win.at = off;
        win.w = mmap(NULL, win.len, PROT_READ | PROT_WRITE, MAP_SHARED, wfd, (off_t)off);
        if (win.w != MAP_FAILED)
            win.r = same ? win.w : mmap(NULL, win.len, PROT_READ, MAP_SHARED, rfd, (off_t)off);
        if (win.w == MAP_FAILED || win.r == MAP_FAILED) {
            fprintf(stderr, "%s: %s BAR%d: cannot map %s at offset 0x%" PRIx64 ": %s\n", prog, f->address, bar,
                    win.w == MAP_FAILED ? wpath : rpath, off, strerror(errno));
            fail_bar(r, bar, "mmap");
            ret = -1;
            goto out;
        }
        w = win.w;
        rd = win.r;
        words = win.len / 8;
        bus_error_armed = 1;
        /* the canary: writes must reach what reads return */
        if (words) {
            uint64_t back;

            w[0] = AV_CANARY;
            __sync_synchronize();
            back = rd[0];
            if (back != AV_CANARY) {
                bus_error_armed = 0;
                fprintf(stderr, "%s: %s BAR%d: a word written at offset 0x%" PRIx64 " does not read back (reads "
                        "0x%016" PRIx64 "): writes do not reach this BAR's memory\n", prog, f->address, bar, off,
                        back);
                fail_bar(r, bar, "canary");
                ret = -1;
                goto out;
            }
        }
        for (uint64_t i = 0; i < words; i++) {
            win.at = off + i * 8;
            w[i] = 0;
        }
        for (uint64_t i = words * 8; i < win.len; i++)
            ((volatile uint8_t *)w)[i] = 0;
        __sync_synchronize();
        for (uint64_t i = 0; i < words; i++) {
            uint64_t v;

            win.at = off + i * 8;
            v = rd[i];
            if (v == 0) {
                win.zeros += 8;
                continue;
            }
            if (first_bad == UINT64_MAX)
                first_bad = off + i * 8;
            for (int b = 0; b < 8; b++, v >>= 8) {
                if (v & 0xff)
                    nonzero++;
                else
                    win.zeros++;
            }
        }
        for (uint64_t i = words * 8; i < win.len; i++) {
            win.at = off + i;
            if (((volatile uint8_t *)rd)[i] == 0) {
                win.zeros++;
            } else {
                nonzero++;
                if (first_bad == UINT64_MAX)
                    first_bad = off + i;
            }
        }
        bus_error_armed = 0;
        window_unmap();
        if (nonzero) {
            fprintf(stderr, "%s: %s BAR%d: %" PRIu64 " bytes of the window at 0x%" PRIx64 " are not zero after "
                    "zeroing (the first at offset 0x%" PRIx64 ")\n", prog, f->address, bar, nonzero, off, first_bad);
            if (ret == 0)
                fail_bar(r, bar, "not-zero");
            ret = -1;
            /* go on: cleared counts every byte that did read back as zero */
        }
    }
out:
    bus_error_armed = 0;
    window_unmap();
    r->cleared += win.zeros;
    if (rfd >= 0 && !same)
        close(rfd);
    if (wfd >= 0)
        close(wfd);
    return ret;
}

/* Enables @f and zeroes its prefetchable memory BARs.  Fills @r; returns 0
 * when every one of them was zeroed and read back, and there was one. */
static int
scrub_function(const AvFunction *f, uint64_t window, AvResult *r)
{
    char buf[4096], *line, *save = NULL;
    int bar = 0;
    int fd;

    memset(r, 0, sizeof(*r));
    /* Documentation/ABI/testing/sysfs-bus-pci: enable */
    {
        char path[4352];

        snprintf(path, sizeof(path), "%s/enable", f->dir);
        fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, "1", 1) != 1) {
            fprintf(stderr, "%s: %s: cannot enable it (%s): %s\n", prog, f->address, path, strerror(errno));
            if (fd >= 0)
                close(fd);
            r->reason = "enable";
            return -1;
        }
        close(fd);
    }
    if (read_attr(f->dir, "resource", buf, sizeof(buf)) < 0) {
        fprintf(stderr, "%s: %s: cannot read its resource list: %s\n", prog, f->address, strerror(errno));
        r->reason = "resource";
        return -1;
    }
    for (line = strtok_r(buf, "\n", &save); line && bar < AV_PCI_STD_NUM_BARS;
         line = strtok_r(NULL, "\n", &save), bar++) {
        unsigned long long start, end, flags;
        uint64_t size;
        char wpath[4352], rpath[4352];
        struct stat st;

        if (sscanf(line, "%llx %llx %llx", &start, &end, &flags) != 3) {
            fprintf(stderr, "%s: %s: cannot parse line %d of its resource list: '%s'\n", prog, f->address, bar + 1,
                    line);
            fail_bar(r, bar, "resource");
            continue;
        }
        if (!(flags & AV_IORESOURCE_MEM) || !(flags & AV_IORESOURCE_PREFETCH))
            continue;
        size = end >= start ? (uint64_t)(end - start) + 1 : 0;
        list_append(r->bars, sizeof(r->bars), bar);
        r->size += size;
        if ((flags & (AV_IORESOURCE_UNSET | AV_IORESOURCE_DISABLED)) || start == 0 || size == 0) {
            fprintf(stderr, "%s: %s BAR%d: a prefetchable memory BAR of 0x%" PRIx64 " bytes that the kernel left "
                    "unassigned (flags 0x%llx): it cannot be reached; give the VM a larger MMIO window\n", prog,
                    f->address, bar, size, flags);
            fail_bar(r, bar, "unassigned");
            continue;
        }
        snprintf(rpath, sizeof(rpath), "%s/resource%d", f->dir, bar);
        snprintf(wpath, sizeof(wpath), "%s/resource%d_wc", f->dir, bar);
        if (stat(wpath, &st) < 0)
            snprintf(wpath, sizeof(wpath), "%s", rpath);
        zero_bar(f, bar, wpath, rpath, size, window, r);
    }
    if (!r->bars[0]) {
        fprintf(stderr, "%s: %s: no prefetchable memory BAR: nothing this scrubber can clear\n", prog, f->address);
        r->reason = "no-memory-bar";
        return -1;
    }
    return r->reason ? -1 : 0;
}

static int
compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int
main(int argc, char **argv)
{
    const char *sysfs = "/sys";
    const char *wanted[AV_MAX_DEVICES];
    int n_wanted = 0, list_only = 0, n_chosen = 0, n_failed = 0, n_seen = 0;
    uint64_t window = AV_WINDOW_DEFAULT;
    long page = sysconf(_SC_PAGESIZE);
    char devices[4096];
    char **names = NULL;
    size_t n_names = 0;
    struct sigaction sa;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--list") == 0) {
            list_only = 1;
        } else if (strcmp(a, "--sysfs") == 0 && v) {
            sysfs = v;
            i++;
        } else if (strcmp(a, "--device") == 0 && v) {
            unsigned d, b, s, fn;
            int end = 0;

            if (sscanf(v, "%4x:%2x:%2x.%1x%n", &d, &b, &s, &fn, &end) != 4 || v[end] || strlen(v) != 12) {
                fprintf(stderr, "%s: --device wants a PCI address DDDD:BB:SS.F, not '%s'\n", prog, v);
                return 2;
            }
            if (n_wanted == AV_MAX_DEVICES) {
                fprintf(stderr, "%s: at most %d --device options\n", prog, AV_MAX_DEVICES);
                return 2;
            }
            wanted[n_wanted++] = v;
            i++;
        } else if (strcmp(a, "--window") == 0 && v) {
            char *end;

            errno = 0;
            window = strtoull(v, &end, 0);
            if (errno || *end || window == 0 || window % (uint64_t)page) {
                fprintf(stderr, "%s: --window wants a multiple of the page size (%ld), not '%s'\n", prog, page, v);
                return 2;
            }
            i++;
        } else {
            fprintf(stderr, "%s: unknown or incomplete option '%s'\n", prog, a);
            usage(stderr);
            return 2;
        }
    }

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_bus_error;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
    setvbuf(stdout, NULL, _IOLBF, 0);

    if (snprintf(devices, sizeof(devices), "%s/bus/pci/devices", sysfs) >= (int)sizeof(devices) - 64) {
        fprintf(stderr, "%s: --sysfs: a path that long is no sysfs: '%s'\n", prog, sysfs);
        return 2;
    }
    if (n_wanted) {
        names = calloc((size_t)n_wanted, sizeof(*names));
        for (int i = 0; names && i < n_wanted; i++) {
            names[i] = strdup(wanted[i]);
            for (char *p = names[i]; p && *p; p++)
                *p = (char)(*p >= 'A' && *p <= 'F' ? *p - 'A' + 'a' : *p);
        }
        n_names = (size_t)n_wanted;
    } else {
        DIR *dir = opendir(devices);
        struct dirent *e;

        if (!dir) {
            fprintf(stderr, "%s: cannot list %s: %s\n", prog, devices, strerror(errno));
            return 1;
        }
        while ((e = readdir(dir))) {
            char **more;

            if (e->d_name[0] == '.')
                continue;
            more = realloc(names, (n_names + 1) * sizeof(*names));
            if (!more)
                break;
            names = more;
            names[n_names++] = strdup(e->d_name);
        }
        closedir(dir);
        if (names)
            qsort(names, n_names, sizeof(*names), compare_names);
    }
    if (!names && n_names) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }

    for (size_t i = 0; i < n_names; i++) {
        AvFunction f;
        AvResult r;
        char why_buf[160];
        const char *why = NULL;
        int err;

        if (!names[i]) {
            fprintf(stderr, "%s: out of memory\n", prog);
            return 1;
        }
        err = function_load(&f, devices, names[i]);
        if (err < 0) {
            if (n_wanted) {
                fprintf(stderr, "%s: no PCI function %s in %s: %s\n", prog, names[i], devices, strerror(-err));
                printf("accelvirt-coverage: device=%s method=bars cleared=0 memory=unknown verified=no bars=none "
                       "reason=absent\n", names[i]);
                n_failed++;
            }
            continue;
        }
        n_seen++;
        if (!n_wanted)
            why = not_passed_through(&f, why_buf, sizeof(why_buf));
        if (list_only) {
            printf("%s %04x:%04x class=%06x %s%s\n", f.address, f.vendor, f.device, f.class_code,
                   why ? "skipped: " : "chosen", why ? why : "");
            n_chosen += !why;
            continue;
        }
        if (why)
            continue;
        n_chosen++;
        if (scrub_function(&f, window, &r) < 0)
            n_failed++;
        printf("accelvirt-coverage: device=%s method=bars cleared=%" PRIu64 " memory=unknown verified=%s bars=%s "
               "size=%" PRIu64 "%s%s%s%s\n", f.address, r.cleared, r.reason ? "no" : "yes",
               r.bars[0] ? r.bars : "none", r.size, r.failed[0] ? " failed=" : "", r.failed,
               r.reason ? " reason=" : "", r.reason ? r.reason : "");
    }
    for (size_t i = 0; i < n_names; i++)
        free(names[i]);
    free(names);
    if (list_only)
        return n_chosen ? 0 : 1;
    if (!n_chosen && !n_failed) {
        fprintf(stderr, "%s: no passed-through device found in %s (%d functions seen, all the machine's own): "
                "the scrub VM does not have its device\n", prog, devices, n_seen);
        return 1;
    }
    return n_failed ? 1 : 0;
}

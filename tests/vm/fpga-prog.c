/* SPDX-License-Identifier: Apache-2.0 */
/* fpga-prog: the VM rig's FPGA "programmer" (issue 15). The rig's ivshmem stands in
 * for an FPGA card: its BAR2 (the shared memory) is the card's configuration memory,
 * and a bitstream is programmed by writing its bytes there through VFIO, the way a
 * vendor tool reaches a card on vfio-pci. Run by accelvirt as a profile's "program"
 * (accelvirt-policy(5), PROGRAMMING; tests/vm/fpga-policies/45-fpga.json):
 *
 *   fpga-prog write FILE ADDRESS    write FILE's bytes at offset 0 of BAR2 of the PCI
 *                                   function ADDRESS and zeros over the rest of BAR2
 *                                   (programming replaces the whole configuration:
 *                                   nothing of the previous image survives)
 *   fpga-prog verify FILE ADDRESS   read BAR2 back: FILE's bytes at offset 0, zeros
 *                                   after them; exit 1 on the first byte that differs
 *
 * The device's VFIO group file is inherited, never opened here: accelvirt passes it
 * as fd 3 and says so in ACCELVIRT_VFIO_GROUP_FD=3 (a group has one open file at a
 * time, held by accelvirt). The rest is the sequence of the kernel's
 * Documentation/driver-api/vfio.rst ("VFIO Usage Example"): open /dev/vfio/vfio (a
 * container), VFIO_GET_API_VERSION, VFIO_GROUP_GET_STATUS (viable), a container left
 * on the group by a programmer that died is unset first (as src/vfio/av-kernel.c
 * does for a held group), VFIO_GROUP_SET_CONTAINER, VFIO_SET_IOMMU (VFIO_TYPE1v2_IOMMU,
 * else VFIO_TYPE1_IOMMU), VFIO_GROUP_GET_DEVICE_FD(ADDRESS),
 * VFIO_DEVICE_GET_REGION_INFO(VFIO_PCI_BAR2_REGION_INDEX), then pwrite/pread at the
 * region's offset in the device file (include/uapi/linux/vfio.h). On the way out the
 * device file is closed and the group taken out of the container again, so that the
 * held group is as it was (accelvirt runs "verify" with the same file after "write").
 *
 * Prints one line: how many bytes went where (or were compared). Exit 0 done, 1 a
 * failure or a mismatch, 2 usage. Static (gcc -static, tests/vm/build.sh): it runs on
 * the rig guest's host userland (and would on its busybox initramfs). */
#include <errno.h>
#include <fcntl.h>
#include <linux/vfio.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *prog = "fpga-prog";

static int fail(const char *what, int err)
{
    fprintf(stderr, "%s: %s: %s\n", prog, what, strerror(err));
    return 1;
}

/* The whole of @path in a new buffer, its length in *ret_len; NULL on failure. */
static uint8_t *read_file(const char *path, size_t *ret_len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    uint8_t *buf;
    size_t done = 0;

    if (fd < 0)
        return NULL;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) {
        close(fd);
        errno = EINVAL;
        return NULL;
    }
    buf = malloc((size_t)st.st_size);
    if (!buf) {
        close(fd);
        return NULL;
    }
    while (done < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + done, (size_t)st.st_size - done);
        if (n <= 0) {
            int e = n < 0 ? errno : EIO;
            free(buf);
            close(fd);
            errno = e;
            return NULL;
        }
        done += (size_t)n;
    }
    close(fd);
    *ret_len = done;
    return buf;
}

/* pwrite/pread of all @len bytes at @off of the device file; 0 or an errno. */
static int device_io(int device, int write_it, uint8_t *buf, size_t len, uint64_t off)
{
    size_t done = 0;

    while (done < len) {
        ssize_t n = write_it ? pwrite(device, buf + done, len - done, (off_t)(off + done))
                             : pread(device, buf + done, len - done, (off_t)(off + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? errno : EIO;
        done += (size_t)n;
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *env = getenv("ACCELVIRT_VFIO_GROUP_FD");
    struct vfio_group_status status = { .argsz = sizeof(status) };
    struct vfio_region_info region = { .argsz = sizeof(region), .index = VFIO_PCI_BAR2_REGION_INDEX };
    int write_it, group, container, device, iommu, rc = 1;
    uint8_t *image, *bar;
    size_t len;
    char *end = NULL;
    long g;

    if (argc != 4 || (strcmp(argv[1], "write") != 0 && strcmp(argv[1], "verify") != 0)) {
        fprintf(stderr, "usage: fpga-prog write|verify FILE ADDRESS\n");
        return 2;
    }
    write_it = strcmp(argv[1], "write") == 0;
    if (!env || !*env || (g = strtol(env, &end, 10), *end != '\0') || g < 0 || g > 1024) {
        fprintf(stderr, "%s: no VFIO group file: ACCELVIRT_VFIO_GROUP_FD is not set (accelvirt passes the "
                        "device's group as fd 3 to a program of a profile with \"driver\": \"vfio-pci\")\n", prog);
        return 1;
    }
    group = (int)g;
    image = read_file(argv[2], &len);
    if (!image)
        return fail(argv[2], errno);

    if (ioctl(group, VFIO_GROUP_GET_STATUS, &status) < 0)
        return fail("VFIO_GROUP_GET_STATUS on the inherited group file", errno);
    if (!(status.flags & VFIO_GROUP_FLAGS_VIABLE)) {
        fprintf(stderr, "%s: the group of %s is not viable (a device of it is on a host driver)\n", prog, argv[3]);
        return 1;
    }
    container = open("/dev/vfio/vfio", O_RDWR | O_CLOEXEC);
    if (container < 0)
        return fail("/dev/vfio/vfio", errno);
    if (ioctl(container, VFIO_GET_API_VERSION) != VFIO_API_VERSION) {
        fprintf(stderr, "%s: unknown VFIO API version\n", prog);
        return 1;
    }
    iommu = ioctl(container, VFIO_CHECK_EXTENSION, VFIO_TYPE1v2_IOMMU) > 0 ? VFIO_TYPE1v2_IOMMU : VFIO_TYPE1_IOMMU;
    if ((status.flags & VFIO_GROUP_FLAGS_CONTAINER_SET) && ioctl(group, VFIO_GROUP_UNSET_CONTAINER) < 0)
        return fail("VFIO_GROUP_UNSET_CONTAINER (a container left on the group)", errno);
    if (ioctl(group, VFIO_GROUP_SET_CONTAINER, &container) < 0)
        return fail("VFIO_GROUP_SET_CONTAINER", errno);
    if (ioctl(container, VFIO_SET_IOMMU, iommu) < 0) {
        rc = fail("VFIO_SET_IOMMU", errno);
        goto unset;
    }
    device = ioctl(group, VFIO_GROUP_GET_DEVICE_FD, argv[3]);
    if (device < 0) {
        rc = fail(argv[3], errno);
        goto unset;
    }
    if (ioctl(device, VFIO_DEVICE_GET_REGION_INFO, &region) < 0) {
        rc = fail("VFIO_DEVICE_GET_REGION_INFO of BAR2", errno);
        goto out;
    }
    if (!(region.flags & VFIO_REGION_INFO_FLAG_READ) || !(region.flags & VFIO_REGION_INFO_FLAG_WRITE) ||
        region.size == 0) {
        fprintf(stderr, "%s: BAR2 of %s cannot be read and written (flags 0x%x, size %llu)\n", prog, argv[3],
                region.flags, (unsigned long long)region.size);
        goto out;
    }
    if (len > region.size) {
        fprintf(stderr, "%s: %s (%zu bytes) does not fit BAR2 of %s (%llu bytes)\n", prog, argv[2], len, argv[3],
                (unsigned long long)region.size);
        goto out;
    }
    bar = calloc(1, (size_t)region.size);
    if (!bar) {
        rc = fail("calloc", errno);
        goto out;
    }
    if (write_it) {
        int e;

        memcpy(bar, image, len);
        e = device_io(device, 1, bar, (size_t)region.size, region.offset);
        if (e) {
            rc = fail("pwrite to BAR2", e);
        } else {
            printf("fpga-prog: wrote %zu bytes of %s at offset 0 of BAR2 of %s (device file offset 0x%llx), "
                   "zeros over its other %llu bytes\n", len, argv[2], argv[3], (unsigned long long)region.offset,
                   (unsigned long long)(region.size - len));
            rc = 0;
        }
    } else {
        int e = device_io(device, 0, bar, (size_t)region.size, region.offset);
        size_t i;

        if (e) {
            rc = fail("pread from BAR2", e);
        } else {
            for (i = 0; i < (size_t)region.size; i++)
                if (bar[i] != (i < len ? image[i] : 0))
                    break;
            if (i < (size_t)region.size) {
                printf("fpga-prog: BAR2 of %s differs from %s at byte %zu (%s)\n", argv[3], argv[2], i,
                       i < len ? "in the image" : "after it, where zeros belong");
            } else {
                printf("fpga-prog: verified %zu bytes of %s at offset 0 of BAR2 of %s and zeros over its other "
                       "%llu bytes\n", len, argv[2], argv[3], (unsigned long long)(region.size - len));
                rc = 0;
            }
        }
    }
    free(bar);
out:
    close(device);
unset:
    /* the group back out of this container: accelvirt keeps the group file */
    (void)ioctl(group, VFIO_GROUP_UNSET_CONTAINER);
    close(container);
    free(image);
    return rc;
}

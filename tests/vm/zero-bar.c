/* SPDX-License-Identifier: Apache-2.0 */
/* zero-bar: map a PCI BAR through its sysfs resourceN file and zero it, or print
 * what it holds. A stand-in for the real scrubber, used by the VM rig (tests/vm) to
 * prove that bytes written through the BAR in the guest reach the host's backing file.
 *
 *   zero-bar zero FILE       write zeros over the whole BAR
 *   zero-bar head FILE N     print the first N bytes (N <= 64) as text, '.' for others
 *   zero-bar sum FILE        print the number of non-zero bytes in the BAR
 *   zero-bar fill FILE TEXT  write TEXT over the whole BAR, again and again (a
 *                            tenant's secret), and read it back
 *   zero-bar count FILE TEXT print how many times TEXT occurs in the BAR
 *   zero-bar line FILE       print the BAR's first line (up to the first newline or
 *                            NUL, at most 128 bytes; '.' for other non-printables):
 *                            the function id a bitstream of the rig starts with
 *   zero-bar cmp FILE DATA   compare the BAR with the file DATA (a bitstream): print
 *                            "same=N rest_nonzero=M" when the BAR begins with DATA's
 *                            N bytes (M: non-zero bytes after them), else
 *                            "differs_at=K rest_nonzero=M"
 *
 * Static (gcc -static): it runs on the guest's busybox initramfs. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: zero-bar zero|head|sum|fill|count|line|cmp FILE [N|TEXT|DATA]\n");
        return 2;
    }
    int write_it = strcmp(argv[1], "zero") == 0 || strcmp(argv[1], "fill") == 0;
    if ((strcmp(argv[1], "fill") == 0 || strcmp(argv[1], "count") == 0) &&
        (argc < 4 || argv[3][0] == '\0')) {
        fprintf(stderr, "zero-bar: %s needs a non-empty TEXT\n", argv[1]);
        return 2;
    }
    if (strcmp(argv[1], "cmp") == 0 && argc < 4) {
        fprintf(stderr, "zero-bar: cmp needs a DATA file\n");
        return 2;
    }
    int fd = open(argv[2], (write_it ? O_RDWR : O_RDONLY) | O_SYNC);
    if (fd < 0) {
        perror(argv[2]);
        return 1;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || st.st_size <= 0) {
        fprintf(stderr, "zero-bar: %s: no size\n", argv[2]);
        return 1;
    }
    size_t len = (size_t)st.st_size;
    volatile uint8_t *p = mmap(NULL, len, write_it ? PROT_READ | PROT_WRITE : PROT_READ,
                               MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        perror("zero-bar: mmap");
        return 1;
    }
    if (strcmp(argv[1], "fill") == 0) {
        size_t tl = strlen(argv[3]);
        for (size_t i = 0; i < len; i++)
            p[i] = (uint8_t)argv[3][i % tl];
        for (size_t i = 0; i < len; i++)
            if (p[i] != (uint8_t)argv[3][i % tl]) {
                fprintf(stderr, "zero-bar: byte %zu does not read back\n", i);
                return 1;
            }
        if (msync((void *)p, len, MS_SYNC) < 0)
            perror("zero-bar: msync");
        printf("filled %zu bytes\n", len);
    } else if (strcmp(argv[1], "count") == 0) {
        size_t tl = strlen(argv[3]), found = 0;
        uint8_t *copy = malloc(len);
        if (!copy) {
            perror("zero-bar: malloc");
            return 1;
        }
        for (size_t i = 0; i < len; i++)
            copy[i] = p[i];
        for (size_t i = 0; i + tl <= len; i++)
            if (memcmp(copy + i, argv[3], tl) == 0) {
                found++;
                i += tl - 1;
            }
        printf("%zu\n", found);
        free(copy);
    } else if (write_it) {
        volatile uint64_t *q = (volatile uint64_t *)p;
        for (size_t i = 0; i < len / 8; i++)
            q[i] = 0;
        for (size_t i = 0; i < len; i++)
            if (p[i] != 0) {
                fprintf(stderr, "zero-bar: byte %zu still non-zero\n", i);
                return 1;
            }
        if (msync((void *)p, len, MS_SYNC) < 0)
            perror("zero-bar: msync");
        printf("zeroed %zu bytes\n", len);
    } else if (strcmp(argv[1], "head") == 0) {
        size_t n = argc > 3 ? strtoul(argv[3], NULL, 0) : 16;
        if (n > 64 || n > len)
            n = len < 64 ? len : 64;
        for (size_t i = 0; i < n; i++)
            putchar(p[i] >= 0x20 && p[i] < 0x7f ? p[i] : '.');
        putchar('\n');
    } else if (strcmp(argv[1], "line") == 0) {
        for (size_t i = 0; i < len && i < 128 && p[i] != '\n' && p[i] != 0; i++)
            putchar(p[i] >= 0x20 && p[i] < 0x7f ? p[i] : '.');
        putchar('\n');
    } else if (strcmp(argv[1], "cmp") == 0) {
        FILE *data = fopen(argv[3], "rb");
        size_t i = 0, nz = 0;
        int c = 0;
        if (!data) {
            perror(argv[3]);
            return 1;
        }
        while (i < len && (c = getc(data)) != EOF && p[i] == (uint8_t)c)
            i++;
        int same = i == len ? getc(data) == EOF : c == EOF;
        size_t n = i;
        fclose(data);
        for (; i < len; i++)
            nz += p[i] != 0;
        if (same)
            printf("same=%zu rest_nonzero=%zu\n", n, nz);
        else
            printf("differs_at=%zu rest_nonzero=%zu\n", n, nz);
    } else if (strcmp(argv[1], "sum") == 0) {
        size_t nz = 0;
        for (size_t i = 0; i < len; i++)
            nz += p[i] != 0;
        printf("%zu\n", nz);
    } else {
        fprintf(stderr, "zero-bar: unknown command %s\n", argv[1]);
        return 2;
    }
    munmap((void *)p, len);
    close(fd);
    return 0;
}

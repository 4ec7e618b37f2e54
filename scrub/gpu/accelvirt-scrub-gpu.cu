/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt-scrub-gpu: the scrubbing kernel (issue 11, item 4).
 *
 * For every CUDA device it sees (or the one --device names), it allocates
 * all the free memory in chunks, writes zeros over it with a grid-stride
 * kernel of 16-byte stores, reads every 16-byte word back with a reduction
 * kernel that counts the words that are not zero (one atomic per block,
 * per chunk), and prints one line per device on stdout:
 *
 *   accelvirt-coverage: device=PCI_ADDR method=cuda cleared=BYTES memory=BYTES verified=yes|no gbps=X.X [KEY=VALUE...]
 *
 * cleared counts the bytes of the chunks that were written and read back
 * all zero; memory is the total of cudaMemGetInfo(); gbps is the bytes
 * cleared per second of the write and verify passes together (10^9
 * bytes/s).  Other parts of accelvirt parse the first six fields: keep
 * them as they are.  Human-readable details go to stderr.
 *
 * Exit status: 0 every device cleared and verified, 1 a failure on some
 * device, 2 bad usage, 3 no CUDA device found.
 *
 * What it cannot reach: the memory the CUDA driver keeps for its own
 * context on each device (cleared - memory shows how much that is, with
 * the fragments under MIN_CHUNK that no allocation could take).
 */

#include <cuda_runtime.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <getopt.h>
#include <vector>

#define PROGRAM "accelvirt-scrub-gpu"

static const size_t MAX_CHUNK = (size_t)1 << 30; /* 1 GiB */
static const size_t MIN_CHUNK = (size_t)2 << 20; /* 2 MiB: the driver's large-page size */
static const int THREADS = 256;                  /* per block; a multiple of 32 */
static const int DEFAULT_REPS = 5;

enum { EXIT_OK = 0, EXIT_FAILED = 1, EXIT_USAGE = 2, EXIT_NO_DEVICE = 3 };

/* --- the kernels --- */

/* Writes zeros over n 16-byte words, four stores in flight per thread. */
__global__ void av_zero_kernel(uint4 *__restrict__ p, size_t n)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const uint4 z = make_uint4(0, 0, 0, 0);
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

    for (; i + 3 * stride < n; i += 4 * stride) {
        p[i] = z;
        p[i + stride] = z;
        p[i + 2 * stride] = z;
        p[i + 3 * stride] = z;
    }
    for (; i < n; i += stride)
        p[i] = z;
}

__device__ static inline unsigned long long av_warp_sum(unsigned long long v)
{
    for (int off = 16; off > 0; off /= 2)
        v += __shfl_down_sync(0xffffffffu, v, off);
    return v;
}

__device__ static inline unsigned int av_word_dirty(uint4 w)
{
    return (w.x | w.y | w.z | w.w) != 0;
}

/* Reads n 16-byte words, ORs the four lanes of each and counts the words
 * that are not zero into counts[0] and the words read into counts[1]: one
 * atomic per block.  counts[1] lets the host see that the kernel really
 * read the whole chunk (a kernel that never ran leaves both at zero). */
__global__ void av_verify_kernel(const uint4 *__restrict__ p, size_t n,
                                 unsigned long long *counts)
{
    __shared__ unsigned long long s_dirty[32], s_read[32];
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned long long dirty = 0, read = 0;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;

    for (; i + 3 * stride < n; i += 4 * stride) {
        uint4 a = p[i], b = p[i + stride], c = p[i + 2 * stride], d = p[i + 3 * stride];
        dirty += av_word_dirty(a) + av_word_dirty(b) + av_word_dirty(c) + av_word_dirty(d);
        read += 4;
    }
    for (; i < n; i += stride) {
        dirty += av_word_dirty(p[i]);
        read++;
    }

    dirty = av_warp_sum(dirty);
    read = av_warp_sum(read);
    if (lane == 0) {
        s_dirty[warp] = dirty;
        s_read[warp] = read;
    }
    __syncthreads();
    if (warp == 0) {
        const int nwarps = blockDim.x / 32;
        dirty = lane < nwarps ? s_dirty[lane] : 0;
        read = lane < nwarps ? s_read[lane] : 0;
        dirty = av_warp_sum(dirty);
        read = av_warp_sum(read);
        if (lane == 0) {
            atomicAdd(&counts[0], dirty);
            atomicAdd(&counts[1], read);
        }
    }
}

/* --- one device --- */

struct Chunk {
    void *ptr;
    size_t size;
};

struct Device {
    int ordinal;
    char pci[32];          /* DDDD:BB:SS.F, lower case, or "unknown" */
    char name[256];
    size_t memory;         /* total, cudaMemGetInfo() */
    size_t free_before;    /* free before the allocation */
    size_t free_after;     /* free with every chunk allocated */
    size_t allocated;
    size_t cleared;
    size_t n_chunks;       /* chunks allocated (the vector is emptied when they are freed) */
    int dirty_chunks;
    bool failed;           /* some CUDA call failed */
    const char *selftest;  /* "ok", "failed" or "not-run" */
    double write_ms, verify_ms;
    double bench_zero_ms, bench_memset_ms; /* medians; < 0 when not measured */
    std::vector<Chunk> chunks;
    cudaStream_t stream;
    cudaEvent_t ev[3];
    unsigned long long *counts; /* 2 per chunk, and 2 for the self-test */
    int grid;
};

/* Reports a failed CUDA call on stderr and marks the device failed;
 * returns whether the call succeeded. */
static bool av_check(Device *dev, cudaError_t err, const char *what)
{
    if (err == cudaSuccess)
        return true;
    fprintf(stderr, PROGRAM ": device %d (%s): %s failed: %s (%s)\n",
            dev->ordinal, dev->pci, what, cudaGetErrorString(err), cudaGetErrorName(err));
    dev->failed = true;
    return false;
}

static void av_note(const Device *dev, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, PROGRAM ": device %d (%s): ", dev->ordinal, dev->pci);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static double av_gib(size_t bytes)
{
    return (double)bytes / (double)((size_t)1 << 30);
}

/* Bytes per millisecond to GB/s (10^9 bytes/s); 0 when nothing was timed. */
static double av_gbps(size_t bytes, double ms)
{
    return ms > 0 ? (double)bytes / (ms * 1e6) : 0.0;
}

/* Fills dev->pci with the device's PCI address in the kernel's form
 * (0000:01:00.0, lower case), whatever case and domain width the runtime
 * uses. */
static void av_device_pci(Device *dev)
{
    char raw[64];
    unsigned int domain, bus, slot, function;

    snprintf(dev->pci, sizeof dev->pci, "unknown");
    if (!av_check(dev, cudaDeviceGetPCIBusId(raw, (int)sizeof raw, dev->ordinal),
                  "cudaDeviceGetPCIBusId"))
        return;
    if (sscanf(raw, "%x:%x:%x.%x", &domain, &bus, &slot, &function) != 4 ||
        domain > 0xffff || bus > 0xff || slot > 0x1f || function > 7) {
        fprintf(stderr, PROGRAM ": device %d: cannot read the PCI bus id '%s'\n",
                dev->ordinal, raw);
        dev->failed = true;
        return;
    }
    snprintf(dev->pci, sizeof dev->pci, "%04x:%02x:%02x.%x", domain, bus, slot, function);
}

/* Allocates every chunk it can: MAX_CHUNK at a time, halving the size on
 * cudaErrorMemoryAllocation down to MIN_CHUNK, so that the remainder is
 * taken too.  Any other error marks the device failed, and so does
 * reaching max_chunks (more memory became free than was counted for). */
static void av_device_allocate(Device *dev, size_t max_chunks)
{
    size_t chunk = MAX_CHUNK;

    while (chunk >= MIN_CHUNK) {
        if (dev->chunks.size() == max_chunks) {
            av_note(dev, "more memory became free during the allocation than the %zu chunks counted for",
                    max_chunks);
            dev->failed = true;
            return;
        }
        void *p = NULL;
        cudaError_t err = cudaMalloc(&p, chunk);

        if (err == cudaErrorMemoryAllocation) {
            (void)cudaGetLastError(); /* not sticky: clear it */
            chunk /= 2;
            continue;
        }
        if (!av_check(dev, err, "cudaMalloc"))
            return;
        dev->chunks.push_back(Chunk{p, chunk});
        dev->n_chunks++;
        dev->allocated += chunk;
    }
}

/* Launches the verify kernel over one chunk, counting into counts[0..1]
 * (which the caller zeroed). */
static bool av_launch_verify(Device *dev, const Chunk &c, unsigned long long *counts)
{
    av_verify_kernel<<<dev->grid, THREADS, 0, dev->stream>>>((const uint4 *)c.ptr, c.size / 16,
                                                             counts);
    return av_check(dev, cudaGetLastError(), "the verify kernel's launch");
}

static bool av_launch_zero(Device *dev, const Chunk &c)
{
    av_zero_kernel<<<dev->grid, THREADS, 0, dev->stream>>>((uint4 *)c.ptr, c.size / 16);
    return av_check(dev, cudaGetLastError(), "the zero kernel's launch");
}

/* Copies bytes from the device after everything queued on the device's
 * stream (a plain cudaMemcpy would not wait for a non-blocking stream). */
static bool av_fetch(Device *dev, void *host, const void *src, size_t bytes, const char *what)
{
    return av_check(dev, cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, dev->stream), what) &&
           av_check(dev, cudaStreamSynchronize(dev->stream), what);
}

static bool av_elapsed(Device *dev, cudaEvent_t from, cudaEvent_t to, double *ret_ms)
{
    float ms = 0;

    if (!av_check(dev, cudaEventElapsedTime(&ms, from, to), "cudaEventElapsedTime"))
        return false;
    *ret_ms = ms;
    return true;
}

/* The scrub: zeros over every chunk, then every chunk read back; a chunk
 * counts as cleared when its reduction read all its words and found none
 * that is not zero.  Returns whether every CUDA call of it succeeded. */
static bool av_device_scrub(Device *dev)
{
    const size_t n = dev->chunks.size();
    std::vector<unsigned long long> counts(2 * n);
    bool ok = true;

    ok = av_check(dev, cudaMemsetAsync(dev->counts, 0, 2 * n * sizeof(unsigned long long), dev->stream),
                  "cudaMemsetAsync of the counters") &&
         av_check(dev, cudaEventRecord(dev->ev[0], dev->stream), "cudaEventRecord");
    for (size_t i = 0; ok && i < n; i++)
        ok = av_launch_zero(dev, dev->chunks[i]);
    ok = ok && av_check(dev, cudaEventRecord(dev->ev[1], dev->stream), "cudaEventRecord");
    for (size_t i = 0; ok && i < n; i++)
        ok = av_launch_verify(dev, dev->chunks[i], dev->counts + 2 * i);
    ok = ok && av_check(dev, cudaEventRecord(dev->ev[2], dev->stream), "cudaEventRecord") &&
         av_check(dev, cudaStreamSynchronize(dev->stream), "the zero and verify kernels") &&
         av_elapsed(dev, dev->ev[0], dev->ev[1], &dev->write_ms) &&
         av_elapsed(dev, dev->ev[1], dev->ev[2], &dev->verify_ms) &&
         av_fetch(dev, counts.data(), dev->counts, 2 * n * sizeof(unsigned long long), "reading the counters");
    if (!ok)
        return false;

    for (size_t i = 0; i < n; i++) {
        const size_t words = dev->chunks[i].size / 16;

        if (counts[2 * i] == 0 && counts[2 * i + 1] == words) {
            dev->cleared += dev->chunks[i].size;
            continue;
        }
        if (dev->dirty_chunks++ < 10)
            av_note(dev, "chunk %zu (%zu bytes): %llu of %zu words read, %llu not zero", i,
                dev->chunks[i].size, counts[2 * i + 1], words, counts[2 * i]);
    }
    return true;
}

/* Proves on this device that the reduction sees a byte that is not zero:
 * one byte at the end of the last chunk set, the chunk verified (exactly one
 * dirty word expected), the byte zeroed again and the chunk verified clean. */
static void av_device_selftest(Device *dev)
{
    const Chunk &c = dev->chunks.back();
    unsigned long long *counts = dev->counts + 2 * dev->chunks.size();
    unsigned long long got[4] = {0, 0, 0, 0};
    char *last = (char *)c.ptr + c.size - 1;
    bool ok;

    ok = av_check(dev, cudaMemsetAsync(counts, 0, 2 * sizeof(unsigned long long), dev->stream),
                  "cudaMemsetAsync of the self-test counters") &&
         av_check(dev, cudaMemsetAsync(last, 0xa5, 1, dev->stream), "cudaMemsetAsync of the self-test byte") &&
         av_launch_verify(dev, c, counts) &&
         av_fetch(dev, got, counts, 2 * sizeof(unsigned long long), "reading the self-test counters") &&
         av_check(dev, cudaMemsetAsync(counts, 0, 2 * sizeof(unsigned long long), dev->stream),
                  "cudaMemsetAsync of the self-test counters") &&
         av_check(dev, cudaMemsetAsync(last, 0, 1, dev->stream), "cudaMemsetAsync of the self-test byte") &&
         av_launch_verify(dev, c, counts) &&
         av_fetch(dev, got + 2, counts, 2 * sizeof(unsigned long long), "reading the self-test counters");
    if (!ok)
        return;
    const bool passed = got[0] == 1 && got[2] == 0 && got[1] == c.size / 16 && got[3] == c.size / 16;

    dev->selftest = passed ? "ok" : "failed";
    if (!passed)
        av_note(dev, "self-test failed: one dirty byte gave %llu dirty words of %llu read, "
                     "then %llu of %llu once zeroed again",
                got[0], got[1], got[2], got[3]);
}

static double av_median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? -1.0 : v[v.size() / 2];
}

/* --bench: the zero kernel and a plain cudaMemset over the same chunks,
 * reps times each, alternating which goes first; the medians go on the
 * line.  Both write zeros, so the memory stays cleared. */
static void av_device_bench(Device *dev, int reps)
{
    std::vector<double> zero_ms, memset_ms;

    for (int r = 0; r < reps; r++) {
        for (int pass = 0; pass < 2; pass++) {
            const bool kernel = (pass == 0) == (r % 2 == 0);
            double ms;
            bool ok = av_check(dev, cudaEventRecord(dev->ev[0], dev->stream), "cudaEventRecord");

            for (size_t i = 0; ok && i < dev->chunks.size(); i++)
                ok = kernel ? av_launch_zero(dev, dev->chunks[i])
                            : av_check(dev, cudaMemsetAsync(dev->chunks[i].ptr, 0, dev->chunks[i].size,
                                                            dev->stream),
                                       "cudaMemsetAsync");
            ok = ok && av_check(dev, cudaEventRecord(dev->ev[1], dev->stream), "cudaEventRecord") &&
                 av_check(dev, cudaEventSynchronize(dev->ev[1]), "the benchmark") &&
                 av_elapsed(dev, dev->ev[0], dev->ev[1], &ms);
            if (!ok)
                return;
            (kernel ? zero_ms : memset_ms).push_back(ms);
        }
    }
    dev->bench_zero_ms = av_median(zero_ms);
    dev->bench_memset_ms = av_median(memset_ms);
}

/* Whether every allocated byte was written and read back zero, with no
 * CUDA call failing and the reduction proven on this device. */
static bool av_device_verified(const Device *dev)
{
    return !dev->failed && strcmp(dev->selftest, "ok") == 0 && dev->allocated > 0 &&
           dev->cleared == dev->allocated;
}

static void av_device_print(const Device *dev, bool bench)
{
    const bool verified = av_device_verified(dev);

    printf("accelvirt-coverage: device=%s method=cuda cleared=%zu memory=%zu verified=%s gbps=%.1f"
           " coverage=%.4f free_before=%zu allocated=%zu free_after=%zu chunks=%zu"
           " write_gbps=%.1f verify_gbps=%.1f selftest=%s",
           dev->pci, dev->cleared, dev->memory, verified ? "yes" : "no",
           av_gbps(dev->cleared, dev->write_ms + dev->verify_ms),
           dev->memory ? (double)dev->cleared / (double)dev->memory : 0.0, dev->free_before,
           dev->allocated, dev->free_after, dev->n_chunks, av_gbps(dev->allocated, dev->write_ms),
           av_gbps(dev->allocated, dev->verify_ms), dev->selftest);
    if (bench && dev->bench_zero_ms > 0 && dev->bench_memset_ms > 0)
        printf(" zero_gbps=%.1f memset_gbps=%.1f ratio=%.3f", av_gbps(dev->allocated, dev->bench_zero_ms),
               av_gbps(dev->allocated, dev->bench_memset_ms), dev->bench_memset_ms / dev->bench_zero_ms);
    printf("\n");
    fflush(stdout);
}

/* Scrubs one device and prints its line; returns whether it was cleared
 * and verified. */
static bool av_device_run(int ordinal, bool bench, int reps)
{
    Device dev{};
    size_t max_chunks;
    int sms = 0, per_sm = 0;

    dev.ordinal = ordinal;
    dev.bench_zero_ms = dev.bench_memset_ms = -1;
    dev.selftest = "not-run";
    snprintf(dev.pci, sizeof dev.pci, "unknown");
    snprintf(dev.name, sizeof dev.name, "unknown");

    if (!av_check(&dev, cudaSetDevice(ordinal), "cudaSetDevice"))
        goto out;
    av_device_pci(&dev);
    {
        cudaDeviceProp prop;
        if (av_check(&dev, cudaGetDeviceProperties(&prop, ordinal), "cudaGetDeviceProperties"))
            snprintf(dev.name, sizeof dev.name, "%s", prop.name);
    }
    /* Everything the scrub needs besides the chunks is made before them:
     * the context (cudaFree(0)), the stream, the events and the counters. */
    if (!av_check(&dev, cudaFree(0), "creating the CUDA context") ||
        !av_check(&dev, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ordinal),
                  "cudaDeviceGetAttribute") ||
        !av_check(&dev, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, av_verify_kernel, THREADS, 0),
                  "cudaOccupancyMaxActiveBlocksPerMultiprocessor") ||
        !av_check(&dev, cudaStreamCreateWithFlags(&dev.stream, cudaStreamNonBlocking), "cudaStreamCreate"))
        goto out;
    dev.grid = std::max(1, sms * std::max(1, per_sm));
    for (int i = 0; i < 3; i++)
        if (!av_check(&dev, cudaEventCreate(&dev.ev[i]), "cudaEventCreate"))
            goto out;
    if (!av_check(&dev, cudaMemGetInfo(&dev.free_before, &dev.memory), "cudaMemGetInfo"))
        goto out;
    max_chunks = dev.free_before / MIN_CHUNK + 1;
    if (!av_check(&dev, cudaMalloc((void **)&dev.counts, 2 * (max_chunks + 1) * sizeof(unsigned long long)),
                  "cudaMalloc of the counters"))
        goto out;

    /* From here on, what was allocated is scrubbed even when something
     * failed before (the line says verified=no all the same). */
    av_device_allocate(&dev, max_chunks);
    av_check(&dev, cudaMemGetInfo(&dev.free_after, &dev.memory), "cudaMemGetInfo");
    av_note(&dev, "%s: %.2f GiB of %.2f GiB free, %.2f GiB allocated in %zu chunks, %.2f MiB left free",
            dev.name, av_gib(dev.free_before), av_gib(dev.memory), av_gib(dev.allocated),
            dev.chunks.size(), (double)dev.free_after / (1 << 20));
    if (dev.chunks.empty()) {
        av_note(&dev, "no memory could be allocated");
        goto out;
    }

    if (av_device_scrub(&dev))
        av_device_selftest(&dev);
    if (!dev.failed)
        av_note(&dev, "zeroed at %.1f GB/s, read back at %.1f GB/s; %.2f GiB cleared (%.2f%% of %.2f GiB)%s",
                av_gbps(dev.allocated, dev.write_ms), av_gbps(dev.allocated, dev.verify_ms),
                av_gib(dev.cleared), 100.0 * (double)dev.cleared / (double)dev.memory, av_gib(dev.memory),
                strcmp(dev.selftest, "ok") == 0 ? "" : "; the self-test failed");
    if (bench && !dev.failed) {
        av_device_bench(&dev, reps);
        if (dev.bench_zero_ms > 0 && dev.bench_memset_ms > 0)
            av_note(&dev, "bench, median of %d: zero kernel %.1f GB/s, cudaMemset %.1f GB/s, ratio %.3f", reps,
                    av_gbps(dev.allocated, dev.bench_zero_ms), av_gbps(dev.allocated, dev.bench_memset_ms),
                    dev.bench_memset_ms / dev.bench_zero_ms);
    }

out:
    /* Freed before the line is printed, so that a failing cudaFree shows
     * on it (verified=no). */
    for (const Chunk &c : dev.chunks)
        av_check(&dev, cudaFree(c.ptr), "cudaFree");
    dev.chunks.clear();
    if (dev.counts)
        av_check(&dev, cudaFree(dev.counts), "cudaFree of the counters");
    for (int i = 0; i < 3; i++)
        if (dev.ev[i])
            av_check(&dev, cudaEventDestroy(dev.ev[i]), "cudaEventDestroy");
    if (dev.stream)
        av_check(&dev, cudaStreamDestroy(dev.stream), "cudaStreamDestroy");
    av_device_print(&dev, bench);
    return av_device_verified(&dev);
}

static void av_usage(FILE *f)
{
    fprintf(f,
            "Usage: " PROGRAM " [--device N|PCI_ADDRESS] [--bench [--reps N]]\n"
            "Allocates all free memory of every CUDA device (or the one named), writes zeros,\n"
            "reads every byte back and prints one line per device:\n"
            "  accelvirt-coverage: device=PCI_ADDR method=cuda cleared=BYTES memory=BYTES verified=yes|no gbps=X.X ...\n"
            "  --device N|ADDR  only the CUDA device of that ordinal or PCI address (0000:01:00.0)\n"
            "  --bench          also time cudaMemset over the same memory, side by side\n"
            "                   (memset_gbps= and ratio= on the line)\n"
            "  --reps N         repetitions of each in --bench, the median is kept (default %d)\n"
            "Exit status: 0 all cleared and verified, 1 a failure, 2 bad usage, 3 no CUDA device.\n",
            DEFAULT_REPS);
}

static bool av_parse_int(const char *s, int min, int max, int *ret)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max)
        return false;
    *ret = (int)v;
    return true;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"device", required_argument, NULL, 'd'},
        {"bench", no_argument, NULL, 'b'},
        {"reps", required_argument, NULL, 'r'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *device_arg = NULL;
    bool bench = false;
    int reps = DEFAULT_REPS, count = 0, first, last, opt;
    cudaError_t err;
    bool all_ok = true;

    while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (opt) {
        case 'd':
            device_arg = optarg;
            break;
        case 'b':
            bench = true;
            break;
        case 'r':
            if (!av_parse_int(optarg, 1, 1000, &reps)) {
                fprintf(stderr, PROGRAM ": --reps takes a whole number from 1 to 1000, not '%s'\n", optarg);
                return EXIT_USAGE;
            }
            break;
        case 'h':
            av_usage(stdout);
            return EXIT_OK;
        default:
            av_usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, PROGRAM ": unexpected argument '%s'\n", argv[optind]);
        av_usage(stderr);
        return EXIT_USAGE;
    }
    if (device_arg && !strchr(device_arg, ':') && !av_parse_int(device_arg, 0, 1 << 20, &first)) {
        fprintf(stderr, PROGRAM ": --device takes a CUDA device number or a PCI address, not '%s'\n",
                device_arg);
        return EXIT_USAGE;
    }

    /* cudaErrorInsufficientDriver is also what the runtime says when no
     * NVIDIA driver is loaded at all (no libcuda.so.1). */
    err = cudaGetDeviceCount(&count);
    if (err == cudaErrorInsufficientDriver) {
        fprintf(stderr, PROGRAM ": no CUDA device found: the NVIDIA driver is not loaded, or is older than "
                        "CUDA %d.%d which this program was built with (%s); nothing was scrubbed\n",
                CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10, cudaGetErrorName(err));
        return EXIT_NO_DEVICE;
    }
    if (err == cudaErrorNoDevice || (err == cudaSuccess && count == 0)) {
        fprintf(stderr, PROGRAM ": no CUDA device found (%s); nothing was scrubbed\n",
                err == cudaSuccess ? "the runtime counts none" : cudaGetErrorName(err));
        return EXIT_NO_DEVICE;
    }
    if (err != cudaSuccess) {
        fprintf(stderr, PROGRAM ": cannot count the CUDA devices: %s (%s)\n", cudaGetErrorString(err),
                cudaGetErrorName(err));
        return EXIT_FAILED;
    }

    first = 0;
    last = count - 1;
    if (device_arg && strchr(device_arg, ':')) {
        err = cudaDeviceGetByPCIBusId(&first, device_arg);
        if (err != cudaSuccess) {
            fprintf(stderr, PROGRAM ": no CUDA device at PCI address '%s' (%s)\n", device_arg,
                    cudaGetErrorString(err));
            return EXIT_NO_DEVICE;
        }
        last = first;
    } else if (device_arg) {
        av_parse_int(device_arg, 0, 1 << 20, &first);
        if (first >= count) {
            fprintf(stderr, PROGRAM ": no CUDA device %d: the runtime sees %d (0 to %d)\n", first, count,
                    count - 1);
            return EXIT_USAGE;
        }
        last = first;
    }

    for (int d = first; d <= last; d++)
        if (!av_device_run(d, bench, reps))
            all_ok = false;
    return all_ok ? EXIT_OK : EXIT_FAILED;
}

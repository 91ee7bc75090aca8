/* Loaded-artifact identity (seed 0x0BA, 0x0BD): what this running process
 * is, captured in the process itself once at start.
 *
 * Build id and flags (from -DATTN_BUILD_ID / -DATTN_BUILD_FLAGS, see the
 * Makefile), C compiler (__VERSION__) and nvcc (__CUDACC_VER_*__, from
 * kernels/cuda/build_info.cu when CUDA is built) versions, SHA-256 of
 * /proc/self/exe and of every shared object mapped in /proc/self/maps, the
 * SHA-256 of the embedded kernel image (the exe's .nv_fatbin section), and
 * the device: name, compute capability, SM count, memory, driver and runtime
 * versions.  One digest over all of it goes into every diagnostic.
 */
#ifndef ATTN_DAEMON_ARTIFACT_H
#define ATTN_DAEMON_ARTIFACT_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>
#include <msgpack.h>

#include "attn/error.h"
#include "planner/key.h"

#define ATTN_ARTIFACT_MAX_OBJECTS 64

typedef struct attn_loaded_object {
    char path[256];
    char sha256[ATTN_SHA256_HEX];
    uint64_t bytes;
} attn_loaded_object;

typedef struct attn_artifact {
    char build_id[64]; /* "unknown" when the build did not pass ATTN_BUILD_ID */
    char build_flags[256];
    char cc_version[96];
    char nvcc_version[32]; /* "" without CUDA */
    char exe_path[256];
    char exe_sha256[ATTN_SHA256_HEX];
    uint32_t num_objects;
    attn_loaded_object objects[ATTN_ARTIFACT_MAX_OBJECTS];
    bool objects_truncated;                    /* more than ATTN_ARTIFACT_MAX_OBJECTS were mapped */
    char loader_map_sha256[ATTN_SHA256_HEX];   /* content address of the (path, sha256) list */
    char kernel_image_sha256[ATTN_SHA256_HEX]; /* "" when the exe embeds no .nv_fatbin */
    uint64_t kernel_image_bytes;
    /* device (has_device false on a CPU-only host; device_why says why) */
    bool has_device;
    char device_why[256];
    char device_name[128];
    int cc_major, cc_minor, sm_count;
    uint64_t device_memory;
    int driver_version, runtime_version;
    /* identity */
    bool complete; /* exe and every listed object hashed */
    char sha256[ATTN_SHA256_HEX];
} attn_artifact;

/* Collect the identity of this process now (reads and hashes files: call
 * once at start).  Unreadable objects leave complete false, not an error. */
int attn_artifact_collect(attn_artifact *a, attn_error_detail *d);

/* The process-wide identity, collected on first use (thread-safe). */
const attn_artifact *attn_artifact_get(void);

/* Whether the build named its source revision (evidence rungs 1-2). */
bool attn_artifact_source_identified(const attn_artifact *a);

/* The identity as a JSON object (hello's "artifact"); NULL when out of memory. */
json_t *attn_artifact_to_json(const attn_artifact *a);

/* The identity as one msgpack map with the same keys as the JSON form. */
int attn_artifact_pack(const attn_artifact *a, msgpack_packer *pk);

/* SHA-256 of a file's bytes; *bytes gets its size (may be NULL). */
int attn_file_sha256(const char *path, char hex[ATTN_SHA256_HEX], uint64_t *bytes);

/* SHA-256 of the named ELF section of a file; ATTN_E_MISSING when absent. */
int attn_elf_section_sha256(const char *path, const char *section, char hex[ATTN_SHA256_HEX],
                            uint64_t *bytes);

#endif

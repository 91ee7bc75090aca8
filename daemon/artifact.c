/* Loaded-artifact identity of the running process (seed 0x0BA, 0x0BD). */
#include <elf.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "daemon/artifact.h"
#include "engines/cuda/cuda_engine.h"

#ifndef ATTN_BUILD_ID
#define ARTIFACT_BUILD_ID "unknown"
#else
#define ARTIFACT_BUILD_ID ATTN_BUILD_ID
#endif
#ifndef ATTN_BUILD_FLAGS
#define ATTN_BUILD_FLAGS "unrecorded (build without -DATTN_BUILD_FLAGS)"
#endif

#ifdef ATTN_WITH_CUDA
const char *attn_cuda_nvcc_version(void); /* kernels/cuda/build_info.cu */
#endif

static void to_hex(const unsigned char *md, unsigned n, char hex[ATTN_SHA256_HEX])
{
    for (unsigned i = 0; i < n && i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

int attn_file_sha256(const char *path, char hex[ATTN_SHA256_HEX], uint64_t *bytes)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return ATTN_E_IO;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx != NULL && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1;
    unsigned char buf[1 << 16];
    uint64_t total = 0;
    size_t n;
    while (ok && (n = fread(buf, 1, sizeof buf, f)) > 0) {
        ok = EVP_DigestUpdate(ctx, buf, n) == 1;
        total += n;
    }
    ok = ok && !ferror(f);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    ok = ok && EVP_DigestFinal_ex(ctx, md, &mdlen) == 1;
    EVP_MD_CTX_free(ctx);
    fclose(f);
    if (!ok)
        return ATTN_E_IO;
    to_hex(md, mdlen, hex);
    if (bytes != NULL)
        *bytes = total;
    return 0;
}

int attn_elf_section_sha256(const char *path, const char *section, char hex[ATTN_SHA256_HEX],
                            uint64_t *bytes)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return ATTN_E_IO;
    Elf64_Ehdr eh;
    int rv = ATTN_E_MISSING;
    Elf64_Shdr *sh = NULL;
    char *names = NULL;
    unsigned char *data = NULL;
    if (fread(&eh, sizeof eh, 1, f) != 1 || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shentsize != sizeof(Elf64_Shdr) ||
        eh.e_shnum == 0 || eh.e_shstrndx >= eh.e_shnum) {
        rv = ATTN_E_PROTOCOL;
        goto out;
    }
    sh = calloc(eh.e_shnum, sizeof *sh);
    if (sh == NULL || fseek(f, (long)eh.e_shoff, SEEK_SET) != 0 ||
        fread(sh, sizeof *sh, eh.e_shnum, f) != eh.e_shnum) {
        rv = ATTN_E_IO;
        goto out;
    }
    const Elf64_Shdr *strs = &sh[eh.e_shstrndx];
    names = malloc(strs->sh_size + 1);
    if (names == NULL || fseek(f, (long)strs->sh_offset, SEEK_SET) != 0 ||
        fread(names, 1, strs->sh_size, f) != strs->sh_size) {
        rv = ATTN_E_IO;
        goto out;
    }
    names[strs->sh_size] = '\0';
    for (unsigned i = 0; i < eh.e_shnum; i++) {
        if (sh[i].sh_name >= strs->sh_size || strcmp(names + sh[i].sh_name, section) != 0)
            continue;
        if (sh[i].sh_type == SHT_NOBITS)
            break;
        data = malloc(sh[i].sh_size ? sh[i].sh_size : 1);
        if (data == NULL || fseek(f, (long)sh[i].sh_offset, SEEK_SET) != 0 ||
            fread(data, 1, sh[i].sh_size, f) != sh[i].sh_size) {
            rv = ATTN_E_IO;
            goto out;
        }
        rv = attn_key_sha256_bytes(data, sh[i].sh_size, hex);
        if (rv == 0 && bytes != NULL)
            *bytes = sh[i].sh_size;
        break;
    }
out:
    free(data);
    free(names);
    free(sh);
    fclose(f);
    return rv;
}

/* Every distinct file-backed shared object in /proc/self/maps (seed 0x0BD:
 * hash what the loader mapped, not what a package claims to contain). */
static void collect_objects(attn_artifact *a)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (f == NULL) {
        a->complete = false;
        return;
    }
    char line[512];
    while (fgets(line, sizeof line, f) != NULL) {
        char *path = strchr(line, '/');
        if (path == NULL)
            continue;
        path[strcspn(path, "\n")] = '\0';
        if (strstr(path, ".so") == NULL || strcmp(path, a->exe_path) == 0 ||
            strstr(path, " (deleted)") != NULL)
            continue;
        int seen = 0;
        for (uint32_t i = 0; i < a->num_objects && !seen; i++)
            seen = strcmp(a->objects[i].path, path) == 0;
        if (seen)
            continue;
        if (a->num_objects == ATTN_ARTIFACT_MAX_OBJECTS) {
            a->objects_truncated = true;
            a->complete = false;
            continue;
        }
        attn_loaded_object *o = &a->objects[a->num_objects++];
        snprintf(o->path, sizeof o->path, "%s", path);
        if (attn_file_sha256(o->path, o->sha256, &o->bytes) != 0) {
            o->sha256[0] = '\0';
            a->complete = false;
        }
    }
    fclose(f);
}

/* Content address of the loader map: sha256 over "path sha256\n" lines in map order. */
static int loader_map_digest(attn_artifact *a)
{
    size_t cap = (size_t)a->num_objects * (sizeof a->objects[0].path + ATTN_SHA256_HEX + 2) + 1;
    char *buf = malloc(cap);
    if (buf == NULL)
        return ATTN_E_NOMEM;
    size_t o = 0;
    buf[0] = '\0';
    for (uint32_t i = 0; i < a->num_objects; i++) {
        int w = snprintf(buf + o, cap - o, "%s %s\n", a->objects[i].path, a->objects[i].sha256);
        o += w > 0 ? (size_t)w : 0;
    }
    int rv = attn_key_sha256_bytes(buf, o, a->loader_map_sha256);
    free(buf);
    return rv;
}

static void collect_device(attn_artifact *a)
{
    int ndev = 0;
    if (!attn_cuda_available(&ndev, a->device_why, sizeof a->device_why) || ndev <= 0) {
        a->has_device = false;
        if (a->device_why[0] == '\0')
            snprintf(a->device_why, sizeof a->device_why, "no CUDA device");
        return;
    }
    attn_cuda_device_info info;
    attn_error_detail err;
    if (attn_cuda_device_info_get(0, &info, &err) != 0) {
        snprintf(a->device_why, sizeof a->device_why, "%s", err.message);
        return;
    }
    a->has_device = true;
    snprintf(a->device_name, sizeof a->device_name, "%s", info.name);
    a->cc_major = info.cc_major;
    a->cc_minor = info.cc_minor;
    a->sm_count = info.sm_count;
    a->device_memory = info.total_mem;
    a->driver_version = info.driver_version;
    a->runtime_version = info.runtime_version;
}

/* One canonical key over every identity field; its digest names the artifact. */
static int identity_digest(attn_artifact *a)
{
    attn_key k;
    int rv = 0;
    attn_key_init(&k);
#define TRY(call)                                                                                  \
    do {                                                                                           \
        if (rv == 0)                                                                               \
            rv = (call);                                                                           \
    } while (0)
    char flags_sha[ATTN_SHA256_HEX];
    TRY(attn_key_sha256_bytes(a->build_flags, strlen(a->build_flags), flags_sha));
    TRY(attn_key_set_str(&k, "build_id", a->build_id));
    TRY(attn_key_set_str(&k, "build_flags_sha256", flags_sha));
    char cc_sha[ATTN_SHA256_HEX];
    TRY(attn_key_sha256_bytes(a->cc_version, strlen(a->cc_version), cc_sha));
    TRY(attn_key_set_str(&k, "cc_version_sha256", cc_sha));
    TRY(attn_key_set_str(&k, "nvcc_version", a->nvcc_version));
    TRY(attn_key_set_str(&k, "exe_sha256", a->exe_sha256));
    TRY(attn_key_set_str(&k, "loader_map_sha256", a->loader_map_sha256));
    TRY(attn_key_set_str(&k, "kernel_image_sha256", a->kernel_image_sha256));
    TRY(attn_key_set_str(&k, "device_name", a->has_device ? a->device_name : "none"));
    TRY(attn_key_set_int(&k, "compute_capability", a->cc_major * 10 + a->cc_minor));
    TRY(attn_key_set_int(&k, "sm_count", a->sm_count));
    TRY(attn_key_set_int(&k, "device_memory", (int64_t)a->device_memory));
    TRY(attn_key_set_int(&k, "driver_version", a->driver_version));
    TRY(attn_key_set_int(&k, "runtime_version", a->runtime_version));
#undef TRY
    if (rv == 0)
        rv = attn_key_sha256(&k, a->sha256);
    attn_key_fini(&k);
    return rv;
}

int attn_artifact_collect(attn_artifact *a, attn_error_detail *d)
{
    memset(a, 0, sizeof *a);
    a->complete = true;
    snprintf(a->build_id, sizeof a->build_id, "%s", ARTIFACT_BUILD_ID);
    snprintf(a->build_flags, sizeof a->build_flags, "%s", ATTN_BUILD_FLAGS);
#ifdef __VERSION__
    snprintf(a->cc_version, sizeof a->cc_version, "%s", __VERSION__);
#endif
#ifdef ATTN_WITH_CUDA
    snprintf(a->nvcc_version, sizeof a->nvcc_version, "%s", attn_cuda_nvcc_version());
#endif
    ssize_t n = readlink("/proc/self/exe", a->exe_path, sizeof a->exe_path - 1);
    if (n <= 0)
        return attn_error_set(d, ATTN_E_IO, "artifact.exe", "cannot read /proc/self/exe");
    a->exe_path[n] = '\0';
    if (attn_file_sha256("/proc/self/exe", a->exe_sha256, NULL) != 0) {
        a->complete = false;
        a->exe_sha256[0] = '\0';
    }
    /* seed 0x0BA: the kernel image actually embedded in this binary */
    if (attn_elf_section_sha256("/proc/self/exe", ".nv_fatbin", a->kernel_image_sha256,
                                &a->kernel_image_bytes) != 0)
        a->kernel_image_sha256[0] = '\0';
    collect_objects(a);
    int rv = loader_map_digest(a);
    if (rv != 0)
        return attn_error_set(d, rv, "artifact", "cannot hash the loader map");
    collect_device(a);
    rv = identity_digest(a);
    if (rv != 0)
        return attn_error_set(d, rv, "artifact", "cannot hash the artifact identity");
    return 0;
}

static attn_artifact g_artifact;
static pthread_once_t g_artifact_once = PTHREAD_ONCE_INIT;

static void artifact_once(void)
{
    if (attn_artifact_collect(&g_artifact, NULL) != 0)
        g_artifact.sha256[0] = '\0';
}

const attn_artifact *attn_artifact_get(void)
{
    pthread_once(&g_artifact_once, artifact_once);
    return &g_artifact;
}

bool attn_artifact_source_identified(const attn_artifact *a)
{
    return a->build_id[0] != '\0' && strcmp(a->build_id, "unknown") != 0;
}

json_t *attn_artifact_to_json(const attn_artifact *a)
{
    json_t *objs = json_array();
    for (uint32_t i = 0; objs != NULL && i < a->num_objects; i++)
        json_array_append_new(objs, json_pack("{s:s, s:s, s:I}", "path", a->objects[i].path,
                                              "sha256", a->objects[i].sha256, "bytes",
                                              (json_int_t)a->objects[i].bytes));
    json_t *dev =
        a->has_device
            ? json_pack("{s:s, s:i, s:i, s:I, s:i, s:i}", "name", a->device_name,
                        "compute_capability", a->cc_major * 10 + a->cc_minor, "sm_count",
                        a->sm_count, "memory", (json_int_t)a->device_memory, "driver_version",
                        a->driver_version, "runtime_version", a->runtime_version)
            : json_pack("{s:n, s:s}", "name", "why", a->device_why);
    if (objs == NULL || dev == NULL) {
        json_decref(objs);
        json_decref(dev);
        return NULL;
    }
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:o, s:b, s:s, s:s, s:I, s:o, s:b}",
                     "sha256", a->sha256, "build_id", a->build_id, "build_flags", a->build_flags,
                     "cc_version", a->cc_version, "nvcc_version", a->nvcc_version, "exe",
                     a->exe_path, "exe_sha256", a->exe_sha256, "loaded_objects", objs,
                     "loaded_objects_truncated", a->objects_truncated, "loader_map_sha256",
                     a->loader_map_sha256, "kernel_image_sha256", a->kernel_image_sha256,
                     "kernel_image_bytes", (json_int_t)a->kernel_image_bytes, "device", dev,
                     "complete", a->complete);
}

static int pk_str(msgpack_packer *pk, const char *s)
{
    size_t n = strlen(s);
    return msgpack_pack_str(pk, n) | msgpack_pack_str_body(pk, s, n);
}

static int pk_kv(msgpack_packer *pk, const char *k, const char *v)
{
    return pk_str(pk, k) | pk_str(pk, v);
}

int attn_artifact_pack(const attn_artifact *a, msgpack_packer *pk)
{
    int rv = msgpack_pack_map(pk, 14);
    rv |= pk_kv(pk, "sha256", a->sha256) | pk_kv(pk, "build_id", a->build_id);
    rv |= pk_kv(pk, "build_flags", a->build_flags) | pk_kv(pk, "cc_version", a->cc_version);
    rv |= pk_kv(pk, "nvcc_version", a->nvcc_version) | pk_kv(pk, "exe", a->exe_path);
    rv |= pk_kv(pk, "exe_sha256", a->exe_sha256);
    rv |= pk_str(pk, "loaded_objects") | msgpack_pack_array(pk, a->num_objects);
    for (uint32_t i = 0; i < a->num_objects; i++) {
        rv |= msgpack_pack_map(pk, 3) | pk_kv(pk, "path", a->objects[i].path);
        rv |= pk_kv(pk, "sha256", a->objects[i].sha256) | pk_str(pk, "bytes") |
              msgpack_pack_uint64(pk, a->objects[i].bytes);
    }
    rv |= pk_str(pk, "loaded_objects_truncated") |
          (a->objects_truncated ? msgpack_pack_true(pk) : msgpack_pack_false(pk));
    rv |= pk_kv(pk, "loader_map_sha256", a->loader_map_sha256);
    rv |= pk_kv(pk, "kernel_image_sha256", a->kernel_image_sha256);
    rv |= pk_str(pk, "kernel_image_bytes") | msgpack_pack_uint64(pk, a->kernel_image_bytes);
    rv |= pk_str(pk, "device");
    if (a->has_device) {
        rv |= msgpack_pack_map(pk, 6) | pk_kv(pk, "name", a->device_name);
        rv |=
            pk_str(pk, "compute_capability") | msgpack_pack_int(pk, a->cc_major * 10 + a->cc_minor);
        rv |= pk_str(pk, "sm_count") | msgpack_pack_int(pk, a->sm_count);
        rv |= pk_str(pk, "memory") | msgpack_pack_uint64(pk, a->device_memory);
        rv |= pk_str(pk, "driver_version") | msgpack_pack_int(pk, a->driver_version);
        rv |= pk_str(pk, "runtime_version") | msgpack_pack_int(pk, a->runtime_version);
    } else {
        rv |= msgpack_pack_map(pk, 2) | pk_str(pk, "name") | msgpack_pack_nil(pk);
        rv |= pk_kv(pk, "why", a->device_why);
    }
    rv |= pk_str(pk, "complete") | (a->complete ? msgpack_pack_true(pk) : msgpack_pack_false(pk));
    return rv != 0 ? ATTN_E_NOMEM : 0;
}

/* seed 0x0BA, 0x0BD, 0x0BG, 0x0AH: loaded-artifact identity, fp64 verification
 * and the evidence ladder of a CPU-only run, with the real CPU and CUDA backends. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <openssl/evp.h>

#include "daemon/artifact.h"
#include "daemon/verify.h"
#include "kernels/common/dtype.h"
#include "engines/cpu/engine.h"
#include "engines/cuda/cuda_engine.h"
#include "engines/cuda/cupti_trace.h"
#include "planner/diag.h"
#include "planner/registry.h"
#include "planner/diag_encode.h"
#include "tests/lib/batch_call.h"
#include "tests/lib/random_batch.h"

/* SHA-256 of a whole file, computed here independently of the module. */
static void sha_of(const char *path, char hex[65])
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    unsigned char md[32], buf[4096];
    unsigned len = 0;
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    EVP_DigestInit_ex(c, EVP_sha256(), NULL);
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        EVP_DigestUpdate(c, buf, n);
    EVP_DigestFinal_ex(c, md, &len);
    EVP_MD_CTX_free(c);
    fclose(f);
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

static void test_artifact_identity(void **state)
{
    (void)state;
    attn_artifact *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    attn_error_detail err;
    assert_int_equal(attn_artifact_collect(a, &err), 0);
    char hex[65];
    sha_of("/proc/self/exe", hex);
    assert_string_equal(a->exe_sha256, hex);
    assert_true(a->complete);
    assert_int_equal(strlen(a->sha256), 64);
    assert_int_equal(strlen(a->loader_map_sha256), 64);
    assert_true(a->cc_version[0] != '\0');
    /* libcrypto is mapped (this test links it dynamically) and hashed correctly */
    int found = 0;
    for (uint32_t i = 0; i < a->num_objects; i++) {
        assert_int_equal(strlen(a->objects[i].sha256), 64);
        if (strstr(a->objects[i].path, "libcrypto") != NULL) {
            sha_of(a->objects[i].path, hex);
            assert_string_equal(a->objects[i].sha256, hex);
            found = 1;
        }
    }
    assert_true(found);
#ifdef ATTN_WITH_CUDA
    assert_true(a->nvcc_version[0] != '\0');
#else
    assert_string_equal(a->nvcc_version, "");
    assert_string_equal(a->kernel_image_sha256, ""); /* no .nv_fatbin in a CPU build */
    assert_false(a->has_device);
    assert_true(a->device_why[0] != '\0');
#endif
    /* the identity is stable within the process */
    assert_int_equal(attn_artifact_collect(b, &err), 0);
    assert_string_equal(a->sha256, b->sha256);
    assert_string_equal(attn_artifact_get()->sha256, a->sha256);
    /* ELF sections: .text exists, a made-up one does not */
    uint64_t bytes = 0;
    assert_int_equal(attn_elf_section_sha256("/proc/self/exe", ".text", hex, &bytes), 0);
    assert_true(bytes > 0);
    assert_int_equal(attn_elf_section_sha256("/proc/self/exe", ".no_such", hex, NULL),
                     ATTN_E_MISSING);
    assert_int_equal(attn_file_sha256("/nonexistent/file", hex, NULL), ATTN_E_IO);
    /* both encodings carry the digest */
    json_t *js = attn_artifact_to_json(a);
    assert_non_null(js);
    assert_string_equal(json_string_value(json_object_get(js, "sha256")), a->sha256);
    assert_int_equal(json_array_size(json_object_get(js, "loaded_objects")), a->num_objects);
    json_decref(js);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    assert_int_equal(attn_artifact_pack(a, &pk), 0);
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    size_t off = 0;
    assert_int_equal(msgpack_unpack_next(&up, sb.data, sb.size, &off), MSGPACK_UNPACK_SUCCESS);
    assert_int_equal(off, sb.size);
    assert_int_equal(up.data.via.map.size, 14);
    msgpack_unpacked_destroy(&up);
    msgpack_sbuffer_destroy(&sb);
    free(a);
    free(b);
}

/* Run the real CPU engine (fp32 accumulation) as the candidate. */
static void run_candidate(attn_rb *rb, void *o, float *lse, bool commit)
{
    attn_cpu_call c;
    attn_rb_cpu_call(rb, NULL, NULL, o, lse, commit, &c);
    attn_cpu_options opt = {.num_threads = 2, .acc = ATTN_CPU_ACC_F32};
    attn_error_detail err;
    int rv = attn_cpu_attend(&c, &opt, &err);
    if (rv != 0)
        fail_msg("candidate run: %s %s", err.field, err.message);
}

static attn_verify_call vcall(attn_rb *rb, const void *o, const float *lse, bool committed)
{
    attn_verify_call v = {&rb->m,    &rb->g,    rb->k, rb->v, rb->q,
                          rb->k_new, rb->v_new, o,     lse,   committed};
    return v;
}

/* seed 0x0BG: pass at the declared tolerance, fail on a corrupted element,
 * an LSE policy violation, or a wrong committed row. */
static void test_verify_against_fp64(void **state)
{
    (void)state;
    static const attn_dtype dts[2] = {ATTN_FP32, ATTN_BF16};
    for (int k = 0; k < 2; k++) {
        attn_rb rb;
        attn_rb_spec spec = {0};
        spec.kv_dtype = spec.q_dtype = dts[k];
        spec.num_requests = 5;
        spec.max_cache_len = 60;
        assert_int_equal(attn_rb_make(&rb, &spec, 11 + k), 0);
        size_t es = attn_dtype_size(dts[k]);
        void *o = calloc(rb.o_elems, es);
        float *lse = calloc(rb.lse_elems, sizeof(float));
        run_candidate(&rb, o, lse, true);
        attn_verify_result r;
        attn_verify_call v = vcall(&rb, o, lse, true);
        assert_int_equal(attn_verify_run(&v, &r, NULL), 0);
        if (!r.passed)
            fail_msg("dtype %d: max_rel %g rel_l2 %g lse %g bad %llu cache %llu", k, r.max_rel,
                     r.rel_l2, r.lse_max_abs, (unsigned long long)r.nonfinite_mismatches,
                     (unsigned long long)r.cache_mismatches);
        assert_true(r.done && r.cache_checked);
        assert_int_equal(r.cache_mismatches, 0);
        assert_string_equal(r.metric, k == 0 ? "max_rel" : "rel_l2");
        assert_true(r.max_abs > 0 || k == 0); /* bf16 output rounding is visible */
        assert_true(r.max_rel <= (k == 0 ? 1e-5 : 1e-2));

        /* a large error in one element fails */
        float bump = attn_load_f32(o, dts[k], 3) + 0.5f;
        attn_store_f32(o, dts[k], 3, bump);
        assert_int_equal(attn_verify_run(&v, &r, NULL), 0);
        assert_false(r.passed);
        assert_true(r.max_abs >= 0.4);
        attn_store_f32(o, dts[k], 3, bump - 0.5f);

        /* an LSE that claims -inf for a visible row violates the policy */
        float keep = lse[0];
        lse[0] = -INFINITY;
        assert_int_equal(attn_verify_run(&v, &r, NULL), 0);
        assert_false(r.passed);
        assert_true(r.nonfinite_mismatches >= 1);
        lse[0] = keep;

        /* a wrong committed row fails even when O and LSE agree */
        attn_rb_free(&rb);
        assert_int_equal(attn_rb_make(&rb, &spec, 11 + k), 0);
        run_candidate(&rb, o, lse, true);
        attn_kv_addr a;
        attn_kv_addr_from_table(&a, &rb.m.kv, rb.m.num_requests, &rb.g);
        int64_t page = 0, slot = 0;
        assert_true(attn_kv_addr_locate(&a, 0, rb.m.requests[0].cache_len, &page, &slot));
        unsigned char *kb =
            (unsigned char *)rb.k + attn_kv_addr_elem(&a, page, slot, 0, 0, rb.g.head_dim_qk) * es;
        kb[0] ^= 0x40;
        v = vcall(&rb, o, lse, true);
        assert_int_equal(attn_verify_run(&v, &r, NULL), 0);
        assert_false(r.passed);
        assert_int_equal(r.cache_mismatches, 1);
        free(o);
        free(lse);
        attn_rb_free(&rb);
    }
}

/* The daemon's flow on a CPU-only machine with the real backends: every
 * reply reaches level 4, and 6 with verify (given a build id). */
static void test_cpu_only_evidence(void **state)
{
    (void)state;
    attn_registry reg;
    attn_error_detail err;
    attn_engine *cpu = NULL;
    attn_registry_init(&reg);
    assert_int_equal(attn_engine_create(attn_cpu_engine_ops(), NULL, &cpu, &err), 0);
    assert_int_equal(attn_registry_add(&reg, cpu, &err), 0);
    /* no device here: the daemon declares the CUDA engine with its reason */
    assert_int_equal(attn_registry_declare(&reg, "cuda_decode", ATTN_PLATFORM_CUDA,
                                           1u << ATTN_PHASE_DECODE, 10, "no CUDA device", &err),
                     0);
    attn_rb rb;
    attn_rb_spec spec = {0};
    spec.kv_dtype = spec.q_dtype = ATTN_FP16;
    assert_int_equal(attn_rb_make(&rb, &spec, 5), 0);
    snprintf(rb.g.device, sizeof rb.g.device, "cpu");
    attn_selection *sel = calloc(1, sizeof *sel);
    assert_int_equal(attn_registry_select(&reg, &rb.m, &rb.g, sel, &err), 0);
    assert_string_equal(sel->candidates[sel->selected].name, "cpu_ref");
    /* forcing the CUDA engine fails closed with its reasons */
    attn_manifest forced = rb.m;
    snprintf(forced.policy.backend, sizeof forced.policy.backend, "cuda_decode");
    attn_selection *fs = calloc(1, sizeof *fs);
    assert_int_equal(attn_registry_select(&reg, &forced, &rb.g, fs, &err), ATTN_E_BACKEND_REJECTED);
    free(fs);

    attn_engine *be = sel->engine;
    assert_ptr_equal(be, cpu);
    attn_engine_plan *plan = NULL;
    assert_int_equal(attn_engine_plan_new(be, &rb.m, &rb.g, &plan, &err), 0);
    void *kl[1] = {rb.k}, *vl[1] = {rb.v};
    attn_pool_view pv = {&rb.g, ATTN_PLATFORM_CPU, -1, kl, vl};
    void *o = calloc(rb.o_elems, 2);
    float *lse = calloc(rb.lse_elems, sizeof(float));
    attn_run_io args = {.pool = &pv,
                        .layer = 0,
                        .q = rb.q,
                        .k_new = rb.k_new,
                        .v_new = rb.v_new,
                        .o = o,
                        .lse = lse,
                        .commit = true};
    attn_exec_report rep;
    assert_int_equal(attn_engine_run(be, plan, &args, &rep, &err), 0);

    attn_key_env env = attn_engine_key_env(&plan->env);
    assert_string_equal(env.device_type, "cpu");
    assert_string_equal(env.workspace_device, "cpu");
    attn_key key;
    attn_key_init(&key);
    assert_int_equal(attn_call_key_build(&rb.m, &rb.g, &env, &key), 0);
    attn_diag *dg = calloc(1, sizeof *dg);
    assert_int_equal(attn_diag_init(dg, &key), 0);
    attn_diag_set_selection(dg, sel);
    attn_diag_set_schedule(dg, &plan->split, plan->schedule, rb.m.policy.state_abi);
    /* the host engine is its own observer of what it executed */
    attn_diag_set_report(dg, &rep, attn_kernel_source_for(be->ops->platform, &rep, false));
    const attn_artifact *art = attn_artifact_get();
    bool source = attn_artifact_source_identified(art);
    attn_diag_finish(dg, art->sha256, source);
    if (!source) {
        /* the build did not pass -DATTN_BUILD_ID: the ladder must say so */
        assert_int_equal(dg->evidence_level, 0);
        assert_non_null(strstr(dg->evidence_cap, "build id"));
        print_message("note: built without ATTN_BUILD_ID; checking the ladder as if it were\n");
        attn_diag_finish(dg, art->sha256, true);
    }
    assert_true(dg->evidence_level >= 4);
    assert_int_equal(dg->evidence_level, 5); /* host-recorded kernels, no verify yet */
    assert_non_null(strstr(dg->evidence_cap, "verify: true"));

    attn_verify_call v = vcall(&rb, o, lse, true);
    attn_verify_result vr;
    assert_int_equal(attn_verify_run(&v, &vr, NULL), 0);
    assert_true(vr.passed);
    attn_diag_set_verify(dg, &vr);
    attn_diag_finish(dg, art->sha256, true);
    assert_int_equal(dg->evidence_level, 6);
    assert_string_equal(dg->evidence_cap, "");
    json_t *js = attn_diag_to_json(dg);
    assert_int_equal(json_integer_value(json_object_get(js, "evidence_level")), 6);
    assert_string_equal(json_string_value(json_object_get(js, "artifact_sha256")), art->sha256);
    json_decref(js);

    /* CUDA trace is unavailable here and says why */
    char why[128];
    if (!attn_cupti_available(why, sizeof why))
        assert_true(why[0] != '\0');
    free(dg);
    attn_key_fini(&key);
    attn_engine_plan_release(plan);
    attn_engine_destroy(cpu);
    free(o);
    free(lse);
    free(sel);
    attn_rb_free(&rb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_artifact_identity),
        cmocka_unit_test(test_verify_against_fp64),
        cmocka_unit_test(test_cpu_only_evidence),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

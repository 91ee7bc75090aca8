/* The names module (attn/names.h): every entry of every list round-trips
 * through its wire name, unknown names are refused with the field and the
 * list's error code, and the facts an entry carries (dtype size, phase
 * letter) come from the list.  The loops walk the lists themselves, so an
 * entry added to a list is tested without touching this file. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "attn/client.h"
#include "attn/names.h"

/* One list: every entry's name parses back to the entry, names are unique,
 * an unknown name and NULL are refused with the field named and *out
 * untouched, a value off the list is named "?". */
#define CHECK_LIST(type, list, ecode)                                                              \
    do {                                                                                           \
        static const struct {                                                                      \
            type value;                                                                            \
            const char *name;                                                                      \
        } entries[] = {list(ENTRY)};                                                               \
        size_t n = sizeof entries / sizeof entries[0];                                             \
        for (size_t i = 0; i < n; i++) {                                                           \
            type back = (type)0;                                                                   \
            attn_error_detail err = {0};                                                           \
            assert_string_equal(type##_name(entries[i].value), entries[i].name);                   \
            assert_int_equal(type##_parse(entries[i].name, "f", &back, &err), 0);                  \
            assert_int_equal(back, entries[i].value);                                              \
            for (size_t j = 0; j < i; j++)                                                         \
                assert_string_not_equal(entries[j].name, entries[i].name);                         \
        }                                                                                          \
        type keep = entries[0].value;                                                              \
        attn_error_detail err = {0};                                                               \
        assert_int_equal(type##_parse("no_such_name", "policy.thing", &keep, &err), (ecode));      \
        assert_int_equal(err.code, (ecode));                                                       \
        assert_string_equal(err.field, "policy.thing");                                            \
        assert_non_null(strstr(err.message, "no_such_name"));                                      \
        assert_non_null(strstr(err.message, entries[n - 1].name)); /* lists what is allowed */     \
        assert_int_equal(keep, entries[0].value);                                                  \
        assert_int_equal(type##_parse(NULL, "x.y", &keep, &err), (ecode));                         \
        assert_string_equal(err.field, "x.y");                                                     \
        assert_int_equal(type##_parse("", "x.y", &keep, NULL), (ecode)); /* err may be NULL */     \
        assert_string_equal(type##_name((type)97), "?");                                           \
        checked++;                                                                                 \
    } while (0);

#define ENTRY(e, v, s, ...) {(e), (s)},

static void test_every_list_round_trips(void **state)
{
    (void)state;
    int checked = 0;
    ATTN_NAMED_ENUMS(CHECK_LIST)
    assert_int_equal(checked, 12); /* the lists of attn/names.h */
}

static void test_parse_is_exact(void **state)
{
    (void)state;
    attn_dtype dt = ATTN_FP32;
    attn_layout lay = ATTN_NHD;
    /* no case folding, no prefixes: the wire names are exact */
    assert_int_equal(attn_dtype_parse("BF16", "kv_dtype", &dt, NULL), ATTN_E_DTYPE);
    assert_int_equal(attn_dtype_parse("bf1", "kv_dtype", &dt, NULL), ATTN_E_DTYPE);
    assert_int_equal(attn_dtype_parse("bf16 ", "kv_dtype", &dt, NULL), ATTN_E_DTYPE);
    assert_int_equal(attn_layout_parse("nhd", "layout", &lay, NULL), ATTN_E_RANGE);
    assert_int_equal(dt, ATTN_FP32);
    /* the unset polarity has a name but no wire name parses to it */
    attn_mask_polarity pol = ATTN_POLARITY_TRUE_MEANS_MASKED;
    assert_string_equal(attn_mask_polarity_name(ATTN_POLARITY_UNSET), "unset");
    assert_int_equal(attn_mask_polarity_parse("unset", "mask.polarity", &pol, NULL),
                     ATTN_E_MASK_POLARITY);
    assert_int_equal(pol, ATTN_POLARITY_TRUE_MEANS_MASKED);
}

static void test_ops(void **state)
{
    (void)state;
    static const struct {
        attn_op value;
        const char *name;
    } entries[] = {ATTN_OPS(ENTRY)};
    size_t n = sizeof entries / sizeof entries[0];
    assert_int_equal(n, ATTN_OP_COUNT);
    for (size_t i = 0; i < n; i++) {
        attn_op back = ATTN_OP_COUNT;
        assert_int_equal(entries[i].value, (attn_op)i); /* ATTN_OP_COUNT follows the last */
        assert_string_equal(attn_op_name(entries[i].value), entries[i].name);
        assert_int_equal(attn_op_from_name(entries[i].name, &back), 1);
        assert_int_equal(back, entries[i].value);
    }
    attn_op op = ATTN_OP_RUN;
    assert_int_equal(attn_op_from_name("runn", &op), 0);
    assert_int_equal(attn_op_from_name(NULL, &op), 0);
    assert_int_equal(op, ATTN_OP_RUN);
    assert_string_equal(attn_op_name(ATTN_OP_COUNT), "?");
}

static void test_counts_and_facts(void **state)
{
    (void)state;
    assert_int_equal(ATTN_MASK_KIND_COUNT, 6);
    assert_int_equal(ATTN_PHASE_COUNT, 3);
    assert_int_equal(ATTN_DTYPE_COUNT, 3);
    assert_int_equal(attn_dtype_size(ATTN_FP32), 4);
    assert_int_equal(attn_dtype_size(ATTN_FP16), 2);
    assert_int_equal(attn_dtype_size(ATTN_BF16), 2);
    assert_int_equal(attn_dtype_size((attn_dtype)9), 0);
    /* phase letters: unique, and each letter names its phase back */
#define LETTER_CHECK(e, v, s, letter)                                                              \
    do {                                                                                           \
        attn_phase p;                                                                              \
        assert_int_equal(attn_phase_letter(e), (letter));                                          \
        assert_int_equal(attn_phase_of_letter((letter), &p), 1);                                   \
        assert_int_equal(p, (e));                                                                  \
    } while (0);
    ATTN_PHASES(LETTER_CHECK)
    attn_phase p = ATTN_PHASE_DECODE;
    assert_int_equal(attn_phase_of_letter('X', &p), 0);
    assert_int_equal(p, ATTN_PHASE_DECODE);
    assert_int_equal(attn_phase_letter((attn_phase)7), '?');
}

static void test_sm_scale_default(void **state)
{
    (void)state;
    attn_manifest m;
    attn_pool_geometry g;
    memset(&m, 0, sizeof m);
    memset(&g, 0, sizeof g);
    g.head_dim_qk = 64;
    assert_true(attn_manifest_sm_scale(&m, &g) == 0.125f);
    g.head_dim_qk = 128; /* not exact in float: the key keeps the double */
    assert_true(attn_sm_scale_default(128) == 1.0 / sqrt(128.0));
    assert_true(attn_manifest_sm_scale(&m, &g) == (float)(1.0 / sqrt(128.0)));
    g.head_dim_qk = 0; /* unvalidated geometry: finite, not a division by zero */
    assert_true(attn_manifest_sm_scale(&m, &g) == 1.0f);
    m.has_sm_scale = true;
    m.sm_scale = 0.3f;
    assert_true(attn_manifest_sm_scale(&m, &g) == 0.3f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_list_round_trips),
        cmocka_unit_test(test_parse_is_exact),
        cmocka_unit_test(test_ops),
        cmocka_unit_test(test_counts_and_facts),
        cmocka_unit_test(test_sm_scale_default),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

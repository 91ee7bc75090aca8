/* The CUDA timeline's file (engines/cuda/timeline_file.h) on any machine:
 * several writers (one engine instance per device) append to one FILE
 * without truncating it or each other, every line whole and naming its pid
 * and device, also when they write at once; a path that cannot be opened
 * fails once, naming ATTN_CUDA_TIMELINE and the path, leaving nothing open
 * (test-asan checks the leak).  Before, each instance fopen()ed FILE "w"
 * (the second truncated the first's lines) and lines named no device. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "engines/cuda/timeline_file.h"

/* A fresh path in the temp dir, holding one line an older attnd wrote. */
static void temp_path(char *path, size_t n, const char *tag)
{
    const char *dir = getenv("TMPDIR");
    snprintf(path, n, "%s/attn-tl-%d-%s.jsonl", dir != NULL ? dir : "/tmp", (int)getpid(), tag);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"older\":true}\n", f);
    fclose(f);
}

/* Lines of `path` that come from device `device` of this process, each
 * checked to be one whole record. */
static int count_lines(const char *path, int device, int *total)
{
    char line[1024], want[64];
    int n = 0;
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    snprintf(want, sizeof want, "{\"pid\":%d,\"device\":%d,\"layer\":", (int)getpid(), device);
    *total = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        size_t len = strlen(line);
        (*total)++;
        assert_true(len > 2 && line[len - 1] == '\n' && line[len - 2] == '}');
        if (strncmp(line, want, strlen(want)) != 0)
            continue;
        assert_non_null(strstr(line, "\"wait_released\":"));
        assert_non_null(strstr(line, "\"kernels_end\":"));
        n++;
    }
    fclose(f);
    return n;
}

static void test_instances_append_to_one_file(void **state)
{
    (void)state;
    char path[256];
    attn_tl_file *a = NULL, *b = NULL;
    attn_error_detail err;
    temp_path(path, sizeof path, "two");
    assert_int_equal(attn_tl_file_open(path, 0, &a, &err), 0);
    assert_int_equal(attn_tl_file_open(path, 1, &b, &err), 0); /* truncated a's lines before */
    attn_tl_record r = {.layer = 3, .wait_value = 7, .signal_value = 8, .stamps = {10, 20, 30}};
    assert_int_equal(attn_tl_file_write(a, &r), 0);
    r.host_behind = true;
    assert_int_equal(attn_tl_file_write(b, &r), 0);
    assert_int_equal(attn_tl_file_write(a, &r), 0);
    attn_tl_file_close(a);
    attn_tl_file_close(b);
    int total = 0;
    assert_int_equal(count_lines(path, 0, &total), 2);
    assert_int_equal(count_lines(path, 1, &total), 1);
    assert_int_equal(total, 4); /* the older line stays */
    FILE *f = fopen(path, "r");
    char line[512];
    assert_non_null(fgets(line, sizeof line, f));
    assert_non_null(fgets(line, sizeof line, f));
    fclose(f);
    char want[256];
    snprintf(want, sizeof want,
             "{\"pid\":%d,\"device\":0,\"layer\":3,\"wait\":7,\"signal\":8,\"host_behind\":false,"
             "\"wait_released\":10,\"kernels_start\":20,\"kernels_end\":30}\n",
             (int)getpid());
    assert_string_equal(line, want);
    unlink(path);
}

typedef struct writer {
    attn_tl_file *f;
    int failures;
} writer;

static void *write_many(void *arg)
{
    writer *w = arg;
    attn_tl_record r = {.layer = 1, .wait_value = UINT64_MAX, .signal_value = UINT64_MAX};
    for (int i = 0; i < 500; i++) {
        r.stamps[0] = r.stamps[1] = r.stamps[2] = (uint64_t)i * 1000003u;
        w->failures += attn_tl_file_write(w->f, &r) != 0;
    }
    return NULL;
}

/* Two devices' instances complete runs at once: no line is torn. */
static void test_concurrent_writers_keep_lines_whole(void **state)
{
    (void)state;
    char path[256];
    attn_error_detail err;
    writer w[4];
    pthread_t t[4];
    temp_path(path, sizeof path, "many");
    for (int i = 0; i < 4; i++) {
        w[i].failures = 0;
        assert_int_equal(attn_tl_file_open(path, i % 2, &w[i].f, &err), 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, write_many, &w[i]);
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(w[i].failures, 0);
        attn_tl_file_close(w[i].f);
    }
    int total = 0;
    assert_int_equal(count_lines(path, 0, &total), 1000);
    assert_int_equal(count_lines(path, 1, &total), 1000);
    assert_int_equal(total, 2001);
    unlink(path);
}

static void test_open_failure_names_the_variable(void **state)
{
    (void)state;
    attn_tl_file *f = (attn_tl_file *)&f; /* overwritten with NULL */
    attn_error_detail err;
    memset(&err, 0, sizeof err);
    assert_int_equal(attn_tl_file_open("/nonexistent-attn-dir/tl.jsonl", 0, &f, &err), ATTN_E_IO);
    assert_null(f);
    assert_int_equal(err.code, ATTN_E_IO);
    assert_string_equal(err.field, "ATTN_CUDA_TIMELINE");
    assert_non_null(strstr(err.message, "/nonexistent-attn-dir/tl.jsonl"));
    attn_tl_file_close(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_instances_append_to_one_file),
        cmocka_unit_test(test_concurrent_writers_keep_lines_whole),
        cmocka_unit_test(test_open_failure_names_the_variable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

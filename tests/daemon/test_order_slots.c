/* daemon/order_slots: a connection's numbered requests come out strictly by
 * number, one at a time; duplicates and old numbers are refused; numbers
 * refused before the slot (E_BUSY) are stepped over; a gap older than the
 * timeout hands back the held items and uses their numbers up; a closed
 * connection's held items come back for cancelling; connections do not
 * wait on each other.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "daemon/order_slots.h"

static attnd_order_item item(uint32_t conn, uint64_t order, uint64_t ms)
{
    attnd_order_item it = {NULL, conn, order, ms};
    return it;
}

static uint64_t count(const attnd_order_item *l)
{
    uint64_t n = 0;
    for (; l != NULL; l = l->next)
        n++;
    return n;
}

static void test_in_number_order_one_at_a_time(void **state)
{
    attnd_order *o;
    attnd_order_item a = item(1, 3, 0), b = item(1, 1, 0), c = item(1, 2, 0);
    (void)state;
    assert_int_equal(attnd_order_create(&o), 0);
    assert_int_equal(attnd_order_offer(o, &a), ATTND_ORDER_HELD);
    assert_null(attnd_order_next(o)); /* 1 missing */
    assert_int_equal(attnd_order_offer(o, &b), ATTND_ORDER_HELD);
    assert_int_equal(attnd_order_offer(o, &c), ATTND_ORDER_HELD);
    assert_ptr_equal(attnd_order_next(o), &b);
    assert_null(attnd_order_next(o)); /* 1 still being handled */
    attnd_order_done(o, 1);
    assert_ptr_equal(attnd_order_next(o), &c);
    attnd_order_done(o, 1);
    assert_ptr_equal(attnd_order_next(o), &a);
    attnd_order_done(o, 1);
    assert_int_equal(attnd_order_held(o), 0);
    attnd_order_destroy(o);
}

static void test_duplicates_and_old_numbers(void **state)
{
    attnd_order *o;
    attnd_order_item a = item(1, 1, 0), d = item(1, 1, 0), h = item(1, 3, 0), h2 = item(1, 3, 0);
    (void)state;
    assert_int_equal(attnd_order_create(&o), 0);
    assert_int_equal(attnd_order_offer(o, &a), ATTND_ORDER_HELD);
    assert_ptr_equal(attnd_order_next(o), &a);
    assert_int_equal(attnd_order_offer(o, &d), ATTND_ORDER_OLD); /* being handled */
    attnd_order_done(o, 1);
    assert_int_equal(attnd_order_offer(o, &d), ATTND_ORDER_OLD); /* handled */
    assert_int_equal(attnd_order_offer(o, &h), ATTND_ORDER_HELD);
    assert_int_equal(attnd_order_offer(o, &h2), ATTND_ORDER_OLD); /* a duplicate held */
    attnd_order_destroy(o);
}

static void test_consumed_numbers_are_stepped_over(void **state)
{
    attnd_order *o;
    attnd_order_item a = item(1, 1, 0), c = item(1, 3, 0), dup = item(1, 2, 0);
    (void)state;
    assert_int_equal(attnd_order_create(&o), 0);
    attnd_order_consume(o, 1, 2);
    assert_int_equal(attnd_order_offer(o, &dup), ATTND_ORDER_OLD);
    assert_int_equal(attnd_order_offer(o, &c), ATTND_ORDER_HELD);
    assert_int_equal(attnd_order_offer(o, &a), ATTND_ORDER_HELD);
    assert_ptr_equal(attnd_order_next(o), &a);
    attnd_order_done(o, 1);
    assert_ptr_equal(attnd_order_next(o), &c); /* 2 was used up */
    attnd_order_destroy(o);
}

/* An E_BUSY refusal of a number that is held (a duplicate) does not take
 * the held run's turn away. */
static void test_busy_duplicate_keeps_the_held_run(void **state)
{
    attnd_order *o;
    attnd_order_item a = item(1, 1, 0), b = item(1, 2, 0);
    (void)state;
    assert_int_equal(attnd_order_create(&o), 0);
    assert_int_equal(attnd_order_offer(o, &b), ATTND_ORDER_HELD);
    attnd_order_consume(o, 1, 2);
    assert_int_equal(attnd_order_offer(o, &a), ATTND_ORDER_HELD);
    assert_ptr_equal(attnd_order_next(o), &a);
    attnd_order_done(o, 1);
    assert_ptr_equal(attnd_order_next(o), &b);
    attnd_order_destroy(o);
}

static void test_gap_timeout(void **state)
{
    attnd_order *o;
    attnd_order_item a = item(1, 2, 100), b = item(1, 3, 150), late = item(1, 1, 400),
                     next = item(1, 4, 400);
    (void)state;
    assert_int_equal(attnd_order_create(&o), 0);
    assert_int_equal(attnd_order_offer(o, &a), ATTND_ORDER_HELD);
    assert_int_equal(attnd_order_offer(o, &b), ATTND_ORDER_HELD);
    assert_null(attnd_order_expire(o, 399, 300)); /* the oldest waited 299 ms */
    attnd_order_item *l = attnd_order_expire(o, 400, 300);
    assert_ptr_equal(l, &a);
    assert_ptr_equal(l->next, &b);
    assert_null(b.next);
    assert_int_equal(attnd_order_held(o), 0);
    assert_int_equal(attnd_order_offer(o, &late), ATTND_ORDER_OLD); /* the gap is used up */
    assert_int_equal(attnd_order_offer(o, &next), ATTND_ORDER_HELD);
    assert_ptr_equal(attnd_order_next(o), &next);
    attnd_order_destroy(o);
}

static void test_no_timeout_while_handling(void **state)
{
    attnd_order *o;
    attnd_order_item a = item(1, 1, 0), b = item(1, 2, 0);
    (void)state;
    assert_int_equal(attnd_order_create(&o), 0);
    assert_int_equal(attnd_order_offer(o, &a), ATTND_ORDER_HELD);
    assert_int_equal(attnd_order_offer(o, &b), ATTND_ORDER_HELD);
    assert_ptr_equal(attnd_order_next(o), &a);
    /* 2 waits for 1's handler (a long synchronous run), not for a gap */
    assert_null(attnd_order_expire(o, 10000, 300));
    /* shutdown (timeout 0) takes every held item */
    assert_ptr_equal(attnd_order_expire(o, 0, 0), &b);
    attnd_order_destroy(o);
}

static void test_close_and_connections_apart(void **state)
{
    attnd_order *o;
    attnd_order_item a2 = item(1, 2, 0), a3 = item(1, 3, 0), b1 = item(2, 1, 0);
    (void)state;
    assert_int_equal(attnd_order_create(&o), 0);
    assert_int_equal(attnd_order_offer(o, &a2), ATTND_ORDER_HELD);
    assert_int_equal(attnd_order_offer(o, &a3), ATTND_ORDER_HELD);
    assert_int_equal(attnd_order_offer(o, &b1), ATTND_ORDER_HELD);
    assert_ptr_equal(attnd_order_next(o), &b1); /* connection 2 does not wait for 1's gap */
    attnd_order_item *l = attnd_order_conn_closed(o, 1);
    assert_int_equal(count(l), 2);
    assert_int_equal(attnd_order_held(o), 0);
    assert_null(attnd_order_conn_closed(o, 1));
    attnd_order_done(o, 2);
    attnd_order_destroy(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_in_number_order_one_at_a_time),
        cmocka_unit_test(test_duplicates_and_old_numbers),
        cmocka_unit_test(test_consumed_numbers_are_stepped_over),
        cmocka_unit_test(test_busy_duplicate_keeps_the_held_run),
        cmocka_unit_test(test_gap_timeout),
        cmocka_unit_test(test_no_timeout_while_handling),
        cmocka_unit_test(test_close_and_connections_apart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

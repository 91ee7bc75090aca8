/* The planner's functions on plan data.  The data itself (attn_split_plan,
 * attn_work_item) lives in kernels/common/plan.h so kernels can read it
 * without including the planner. */
#ifndef ATTN_PLANNER_PLAN_H
#define ATTN_PLANNER_PLAN_H

#include "kernels/common/plan.h"

/* Release the arrays of a plan (the struct itself is the caller's). */
void attn_split_plan_free(attn_split_plan *p);

#endif

/*
 * emit_prog.c — uses only the trainprof API (ranges, a domain range, start/end, a mark, a
 * timer); the NVTX emission test runs it with another NVTX tool attached.
 */
#include <stdio.h>

#include "trainprof.h"

int main(void) {
    tprof_range_push("api_push");
    tprof_range_pop();
    tprof_range_push_ex("mydom", "dom_push", 3);
    tprof_range_pop();
    uint64_t id = tprof_range_start("api_start");
    tprof_range_end(id);
    tprof_mark("api_mark");
    tprof_timers *t;
    if (tprof_timers_create(2, TPROF_TIMERS_MINMAX, &t) != TPROF_OK) return 1;
    tprof_timer *fwd = tprof_timer_get(t, "fwd", 1);
    tprof_timer_start(fwd, 0);
    tprof_timer_stop(fwd, 0);
    tprof_timers_destroy(t);
    printf("emit_prog done\n");
    return 0;
}

/*
 * cuda_events.h — CUDA driver events for GPU-accurate Timers (cuda_events.c).
 */
#ifndef TPROF_CUDA_EVENTS_H
#define TPROF_CUDA_EVENTS_H

/* Nonzero when libcuda's event calls could be loaded. */
int tprof__cuda_available(void);
/* Nonzero when the calling thread has a current CUDA context (events need one). */
int tprof__cuda_has_context(void);
/* A new event recorded on `stream` (NULL = the legacy default stream), or NULL. */
void *tprof__cuda_event_record(void *stream);
/* Seconds between two recorded events; waits for `end` to complete. -1 on failure. */
double tprof__cuda_elapsed_s(void *start, void *end);
void tprof__cuda_event_destroy(void *ev);
/* cuCtxSynchronize on the current context; 0 on success. */
int tprof__cuda_synchronize(void);

#endif

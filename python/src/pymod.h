/*
 * pymod.h — what the files of the `_trainprof` extension module share (docs/design.md §2):
 * the module's exception and helpers (_trainprof.c), the collectives hook and its kept
 * exception (collectives.c), the types (ranges.c, timers.c, energy.c) and the functions of
 * the module's method table (_trainprof.c), each defined in the file of its part.
 *
 * Everything declared here is hidden (not exported from the module, whatever the build's
 * flags): only PyInit__trainprof is, so no name here can bind to, or be bound by, a symbol
 * of the profiled program or of another extension. All of it is called with the GIL held
 * (the collectives callbacks take it themselves).
 */
#ifndef TPROF_PYMOD_H
#define TPROF_PYMOD_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

#include <trainprof.h>

#if PY_VERSION_HEX >= 0x030D0000
#define TP_FINALIZING() Py_IsFinalizing()
#else
#define TP_FINALIZING() _Py_IsFinalizing()
#endif

#define TP_LIKELY(x) __builtin_expect(!!(x), 1)

/* A method table entry for a fastcall-with-keywords function (the cast through void(*)(void)
 * keeps -Wcast-function-type quiet, as CPython's own modules do). */
#define TP_FASTKW(f) ((PyCFunction)(void (*)(void))(f))

#pragma GCC visibility push(hidden)

/* _trainprof.c: the module's exception and argument helpers */
extern PyObject *g_error;          /* trainprof.Error */
extern PyObject *g_update_wrapper; /* functools.update_wrapper */
/* Raises trainprof.Error for a library code (rc) with .code set; returns NULL. */
PyObject *raise_code(int rc, const char *what);
/* A str argument's UTF-8 (cached inside the str by CPython; valid while the str lives). */
const char *utf8_of(PyObject *o, const char *what);
int as_u64(PyObject *o, uint64_t *out);

/* collectives.c: the hook of Python callables, and the exception a callback raised */
extern PyObject *g_hook_provider; /* callable registering a hook on demand, or NULL */
extern PyObject *g_pending_exc;
void pending_save(void);
int pending_raise(void);
void pending_clear(void);
int ensure_hook(void);
int hook_is_ours(const tprof_collectives *c);
void pyhook_release(void);
PyObject *collective_result(int rc, const char *what);

/* the types: ranges.c (range, the decorator's wrapper, step), timers.c, energy.c */
extern PyTypeObject RangeType, WrappedType, StepType, TimerType, TimersType, EnergyType;
/* timers.c: names, None or a sequence of str -> a malloc'ed array of UTF-8 pointers (valid
 * while *keep lives); the EnergyMonitor's device names use it too */
int names_array(PyObject *names, PyObject **keep, const char ***out, size_t *n);
/* ranges.c: frees the range objects kept for reuse (module teardown) */
void range_free_list_clear(void);

/* the module's functions, in the order of its method table */
PyObject *fn_push(PyObject *m, PyObject *arg);
PyObject *fn_pop(PyObject *m, PyObject *unused);
PyObject *fn_depth(PyObject *m, PyObject *unused);
PyObject *fn_mark(PyObject *m, PyObject *arg);
PyObject *fn_counter(PyObject *m, PyObject *const *args, Py_ssize_t nargs);
PyObject *fn_step_begin(PyObject *m, PyObject *arg);
PyObject *fn_step_end(PyObject *m, PyObject *arg);
PyObject *fn_range_start(PyObject *m, PyObject *arg);
PyObject *fn_range_end(PyObject *m, PyObject *arg);
PyObject *fn_set_metadata(PyObject *m, PyObject *args);
PyObject *fn_set_rank(PyObject *m, PyObject *args);
PyObject *fn_name_thread(PyObject *m, PyObject *arg);
PyObject *fn_enabled(PyObject *m, PyObject *unused);
PyObject *fn_flush(PyObject *m, PyObject *unused);
PyObject *fn_shutdown(PyObject *m, PyObject *unused);
PyObject *fn_output_path(PyObject *m, PyObject *unused);
PyObject *fn_now_ns(PyObject *m, PyObject *unused);
PyObject *fn_version(PyObject *m, PyObject *unused);
PyObject *fn_build_info(PyObject *m, PyObject *unused);
PyObject *fn_comm_record(PyObject *m, PyObject *const *args, Py_ssize_t nargs);
PyObject *fn_nccl_recording(PyObject *m, PyObject *unused);
PyObject *fn_memory_config(PyObject *m, PyObject *unused);
PyObject *fn_oom_observed(PyObject *m, PyObject *unused);
PyObject *fn_oom_begin(PyObject *m, PyObject *unused);
PyObject *fn_gpu_capture_pause(PyObject *m, PyObject *unused);
PyObject *fn_gpu_capture_resume(PyObject *m, PyObject *unused);
PyObject *fn_gpu_capture_steps(PyObject *m, PyObject *args);
PyObject *fn_gpu_capture_on(PyObject *m, PyObject *unused);
PyObject *fn_strerror(PyObject *m, PyObject *arg);
PyObject *fn_init(PyObject *m, PyObject *args, PyObject *kwds);
PyObject *fn_set_collectives(PyObject *m, PyObject *args, PyObject *kwds);
PyObject *fn_clear_collectives(PyObject *m, PyObject *args, PyObject *kwds);
PyObject *fn_get_collectives(PyObject *m, PyObject *unused);
PyObject *fn_set_hook_provider(PyObject *m, PyObject *arg);
PyObject *fn_ensure_hook(PyObject *m, PyObject *unused);
PyObject *fn_joules_per_step(PyObject *m, PyObject *a);
PyObject *fn_wh_per_step(PyObject *m, PyObject *a);
PyObject *fn_joules_per_sample(PyObject *m, PyObject *a);
PyObject *fn_wh_per_sample(PyObject *m, PyObject *a);
PyObject *fn_avg_watts(PyObject *m, PyObject *a);

#pragma GCC visibility pop

#endif

/*
 * _trainprof.c — the CPython extension module behind the `trainprof` package (docs/python.md).
 * This file holds the module (method table, init, teardown) and its error helpers; the parts
 * are ranges.c, session.c, collectives.c, timers.c and energy.c, sharing pymod.h.
 *
 * A thin layer over the public C API (include/trainprof.h), linked against libtrainprof.so
 * the ordinary way: when `trainprof run` has preloaded the library, the dynamic linker binds
 * this module to that copy (same SONAME), so one process never holds two sessions.
 *
 * Hot paths (range enter/exit, the decorator's call, Timer start/stop) do no allocation and
 * no Python-level work beyond argument checks: a range object keeps its name's str alive and
 * passes the str's own UTF-8 buffer (cached inside the str by CPython) to the library, which
 * interns it per thread; range objects come from a small free list. Everything the library
 * keeps is copied by the library, so nothing here outlives a pointer the C side holds.
 *
 * Cross-rank collectives (Timers logging, EnergyMonitor laps) go through the library's hook
 * (tprof_set_collectives). set_collectives() registers Python callables behind C callbacks;
 * trainprof/_dist.py provides torch.distributed ones, registered lazily (through the hook
 * provider) only when no hook is registered yet. An exception raised inside a callback is
 * kept and re-raised by the call that caused it.
 */
#include "pymod.h"

#include <stdint.h>

PyObject *g_error;          /* trainprof.Error */
PyObject *g_update_wrapper; /* functools.update_wrapper */

/* ------------------------------------------------------------------------------ errors */

PyObject *raise_code(int rc, const char *what) {
    PyObject *msg = PyUnicode_FromFormat("%s: %s", what, tprof_strerror(rc));
    if (!msg) return NULL;
    PyObject *exc = PyObject_CallOneArg(g_error, msg);
    Py_DECREF(msg);
    if (!exc) return NULL;
    PyObject *code = PyLong_FromLong(rc);
    if (code) {
        PyObject_SetAttrString(exc, "code", code);
        Py_DECREF(code);
    }
    PyErr_SetObject(g_error, exc);
    Py_DECREF(exc);
    return NULL;
}

/* A str argument's UTF-8 (cached inside the str by CPython; valid while the str lives). */
const char *utf8_of(PyObject *o, const char *what) {
    if (!PyUnicode_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be str, not %.100s", what, Py_TYPE(o)->tp_name);
        return NULL;
    }
    return PyUnicode_AsUTF8AndSize(o, NULL);
}

int as_u64(PyObject *o, uint64_t *out) {
    unsigned long long u = PyLong_AsUnsignedLongLong(o);
    if (u == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    *out = (uint64_t)u;
    return 0;
}

/* ------------------------------------------------------------------------------ module */

static PyMethodDef module_methods[] = {
    {"push", fn_push, METH_O,
     "push(name)\n--\n\nOpen a range on the calling thread's stack (close it with pop())."},
    {"pop", fn_pop, METH_NOARGS,
     "pop()\n--\n\nClose the calling thread's innermost range. With none pushed from Python "
     "on this thread: a RuntimeWarning, and the pop is recorded and ignored."},
    {"_depth", fn_depth, METH_NOARGS, "Ranges pushed from Python and still open on this thread."},
    {"mark", fn_mark, METH_O, "mark(name)\n--\n\nAn instant event on the calling thread."},
    {"counter", (PyCFunction)(void (*)(void))fn_counter, METH_FASTCALL,
     "counter(name, value)\n--\n\nA sample of a named counter (float; put the unit in the "
     "name, e.g. 'loss', 'tokens/s')."},
    {"step_begin", fn_step_begin, METH_O, "step_begin(step)\n--\n\nA training step begins."},
    {"step_end", fn_step_end, METH_O, "step_end(step)\n--\n\nA training step ends."},
    {"range_start", fn_range_start, METH_O,
     "range_start(name)\n--\n\nOpen a range that may end on another thread; returns its id "
     "(int, 0 when not recording)."},
    {"range_end", fn_range_end, METH_O,
     "range_end(id)\n--\n\nClose a range opened by range_start() (any thread)."},
    {"set_metadata", fn_set_metadata, METH_VARARGS,
     "set_metadata(key, value)\n--\n\nA key/value pair in the rank file (the last value "
     "wins). Returns False when not recording."},
    {"set_rank", fn_set_rank, METH_VARARGS,
     "set_rank(rank, world_size)\n--\n\nThis process's rank when the launcher's variables "
     "do not tell. Returns False when not recording."},
    {"name_thread", fn_name_thread, METH_O,
     "name_thread(name)\n--\n\nName the calling thread in traces. False when not recording."},
    {"enabled", fn_enabled, METH_NOARGS,
     "enabled()\n--\n\nTrue when this process records (starts the lazy session)."},
    {"flush", fn_flush, METH_NOARGS,
     "flush()\n--\n\nWrite every thread's events to the rank file now. False when not "
     "recording."},
    {"shutdown", fn_shutdown, METH_NOARGS,
     "shutdown()\n--\n\nFlush and close the rank file; later calls record nothing. Runs at "
     "exit anyway."},
    {"output_path", fn_output_path, METH_NOARGS,
     "output_path()\n--\n\nThis process's rank file path, or None (before the first flush, "
     "or not recording)."},
    {"now_ns", fn_now_ns, METH_NOARGS,
     "now_ns()\n--\n\nCLOCK_MONOTONIC in nanoseconds, the clock of every record."},
    {"version", fn_version, METH_NOARGS, "version()\n--\n\nThe loaded library's version."},
    {"build_info", fn_build_info, METH_NOARGS,
     "build_info()\n--\n\nOne line on the loaded library's build."},
    {"_comm_record", (PyCFunction)(void (*)(void))fn_comm_record, METH_FASTCALL,
     "_comm_record(name, op, start_ns, end_ns, bytes, count, comm_hash, seq, nranks, rank, "
     "peer, flags)\n--\n\nOne communication record of source torch (trainprof.torch's)."},
    {"_nccl_recording", fn_nccl_recording, METH_NOARGS,
     "_nccl_recording()\n--\n\nTrue once NCCL's profiler plugin records this process's "
     "collectives (trainprof.torch then leaves NCCL's to it)."},
    {"_memory_config", fn_memory_config, METH_NOARGS,
     "_memory_config()\n--\n\n(on, history_entries): TRAINPROF_MEMORY and "
     "TRAINPROF_MEMORY_HISTORY as the library parses them."},
    {"_oom_observed", fn_oom_observed, METH_NOARGS,
     "_oom_observed()\n--\n\ntrainprof.torch's allocator OOM observer is attached: the CUPTI "
     "callback leaves OOMs to it."},
    {"_oom_begin", fn_oom_begin, METH_NOARGS,
     "_oom_begin()\n--\n\nOne more OOM of this process; returns the count so far."},
    {"gpu_capture_pause", fn_gpu_capture_pause, METH_NOARGS,
     "gpu_capture_pause()\n--\n\nStop CUPTI activity capture (tprof_gpu_capture_pause); "
     "returns 0 or a negative library code (e.g. TPROF_ERR_UNAVAILABLE without CUPTI)."},
    {"gpu_capture_resume", fn_gpu_capture_resume, METH_NOARGS,
     "gpu_capture_resume()\n--\n\nResume what gpu_capture_pause() stopped; 0 or a "
     "negative library code."},
    {"gpu_capture_steps", fn_gpu_capture_steps, METH_VARARGS,
     "gpu_capture_steps(first, count)\n--\n\nRecord GPU activity in count steps from step "
     "first (-1: the next step that begins), on top of the capture plan "
     "(tprof_gpu_capture_steps); 0 or a negative library code."},
    {"_gpu_capture_on", fn_gpu_capture_on, METH_NOARGS,
     "_gpu_capture_on()\n--\n\nWhether the step running now is one the GPU capture plan or "
     "an on-demand window chose for detail (tprof_gpu_capture_on)."},
    {"strerror", fn_strerror, METH_O, "strerror(code)\n--\n\nThe text of a library error code."},
    {"init", (PyCFunction)(void (*)(void))fn_init, METH_VARARGS | METH_KEYWORDS,
     "init(output_dir=None, run_id=None, *, ring_bytes=-1, max_threads=-1, "
     "flush_interval_ms=-1, max_strings=-1, log_level=-1, enabled=True, sample_hz=-1, "
     "nvml_hz=-1, from_env=True)\n--\n\nStart the session explicitly (otherwise it starts "
     "lazily from TRAINPROF_* variables). Negative = default. Returns True when recording, "
     "False when disabled; raises trainprof.Error (e.g. code -9 when already started)."},
    {"set_collectives", (PyCFunction)(void (*)(void))fn_set_collectives,
     METH_VARARGS | METH_KEYWORDS,
     "set_collectives(rank, world_size, all_gather, all_reduce=None, barrier=None)\n--\n\n"
     "Register Python callables as the cross-rank hook of the Timers and EnergyMonitor: "
     "all_gather(bytes) -> bytes (world_size blocks, rank r's at r*len), all_reduce(list of "
     "float, op: 'sum'|'min'|'max') -> list of float, barrier() -> None. Collective: every "
     "rank calls them in the same order. Replaces any hook."},
    {"clear_collectives", (PyCFunction)(void (*)(void))fn_clear_collectives,
     METH_VARARGS | METH_KEYWORDS,
     "clear_collectives(force=False)\n--\n\nRemove the hook registered from Python (any hook "
     "with force=True). Returns whether one was removed."},
    {"get_collectives", fn_get_collectives, METH_NOARGS,
     "get_collectives()\n--\n\n{rank, world_size, registered, python}: the hook in force."},
    {"_set_hook_provider", fn_set_hook_provider, METH_O,
     "Callable run before every collective call, to register a hook lazily."},
    {"_ensure_hook", fn_ensure_hook, METH_NOARGS, "Run the hook provider now."},
    {"joules_per_step", fn_joules_per_step, METH_VARARGS,
     "joules_per_step(joules, steps)\n--\n\nJ / steps (0 when steps is 0)."},
    {"wh_per_step", fn_wh_per_step, METH_VARARGS,
     "wh_per_step(joules, steps)\n--\n\nWh / step (J / 3600 / steps)."},
    {"joules_per_sample", fn_joules_per_sample, METH_VARARGS,
     "joules_per_sample(joules, samples)\n--\n\nJ / sample."},
    {"wh_per_sample", fn_wh_per_sample, METH_VARARGS,
     "wh_per_sample(joules, samples)\n--\n\nWh / sample."},
    {"avg_watts", fn_avg_watts, METH_VARARGS,
     "avg_watts(joules, interval_ns)\n--\n\nAverage power in W over an interval in ns."},
    {NULL, NULL, 0, NULL}};

static void module_free(void *m) {
    (void)m;
    range_free_list_clear();
    Py_CLEAR(g_hook_provider);
    Py_CLEAR(g_pending_exc);
    /* the library may still call the hook (another thread, C code): unregister first */
    tprof_collectives c;
    tprof_get_collectives(&c);
    if (hook_is_ours(&c)) tprof_set_collectives(NULL);
    pyhook_release();
}

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "trainprof._trainprof",
    .m_doc = "trainprof's C extension: ranges, marks, counters, steps, Megatron-LM Timers and "
             "EnergyMonitor over libtrainprof (docs/python.md). Import the `trainprof` "
             "package rather than this module.",
    .m_size = -1,
    .m_methods = module_methods,
    .m_free = module_free,
};

PyMODINIT_FUNC PyInit__trainprof(void) {
    PyTypeObject *types[] = {&RangeType, &WrappedType, &StepType, &TimerType, &TimersType,
                             &EnergyType};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (PyType_Ready(types[i]) < 0) return NULL;
    PyObject *ft = PyImport_ImportModule("functools");
    if (!ft) return NULL;
    g_update_wrapper = PyObject_GetAttrString(ft, "update_wrapper");
    Py_DECREF(ft);
    if (!g_update_wrapper) return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    PyObject *d = PyDict_New();
    if (!d || PyDict_SetItemString(d, "code", Py_None) < 0) goto fail;
    g_error = PyErr_NewExceptionWithDoc(
        "trainprof.Error",
        "An error code of libtrainprof; .code holds the (negative) code, str() the text of "
        "tprof_strerror.",
        PyExc_RuntimeError, d);
    Py_CLEAR(d);
    if (!g_error || PyModule_AddObjectRef(m, "Error", g_error) < 0) goto fail;
    if (PyModule_AddObjectRef(m, "range", (PyObject *)&RangeType) < 0 ||
        PyModule_AddObjectRef(m, "step", (PyObject *)&StepType) < 0 ||
        PyModule_AddObjectRef(m, "Timer", (PyObject *)&TimerType) < 0 ||
        PyModule_AddObjectRef(m, "Timers", (PyObject *)&TimersType) < 0 ||
        PyModule_AddObjectRef(m, "EnergyMonitor", (PyObject *)&EnergyType) < 0)
        goto fail;
#define TP_ADD_INT(name, v) \
    if (PyModule_AddIntConstant(m, name, v) < 0) goto fail
    TP_ADD_INT("ERR_INVALID_ARG", TPROF_ERR_INVALID_ARG);
    TP_ADD_INT("ERR_DISABLED", TPROF_ERR_DISABLED);
    TP_ADD_INT("ERR_ALREADY", TPROF_ERR_ALREADY);
    TP_ADD_INT("ERR_UNAVAILABLE", TPROF_ERR_UNAVAILABLE);
    TP_ADD_INT("ERR_NOT_FOUND", TPROF_ERR_NOT_FOUND);
#undef TP_ADD_INT
    if (PyModule_AddStringConstant(m, "HEADER_VERSION", TPROF_VERSION_STRING) < 0) goto fail;
    return m;
fail:
    Py_XDECREF(d);
    Py_DECREF(m);
    return NULL;
}

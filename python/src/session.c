/*
 * session.c — the session's control from Python (init, flush, shutdown, metadata, rank,
 * version) and the bridge trainprof.torch records collectives through.
 */
#include "pymod.h"

#include <stdint.h>
#include <string.h>

/* the bridge the MPI wrappers use (exported, internal): trainprof.torch records
 * torch.distributed calls through it (source TPROF_COMM_SRC_TORCH) */
#include "capture/comm_ext.h"

PyObject *fn_set_metadata(PyObject *m, PyObject *args) {
    (void)m;
    const char *k, *v;
    if (!PyArg_ParseTuple(args, "ss:set_metadata", &k, &v)) return NULL;
    int rc = tprof_set_metadata(k, v);
    if (rc == TPROF_ERR_DISABLED) Py_RETURN_FALSE;
    if (rc != TPROF_OK) return raise_code(rc, "set_metadata");
    Py_RETURN_TRUE;
}

PyObject *fn_set_rank(PyObject *m, PyObject *args) {
    (void)m;
    int rank, world;
    if (!PyArg_ParseTuple(args, "ii:set_rank", &rank, &world)) return NULL;
    int rc = tprof_set_rank(rank, world);
    if (rc == TPROF_ERR_DISABLED) Py_RETURN_FALSE;
    if (rc != TPROF_OK) return raise_code(rc, "set_rank");
    Py_RETURN_TRUE;
}

PyObject *fn_name_thread(PyObject *m, PyObject *arg) {
    (void)m;
    const char *u = utf8_of(arg, "name");
    if (!u) return NULL;
    int rc = tprof_name_thread(u);
    if (rc == TPROF_ERR_DISABLED) Py_RETURN_FALSE;
    if (rc != TPROF_OK) return raise_code(rc, "name_thread");
    Py_RETURN_TRUE;
}

PyObject *fn_enabled(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    return PyBool_FromLong(tprof_enabled());
}

PyObject *fn_flush(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = tprof_flush();
    Py_END_ALLOW_THREADS
    if (rc == TPROF_ERR_DISABLED) Py_RETURN_FALSE;
    if (rc != TPROF_OK) return raise_code(rc, "flush");
    Py_RETURN_TRUE;
}

PyObject *fn_shutdown(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = tprof_shutdown();
    Py_END_ALLOW_THREADS
    if (rc != TPROF_OK && rc != TPROF_ERR_DISABLED) return raise_code(rc, "shutdown");
    Py_RETURN_NONE;
}

PyObject *fn_output_path(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    const char *p = tprof_output_path();
    if (!p) Py_RETURN_NONE;
    return PyUnicode_DecodeFSDefault(p);
}

PyObject *fn_now_ns(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    return PyLong_FromUnsignedLongLong(tprof_now_ns());
}

PyObject *fn_version(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    return PyUnicode_FromString(tprof_version());
}

PyObject *fn_build_info(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    return PyUnicode_FromString(tprof_build_info());
}

PyObject *fn_strerror(PyObject *m, PyObject *arg) {
    (void)m;
    long c = PyLong_AsLong(arg);
    if (c == -1 && PyErr_Occurred()) return NULL;
    return PyUnicode_FromString(tprof_strerror((int)c));
}

PyObject *fn_init(PyObject *m, PyObject *args, PyObject *kwds) {
    (void)m;
    static char *kw[] = {"output_dir", "run_id", "ring_bytes", "max_threads",
                         "flush_interval_ms", "max_strings", "log_level", "enabled",
                         "sample_hz", "nvml_hz", "from_env", NULL};
    PyObject *dir = Py_None, *run_id = Py_None;
    long long ring = -1, max_threads = -1, flush_ms = -1, max_strings = -1, sample = -1,
              nvml = -1;
    int log_level = -1, enabled = 1, from_env = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|OO$LLLLipLLp:init", kw, &dir, &run_id, &ring,
                                     &max_threads, &flush_ms, &max_strings, &log_level, &enabled,
                                     &sample, &nvml, &from_env))
        return NULL;
    tprof_config cfg;
    tprof_config_init(&cfg);
    if (from_env) tprof_config_from_env(&cfg);
    PyObject *dir_b = NULL;
    if (dir != Py_None) {
        if (!PyUnicode_FSConverter(dir, &dir_b)) return NULL;
        cfg.output_dir = PyBytes_AS_STRING(dir_b);
    }
    if (run_id != Py_None) {
        cfg.run_id = utf8_of(run_id, "run_id");
        if (!cfg.run_id) {
            Py_XDECREF(dir_b);
            return NULL;
        }
    }
    if (ring >= 0) cfg.ring_bytes = (size_t)ring;
    if (max_threads >= 0) cfg.max_threads = (uint32_t)max_threads;
    if (flush_ms >= 0) cfg.flush_interval_ms = (uint32_t)flush_ms;
    if (max_strings >= 0) cfg.max_strings = (uint32_t)max_strings;
    if (sample >= 0) cfg.sample_hz = (uint32_t)sample;
    if (nvml >= 0) cfg.nvml_hz = (uint32_t)nvml;
    if (log_level >= 0) cfg.log_level = log_level;
    if (!enabled) cfg.enabled = 0;
    int rc = tprof_init(&cfg); /* copies the strings */
    Py_XDECREF(dir_b);
    if (rc == TPROF_ERR_DISABLED) Py_RETURN_FALSE;
    if (rc != TPROF_OK) return raise_code(rc, "init");
    Py_RETURN_TRUE;
}

/* _comm_record(name, op, start_ns, end_ns, bytes, count, comm_hash, seq, nranks, rank, peer,
 * flags): one COMM_OP record of source TPROF_COMM_SRC_TORCH on the calling thread (for
 * trainprof.torch; op is an enum tprof_comm_op value, peer -1 for none). True when written. */
PyObject *fn_comm_record(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
    (void)m;
    if (nargs != 12) {
        PyErr_SetString(PyExc_TypeError, "_comm_record takes 12 arguments");
        return NULL;
    }
    const char *name = utf8_of(args[0], "name");
    if (!name) return NULL;
    uint64_t v[11];
    for (int i = 0; i < 11; i++) {
        if (i == 9) { /* peer: -1 = none */
            long long pe = PyLong_AsLongLong(args[10]);
            if (pe == -1 && PyErr_Occurred()) return NULL;
            v[i] = pe < 0 ? TPROF_COMM_NO_PEER : (uint64_t)pe;
            continue;
        }
        if (as_u64(args[i + 1], &v[i]) < 0) return NULL;
    }
    tprof_pl_comm pl;
    memset(&pl, 0, sizeof pl);
    pl.op = (uint32_t)v[0];
    pl.end_ns = v[2];
    pl.bytes = v[3];
    pl.count = v[4];
    pl.comm_hash = v[5];
    pl.seq = (uint32_t)v[6];
    pl.nranks = (uint32_t)v[7];
    pl.rank = (uint32_t)v[8];
    pl.peer = (uint32_t)v[9];
    pl.flags = (uint32_t)v[10];
    pl.source = TPROF_COMM_SRC_TORCH;
    if (pl.op >= TPROF_COMM_OP_COUNT) pl.op = TPROF_COMM_UNKNOWN;
    return PyBool_FromLong(tprof__comm_record(name, v[1], &pl));
}

/* _nccl_recording(): True once NCCL's profiler plugin records this process's collectives
 * (tprof__nccl_recording): trainprof.torch then writes none of its own for NCCL. */
PyObject *fn_nccl_recording(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    return PyBool_FromLong(tprof__nccl_recording());
}

/* _memory_config(): (on, history_entries) from TRAINPROF_MEMORY and TRAINPROF_MEMORY_HISTORY,
 * parsed by the library's table (tprof__memory_options). */
PyObject *fn_memory_config(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    int on = 1;
    uint64_t history = 0;
    tprof__memory_options(&on, &history);
    return Py_BuildValue("(OK)", on ? Py_True : Py_False, (unsigned long long)history);
}

/* _oom_observed(): trainprof.torch's allocator OOM observer is attached; the CUPTI callback
 * leaves OOMs to it from now on (tprof__oom_torch_observes). */
PyObject *fn_oom_observed(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    tprof__oom_torch_observes();
    Py_RETURN_NONE;
}

/* _oom_begin(): one more OOM of this process; the count so far (tprof__oom_begin). */
PyObject *fn_oom_begin(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    return PyLong_FromUnsignedLong(tprof__oom_begin());
}

/* gpu_capture_pause() / gpu_capture_resume(): tprof_gpu_capture_pause/resume; the library's
 * code (0, or a negative TPROF_ERR_*) is returned, never raised. */
PyObject *fn_gpu_capture_pause(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    return PyLong_FromLong(tprof_gpu_capture_pause());
}

PyObject *fn_gpu_capture_resume(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    return PyLong_FromLong(tprof_gpu_capture_resume());
}

/* _gpu_capture_on(): tprof_gpu_capture_on, as a bool. */
PyObject *fn_gpu_capture_on(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    return PyBool_FromLong(tprof_gpu_capture_on());
}

/* gpu_capture_steps(first, count): tprof_gpu_capture_steps; first -1 is TPROF_NEXT_STEP. The
 * library's code is returned, never raised. A count or first that 64 bits cannot hold (a
 * negative count, 2**64 steps or more, a first step past 2**64 - 2) is ERR_INVALID_ARG, as
 * the C call answers for a window past 2^64: read modulo 2**64 instead, 2**64 + 3 would ask
 * for 3 steps and a negative count for nearly 2**64. */
PyObject *fn_gpu_capture_steps(PyObject *m, PyObject *args) {
    (void)m;
    PyObject *fo, *co;
    if (!PyArg_ParseTuple(args, "OO", &fo, &co)) return NULL;
    PyObject *f = PyNumber_Index(fo); /* ints and what stands for one (numpy's) */
    if (!f) return NULL;
    PyObject *c = PyNumber_Index(co);
    if (!c) {
        Py_DECREF(f);
        return NULL;
    }
    int over = 0;
    long long sf = PyLong_AsLongLongAndOverflow(f, &over);
    long code = TPROF_ERR_INVALID_ARG;
    if (over < 0 || (!over && sf < -1)) {
        PyErr_SetString(PyExc_ValueError, "first must be a step number >= 0, or -1 for the next");
        code = 1;
    } else {
        /* above 2**63 - 1 (over > 0): unsigned, up to 2**64 - 2 (2**64 - 1 is the next step) */
        uint64_t first = over ? (uint64_t)PyLong_AsUnsignedLongLong(f)
                              : sf < 0 ? TPROF_NEXT_STEP : (uint64_t)sf;
        int bad = PyErr_Occurred() != NULL || (over && first == TPROF_NEXT_STEP);
        unsigned long long count = 0;
        if (!bad) {
            count = PyLong_AsUnsignedLongLong(c);
            bad = PyErr_Occurred() != NULL;
        }
        if (bad) PyErr_Clear(); /* OverflowError: out of 64 bits */
        else code = tprof_gpu_capture_steps(first, count);
    }
    Py_DECREF(f);
    Py_DECREF(c);
    return code > 0 ? NULL : PyLong_FromLong(code);
}

/*
 * timers.c — trainprof.Timer and trainprof.Timers: Megatron-LM's timers over the library's
 * registry (tprof_timers_*).
 */
#include "pymod.h"

#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------------------------ timers */

typedef struct {
    PyObject_HEAD
    tprof_timer *tm;  /* the library's timer, or its dummy */
    PyObject *owner;  /* capsule owning the registry: keeps tm valid */
    PyObject *name;   /* str as asked for */
    int level;        /* level it was created (or asked) with */
    int strict;       /* Megatron's behaviour: the dummy raises on elapsed() */
    int dummy;        /* above the registry's level: the library's dummy timer */
    PyObject *barrier_group;
} TimerObject;

typedef struct {
    PyObject_HEAD
    tprof_timers *t;
    PyObject *owner; /* capsule: destroys the registry when the last user goes */
    PyObject *stream_source; /* set_timing's callable, or NULL */
    PyObject *cache; /* name -> Timer */
    int log_level;
    int option;
    int strict;
    vectorcallfunc vectorcall;
    PyObject *dict;
} TimersObject;


static const char *const OPTION_NAMES[] = {"max", "minmax", "all"};

static void registry_capsule_free(PyObject *cap) {
    tprof_timers *t = PyCapsule_GetPointer(cap, "trainprof.timers");
    tprof_timers_destroy(t);
}

/* The registry's CUDA-event stream (tprof_timers_set_stream_source): a Python callable, held
 * by the Timers object (seen by the garbage collector, and unset before it is dropped, so
 * that destroy, which stops running timers, never calls Python), answers it as an int at
 * every edge. An exception is shown once per process and the legacy default stream (0)
 * used. Called by the library on the thread that starts or stops a timer, which normally
 * holds the GIL already. */
static void *py_stream_source(void *ctx) {
    static int warned;
    PyGILState_STATE g = PyGILState_Ensure();
    void *stream = NULL;
    /* an exception in flight (a destructor during unwinding) is not ours to report or clear */
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *inflight = PyErr_GetRaisedException();
#else
    PyObject *et, *ev, *etb;
    PyErr_Fetch(&et, &ev, &etb);
#endif
    PyObject *src = Py_NewRef((PyObject *)ctx); /* set_timing may replace it meanwhile */
    PyObject *r = PyObject_CallNoArgs(src);
    if (r) {
        PyObject *i = PyNumber_Index(r);
        if (i) {
            unsigned long long v = PyLong_AsUnsignedLongLong(i);
            if (!PyErr_Occurred()) stream = (void *)(uintptr_t)v;
            Py_DECREF(i);
        }
        Py_DECREF(r);
    }
    if (PyErr_Occurred()) {
        if (!warned) {
            warned = 1;
            PyErr_WriteUnraisable(src); /* once: the default stream from now on, if it goes on */
        }
        PyErr_Clear();
    }
    Py_DECREF(src);
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(inflight);
#else
    PyErr_Restore(et, ev, etb);
#endif
    PyGILState_Release(g);
    return stream;
}

static PyObject *timer_start(TimerObject *t, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames);

static inline int get_barrier_arg(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                                  const char *fname, int *barrier) {
    *barrier = 0;
    PyObject *b = NULL;
    if (nargs > 1) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most 1 positional argument", fname);
        return -1;
    }
    if (nargs == 1) b = args[0];
    if (kwnames) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); i++) {
            PyObject *k = PyTuple_GET_ITEM(kwnames, i);
            if (PyUnicode_CompareWithASCIIString(k, "barrier") != 0 || b) {
                PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'",
                             fname, k);
                return -1;
            }
            b = args[nargs + i];
        }
    }
    if (b) {
        int v = PyObject_IsTrue(b);
        if (v < 0) return -1;
        *barrier = v;
    }
    return 0;
}

/* start(barrier=False) and stop(barrier=False) past their fast path (no argument): the
 * argument checked, the hook registered for a barrier, then `edge` (tprof_timer_start or
 * tprof_timer_stop); `fname` names the method in a TypeError. */
static PyObject *timer_edge(TimerObject *t, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames, const char *fname,
                            void (*edge)(tprof_timer *, int)) {
    int barrier;
    if (get_barrier_arg(args, nargs, kwnames, fname, &barrier) < 0) return NULL;
    if (barrier && ensure_hook() < 0) return NULL;
    edge(t->tm, barrier);
    if (pending_raise()) return NULL;
    Py_RETURN_NONE;
}

static PyObject *timer_start(TimerObject *t, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames) {
    if (TP_LIKELY(nargs == 0 && !kwnames)) {
        tprof_timer_start(t->tm, 0);
        Py_RETURN_NONE;
    }
    return timer_edge(t, args, nargs, kwnames, "start", tprof_timer_start);
}

static PyObject *timer_stop(TimerObject *t, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames) {
    if (TP_LIKELY(nargs == 0 && !kwnames)) {
        tprof_timer_stop(t->tm, 0);
        Py_RETURN_NONE;
    }
    return timer_edge(t, args, nargs, kwnames, "stop", tprof_timer_stop);
}

static PyObject *timer_reset(TimerObject *t, PyObject *unused) {
    (void)unused;
    tprof_timer_reset(t->tm);
    Py_RETURN_NONE;
}

static PyObject *dummy_raise(void) {
    PyErr_SetString(PyExc_Exception, "dummy timer should not be used to calculate elapsed "
                                     "time, check if timer's log_level <= self._log_level.");
    return NULL;
}

static PyObject *timer_elapsed(TimerObject *t, PyObject *args, PyObject *kwds) {
    static char *kw[] = {"reset", "barrier", NULL};
    int reset = 1, barrier = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|pp:elapsed", kw, &reset, &barrier))
        return NULL;
    if (t->strict && t->dummy) return dummy_raise();
    if (barrier && ensure_hook() < 0) return NULL;
    double s = tprof_timer_elapsed(t->tm, reset, barrier);
    if (pending_raise()) return NULL;
    return PyFloat_FromDouble(s);
}

static PyObject *timer_active_time(TimerObject *t, PyObject *unused) {
    (void)unused;
    if (t->strict && t->dummy) return dummy_raise();
    return PyFloat_FromDouble(tprof_timer_active_time(t->tm));
}

static PyObject *timer_set_elapsed(TimerObject *t, PyObject *arg) {
    double s = PyFloat_AsDouble(arg);
    if (s == -1.0 && PyErr_Occurred()) return NULL;
    if (t->dummy) Py_RETURN_NONE; /* the dummy ignores it, as Megatron's */
    int rc = tprof_timer_set_elapsed(t->tm, s);
    if (rc != TPROF_OK) return raise_code(rc, "set_elapsed");
    Py_RETURN_NONE;
}

static PyObject *timer_set_barrier_group(TimerObject *t, PyObject *arg) {
    Py_XSETREF(t->barrier_group, Py_NewRef(arg));
    Py_RETURN_NONE;
}

static PyObject *timer_enter(TimerObject *t, PyObject *unused) {
    (void)unused;
    tprof_timer_start(t->tm, 0);
    Py_INCREF(t);
    return (PyObject *)t;
}

static PyObject *timer_exit(TimerObject *t, PyObject *const *args, Py_ssize_t nargs) {
    (void)args;
    (void)nargs;
    tprof_timer_stop(t->tm, 0);
    Py_RETURN_FALSE;
}

static void timer_dealloc(TimerObject *t) {
    Py_CLEAR(t->name);
    Py_CLEAR(t->barrier_group);
    Py_CLEAR(t->owner); /* last: may destroy the registry */
    Py_TYPE(t)->tp_free((PyObject *)t);
}

static PyObject *timer_repr(TimerObject *t) {
    if (t->dummy)
        return PyUnicode_FromFormat("<trainprof.Timer %R (dummy: level %d above the log level)>",
                                    t->name, t->level);
    return PyUnicode_FromFormat("<trainprof.Timer %R level %d>", t->name, t->level);
}

static PyObject *timer_get_name(TimerObject *t, void *c) {
    (void)c;
    Py_INCREF(t->name);
    return t->name;
}

static PyObject *timer_get_dummy(TimerObject *t, void *c) {
    (void)c;
    return PyBool_FromLong(t->dummy);
}

static PyObject *timer_get_level(TimerObject *t, void *c) {
    (void)c;
    return PyLong_FromLong(t->level);
}

static PyMethodDef timer_methods[] = {
    {"start", TP_FASTKW(timer_start), METH_FASTCALL | METH_KEYWORDS,
     "start(barrier=False)\n--\n\nStart timing (host CLOCK_MONOTONIC). barrier=True first "
     "waits on the collectives hook's barrier. Starting a running timer warns once and is "
     "ignored."},
    {"stop", TP_FASTKW(timer_stop), METH_FASTCALL | METH_KEYWORDS,
     "stop(barrier=False)\n--\n\nStop timing: adds the interval to elapsed and active time."},
    {"reset", (PyCFunction)timer_reset, METH_NOARGS,
     "reset()\n--\n\nZero the elapsed time and mark stopped (active time is kept)."},
    {"elapsed", TP_FASTKW(timer_elapsed), METH_VARARGS | METH_KEYWORDS,
     "elapsed(reset=True, barrier=False)\n--\n\nSeconds (float) accumulated since the last "
     "reset; with reset, resets. Safe while running (the running interval is included and "
     "goes on)."},
    {"active_time", (PyCFunction)timer_active_time, METH_NOARGS,
     "active_time()\n--\n\nTotal seconds ever measured (reset does not clear it)."},
    {"set_elapsed", (PyCFunction)timer_set_elapsed, METH_O,
     "set_elapsed(seconds)\n--\n\nOverwrite the elapsed seconds (Megatron's startup "
     "timestamps)."},
    {"set_barrier_group", (PyCFunction)timer_set_barrier_group, METH_O,
     "set_barrier_group(group)\n--\n\nKept for Megatron compatibility: barriers always use "
     "the registered collectives hook (the world group)."},
    {"__enter__", (PyCFunction)timer_enter, METH_NOARGS, "start()"},
    {"__exit__", (PyCFunction)(void (*)(void))timer_exit, METH_FASTCALL, "stop()"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef timer_getset[] = {
    {"name", (getter)timer_get_name, NULL, "The timer's name (str).", NULL},
    {"is_dummy", (getter)timer_get_dummy, NULL,
     "True for a timer above the registry's log level (its calls do nothing).", NULL},
    {"log_level", (getter)timer_get_level, NULL, "The timer's log level (0..2).", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject TimerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "trainprof.Timer",
    .tp_basicsize = sizeof(TimerObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One timer of a trainprof.Timers registry (get it with timers(name, "
              "log_level)). Values are seconds. Also a context manager (start/stop).",
    .tp_dealloc = (destructor)timer_dealloc,
    .tp_methods = timer_methods,
    .tp_getset = timer_getset,
    .tp_repr = (reprfunc)timer_repr,
};

static PyObject *timer_wrap(TimersObject *ts, tprof_timer *tm, PyObject *name, int level) {
    TimerObject *t = PyObject_New(TimerObject, &TimerType);
    if (!t) return NULL;
    t->tm = tm;
    t->owner = Py_NewRef(ts->owner);
    t->name = Py_NewRef(name);
    t->level = level;
    t->strict = ts->strict;
    t->dummy = level > ts->log_level;
    t->barrier_group = NULL;
    return (PyObject *)t;
}

/* timers(name, log_level=None) */
static PyObject *timers_lookup(TimersObject *ts, PyObject *name, PyObject *level_obj) {
    int level = -1;
    if (level_obj && level_obj != Py_None) {
        long l = PyLong_AsLong(level_obj);
        if (l == -1 && PyErr_Occurred()) return NULL;
        level = l < 0 ? -2 : (int)(l > 1000 ? 1000 : l);
    }
    PyObject *hit = PyDict_GetItemWithError(ts->cache, name); /* borrowed */
    if (hit) {
        TimerObject *t = (TimerObject *)hit;
        if (level == -1 || level == t->level) return Py_NewRef(hit);
    } else if (PyErr_Occurred()) {
        return NULL;
    }
    const char *u = utf8_of(name, "timer name");
    if (!u) return NULL;
    if (level == -2 || level > 2) {
        if (ts->strict) {
            PyErr_Format(PyExc_AssertionError, "timer %R: log level must be 0..2", name);
            return NULL;
        }
        return raise_code(TPROF_ERR_INVALID_ARG, "timer log level must be 0, 1 or 2");
    }
    tprof_timer *tm = NULL;
    int rc = tprof_timers_lookup(ts->t, u, level, &tm);
    if (rc == TPROF_ERR_INVALID_ARG && hit) {
        if (ts->strict) {
            PyErr_Format(PyExc_AssertionError,
                         "input log level %d does not match already existing log level %d "
                         "for %R timer",
                         level, ((TimerObject *)hit)->level, name);
            return NULL;
        }
        PyErr_Format(g_error, "timer %R was created with log level %d, not %d (%s)", name,
                     ((TimerObject *)hit)->level, level, tprof_strerror(rc));
        return NULL;
    }
    if (rc != TPROF_OK) return raise_code(rc, "timers lookup");
    PyObject *t = timer_wrap(ts, tm, name, level < 0 ? 2 : level);
    if (!t) return NULL;
    /* a dummy that becomes a real timer moves to the end: the cache keeps creation order */
    if ((hit && PyDict_DelItem(ts->cache, name) < 0) || PyDict_SetItem(ts->cache, name, t) < 0) {
        Py_DECREF(t);
        return NULL;
    }
    return t;
}

static PyObject *timers_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                   PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *name = nargs > 0 ? args[0] : NULL, *level = nargs > 1 ? args[1] : NULL;
    if (nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "Timers.__call__(name, log_level=None)");
        return NULL;
    }
    if (kwnames) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); i++) {
            PyObject *k = PyTuple_GET_ITEM(kwnames, i);
            if (PyUnicode_CompareWithASCIIString(k, "log_level") == 0 && !level)
                level = args[nargs + i];
            else if (PyUnicode_CompareWithASCIIString(k, "name") == 0 && !name)
                name = args[nargs + i];
            else {
                PyErr_Format(PyExc_TypeError, "Timers() got an unexpected keyword argument '%U'",
                             k);
                return NULL;
            }
        }
    }
    if (!name) {
        PyErr_SetString(PyExc_TypeError, "Timers.__call__ missing required argument 'name'");
        return NULL;
    }
    if (!PyUnicode_Check(name)) {
        PyErr_SetString(PyExc_TypeError, "timer name must be str");
        return NULL;
    }
    return timers_lookup((TimersObject *)self, name, level);
}

static int parse_option(PyObject *o, int strict, int *out) {
    if (!o || o == Py_None) {
        *out = TPROF_TIMERS_MINMAX;
        return 0;
    }
    for (int i = 0; i < 3; i++) {
        if (PyUnicode_Check(o) && PyUnicode_CompareWithASCIIString(o, OPTION_NAMES[i]) == 0) {
            *out = i;
            return 0;
        }
    }
    PyErr_Format(strict ? PyExc_AssertionError : PyExc_ValueError,
                 "log_option must be 'max', 'minmax' or 'all', not %R", o);
    return -1;
}

static int timers_init(TimersObject *ts, PyObject *args, PyObject *kwds) {
    static char *kw[] = {"log_level", "log_option", "strict", NULL};
    int level = 2, strict = 0;
    PyObject *opt = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|iO$p:Timers", kw, &level, &opt, &strict))
        return -1;
    int option;
    if (parse_option(opt, strict, &option) < 0) return -1;
    if (level < 0 || level > 2) {
        PyErr_Format(strict ? PyExc_AssertionError : PyExc_ValueError,
                     "log_level must be 0, 1 or 2, not %d", level);
        return -1;
    }
    if (ts->t) {
        PyErr_SetString(PyExc_RuntimeError, "Timers already initialised");
        return -1;
    }
    tprof_timers *t = NULL;
    int rc = tprof_timers_create(level, (tprof_timers_option)option, &t);
    if (rc != TPROF_OK) {
        raise_code(rc, "Timers");
        return -1;
    }
    ts->owner = PyCapsule_New(t, "trainprof.timers", registry_capsule_free);
    if (!ts->owner) {
        tprof_timers_destroy(t);
        return -1;
    }
    ts->t = t;
    ts->cache = PyDict_New();
    if (!ts->cache) return -1;
    ts->log_level = level;
    ts->option = option;
    ts->strict = strict;
    return 0;
}

static PyObject *timers_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    (void)args;
    (void)kwds;
    TimersObject *ts = (TimersObject *)type->tp_alloc(type, 0);
    if (!ts) return NULL;
    ts->vectorcall = timers_vectorcall;
    return (PyObject *)ts;
}

static int timers_traverse(TimersObject *ts, visitproc visit, void *arg) {
    Py_VISIT(ts->cache);
    Py_VISIT(ts->dict);
    Py_VISIT(ts->stream_source);
    return 0;
}

/* The registry stops asking the callable (its surviving Timers record on set_timing's fixed
 * stream), then the callable is dropped. */
static void drop_stream_source(TimersObject *ts) {
    if (ts->t) tprof_timers_set_stream_source(ts->t, NULL, NULL);
    Py_CLEAR(ts->stream_source);
}

static int timers_clear(TimersObject *ts) {
    Py_CLEAR(ts->cache);
    Py_CLEAR(ts->dict);
    drop_stream_source(ts);
    return 0;
}

static void timers_dealloc(TimersObject *ts) {
    PyObject_GC_UnTrack(ts);
    timers_clear(ts);
    ts->t = NULL;
    Py_CLEAR(ts->owner); /* the registry goes with its last Timer */
    Py_TYPE(ts)->tp_free((PyObject *)ts);
}

static int timers_ready(TimersObject *ts) {
    if (ts->t) return 0;
    PyErr_SetString(PyExc_RuntimeError, "Timers not initialised (call Timers.__init__)");
    return -1;
}

/* names: None or a sequence of str -> a malloc'ed array of UTF-8 pointers (valid while *keep
 * lives). */
int names_array(PyObject *names, PyObject **keep, const char ***out, size_t *n) {
    *keep = NULL;
    *out = NULL;
    *n = 0;
    if (!names || names == Py_None) return 0;
    if (PyUnicode_Check(names)) {
        PyErr_SetString(PyExc_TypeError, "names must be a list of str, not a str");
        return -1;
    }
    PyObject *seq = PySequence_Fast(names, "names must be a sequence of str");
    if (!seq) return -1;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(seq);
    const char **v = PyMem_Malloc(sizeof(char *) * (size_t)(len ? len : 1));
    if (!v) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        v[i] = utf8_of(PySequence_Fast_GET_ITEM(seq, i), "timer name");
        if (!v[i]) {
            PyMem_Free(v);
            Py_DECREF(seq);
            return -1;
        }
    }
    *keep = seq;
    *out = v;
    *n = (size_t)len;
    return 0;
}

/* The common arguments of the collective methods. */
typedef struct {
    PyObject *names;
    double normalizer;
    int reset, barrier;
} coll_args;

static PyObject *timers_string_common(TimersObject *ts, const coll_args *a, int json) {
    if (timers_ready(ts) < 0) return NULL;
    if (!(a->normalizer > 0.0)) {
        PyErr_SetString(ts->strict ? PyExc_AssertionError : PyExc_ValueError,
                        "normalizer must be positive");
        return NULL;
    }
    if (ensure_hook() < 0) return NULL;
    PyObject *keep;
    const char **v;
    size_t n;
    if (names_array(a->names, &keep, &v, &n) < 0) return NULL;
    char *text = NULL;
    pending_clear();
    int rc = json ? tprof_timers_json(ts->t, v, n, a->normalizer, a->reset, a->barrier, &text)
                  : tprof_timers_string(ts->t, v, n, a->normalizer, a->reset, a->barrier, &text);
    PyMem_Free(v);
    Py_XDECREF(keep);
    if (!collective_result(rc, json ? "Timers.json" : "Timers.get_all_timers_string")) {
        free(text);
        return NULL;
    }
    if (!text) Py_RETURN_NONE;
    PyObject *s = PyUnicode_FromString(text);
    free(text);
    return s;
}

/* get_all_timers_string and json: the same arguments (names=None, normalizer=1.0,
 * reset=True, barrier=False), the text or the JSON document. */
static PyObject *timers_text(TimersObject *ts, PyObject *args, PyObject *kwds, int json) {
    static char *kw[] = {"names", "normalizer", "reset", "barrier", NULL};
    coll_args a = {NULL, 1.0, 1, 0};
    const char *fmt = json ? "|Odpp:json" : "|Odpp:get_all_timers_string";
    if (!PyArg_ParseTupleAndKeywords(args, kwds, fmt, kw, &a.names, &a.normalizer, &a.reset,
                                     &a.barrier))
        return NULL;
    return timers_string_common(ts, &a, json);
}

static PyObject *timers_get_all_timers_string(TimersObject *ts, PyObject *args, PyObject *kwds) {
    return timers_text(ts, args, kwds, 0);
}

static PyObject *timers_json(TimersObject *ts, PyObject *args, PyObject *kwds) {
    return timers_text(ts, args, kwds, 1);
}

/* log(names=None, rank=None, normalizer=1.0, reset=True, barrier=False, file=None) */
static PyObject *timers_log(TimersObject *ts, PyObject *args, PyObject *kwds) {
    static char *kw[] = {"names", "rank", "normalizer", "reset", "barrier", "file", NULL};
    coll_args a = {NULL, 1.0, 1, 0};
    PyObject *rank_o = Py_None, *file = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|OOdppO:log", kw, &a.names, &rank_o,
                                     &a.normalizer, &a.reset, &a.barrier, &file))
        return NULL;
    /* the hook decides the world, so register it before reading the rank */
    if (ensure_hook() < 0) return NULL;
    tprof_collectives c;
    tprof_get_collectives(&c);
    long rank = c.world_size - 1;
    if (rank_o != Py_None) {
        rank = PyLong_AsLong(rank_o);
        if (rank == -1 && PyErr_Occurred()) return NULL;
        if (rank < 0 || rank >= c.world_size)
            return raise_code(TPROF_ERR_INVALID_ARG, "Timers.log: rank outside the world");
    }
    PyObject *s = timers_string_common(ts, &a, 0);
    if (!s) return NULL;
    if (s != Py_None && rank == c.rank) {
        PyObject *f = file;
        if (f == Py_None) f = PySys_GetObject("stdout"); /* borrowed */
        if (f && f != Py_None) {
            PyObject *r = PyObject_CallMethod(f, "write", "O", s);
            PyObject *r2 = r ? PyObject_CallMethod(f, "write", "s", "\n") : NULL;
            PyObject *r3 = r2 ? PyObject_CallMethod(f, "flush", NULL) : NULL;
            Py_XDECREF(r);
            Py_XDECREF(r2);
            if (!r3) {
                Py_DECREF(s);
                return NULL;
            }
            Py_DECREF(r3);
        }
    }
    Py_DECREF(s);
    Py_RETURN_NONE;
}

/* Elapsed seconds of every rank: (names, rows) with rows world x n. */
static int gather_matrix(TimersObject *ts, PyObject *names, int reset, int barrier, double **m,
                         int *world, size_t *n, PyObject **names_out) {
    if (timers_ready(ts) < 0) return -1;
    if (ensure_hook() < 0) return -1;
    PyObject *keep;
    const char **v;
    size_t nn;
    if (names_array(names, &keep, &v, &nn) < 0) return -1;
    pending_clear();
    int rc = tprof_timers_gather(ts->t, v, nn, reset, barrier, m, world, n);
    PyMem_Free(v);
    if (!collective_result(rc, "Timers gather")) {
        Py_XDECREF(keep);
        free(*m);
        *m = NULL;
        return -1;
    }
    /* the names, in the matrix's column order */
    if (keep) {
        *names_out = PySequence_List(keep);
        Py_DECREF(keep);
    } else {
        *names_out = PyList_New(0);
        if (*names_out) {
            /* every registered timer, in creation order: the cache holds them all (dict
             * order is insertion order, and the library's is creation order) */
            PyObject *k, *val;
            Py_ssize_t pos = 0;
            while (PyDict_Next(ts->cache, &pos, &k, &val)) {
                if (((TimerObject *)val)->dummy) continue;
                if (PyList_Append(*names_out, k) < 0) {
                    Py_CLEAR(*names_out);
                    break;
                }
            }
        }
    }
    if (*names_out && (size_t)PyList_GET_SIZE(*names_out) != *n) {
        PyErr_SetString(PyExc_RuntimeError,
                        "Timers: registered names out of step with the library");
        Py_CLEAR(*names_out);
    }
    if (!*names_out) {
        free(*m);
        *m = NULL;
        return -1;
    }
    return 0;
}

static PyObject *timers_elapsed_all_ranks(TimersObject *ts, PyObject *args, PyObject *kwds) {
    static char *kw[] = {"names", "reset", "barrier", NULL};
    PyObject *names = NULL;
    int reset = 1, barrier = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|Opp:elapsed_all_ranks", kw, &names, &reset,
                                     &barrier))
        return NULL;
    double *m = NULL;
    int world = 0;
    size_t n = 0;
    PyObject *nl = NULL;
    if (gather_matrix(ts, names, reset, barrier, &m, &world, &n, &nl) < 0) return NULL;
    PyObject *rows = PyList_New(world);
    for (int r = 0; rows && r < world; r++) {
        PyObject *row = PyList_New((Py_ssize_t)n);
        if (!row) {
            Py_CLEAR(rows);
            break;
        }
        for (size_t i = 0; i < n; i++) {
            PyObject *f = PyFloat_FromDouble(m[(size_t)r * n + i]);
            if (!f) {
                Py_DECREF(row);
                Py_CLEAR(rows);
                break;
            }
            PyList_SET_ITEM(row, (Py_ssize_t)i, f);
        }
        if (rows) PyList_SET_ITEM(rows, r, row);
    }
    free(m);
    PyObject *res = rows ? PyTuple_Pack(2, nl, rows) : NULL;
    Py_XDECREF(nl);
    Py_XDECREF(rows);
    return res;
}

/* write(names, writer, iteration, normalizer=1.0, reset=False, barrier=False): Megatron's
 * TensorBoard step: the max over ranks of each timer with a value, in seconds per normalizer
 * unit, as writer.add_scalar(name + '-time', value, iteration). */
static PyObject *timers_write(TimersObject *ts, PyObject *args, PyObject *kwds) {
    static char *kw[] = {"names", "writer", "iteration", "normalizer", "reset", "barrier", NULL};
    PyObject *names, *writer, *iteration;
    double normalizer = 1.0;
    int reset = 0, barrier = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO|dpp:write", kw, &names, &writer,
                                     &iteration, &normalizer, &reset, &barrier))
        return NULL;
    if (!(normalizer > 0.0)) {
        PyErr_SetString(ts->strict ? PyExc_AssertionError : PyExc_ValueError,
                        "normalizer must be positive");
        return NULL;
    }
    double *m = NULL;
    int world = 0;
    size_t n = 0;
    PyObject *nl = NULL;
    if (gather_matrix(ts, names, reset, barrier, &m, &world, &n, &nl) < 0) return NULL;
    PyObject *ret = Py_None;
    for (size_t i = 0; writer != Py_None && i < n; i++) {
        double mx = 0;
        int any = 0;
        for (int r = 0; r < world; r++) {
            double v = m[(size_t)r * n + i];
            if (v > 0) {
                if (!any || v > mx) mx = v;
                any = 1;
            }
        }
        if (!any) continue;
        PyObject *tag = PyUnicode_FromFormat("%U-time", PyList_GET_ITEM(nl, (Py_ssize_t)i));
        PyObject *r = tag ? PyObject_CallMethod(writer, "add_scalar", "OdO", tag, mx / normalizer,
                                                iteration)
                          : NULL;
        Py_XDECREF(tag);
        if (!r) {
            ret = NULL;
            break;
        }
        Py_DECREF(r);
    }
    free(m);
    Py_DECREF(nl);
    if (!ret) return NULL;
    Py_RETURN_NONE;
}

static PyObject *timers_set_timing(TimersObject *ts, PyObject *args, PyObject *kwds) {
    static char *kw[] = {"timing", "cuda_stream", NULL};
    const char *mode;
    PyObject *arg = Py_None, *source = NULL;
    unsigned long long stream = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "s|O:set_timing", kw, &mode, &arg))
        return NULL;
    if (timers_ready(ts) < 0) return NULL;
    tprof_timing t;
    if (!strcmp(mode, "host")) t = TPROF_TIMING_HOST;
    else if (!strcmp(mode, "cuda_events")) t = TPROF_TIMING_CUDA_EVENTS;
    else if (!strcmp(mode, "cuda_sync")) t = TPROF_TIMING_CUDA_SYNC;
    else {
        PyErr_Format(PyExc_ValueError, "timing must be 'host', 'cuda_events' or 'cuda_sync', "
                                       "not '%s'", mode);
        return NULL;
    }
    if (arg == Py_None) { /* the program's current stream at each edge */
        PyObject *m = PyImport_ImportModule("trainprof.torch");
        if (!m) return NULL;
        source = PyObject_GetAttrString(m, "current_cuda_stream");
        Py_DECREF(m);
        if (!source) return NULL;
    } else if (PyCallable_Check(arg)) {
        source = Py_NewRef(arg);
    } else {
        PyObject *i = PyNumber_Index(arg);
        if (!i) return NULL;
        stream = PyLong_AsUnsignedLongLong(i);
        Py_DECREF(i);
        if (PyErr_Occurred()) return NULL;
    }
    int rc = tprof_timers_set_timing(ts->t, t, (void *)(uintptr_t)stream);
    if (rc != TPROF_OK) {
        Py_XDECREF(source);
        return raise_code(rc, "Timers.set_timing");
    }
    drop_stream_source(ts);
    ts->stream_source = source; /* kept by this object as long as the registry asks it */
    if (source) tprof_timers_set_stream_source(ts->t, py_stream_source, source);
    Py_RETURN_NONE;
}

static PyObject *timers_get_level(TimersObject *ts, void *c) {
    (void)c;
    return PyLong_FromLong(ts->log_level);
}

static PyObject *timers_get_option(TimersObject *ts, void *c) {
    (void)c;
    return PyUnicode_FromString(OPTION_NAMES[ts->option]);
}

static PyMethodDef timers_methods[] = {
    {"log", (PyCFunction)(void (*)(void))timers_log, METH_VARARGS | METH_KEYWORDS,
     "log(names=None, rank=None, normalizer=1.0, reset=True, barrier=False, file=None)\n--\n\n"
     "Collective: every rank calls it with the same names. Rank `rank` (default the last) "
     "writes Megatron-LM's text to `file` (default sys.stdout): milliseconds per normalizer "
     "unit (pass the log interval to get average ms per iteration). Nothing is written when "
     "no timer has a value."},
    {"write", (PyCFunction)(void (*)(void))timers_write, METH_VARARGS | METH_KEYWORDS,
     "write(names, writer, iteration, normalizer=1.0, reset=False, barrier=False)\n--\n\n"
     "Collective. For each timer with a value, writer.add_scalar(name + '-time', max over "
     "ranks in SECONDS per normalizer unit, iteration), as Megatron-LM does for TensorBoard."},
    {"get_all_timers_string", (PyCFunction)(void (*)(void))timers_get_all_timers_string,
     METH_VARARGS | METH_KEYWORDS,
     "get_all_timers_string(names=None, normalizer=1.0, reset=True, barrier=False)\n--\n\n"
     "Collective. Megatron-LM's text (ms per normalizer unit), or None when no timer has a "
     "value."},
    {"json", (PyCFunction)(void (*)(void))timers_json, METH_VARARGS | METH_KEYWORDS,
     "json(names=None, normalizer=1.0, reset=True, barrier=False)\n--\n\nCollective. The "
     "same data as a JSON string ({option, unit: 'ms', normalizer, world_size, timers: "
     "[{name, min, max, ranks}]}), or None."},
    {"elapsed_all_ranks", (PyCFunction)(void (*)(void))timers_elapsed_all_ranks,
     METH_VARARGS | METH_KEYWORDS,
     "elapsed_all_ranks(names=None, reset=True, barrier=False)\n--\n\nCollective. (names, "
     "rows): rows is a world_size x len(names) list of elapsed SECONDS (float32 precision, "
     "0.0 for a timer missing on a rank); names=None means every registered timer."},
    {"set_timing", (PyCFunction)(void (*)(void))timers_set_timing, METH_VARARGS | METH_KEYWORDS,
     "set_timing(timing, cuda_stream=None)\n--\n\n'host' (default), 'cuda_events' (GPU time: "
     "CUDA events at start and stop, read when the timers are logged, no synchronize) or "
     "'cuda_sync' (Megatron's device synchronize before each start and stop). cuda_stream: "
     "None records on torch's current stream at each start and stop "
     "(trainprof.torch.current_cuda_stream), a callable returning a cudaStream_t as int does "
     "the same with its answer, an int fixes the stream (0: the legacy default stream). Call "
     "before timing starts."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef timers_getset[] = {
    {"log_level", (getter)timers_get_level, NULL, "The registry's log level (0..2).", NULL},
    {"log_option", (getter)timers_get_option, NULL, "'max', 'minmax' or 'all'.", NULL},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyDoc_STRVAR(timers_doc,
             "Timers(log_level=2, log_option='minmax', *, strict=False)\n--\n\n"
             "Megatron-LM's Timers registry over the C library (tprof_timers_*). "
             "timers(name, log_level=None) returns the Timer `name`, created on first use with "
             "its level fixed (default 2); a timer above log_level is a dummy whose calls do "
             "nothing. Times are host CLOCK_MONOTONIC seconds; printed values are milliseconds "
             "per normalizer unit. strict=True (trainprof.megatron.Timers) raises as Megatron "
             "does: AssertionError on a level mismatch, an Exception from a dummy's elapsed().");

PyTypeObject TimersType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "trainprof.Timers",
    .tp_basicsize = sizeof(TimersObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC |
                Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = timers_doc,
    .tp_new = timers_new,
    .tp_init = (initproc)timers_init,
    .tp_dealloc = (destructor)timers_dealloc,
    .tp_traverse = (traverseproc)timers_traverse,
    .tp_clear = (inquiry)timers_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(TimersObject, vectorcall),
    .tp_dictoffset = offsetof(TimersObject, dict),
    .tp_methods = timers_methods,
    .tp_getset = timers_getset,
};

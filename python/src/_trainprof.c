/*
 * _trainprof.c — the CPython extension module behind the `trainprof` package (docs/python.md).
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
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#include <trainprof.h>

/* the bridge the MPI wrappers use (exported, internal): trainprof.torch records
 * torch.distributed calls through it (source TPROF_COMM_SRC_TORCH) */
#include "capture/comm_ext.h"

#if PY_VERSION_HEX >= 0x030D0000
#define TP_FINALIZING() Py_IsFinalizing()
#else
#define TP_FINALIZING() _Py_IsFinalizing()
#endif

#define TP_LIKELY(x) __builtin_expect(!!(x), 1)

/* A method table entry for a fastcall-with-keywords function (the cast through void(*)(void)
 * keeps -Wcast-function-type quiet, as CPython's own modules do). */
#define TP_FASTKW(f) ((PyCFunction)(void (*)(void))(f))

static PyObject *g_error;         /* trainprof.Error */
static PyObject *g_update_wrapper; /* functools.update_wrapper */
static PyObject *g_hook_provider; /* callable registering a hook on demand, or NULL */

/* Ranges pushed from Python on this thread, to warn about a pop with none open. */
static _Thread_local long tls_depth;

/* ------------------------------------------------------------------------------ errors */

static PyObject *raise_code(int rc, const char *what) {
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

/* The exception a Python collectives callback raised, kept across the C call. */
static PyObject *g_pending_exc;

static void pending_save(void) {
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *e = PyErr_GetRaisedException();
#else
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyErr_NormalizeException(&t, &v, &tb);
    if (v && tb) PyException_SetTraceback(v, tb);
    Py_XDECREF(t);
    Py_XDECREF(tb);
    PyObject *e = v;
#endif
    if (g_pending_exc) { /* the first failure is the interesting one */
        Py_XDECREF(e);
        return;
    }
    g_pending_exc = e;
}

/* Re-raise a kept exception: returns 1 when one was raised. */
static int pending_raise(void) {
    if (!g_pending_exc) return 0;
    PyObject *e = g_pending_exc;
    g_pending_exc = NULL;
    PyErr_SetObject((PyObject *)Py_TYPE(e), e);
    Py_DECREF(e);
    return 1;
}

static void pending_clear(void) { Py_CLEAR(g_pending_exc); }

/* Before anything collective: let the provider register a hook (torch.distributed) when the
 * program has initialised one since. Returns -1 with an exception set on failure. */
static int ensure_hook(void) {
    if (!g_hook_provider) return 0;
    PyObject *r = PyObject_CallNoArgs(g_hook_provider);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

/* A str argument's UTF-8 (cached inside the str by CPython; valid while the str lives). */
static const char *utf8_of(PyObject *o, const char *what) {
    if (!PyUnicode_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be str, not %.100s", what, Py_TYPE(o)->tp_name);
        return NULL;
    }
    return PyUnicode_AsUTF8AndSize(o, NULL);
}

/* ------------------------------------------------------------------------------ push/pop */

static inline void push_name(const char *domain, const char *name, uint32_t category) {
    if (domain || category)
        tprof_range_push_ex(domain, name, category);
    else
        tprof_range_push(name);
    tls_depth++;
}

/* Returns -1 when the warning became an exception (warnings filter "error"). */
static inline int pop_checked(int may_warn) {
    tprof_range_pop();
    if (TP_LIKELY(tls_depth > 0)) {
        tls_depth--;
        return 0;
    }
    if (may_warn)
        return PyErr_WarnEx(PyExc_RuntimeWarning,
                            "trainprof: pop() with no range open on this thread (mismatched "
                            "push/pop); recorded and ignored",
                            1);
    return 0;
}

/* ------------------------------------------------------------------------------ range */

typedef struct {
    PyObject_HEAD
    PyObject *name;   /* str: its UTF-8 buffer is what the library reads */
    const char *utf8;
    PyObject *domain; /* str or NULL */
    const char *domain_utf8;
    uint32_t category;
} RangeObject;

static PyTypeObject RangeType;
static PyTypeObject WrappedType;

#define RANGE_FREELIST 32
static RangeObject *g_range_free[RANGE_FREELIST];
static int g_range_nfree;

static PyObject *range_make(PyTypeObject *type, PyObject *name, PyObject *domain,
                            uint32_t category) {
    const char *u = utf8_of(name, "range name");
    if (!u) return NULL;
    const char *du = NULL;
    if (domain && domain != Py_None) {
        du = utf8_of(domain, "domain");
        if (!du) return NULL;
    } else {
        domain = NULL;
    }
    RangeObject *r;
    if (type == &RangeType && g_range_nfree > 0) {
        r = g_range_free[--g_range_nfree];
        PyObject_Init((PyObject *)r, &RangeType);
    } else {
        r = (RangeObject *)type->tp_alloc(type, 0);
        if (!r) return NULL;
    }
    Py_INCREF(name);
    r->name = name;
    r->utf8 = u;
    Py_XINCREF(domain);
    r->domain = domain;
    r->domain_utf8 = du;
    r->category = category;
    return (PyObject *)r;
}

static void range_dealloc(RangeObject *r) {
    Py_CLEAR(r->name);
    Py_CLEAR(r->domain);
    if (Py_TYPE(r) == &RangeType && g_range_nfree < RANGE_FREELIST) {
        g_range_free[g_range_nfree++] = r;
        return;
    }
    Py_TYPE(r)->tp_free((PyObject *)r);
}

static int parse_category(PyObject *o, uint32_t *out) {
    unsigned long v = PyLong_AsUnsignedLong(o);
    if (v == (unsigned long)-1 && PyErr_Occurred()) return -1;
    if (v > UINT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "category must fit in 32 bits");
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

/* range(name, domain=None, category=0) */
static PyObject *range_vectorcall(PyObject *type, PyObject *const *args, size_t nargsf,
                                  PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs == 1 && !kwnames) return range_make((PyTypeObject *)type, args[0], NULL, 0);
    PyObject *name = NULL, *domain = NULL, *cat = NULL;
    if (nargs > 3) {
        PyErr_SetString(PyExc_TypeError, "range() takes at most 3 positional arguments");
        return NULL;
    }
    if (nargs > 0) name = args[0];
    if (nargs > 1) domain = args[1];
    if (nargs > 2) cat = args[2];
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *k = PyTuple_GET_ITEM(kwnames, i);
        PyObject *v = args[nargs + i];
        PyObject **slot = NULL;
        if (PyUnicode_CompareWithASCIIString(k, "name") == 0) slot = &name;
        else if (PyUnicode_CompareWithASCIIString(k, "domain") == 0) slot = &domain;
        else if (PyUnicode_CompareWithASCIIString(k, "category") == 0) slot = &cat;
        if (!slot) {
            PyErr_Format(PyExc_TypeError, "range() got an unexpected keyword argument '%U'", k);
            return NULL;
        }
        if (*slot) {
            PyErr_Format(PyExc_TypeError, "range() got multiple values for argument '%U'", k);
            return NULL;
        }
        *slot = v;
    }
    if (!name) {
        PyErr_SetString(PyExc_TypeError, "range() missing required argument 'name'");
        return NULL;
    }
    uint32_t category = 0;
    if (cat && parse_category(cat, &category) < 0) return NULL;
    return range_make((PyTypeObject *)type, name, domain, category);
}

static PyObject *range_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kw[] = {"name", "domain", "category", NULL};
    PyObject *name, *domain = NULL, *cat = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|OO:range", kw, &name, &domain, &cat))
        return NULL;
    uint32_t category = 0;
    if (cat && parse_category(cat, &category) < 0) return NULL;
    return range_make(type, name, domain, category);
}

static PyObject *range_enter(RangeObject *r, PyObject *unused) {
    (void)unused;
    push_name(r->domain_utf8, r->utf8, r->category);
    Py_INCREF(r);
    return (PyObject *)r;
}

static PyObject *range_exit(RangeObject *r, PyObject *const *args, Py_ssize_t nargs) {
    (void)r;
    /* with an exception in flight, a warning would replace it: stay quiet then */
    int in_exc = nargs > 0 && args[0] != Py_None;
    if (pop_checked(!in_exc) < 0) return NULL;
    Py_RETURN_FALSE; /* never swallow the exception */
}

static PyObject *range_repr(RangeObject *r) {
    if (r->domain)
        return PyUnicode_FromFormat("trainprof.range(%R, domain=%R)", r->name, r->domain);
    return PyUnicode_FromFormat("trainprof.range(%R)", r->name);
}

/* As a decorator: range(name)(func) -> a callable that runs func inside the range. */
typedef struct {
    PyObject_HEAD
    PyObject *func;
    RangeObject *range;
    PyObject *dict;
    vectorcallfunc vectorcall;
} WrappedObject;

static PyObject *wrapped_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                    PyObject *kwnames) {
    WrappedObject *w = (WrappedObject *)self;
    RangeObject *r = w->range;
    push_name(r->domain_utf8, r->utf8, r->category);
    PyObject *res = PyObject_Vectorcall(w->func, args, nargsf, kwnames);
    if (pop_checked(res != NULL) < 0) Py_CLEAR(res);
    return res;
}

static PyObject *range_call(RangeObject *r, PyObject *args, PyObject *kwds) {
    PyObject *func;
    if ((kwds && PyDict_GET_SIZE(kwds)) || PyTuple_GET_SIZE(args) != 1 ||
        !PyCallable_Check(func = PyTuple_GET_ITEM(args, 0))) {
        PyErr_SetString(PyExc_TypeError,
                        "a trainprof.range used as a decorator takes one callable");
        return NULL;
    }
    WrappedObject *w = PyObject_GC_New(WrappedObject, &WrappedType);
    if (!w) return NULL;
    Py_INCREF(func);
    w->func = func;
    Py_INCREF(r);
    w->range = r;
    w->dict = NULL;
    w->vectorcall = wrapped_vectorcall;
    PyObject_GC_Track(w);
    /* __name__, __doc__, __wrapped__, ... as functools.wraps gives */
    PyObject *u = PyObject_CallFunctionObjArgs(g_update_wrapper, (PyObject *)w, func, NULL);
    if (!u) {
        Py_DECREF(w);
        return NULL;
    }
    Py_DECREF(u);
    return (PyObject *)w;
}

static int wrapped_traverse(WrappedObject *w, visitproc visit, void *arg) {
    Py_VISIT(w->func);
    Py_VISIT(w->range);
    Py_VISIT(w->dict);
    return 0;
}

static int wrapped_clear(WrappedObject *w) {
    Py_CLEAR(w->func);
    Py_CLEAR(w->range);
    Py_CLEAR(w->dict);
    return 0;
}

static void wrapped_dealloc(WrappedObject *w) {
    PyObject_GC_UnTrack(w);
    wrapped_clear(w);
    PyObject_GC_Del(w);
}

/* Binds like a function, so a decorated method gets its self. */
static PyObject *wrapped_get(PyObject *self, PyObject *obj, PyObject *type) {
    (void)type;
    if (!obj || obj == Py_None) {
        Py_INCREF(self);
        return self;
    }
    return PyMethod_New(self, obj);
}

static PyObject *wrapped_repr(WrappedObject *w) {
    return PyUnicode_FromFormat("<trainprof.range(%R) wrapping %R>", w->range->name, w->func);
}

static PyGetSetDef wrapped_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject WrappedType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "trainprof._RangeWrapped",
    .tp_basicsize = sizeof(WrappedObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
                Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "A function wrapped by a trainprof.range used as a decorator.",
    .tp_dealloc = (destructor)wrapped_dealloc,
    .tp_traverse = (traverseproc)wrapped_traverse,
    .tp_clear = (inquiry)wrapped_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(WrappedObject, vectorcall),
    .tp_descr_get = wrapped_get,
    .tp_dictoffset = offsetof(WrappedObject, dict),
    .tp_getset = wrapped_getset,
    .tp_repr = (reprfunc)wrapped_repr,
};

static PyMethodDef range_methods[] = {
    {"__enter__", (PyCFunction)range_enter, METH_NOARGS, "Open the range (push)."},
    {"__exit__", (PyCFunction)(void (*)(void))range_exit, METH_FASTCALL,
     "Close the range (pop); an exception in flight propagates."},
    {NULL, NULL, 0, NULL}};

static PyObject *range_get_name(RangeObject *r, void *c) {
    (void)c;
    Py_INCREF(r->name);
    return r->name;
}

static PyObject *range_get_domain(RangeObject *r, void *c) {
    (void)c;
    PyObject *d = r->domain ? r->domain : Py_None;
    Py_INCREF(d);
    return d;
}

static PyGetSetDef range_getset[] = {
    {"name", (getter)range_get_name, NULL, "The range's name (str).", NULL},
    {"domain", (getter)range_get_domain, NULL, "The NVTX-style domain, or None.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyDoc_STRVAR(range_doc,
             "range(name, domain=None, category=0)\n--\n\n"
             "A named time range on the calling thread: a context manager (``with "
             "trainprof.range('fwd'):``) and a decorator (``@trainprof.range('fwd')``).\n"
             "Entering pushes, leaving pops (also when an exception propagates). Reusable and "
             "reentrant; keep one object per name in hot loops to skip its creation.\n"
             "Recorded with nanosecond CLOCK_MONOTONIC timestamps when a session records.");

static PyTypeObject RangeType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "trainprof.range",
    .tp_basicsize = sizeof(RangeObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = range_doc,
    .tp_dealloc = (destructor)range_dealloc,
    .tp_new = range_new,
    .tp_vectorcall = range_vectorcall,
    .tp_call = (ternaryfunc)range_call,
    .tp_methods = range_methods,
    .tp_getset = range_getset,
    .tp_repr = (reprfunc)range_repr,
};

/* ------------------------------------------------------------------------------ step */

typedef struct {
    PyObject_HEAD
    uint64_t step;
} StepObject;

static PyTypeObject StepType;
static uint64_t g_next_step; /* guarded by the GIL */

static PyObject *step_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kw[] = {"step", NULL};
    PyObject *n = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O:step", kw, &n)) return NULL;
    uint64_t v;
    if (n == Py_None) {
        v = g_next_step;
    } else {
        unsigned long long u = PyLong_AsUnsignedLongLong(n);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
        v = (uint64_t)u;
    }
    g_next_step = v + 1;
    StepObject *s = (StepObject *)type->tp_alloc(type, 0);
    if (!s) return NULL;
    s->step = v;
    return (PyObject *)s;
}

static PyObject *step_enter(StepObject *s, PyObject *unused) {
    (void)unused;
    tprof_step_begin(s->step);
    Py_INCREF(s);
    return (PyObject *)s;
}

static PyObject *step_exit(StepObject *s, PyObject *const *args, Py_ssize_t nargs) {
    (void)args;
    (void)nargs;
    tprof_step_end(s->step);
    Py_RETURN_FALSE;
}

static PyObject *step_get_number(StepObject *s, void *c) {
    (void)c;
    return PyLong_FromUnsignedLongLong(s->step);
}

static PyMethodDef step_methods[] = {
    {"__enter__", (PyCFunction)step_enter, METH_NOARGS, "tprof_step_begin(step)."},
    {"__exit__", (PyCFunction)(void (*)(void))step_exit, METH_FASTCALL, "tprof_step_end(step)."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef step_getset[] = {
    {"step", (getter)step_get_number, NULL, "The step number (int).", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject StepType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "trainprof.step",
    .tp_basicsize = sizeof(StepObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "step(step=None)\n--\n\nOne training step as a context manager: "
              "step_begin(n) on entry, step_end(n) on exit. step=None numbers steps 0, 1, 2, "
              "... (continuing after the last number given). API steps take precedence over "
              "steps inferred from range names in the report.",
    .tp_new = step_new,
    .tp_methods = step_methods,
    .tp_getset = step_getset,
};

/* ------------------------------------------------------------------------------ functions */

static PyObject *fn_push(PyObject *m, PyObject *arg) {
    (void)m;
    const char *u = utf8_of(arg, "name");
    if (!u) return NULL;
    push_name(NULL, u, 0);
    Py_RETURN_NONE;
}

static PyObject *fn_pop(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    if (pop_checked(1) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *fn_depth(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    return PyLong_FromLong(tls_depth);
}

static PyObject *fn_mark(PyObject *m, PyObject *arg) {
    (void)m;
    const char *u = utf8_of(arg, "name");
    if (!u) return NULL;
    tprof_mark(u);
    Py_RETURN_NONE;
}

static PyObject *fn_counter(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
    (void)m;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "counter(name, value) takes 2 arguments");
        return NULL;
    }
    const char *u = utf8_of(args[0], "name");
    if (!u) return NULL;
    double v = PyFloat_AsDouble(args[1]);
    if (v == -1.0 && PyErr_Occurred()) return NULL;
    tprof_counter(u, v);
    Py_RETURN_NONE;
}

static int as_u64(PyObject *o, uint64_t *out) {
    unsigned long long u = PyLong_AsUnsignedLongLong(o);
    if (u == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    *out = (uint64_t)u;
    return 0;
}

static PyObject *fn_step_begin(PyObject *m, PyObject *arg) {
    (void)m;
    uint64_t n;
    if (as_u64(arg, &n) < 0) return NULL;
    tprof_step_begin(n);
    if (n + 1 > g_next_step) g_next_step = n + 1;
    Py_RETURN_NONE;
}

static PyObject *fn_step_end(PyObject *m, PyObject *arg) {
    (void)m;
    uint64_t n;
    if (as_u64(arg, &n) < 0) return NULL;
    tprof_step_end(n);
    Py_RETURN_NONE;
}

static PyObject *fn_range_start(PyObject *m, PyObject *arg) {
    (void)m;
    const char *u = utf8_of(arg, "name");
    if (!u) return NULL;
    return PyLong_FromUnsignedLongLong(tprof_range_start(u));
}

static PyObject *fn_range_end(PyObject *m, PyObject *arg) {
    (void)m;
    uint64_t id;
    if (as_u64(arg, &id) < 0) return NULL;
    tprof_range_end(id);
    Py_RETURN_NONE;
}

static PyObject *fn_set_metadata(PyObject *m, PyObject *args) {
    (void)m;
    const char *k, *v;
    if (!PyArg_ParseTuple(args, "ss:set_metadata", &k, &v)) return NULL;
    int rc = tprof_set_metadata(k, v);
    if (rc == TPROF_ERR_DISABLED) Py_RETURN_FALSE;
    if (rc != TPROF_OK) return raise_code(rc, "set_metadata");
    Py_RETURN_TRUE;
}

static PyObject *fn_set_rank(PyObject *m, PyObject *args) {
    (void)m;
    int rank, world;
    if (!PyArg_ParseTuple(args, "ii:set_rank", &rank, &world)) return NULL;
    int rc = tprof_set_rank(rank, world);
    if (rc == TPROF_ERR_DISABLED) Py_RETURN_FALSE;
    if (rc != TPROF_OK) return raise_code(rc, "set_rank");
    Py_RETURN_TRUE;
}

static PyObject *fn_name_thread(PyObject *m, PyObject *arg) {
    (void)m;
    const char *u = utf8_of(arg, "name");
    if (!u) return NULL;
    int rc = tprof_name_thread(u);
    if (rc == TPROF_ERR_DISABLED) Py_RETURN_FALSE;
    if (rc != TPROF_OK) return raise_code(rc, "name_thread");
    Py_RETURN_TRUE;
}

static PyObject *fn_enabled(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    return PyBool_FromLong(tprof_enabled());
}

static PyObject *fn_flush(PyObject *m, PyObject *unused) {
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

static PyObject *fn_shutdown(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = tprof_shutdown();
    Py_END_ALLOW_THREADS
    if (rc != TPROF_OK && rc != TPROF_ERR_DISABLED) return raise_code(rc, "shutdown");
    Py_RETURN_NONE;
}

static PyObject *fn_output_path(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    const char *p = tprof_output_path();
    if (!p) Py_RETURN_NONE;
    return PyUnicode_DecodeFSDefault(p);
}

static PyObject *fn_now_ns(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    return PyLong_FromUnsignedLongLong(tprof_now_ns());
}

static PyObject *fn_version(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    return PyUnicode_FromString(tprof_version());
}

static PyObject *fn_build_info(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    return PyUnicode_FromString(tprof_build_info());
}

static PyObject *fn_strerror(PyObject *m, PyObject *arg) {
    (void)m;
    long c = PyLong_AsLong(arg);
    if (c == -1 && PyErr_Occurred()) return NULL;
    return PyUnicode_FromString(tprof_strerror((int)c));
}

static PyObject *fn_init(PyObject *m, PyObject *args, PyObject *kwds) {
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

/* Energy arithmetic helpers (trainprof.h): pure functions. */
static PyObject *fn_energy2(PyObject *args, const char *fmt, double (*f)(double, uint64_t)) {
    double j;
    unsigned long long n;
    if (!PyArg_ParseTuple(args, fmt, &j, &n)) return NULL;
    return PyFloat_FromDouble(f(j, (uint64_t)n));
}
static PyObject *fn_joules_per_step(PyObject *m, PyObject *a) {
    (void)m;
    return fn_energy2(a, "dK:joules_per_step", tprof_energy_joules_per_step);
}
static PyObject *fn_wh_per_step(PyObject *m, PyObject *a) {
    (void)m;
    return fn_energy2(a, "dK:wh_per_step", tprof_energy_wh_per_step);
}
static PyObject *fn_joules_per_sample(PyObject *m, PyObject *a) {
    (void)m;
    return fn_energy2(a, "dK:joules_per_sample", tprof_energy_joules_per_sample);
}
static PyObject *fn_wh_per_sample(PyObject *m, PyObject *a) {
    (void)m;
    return fn_energy2(a, "dK:wh_per_sample", tprof_energy_wh_per_sample);
}
static PyObject *fn_avg_watts(PyObject *m, PyObject *a) {
    (void)m;
    return fn_energy2(a, "dK:avg_watts", tprof_energy_avg_watts);
}

/* ------------------------------------------------------------------------------ collectives */

/* The Python callables behind the C hook; ctx of our registration points here. */
static struct {
    PyObject *all_gather, *all_reduce, *barrier;
    int registered;
} g_pyhook;

static int hook_enter(PyGILState_STATE *st) {
    if (TP_FINALIZING()) return -1;
    *st = PyGILState_Ensure();
    return 0;
}

static int cb_all_gather(void *ctx, const void *send, size_t bytes, void *recv) {
    (void)ctx;
    PyGILState_STATE st;
    if (hook_enter(&st) < 0) return 1;
    int rc = 1;
    tprof_collectives c;
    tprof_get_collectives(&c);
    PyObject *res = NULL, *in = PyBytes_FromStringAndSize(send, (Py_ssize_t)bytes);
    if (in && g_pyhook.all_gather) res = PyObject_CallOneArg(g_pyhook.all_gather, in);
    if (res) {
        Py_buffer view;
        if (PyObject_GetBuffer(res, &view, PyBUF_SIMPLE) == 0) {
            if ((size_t)view.len == bytes * (size_t)c.world_size) {
                memcpy(recv, view.buf, (size_t)view.len);
                rc = 0;
            } else {
                PyErr_Format(PyExc_ValueError,
                             "collectives all_gather returned %zd bytes, expected %zu",
                             view.len, bytes * (size_t)c.world_size);
            }
            PyBuffer_Release(&view);
        }
    }
    if (rc) {
        if (PyErr_Occurred()) pending_save();
    }
    Py_XDECREF(in);
    Py_XDECREF(res);
    PyGILState_Release(st);
    return rc;
}

static int cb_all_reduce(void *ctx, double *values, size_t count, tprof_reduce_op op) {
    (void)ctx;
    PyGILState_STATE st;
    if (hook_enter(&st) < 0) return 1;
    int rc = 1;
    static const char *names[] = {"sum", "min", "max"};
    PyObject *list = PyList_New((Py_ssize_t)count), *res = NULL, *seq = NULL;
    for (size_t i = 0; list && i < count; i++) {
        PyObject *f = PyFloat_FromDouble(values[i]);
        if (!f) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, f);
    }
    if (list && g_pyhook.all_reduce)
        res = PyObject_CallFunction(g_pyhook.all_reduce, "Os", list,
                                    (unsigned)op < 3 ? names[op] : "sum");
    if (res) seq = PySequence_Fast(res, "collectives all_reduce must return a sequence");
    if (seq) {
        if ((size_t)PySequence_Fast_GET_SIZE(seq) == count) {
            rc = 0;
            for (size_t i = 0; i < count; i++) {
                double v = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(seq, (Py_ssize_t)i));
                if (v == -1.0 && PyErr_Occurred()) {
                    rc = 1;
                    break;
                }
                values[i] = v;
            }
        } else {
            PyErr_SetString(PyExc_ValueError, "collectives all_reduce returned a wrong count");
        }
    }
    if (rc && PyErr_Occurred()) pending_save();
    Py_XDECREF(list);
    Py_XDECREF(res);
    Py_XDECREF(seq);
    PyGILState_Release(st);
    return rc;
}

static int cb_barrier(void *ctx) {
    (void)ctx;
    PyGILState_STATE st;
    if (hook_enter(&st) < 0) return 1;
    PyObject *res = g_pyhook.barrier ? PyObject_CallNoArgs(g_pyhook.barrier) : NULL;
    int rc = res ? 0 : 1;
    if (rc && PyErr_Occurred()) pending_save();
    Py_XDECREF(res);
    PyGILState_Release(st);
    return rc;
}

static int hook_is_ours(const tprof_collectives *c) {
    return g_pyhook.registered && c->ctx == (void *)&g_pyhook;
}

static PyObject *fn_set_collectives(PyObject *m, PyObject *args, PyObject *kwds) {
    (void)m;
    static char *kw[] = {"rank", "world_size", "all_gather", "all_reduce", "barrier", NULL};
    int rank, world;
    PyObject *ag, *ar = Py_None, *bar = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "iiO|OO:set_collectives", kw, &rank, &world, &ag,
                                     &ar, &bar))
        return NULL;
    if (!PyCallable_Check(ag) || (ar != Py_None && !PyCallable_Check(ar)) ||
        (bar != Py_None && !PyCallable_Check(bar))) {
        PyErr_SetString(PyExc_TypeError, "set_collectives: callbacks must be callable (or None)");
        return NULL;
    }
    tprof_collectives c = {.struct_size = sizeof c,
                           .ctx = (void *)&g_pyhook,
                           .rank = rank,
                           .world_size = world,
                           .all_gather = cb_all_gather,
                           .all_reduce = ar != Py_None ? cb_all_reduce : NULL,
                           .barrier = bar != Py_None ? cb_barrier : NULL};
    /* the new callables are in place before the library can call them */
    PyObject *old_ag = g_pyhook.all_gather, *old_ar = g_pyhook.all_reduce,
             *old_b = g_pyhook.barrier;
    Py_INCREF(ag);
    g_pyhook.all_gather = ag;
    g_pyhook.all_reduce = ar != Py_None ? Py_NewRef(ar) : NULL;
    g_pyhook.barrier = bar != Py_None ? Py_NewRef(bar) : NULL;
    int rc = tprof_set_collectives(&c);
    if (rc != TPROF_OK) {
        Py_XDECREF(g_pyhook.all_gather);
        Py_XDECREF(g_pyhook.all_reduce);
        Py_XDECREF(g_pyhook.barrier);
        g_pyhook.all_gather = old_ag;
        g_pyhook.all_reduce = old_ar;
        g_pyhook.barrier = old_b;
        return raise_code(rc, "set_collectives");
    }
    g_pyhook.registered = 1;
    Py_XDECREF(old_ag);
    Py_XDECREF(old_ar);
    Py_XDECREF(old_b);
    Py_RETURN_NONE;
}

static void pyhook_release(void) {
    g_pyhook.registered = 0;
    Py_CLEAR(g_pyhook.all_gather);
    Py_CLEAR(g_pyhook.all_reduce);
    Py_CLEAR(g_pyhook.barrier);
}

/* clear_collectives(force=False): removes our hook; with force, any hook. Returns whether a
 * hook was removed. */
static PyObject *fn_clear_collectives(PyObject *m, PyObject *args, PyObject *kwds) {
    (void)m;
    static char *kw[] = {"force", NULL};
    int force = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|p:clear_collectives", kw, &force)) return NULL;
    tprof_collectives c;
    tprof_get_collectives(&c);
    int ours = hook_is_ours(&c);
    int removed = 0;
    if (ours || force) {
        tprof_set_collectives(NULL);
        removed = ours || c.world_size > 1 || c.ctx;
    }
    if (ours || force) pyhook_release();
    return PyBool_FromLong(removed);
}

static PyObject *fn_get_collectives(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    tprof_collectives c;
    tprof_get_collectives(&c);
    int ours = hook_is_ours(&c);
    /* the library's convention (mpi_pmpi.c): a hook of one rank without context is none */
    int registered = ours || c.world_size > 1 || c.ctx != NULL;
    return Py_BuildValue("{s:i,s:i,s:O,s:O}", "rank", c.rank, "world_size", c.world_size,
                         "registered", registered ? Py_True : Py_False, "python",
                         ours ? Py_True : Py_False);
}

static PyObject *fn_set_hook_provider(PyObject *m, PyObject *arg) {
    (void)m;
    if (arg != Py_None && !PyCallable_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "hook provider must be callable or None");
        return NULL;
    }
    Py_XSETREF(g_hook_provider, arg == Py_None ? NULL : Py_NewRef(arg));
    Py_RETURN_NONE;
}

static PyObject *fn_ensure_hook(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    if (ensure_hook() < 0) return NULL;
    Py_RETURN_NONE;
}

/* After a collective C call: a kept callback exception wins over the code. */
static PyObject *collective_result(int rc, const char *what) {
    if (pending_raise()) return NULL;
    if (rc != TPROF_OK) return raise_code(rc, what);
    return Py_None; /* borrowed marker: success */
}

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

static PyTypeObject TimerType;
static PyTypeObject TimersType;

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

static PyObject *timer_start(TimerObject *t, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames) {
    if (TP_LIKELY(nargs == 0 && !kwnames)) {
        tprof_timer_start(t->tm, 0);
        Py_RETURN_NONE;
    }
    int barrier;
    if (get_barrier_arg(args, nargs, kwnames, "start", &barrier) < 0) return NULL;
    if (barrier && ensure_hook() < 0) return NULL;
    tprof_timer_start(t->tm, barrier);
    if (pending_raise()) return NULL;
    Py_RETURN_NONE;
}

static PyObject *timer_stop(TimerObject *t, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames) {
    if (TP_LIKELY(nargs == 0 && !kwnames)) {
        tprof_timer_stop(t->tm, 0);
        Py_RETURN_NONE;
    }
    int barrier;
    if (get_barrier_arg(args, nargs, kwnames, "stop", &barrier) < 0) return NULL;
    if (barrier && ensure_hook() < 0) return NULL;
    tprof_timer_stop(t->tm, barrier);
    if (pending_raise()) return NULL;
    Py_RETURN_NONE;
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

static PyTypeObject TimerType = {
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
static int names_array(PyObject *names, PyObject **keep, const char ***out, size_t *n) {
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

static PyObject *timers_get_all_timers_string(TimersObject *ts, PyObject *args, PyObject *kwds) {
    static char *kw[] = {"names", "normalizer", "reset", "barrier", NULL};
    coll_args a = {NULL, 1.0, 1, 0};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|Odpp:get_all_timers_string", kw, &a.names,
                                     &a.normalizer, &a.reset, &a.barrier))
        return NULL;
    return timers_string_common(ts, &a, 0);
}

static PyObject *timers_json(TimersObject *ts, PyObject *args, PyObject *kwds) {
    static char *kw[] = {"names", "normalizer", "reset", "barrier", NULL};
    coll_args a = {NULL, 1.0, 1, 0};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|Odpp:json", kw, &a.names, &a.normalizer,
                                     &a.reset, &a.barrier))
        return NULL;
    return timers_string_common(ts, &a, 1);
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

static PyTypeObject TimersType = {
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

/* ------------------------------------------------------------------------------ energy */

typedef struct {
    PyObject_HEAD
    tprof_energy *m;
    int status; /* last setup code */
    PyObject *dict;
} EnergyObject;

static PyTypeObject EnergyType;

/* UNAVAILABLE (no NVML/GPU, a read failed, or the hook failed) is not an error for the job:
 * Megatron's monitor returns 0 without pynvml; a failing Python callback still raises. */
static int energy_rc(int rc, const char *what) {
    if (pending_raise()) return -1;
    if (rc == TPROF_OK || rc == TPROF_ERR_UNAVAILABLE) return 0;
    raise_code(rc, what);
    return -1;
}

static PyObject *energy_setup(EnergyObject *e, PyObject *args, PyObject *kwds) {
    static char *kw[] = {"devices", NULL};
    PyObject *devices = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O:setup", kw, &devices)) return NULL;
    PyObject *keep = NULL;
    const char **v = NULL;
    size_t n = 0;
    if (devices != Py_None) {
        if (PyUnicode_Check(devices) || PyLong_Check(devices)) {
            PyErr_SetString(PyExc_TypeError, "devices must be a list of str (UUIDs or indices)");
            return NULL;
        }
        if (names_array(devices, &keep, &v, &n) < 0) return NULL;
    }
    if (e->m) {
        tprof_energy_shutdown(e->m);
        e->m = NULL;
    }
    tprof_energy *m = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = tprof_energy_setup(v, n, &m); /* nvmlInit: up to a second */
    Py_END_ALLOW_THREADS
    PyMem_Free(v);
    Py_XDECREF(keep);
    e->m = m;
    e->status = rc;
    if (rc == TPROF_ERR_NOT_FOUND && m) Py_RETURN_NONE; /* counts the others; gpus() says */
    if (energy_rc(rc, "EnergyMonitor.setup") < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *energy_resume(EnergyObject *e, PyObject *unused) {
    (void)unused;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = tprof_energy_resume(e->m);
    Py_END_ALLOW_THREADS
    if (energy_rc(rc, "EnergyMonitor.resume") < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *energy_pause(EnergyObject *e, PyObject *unused) {
    (void)unused;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = tprof_energy_pause(e->m);
    Py_END_ALLOW_THREADS
    if (energy_rc(rc, "EnergyMonitor.pause") < 0) return NULL;
    Py_RETURN_NONE;
}

/* lap and get_total: collective through the hook, so the GIL is kept (the Python callbacks
 * need it anyway). */
static PyObject *energy_collective(EnergyObject *e, PyObject *args, PyObject *kwds, int total) {
    static char *kw[] = {"per_rank", NULL};
    int per_rank = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, total ? "|$p:get_total" : "|$p:lap", kw,
                                     &per_rank))
        return NULL;
    if (ensure_hook() < 0) return NULL;
    double mine = 0, world = 0;
    pending_clear();
    int rc = total ? tprof_energy_get_total(e->m, &mine, &world)
                   : tprof_energy_lap(e->m, &mine, &world);
    if (energy_rc(rc, total ? "EnergyMonitor.get_total" : "EnergyMonitor.lap") < 0) return NULL;
    if (per_rank) return Py_BuildValue("(dd)", mine, world);
    return PyFloat_FromDouble(world);
}

static PyObject *energy_lap(EnergyObject *e, PyObject *args, PyObject *kwds) {
    return energy_collective(e, args, kwds, 0);
}

static PyObject *energy_get_total(EnergyObject *e, PyObject *args, PyObject *kwds) {
    return energy_collective(e, args, kwds, 1);
}

static PyObject *energy_shutdown(EnergyObject *e, PyObject *unused) {
    (void)unused;
    tprof_energy *m = e->m;
    e->m = NULL;
    tprof_energy_shutdown(m);
    Py_RETURN_NONE;
}

static PyObject *energy_gpus(EnergyObject *e, PyObject *unused) {
    (void)unused;
    size_t n = tprof_energy_gpu_count(e->m);
    PyObject *list = PyList_New(0);
    for (size_t i = 0; list && i < n; i++) {
        tprof_energy_gpu g;
        memset(&g, 0, sizeof g);
        g.struct_size = sizeof g;
        if (tprof_energy_gpu_info(e->m, i, &g) != TPROF_OK) continue;
        PyObject *d = Py_BuildValue("{s:i,s:s,s:s,s:d,s:d,s:d}", "nvml_index", g.nvml_index, "uuid",
                                    g.uuid, "name", g.name, "lap_joules", g.lap_joules,
                                    "total_joules", g.total_joules, "current_joules",
                                    g.current_joules);
        if (!d || PyList_Append(list, d) < 0) {
            Py_XDECREF(d);
            Py_CLEAR(list);
            break;
        }
        Py_DECREF(d);
    }
    return list;
}

static PyObject *energy_get_has_nvml(EnergyObject *e, void *c) {
    (void)c;
    return PyBool_FromLong(tprof_energy_gpu_count(e->m) > 0);
}

static PyObject *energy_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    (void)args;
    (void)kwds;
    EnergyObject *e = (EnergyObject *)type->tp_alloc(type, 0);
    if (e) e->status = TPROF_ERR_UNAVAILABLE;
    return (PyObject *)e;
}

static int energy_init(EnergyObject *e, PyObject *args, PyObject *kwds) {
    (void)e;
    if (PyTuple_GET_SIZE(args) || (kwds && PyDict_GET_SIZE(kwds))) {
        PyErr_SetString(PyExc_TypeError, "EnergyMonitor() takes no arguments");
        return -1;
    }
    return 0;
}

static int energy_traverse(EnergyObject *e, visitproc visit, void *arg) {
    Py_VISIT(e->dict);
    return 0;
}

static int energy_clear(EnergyObject *e) {
    Py_CLEAR(e->dict);
    return 0;
}

static void energy_dealloc(EnergyObject *e) {
    PyObject_GC_UnTrack(e);
    energy_clear(e);
    tprof_energy_shutdown(e->m);
    e->m = NULL;
    Py_TYPE(e)->tp_free((PyObject *)e);
}

static PyMethodDef energy_methods[] = {
    {"setup", (PyCFunction)(void (*)(void))energy_setup, METH_VARARGS | METH_KEYWORDS,
     "setup(devices=None)\n--\n\nFind this rank's GPU(s) (or the named ones: 'GPU-<uuid>', a "
     "UUID, or an NVML index as str) and load NVML. Without NVML or a GPU the monitor counts "
     "zeros (no exception). Slow: up to a second."},
    {"resume", (PyCFunction)energy_resume, METH_NOARGS,
     "resume()\n--\n\nStart (or continue) counting energy."},
    {"pause", (PyCFunction)energy_pause, METH_NOARGS,
     "pause()\n--\n\nStop counting (the time until resume() is not counted)."},
    {"lap", (PyCFunction)(void (*)(void))energy_lap, METH_VARARGS | METH_KEYWORDS,
     "lap(*, per_rank=False)\n--\n\nCollective. Ends the lap: JOULES counted since the "
     "previous lap, summed over all ranks' GPUs (Megatron's value); per_rank=True returns "
     "(this rank's J, all ranks' J). 0.0 without NVML."},
    {"get_total", (PyCFunction)(void (*)(void))energy_get_total, METH_VARARGS | METH_KEYWORDS,
     "get_total(*, per_rank=False)\n--\n\nCollective. JOULES of all completed laps summed "
     "over ranks (call lap() first to include the current one)."},
    {"shutdown", (PyCFunction)energy_shutdown, METH_NOARGS,
     "shutdown()\n--\n\nRelease NVML; later calls count zeros until setup()."},
    {"gpus", (PyCFunction)energy_gpus, METH_NOARGS,
     "gpus()\n--\n\nPer GPU: dicts {nvml_index, uuid, name, lap_joules, total_joules, "
     "current_joules} (joules)."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef energy_getset[] = {
    {"has_nvml", (getter)energy_get_has_nvml, NULL,
     "True when the monitor counts at least one GPU.", NULL},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject EnergyType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "trainprof.EnergyMonitor",
    .tp_basicsize = sizeof(EnergyObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "EnergyMonitor()\n--\n\nGPU energy with Megatron-LM's methods (setup, resume, "
              "pause, lap, get_total, shutdown) over NVML's total-energy counter "
              "(tprof_energy_*). Values are joules; lap/get_total sum over ranks through the "
              "collectives hook and are collective.",
    .tp_new = energy_new,
    .tp_init = (initproc)energy_init,
    .tp_dealloc = (destructor)energy_dealloc,
    .tp_traverse = (traverseproc)energy_traverse,
    .tp_clear = (inquiry)energy_clear,
    .tp_dictoffset = offsetof(EnergyObject, dict),
    .tp_methods = energy_methods,
    .tp_getset = energy_getset,
};

/* _comm_record(name, op, start_ns, end_ns, bytes, count, comm_hash, seq, nranks, rank, peer,
 * flags): one COMM_OP record of source TPROF_COMM_SRC_TORCH on the calling thread (for
 * trainprof.torch; op is an enum tprof_comm_op value, peer -1 for none). True when written. */
static PyObject *fn_comm_record(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
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
static PyObject *fn_nccl_recording(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    return PyBool_FromLong(tprof__nccl_recording());
}

/* gpu_capture_pause() / gpu_capture_resume(): tprof_gpu_capture_pause/resume; the library's
 * code (0, or a negative TPROF_ERR_*) is returned, never raised. */
static PyObject *fn_gpu_capture_pause(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    return PyLong_FromLong(tprof_gpu_capture_pause());
}

static PyObject *fn_gpu_capture_resume(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    return PyLong_FromLong(tprof_gpu_capture_resume());
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
    {"gpu_capture_pause", fn_gpu_capture_pause, METH_NOARGS,
     "gpu_capture_pause()\n--\n\nStop CUPTI activity capture (tprof_gpu_capture_pause); "
     "returns 0 or a negative library code (e.g. TPROF_ERR_UNAVAILABLE without CUPTI)."},
    {"gpu_capture_resume", fn_gpu_capture_resume, METH_NOARGS,
     "gpu_capture_resume()\n--\n\nResume what gpu_capture_pause() stopped; 0 or a "
     "negative library code."},
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
    while (g_range_nfree > 0) PyObject_Free(g_range_free[--g_range_nfree]);
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

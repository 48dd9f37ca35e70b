/*
 * ranges.c — ranges, the decorator, steps and the thread-stack functions of the `trainprof`
 * module (push, pop, mark, counter, step_begin/end, range_start/end): the hot paths of
 * _trainprof.c's note (no allocation beyond the free list, no Python-level work).
 */
#include "pymod.h"

#include <stdint.h>

/* Ranges pushed from Python on this thread, to warn about a pop with none open. */
static _Thread_local long tls_depth;

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


#define RANGE_FREELIST 32
static RangeObject *g_range_free[RANGE_FREELIST];
static int g_range_nfree;

void range_free_list_clear(void) {
    while (g_range_nfree > 0) PyObject_Free(g_range_free[--g_range_nfree]);
}

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

PyTypeObject WrappedType = {
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

PyTypeObject RangeType = {
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

PyTypeObject StepType = {
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

PyObject *fn_push(PyObject *m, PyObject *arg) {
    (void)m;
    const char *u = utf8_of(arg, "name");
    if (!u) return NULL;
    push_name(NULL, u, 0);
    Py_RETURN_NONE;
}

PyObject *fn_pop(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    if (pop_checked(1) < 0) return NULL;
    Py_RETURN_NONE;
}

PyObject *fn_depth(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    return PyLong_FromLong(tls_depth);
}

PyObject *fn_mark(PyObject *m, PyObject *arg) {
    (void)m;
    const char *u = utf8_of(arg, "name");
    if (!u) return NULL;
    tprof_mark(u);
    Py_RETURN_NONE;
}

PyObject *fn_counter(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
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


PyObject *fn_step_begin(PyObject *m, PyObject *arg) {
    (void)m;
    uint64_t n;
    if (as_u64(arg, &n) < 0) return NULL;
    tprof_step_begin(n);
    if (n + 1 > g_next_step) g_next_step = n + 1;
    Py_RETURN_NONE;
}

PyObject *fn_step_end(PyObject *m, PyObject *arg) {
    (void)m;
    uint64_t n;
    if (as_u64(arg, &n) < 0) return NULL;
    tprof_step_end(n);
    Py_RETURN_NONE;
}

PyObject *fn_range_start(PyObject *m, PyObject *arg) {
    (void)m;
    const char *u = utf8_of(arg, "name");
    if (!u) return NULL;
    return PyLong_FromUnsignedLongLong(tprof_range_start(u));
}

PyObject *fn_range_end(PyObject *m, PyObject *arg) {
    (void)m;
    uint64_t id;
    if (as_u64(arg, &id) < 0) return NULL;
    tprof_range_end(id);
    Py_RETURN_NONE;
}

/*
 * collectives.c — Python callables as the library's cross-rank hook (tprof_set_collectives)
 * for Timers and EnergyMonitor, the lazy hook provider, and the exception a callback raised,
 * kept across the C call and re-raised by the call that caused it.
 */
#include "pymod.h"

#include <string.h>

PyObject *g_hook_provider; /* callable registering a hook on demand, or NULL */

/* The exception a Python collectives callback raised, kept across the C call. */
PyObject *g_pending_exc;

void pending_save(void) {
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
int pending_raise(void) {
    if (!g_pending_exc) return 0;
    PyObject *e = g_pending_exc;
    g_pending_exc = NULL;
    PyErr_SetObject((PyObject *)Py_TYPE(e), e);
    Py_DECREF(e);
    return 1;
}

void pending_clear(void) { Py_CLEAR(g_pending_exc); }

/* Before anything collective: let the provider register a hook (torch.distributed) when the
 * program has initialised one since. Returns -1 with an exception set on failure. */
int ensure_hook(void) {
    if (!g_hook_provider) return 0;
    PyObject *r = PyObject_CallNoArgs(g_hook_provider);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
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

int hook_is_ours(const tprof_collectives *c) {
    return g_pyhook.registered && c->ctx == (void *)&g_pyhook;
}

PyObject *fn_set_collectives(PyObject *m, PyObject *args, PyObject *kwds) {
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

void pyhook_release(void) {
    g_pyhook.registered = 0;
    Py_CLEAR(g_pyhook.all_gather);
    Py_CLEAR(g_pyhook.all_reduce);
    Py_CLEAR(g_pyhook.barrier);
}

/* clear_collectives(force=False): removes our hook; with force, any hook. Returns whether a
 * hook was removed. */
PyObject *fn_clear_collectives(PyObject *m, PyObject *args, PyObject *kwds) {
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

PyObject *fn_get_collectives(PyObject *m, PyObject *unused) {
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

PyObject *fn_set_hook_provider(PyObject *m, PyObject *arg) {
    (void)m;
    if (arg != Py_None && !PyCallable_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "hook provider must be callable or None");
        return NULL;
    }
    Py_XSETREF(g_hook_provider, arg == Py_None ? NULL : Py_NewRef(arg));
    Py_RETURN_NONE;
}

PyObject *fn_ensure_hook(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    if (ensure_hook() < 0) return NULL;
    Py_RETURN_NONE;
}

/* After a collective C call: a kept callback exception wins over the code. */
PyObject *collective_result(int rc, const char *what) {
    if (pending_raise()) return NULL;
    if (rc != TPROF_OK) return raise_code(rc, what);
    return Py_None; /* borrowed marker: success */
}

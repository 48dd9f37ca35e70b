/*
 * energy.c — trainprof.EnergyMonitor over tprof_energy_*, and the energy arithmetic helpers.
 */
#include "pymod.h"

#include <stdint.h>

/* Energy arithmetic helpers (trainprof.h): pure functions. */
static PyObject *fn_energy2(PyObject *args, const char *fmt, double (*f)(double, uint64_t)) {
    double j;
    unsigned long long n;
    if (!PyArg_ParseTuple(args, fmt, &j, &n)) return NULL;
    return PyFloat_FromDouble(f(j, (uint64_t)n));
}
PyObject *fn_joules_per_step(PyObject *m, PyObject *a) {
    (void)m;
    return fn_energy2(a, "dK:joules_per_step", tprof_energy_joules_per_step);
}
PyObject *fn_wh_per_step(PyObject *m, PyObject *a) {
    (void)m;
    return fn_energy2(a, "dK:wh_per_step", tprof_energy_wh_per_step);
}
PyObject *fn_joules_per_sample(PyObject *m, PyObject *a) {
    (void)m;
    return fn_energy2(a, "dK:joules_per_sample", tprof_energy_joules_per_sample);
}
PyObject *fn_wh_per_sample(PyObject *m, PyObject *a) {
    (void)m;
    return fn_energy2(a, "dK:wh_per_sample", tprof_energy_wh_per_sample);
}
PyObject *fn_avg_watts(PyObject *m, PyObject *a) {
    (void)m;
    return fn_energy2(a, "dK:avg_watts", tprof_energy_avg_watts);
}

/* ------------------------------------------------------------------------------ energy */

typedef struct {
    PyObject_HEAD
    tprof_energy *m;
    int status; /* last setup code */
    PyObject *dict;
} EnergyObject;


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

PyTypeObject EnergyType = {
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

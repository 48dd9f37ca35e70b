"""trainprof's zero-code-change entry for Python programs (`trainprof run --python`).

`trainprof run --python` puts this file's directory first on PYTHONPATH, so that every Python
process of the job imports it at startup (the `site` module imports `sitecustomize`). It
costs one look-up of `trainprof` on the path and two import-system hooks (three when the
command's package is used) and nothing else until the program imports torch; then it
calls trainprof.torch.autostart(), which instruments the optimizers, DataLoaders, model and
collectives the program creates (docs/python.md); and when it imports Megatron-LM's
megatron.core.timers, trainprof.megatron.watch_megatron_timers() records those timers'
intervals under their names. A `sitecustomize` this one hides (the
interpreter's own, e.g. Debian's, or the user's) still runs: it is found on the rest of
sys.path and executed first. Nothing is installed into the user's environment.

Which `trainprof` module: only this directory is put on PYTHONPATH, never the package around
it, so the interpreter's own trainprof (installed in its environment, or on the user's
PYTHONPATH) is the one imported, as without trainprof run. Only when the interpreter has none
is the package around this file (the one of the `trainprof` command that runs the job) used,
and only when its extension is built for this interpreter (a file name suffix of
importlib.machinery.EXTENSION_SUFFIXES): a finder placed after all others resolves the name
`trainprof` to it, so nothing else of the directory that holds it becomes importable.
Otherwise the process says so in one line on stderr (once per Python version in a job) and
runs unchanged.
"""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_PKG = os.path.dirname(_HERE)  # the trainprof package of the command running the job


def _chain():
    """Run the sitecustomize that would have run without us."""
    import importlib.machinery
    import importlib.util
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None or not spec.origin:
        return
    if os.path.dirname(os.path.abspath(spec.origin)) == _HERE:
        return
    mod = importlib.util.module_from_spec(spec)
    sys.modules["_trainprof_chained_sitecustomize"] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception as e:  # as site.py does: report and go on
        sys.stderr.write("Error in sitecustomize (%s, run by trainprof's): %s: %s\n"
                         % (spec.origin, type(e).__name__, e))


class _Fallback:
    """The last meta-path finder: `trainprof` is the package _PKG when no other finder
    (the interpreter's own path) has one. Submodules are found in the package's __path__."""

    def find_spec(self, name, path=None, target=None):
        if name != "trainprof":
            return None
        import importlib.util
        return importlib.util.spec_from_file_location(
            "trainprof", os.path.join(_PKG, "__init__.py"), submodule_search_locations=[_PKG])


def _use_module():
    """The interpreter's own trainprof, else the command's when it fits this interpreter
    (True), else one line on stderr (False)."""
    import importlib.machinery
    import importlib.util
    if importlib.util.find_spec("trainprof") is not None:  # any finder, e.g. an editable install
        return True
    try:
        exts = [f for f in os.listdir(_PKG) if f.startswith("_trainprof.")]
    except OSError:
        exts = []
    if any(f == "_trainprof" + s for f in exts for s in importlib.machinery.EXTENSION_SUFFIXES):
        sys.meta_path.append(_Fallback())
        return True
    mine = "%d.%d" % sys.version_info[:2]
    told = os.environ.get("TRAINPROF_PYTHON_NOTICE", "").split(",")
    if mine in told:
        return False
    # once per job and Python version, siblings included (ranks started side by side): the
    # first process to create the marker in the run's directory says it
    run_dir = os.environ.get("TRAINPROF_DIR")
    if run_dir:
        try:
            os.close(os.open(os.path.join(run_dir, ".python-notice-" + mine),
                             os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        except FileExistsError:
            return False
        except OSError:
            pass
    # the command's interpreter, from its extension's name (_trainprof.cpython-311-...)
    import re
    built = sorted({"%s.%s" % m.groups() for f in exts
                    for m in [re.match(r"_trainprof\.cpython-(\d)(\d+)", f)] if m})
    sys.stderr.write("trainprof: --python: no trainprof module for Python %s in this "
                     "environment%s: install trainprof into it (pip install . in a trainprof "
                     "checkout)\n"
                     % (mine, " (the CLI's is for %s)" % ", ".join(built) if built else ""))
    os.environ["TRAINPROF_PYTHON_NOTICE"] = ",".join([t for t in told if t] + [mine])
    return False


def _on_torch():
    try:
        import trainprof.torch as tt
        tt.autostart()
    except Exception as e:
        sys.stderr.write("trainprof: --python: PyTorch not instrumented in pid %d (%s: %s)\n"
                         % (os.getpid(), type(e).__name__, e))


def _on_megatron_timers(module):
    try:
        import trainprof.megatron as tm
        tm.watch_megatron_timers(module)
    except Exception as e:
        sys.stderr.write("trainprof: --python: Megatron-LM's timers not recorded in pid %d "
                         "(%s: %s)\n" % (os.getpid(), type(e).__name__, e))


class _Watcher:
    """A one-shot meta-path finder: when module `name` is first imported, wraps its loader
    so that `then(module)` runs right after the module's code has executed."""

    def __init__(self, name, then):
        self.name = name
        self.then = then

    def find_spec(self, name, path=None, target=None):
        if name != self.name:
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        import importlib.util
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        orig = loader.exec_module
        then = self.then

        def exec_module(module):
            orig(module)
            then(module)

        loader.exec_module = exec_module
        return spec

    def find_module(self, name, path=None):  # pre-3.4 protocol: not used
        return None


_chain()
if (os.environ.get("TRAINPROF_PYTHON", "") not in ("", "0") and os.environ.get("TRAINPROF_DIR")
        and _use_module()):
    if "torch" in sys.modules:  # imported by the chained sitecustomize
        _on_torch()
    else:
        sys.meta_path.insert(0, _Watcher("torch", lambda module: _on_torch()))
    # Megatron-LM's own timers (megatron/core/timers.py), recorded under their names
    if "megatron.core.timers" in sys.modules:
        _on_megatron_timers(sys.modules["megatron.core.timers"])
    else:
        sys.meta_path.insert(0, _Watcher("megatron.core.timers", _on_megatron_timers))

"""trainprof's zero-code-change entry for Python programs (`trainprof run --python`).

`trainprof run --python` puts this file's directory first on PYTHONPATH, so that every Python
process of the job imports it at startup (the `site` module imports `sitecustomize`). It
costs two import-system hooks and nothing else until the program imports torch; then it
calls trainprof.torch.autostart(), which instruments the optimizers, DataLoaders, model and
collectives the program creates (docs/python.md); and when it imports Megatron-LM's
megatron.core.timers, trainprof.megatron.watch_megatron_timers() records those timers'
intervals under their names. A `sitecustomize` this one hides (the
interpreter's own, e.g. Debian's, or the user's) still runs: it is found on the rest of
sys.path and executed first. Nothing is installed into the user's environment.
"""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


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
if os.environ.get("TRAINPROF_PYTHON", "") not in ("", "0") and os.environ.get("TRAINPROF_DIR"):
    if "torch" in sys.modules:  # imported by the chained sitecustomize
        _on_torch()
    else:
        sys.meta_path.insert(0, _Watcher("torch", lambda module: _on_torch()))
    # Megatron-LM's own timers (megatron/core/timers.py), recorded under their names
    if "megatron.core.timers" in sys.modules:
        _on_megatron_timers(sys.modules["megatron.core.timers"])
    else:
        sys.meta_path.insert(0, _Watcher("megatron.core.timers", _on_megatron_timers))

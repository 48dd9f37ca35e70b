"""trainprof.torch's hand-over around torch.profiler (_patch_profiler, docs/python.md) against a
stand-in torch (faketorch.py) whose torch.profiler has the _KinetoProfile of
torch/profiler/profiler.py (prepare_trace, stop_trace) and a recording trainprof core: the
capture is paused from prepare_trace to stop_trace, and given back when prepare_trace raises
(torch.profiler then never calls stop_trace)."""
import os
import sys
import types
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import faketorch  # noqa: E402

torch = faketorch.install()


class _KinetoProfile:
    def __init__(self, activities, fail=False):
        self.activities = activities
        self.fail = fail
        self.calls = []

    def prepare_trace(self):
        if self.fail:
            raise RuntimeError("Kineto could not start")
        self.calls.append("prepare_trace")

    def stop_trace(self):
        self.calls.append("stop_trace")


class profile(_KinetoProfile):
    pass


_prof = types.ModuleType("torch.profiler")
_prof.profiler = types.ModuleType("torch.profiler.profiler")
_prof.profiler._KinetoProfile = _KinetoProfile
_prof.profile = profile
torch.profiler = _prof
sys.modules["torch.profiler"] = _prof
sys.modules["torch.profiler.profiler"] = _prof.profiler

import trainprof.torch as tt  # noqa: E402


class Core:
    """The calls _patch_profiler makes of trainprof's core, recorded."""

    def __init__(self):
        self.calls = []

    def set_metadata(self, k, v):
        self.calls.append(("meta", k, v))

    def gpu_capture_pause(self):
        self.calls.append("pause")
        return 0

    def gpu_capture_resume(self):
        self.calls.append("resume")
        return 0


class ProfilerPatch(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.core = Core()
        tt._tp = cls.core
        tt._patch_profiler()

    def setUp(self):
        del self.core.calls[:]

    def test_paused_from_prepare_to_stop(self):
        p = profile(["ProfilerActivity.CPU", "ProfilerActivity.CUDA"])
        p.prepare_trace()
        self.assertEqual(self.core.calls,
                         [("meta", "gpu_capture.pause_reason", "torch.profiler"), "pause"])
        p.stop_trace()
        self.assertEqual(self.core.calls[2:], ["resume"])
        self.assertEqual(p.calls, ["prepare_trace", "stop_trace"])

    def test_cpu_only_not_paused(self):
        p = profile(["ProfilerActivity.CPU"])
        p.prepare_trace()
        p.stop_trace()
        self.assertEqual(self.core.calls, [])

    def test_prepare_raises_gives_back(self):
        p = profile(["ProfilerActivity.CUDA"], fail=True)
        with self.assertRaises(RuntimeError):
            p.prepare_trace()
        self.assertEqual(self.core.calls[1:], ["pause", "resume"])
        # a later profiler pauses again
        q = profile(["ProfilerActivity.CUDA"])
        q.prepare_trace()
        q.stop_trace()
        self.assertEqual(self.core.calls[3:], [("meta", "gpu_capture.pause_reason",
                                                "torch.profiler"), "pause", "resume"])


if __name__ == "__main__":
    unittest.main()

"""trainprof.torch's hand-over to torch.profiler, against a scripted torch.profiler (the fake
below mirrors torch/profiler/profiler.py: _KinetoProfile.prepare_trace takes CUPTI as warm-up
or recording begins, stop_trace gives it back; profile(schedule=...) calls them at the
schedule's transitions, so its wait steps leave CUPTI alone). trainprof's capture must be
paused exactly from prepare_trace to stop_trace: under a schedule around the whole loop, the
wait steps before and the steps after stay captured; a warm-up that raises gives capture back. The C side of the pause (CUPTI) is
tests/test_cupti.c's; here the pause and resume calls are counted."""
import os
import sys
import types
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import faketorch  # noqa: E402

EVENTS = []


def fake_profiler(torch):
    prof_mod = types.ModuleType("torch.profiler.profiler")

    class ProfilerActivity:
        CPU, CUDA = "ProfilerActivity.CPU", "ProfilerActivity.CUDA"

    class _KinetoProfile:
        def __init__(self, activities=None, fail=False):
            self.activities, self.fail = activities or [], fail

        def prepare_trace(self):
            if self.fail:
                raise RuntimeError("Kineto could not start")
            EVENTS.append(("kineto takes CUPTI", self.step_num))

        def start_trace(self):
            pass

        def stop_trace(self):
            EVENTS.append(("kineto gives CUPTI back", self.step_num))

    class profile(_KinetoProfile):
        """wait, warmup and active steps as torch.profiler.schedule(repeat=1); none: record."""

        def __init__(self, activities=None, schedule=None, fail=False):
            super().__init__(activities, fail)
            self.sched, self.step_num, self.state = schedule, 0, "none"

        def _want(self):
            if not self.sched:
                return "record"
            w, u, a = self.sched
            k = self.step_num
            return "wait" if k < w else "warmup" if k < w + u else "record" if k < w + u + a \
                else "done"

        def _go(self, new):
            old, self.state = self.state, new
            if old in ("none", "wait") and new in ("warmup", "record"):
                self.prepare_trace()
            if new == "record" and old != "record":
                self.start_trace()
            if old in ("warmup", "record") and new not in ("warmup", "record"):
                self.stop_trace()

        def start(self):
            self._go(self._want())

        def step(self):
            self.step_num += 1
            self._go(self._want())

        def stop(self):
            self._go("done")

        def __enter__(self):
            self.start()
            return self

        def __exit__(self, *exc):
            self.stop()

    prof_mod._KinetoProfile = _KinetoProfile
    prof_mod.profile = profile
    top = types.ModuleType("torch.profiler")
    top.profiler, top.profile, top.ProfilerActivity = prof_mod, profile, ProfilerActivity
    torch.profiler = top
    sys.modules["torch.profiler"] = top
    sys.modules["torch.profiler.profiler"] = prof_mod
    return top


class HandOverTest(unittest.TestCase):
    def setUp(self):
        EVENTS.clear()
        torch = faketorch.install()
        self.tp = fake_profiler(torch)
        import trainprof.torch as tt
        self.tt = tt
        calls = {"pause": tt._tp.gpu_capture_pause, "resume": tt._tp.gpu_capture_resume}
        self.addCleanup(lambda: [setattr(tt._tp, "gpu_capture_" + k, f) for k, f in calls.items()])
        self.prof_at = {"step": 0}
        tt._tp.gpu_capture_pause = lambda: EVENTS.append(("pause", self.prof_at["step"])) or 0
        tt._tp.gpu_capture_resume = lambda: EVENTS.append(("resume", self.prof_at["step"])) or 0
        tt._S.patched.discard("profiler")  # each test's fake torch.profiler is new
        tt._patch_profiler()

    def test_schedule_around_the_loop(self):
        acts = [self.tp.ProfilerActivity.CPU, self.tp.ProfilerActivity.CUDA]
        with self.tp.profile(activities=acts, schedule=(3, 1, 2)) as p:
            for k in range(9):
                self.prof_at["step"] = k
                p.step()
        # warm-up begins as step 3 is entered (after step 2's step()), recording ends after
        # step 5: trainprof is paused around exactly that, before Kineto and after it
        self.assertEqual(EVENTS, [("pause", 2), ("kineto takes CUPTI", 3),
                                  ("kineto gives CUPTI back", 6), ("resume", 5)])

    def test_start_stop(self):
        p = self.tp.profile(activities=[self.tp.ProfilerActivity.CUDA])
        p.start()
        p.stop()
        self.assertEqual([e[0] for e in EVENTS],
                         ["pause", "kineto takes CUPTI", "kineto gives CUPTI back", "resume"])

    def test_start_raises_gives_back(self):
        # torch.profiler never reaches stop_trace when its warm-up fails: capture comes back
        p = self.tp.profile(activities=[self.tp.ProfilerActivity.CUDA], fail=True)
        with self.assertRaises(RuntimeError):
            p.start()
        self.assertEqual([e[0] for e in EVENTS], ["pause", "resume"])
        q = self.tp.profile(activities=[self.tp.ProfilerActivity.CUDA])  # a later one pauses
        q.start()
        q.stop()
        self.assertEqual([e[0] for e in EVENTS][2:],
                         ["pause", "kineto takes CUPTI", "kineto gives CUPTI back", "resume"])

    def test_cpu_only_keeps_capture(self):
        with self.tp.profile(activities=[self.tp.ProfilerActivity.CPU], schedule=(1, 0, 2)) as p:
            for _ in range(4):
                p.step()
        self.assertEqual([e[0] for e in EVENTS], ["kineto takes CUPTI", "kineto gives CUPTI back"])


if __name__ == "__main__":
    unittest.main()

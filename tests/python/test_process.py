"""The module inside real processes: under `trainprof run` it binds to the preloaded
libtrainprof (one copy mapped, records in the run's rank file); a forked child records its
own file; interpreter shutdown while another thread is inside a range does not crash."""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tphelp  # noqa: E402


class BindingTest(unittest.TestCase):
    def test_one_library_under_trainprof_run(self):
        d = tphelp.workdir("binding")
        p = tphelp.run_child(r'''
            import json, os, trainprof, trainprof._trainprof as ext
            libs = set()
            with open("/proc/self/maps") as f:
                for line in f:
                    path = line.split()[-1] if len(line.split()) >= 6 else ""
                    if "libtrainprof.so" in os.path.basename(path):
                        libs.add(os.path.realpath(path))
            with trainprof.range("from-python"):
                pass
            trainprof.flush()
            print(json.dumps({"libs": sorted(libs), "preload": os.environ.get("LD_PRELOAD", ""),
                              "path": trainprof.output_path(), "pid": os.getpid()}))
        ''', d, under_run=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        out = json.loads(p.stdout.strip().splitlines()[-1])
        self.assertEqual(len(out["libs"]), 1, out)  # the preloaded copy only
        first = out["preload"].split(":")[0]
        self.assertEqual(out["libs"][0], os.path.realpath(first))
        files = tphelp.rank_files(d)
        self.assertEqual(files, [os.path.basename(out["path"])])
        self.assertTrue(files[0].endswith("-%d.tprof" % out["pid"]))
        ev = tphelp.chrome(d)
        self.assertEqual(len(tphelp.complete(ev, "from-python")), 1)


class ForkTest(unittest.TestCase):
    # Runs under the ASan build too, where a fork right after the first range (which starts
    # the session) could catch the new flusher thread inside ASan's setup of it, in malloc,
    # and the child would inherit that allocator lock held: the session waits for its flusher
    # to run before recording (flusher.c, tprof__flusher_start).
    def test_capture_asks_for_a_window(self):
        # trainprof.capture reaches tprof_gpu_capture_steps (test_capture_trigger checks the
        # window it opens): accepted with a plan of windows, ERR_INVALID_ARG for no step,
        # ERR_ALREADY with plan "all"
        d = tphelp.workdir("capture")
        p = tphelp.run_child(r'''
            import trainprof
            codes = []
            for i in range(12):
                trainprof.step_begin(i)
                if i == 4:
                    codes.append(trainprof.capture(steps=0))
                    # what 64 bits cannot hold is refused, never read modulo 2**64 (3 steps
                    # for 2**64 + 3, nearly 2**64 for -5); a first step past 2**64 - 2 too
                    codes.append(trainprof.capture(steps=2**64 + 3))
                    codes.append(trainprof.gpu_capture_steps(-1, -5))
                    codes.append(trainprof.capture(steps=3, start=2**64 - 1))
                    codes.append(trainprof.capture(steps=3))
                trainprof.step_end(i)
            print(codes)
        ''', d, env={"TRAINPROF_GPU_CAPTURE": "1000-1001", "TRAINPROF_COMPRESS": "0"})
        self.assertEqual(p.returncode, 0, p.stderr)
        import trainprof
        bad = trainprof.ERR_INVALID_ARG
        self.assertEqual(p.stdout.strip(), str([bad, bad, bad, bad, 0]))
        # the one window taken: the 3 steps asked for last, from the next step
        files = tphelp.rank_files(d)
        meta = tphelp.rank_records(os.path.join(d, files[0]))["meta"]
        self.assertEqual(meta["gpu_capture.requests"], "0:5-7")
        d2 = tphelp.workdir("capture_all")
        p = tphelp.run_child(r'''
            import trainprof
            trainprof.step_begin(0)
            print(trainprof.capture(steps=3))
            trainprof.step_end(0)
        ''', d2, env={"TRAINPROF_GPU_CAPTURE": "all"})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.strip(), str(trainprof.ERR_ALREADY))

    def test_forked_child_records_its_own_file(self):
        d = tphelp.workdir("fork")
        p = tphelp.run_child(r'''
            import os, time, trainprof
            with trainprof.range("parent-before"):
                pass
            with trainprof.range("parent-open"):
                pid = os.fork()
                if pid == 0:
                    with trainprof.range("child-work"):
                        time.sleep(0.005)
                    trainprof.shutdown()
                    os._exit(0)
                _, st = os.waitpid(pid, 0)
                assert os.WEXITSTATUS(st) == 0
            print(pid)
        ''', d)
        self.assertEqual(p.returncode, 0, p.stderr)
        child = int(p.stdout.strip())
        files = tphelp.rank_files(d)
        self.assertEqual(len(files), 2, files)
        self.assertTrue(any(f.endswith("-%d.tprof" % child) for f in files), files)
        ev = tphelp.chrome(d)
        procs = {e["pid"]: e["args"]["name"] for e in ev
                 if e.get("ph") == "M" and e.get("name") == "process_name"}
        (cw,) = tphelp.complete(ev, "child-work")
        self.assertIn(":%d)" % child, procs[cw["pid"]])
        self.assertGreaterEqual(cw["dur"], 5000)
        (pb,) = tphelp.complete(ev, "parent-before")
        self.assertNotEqual(pb["pid"], cw["pid"])
        # the child starts empty: the parent's events are not in its file
        self.assertEqual(len(tphelp.complete(ev, "parent-before")), 1)


class ShutdownTest(unittest.TestCase):
    def test_exit_with_thread_inside_range(self):
        d = tphelp.workdir("shutdown")
        p = tphelp.run_child(r'''
            import threading, time, trainprof
            inside = threading.Event()
            def spin():
                t = trainprof.Timers(2, "minmax")
                with trainprof.range("never-closed"):
                    t("busy").start()
                    inside.set()
                    while True:
                        with trainprof.range("tick"):
                            time.sleep(0.001)
            threading.Thread(target=spin, daemon=True).start()
            inside.wait()
            time.sleep(0.05)
            with trainprof.range("main-done"):
                pass
            print("exiting")
        ''', d)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.strip(), "exiting")
        self.assertNotIn("Fatal", p.stderr)
        ev = tphelp.chrome(d)
        self.assertEqual(len(tphelp.complete(ev, "main-done")), 1)
        self.assertGreater(len(tphelp.complete(ev, "tick")), 5)


if __name__ == "__main__":
    unittest.main(verbosity=2)

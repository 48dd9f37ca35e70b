"""cli_signals.py — the signals a job gets under `trainprof run` are the ones it gets bare.

    python3 cli_signals.py TRAINPROF SIGCOUNT_PROG TMPDIR

The job (tests/sigcount_prog.c) counts the SIGINTs and SIGTERMs that reach it and exits with
the count. Each case runs it bare and under `trainprof run` and compares (counts, exit
status), which must be equal and must be one signal:
  - a signal sent to the process group of the command started (kill -SIG -PGID, as a
    batch system or a shell's `kill %1` does): bare, the job's group; under trainprof, the
    group of `trainprof run`;
  - a signal sent to the started process alone (kill PID): the job, or `trainprof run`,
    which forwards it;
  - Ctrl-C typed on a terminal (a pty whose foreground group is the command's), after the
    job has read a line from that terminal;
  - Ctrl-Z, `fg` and Ctrl-C in an interactive bash on a pty: the job stops and continues
    with its terminal as it does bare;
  - started in the background (&) in that bash, the job stops on its read of the terminal,
    and `fg` gives it the terminal: it reads the line typed, then Ctrl-C;
  - Ctrl-C while a bash script runs the command in a loop ends the script as it does bare.
Signals sent to `trainprof run` are SIGINT, SIGTERM and SIGUSR1 (a batch system's warning
before preemption): each must reach the job once, never end `trainprof run` first.
And `trainprof run`'s own ending must not change the job's:
  - with standard output and error a pipe that nobody reads, its exit status is the job's
    (trainprof run's messages there must not end it by SIGPIPE);
  - when the job dies of a signal that dumps core, trainprof run dies of the same signal
    without a core of its own, which would overwrite the job's (a core_pattern without %p).
"""
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time

TP, PROG, TMP = (os.path.abspath(a) for a in sys.argv[1:4])
os.makedirs(TMP, exist_ok=True)
fails = 0
seq = 0


def fail(msg):
    global fails
    fails += 1
    print("FAIL " + msg, file=sys.stderr)


def wait_for(pred, what, timeout=30.0):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.02)
    raise TimeoutError(what)


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def fresh(name):
    global seq
    seq += 1
    d = os.path.join(TMP, "%s-%d" % (name, seq))
    os.makedirs(d)
    return d, os.path.join(d, "count")


def argv_for(mode, d, count, *extra):
    job = [PROG, count, *extra]
    if mode == "bare":
        return job
    return [TP, "run", "--quiet", "-o", os.path.join(d, "run"), "--", *job]


def job_pid(count):
    txt = wait_for(lambda: read(count).startswith("ready"), "the job's ready line")
    return int(read(count).split()[1])


def counts(count):
    for line in read(count).splitlines():
        if line.startswith("int "):
            return line
    return "no count (%r)" % read(count)


def killed(mode, target, sig):
    """Starts the command in a session of its own (no terminal), sends sig."""
    d, count = fresh("kill")
    p = subprocess.Popen(argv_for(mode, d, count), start_new_session=True,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    job_pid(count)
    if target == "group":
        os.killpg(p.pid, sig)
    else:
        os.kill(p.pid, sig)
    _, err = p.communicate(timeout=60)
    return counts(count), p.returncode


def pty_run(argv, steps):
    """Runs argv on a new pty (its session leader, the pty its controlling terminal and its
    group the foreground one); steps(master, output) drives it. Returns the wait status."""
    pid, master = pty.fork()
    if pid == 0:
        try:
            os.execv(argv[0], argv)
        finally:
            os._exit(127)
    out = bytearray()

    def pump(t=0.05):
        r, _, _ = select.select([master], [], [], t)
        if r:
            try:
                out.extend(os.read(master, 65536))
            except OSError:
                pass

    try:
        steps(master, out, pump)
        end = time.time() + 60
        while time.time() < end:
            pump()
            w, st = os.waitpid(pid, os.WNOHANG)
            if w == pid:
                return os.waitstatus_to_exitcode(st), out.decode(errors="replace")
        raise TimeoutError("the command did not end: %r" % out.decode(errors="replace"))
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        os.close(master)


def ctrl_c(mode):
    d, count = fresh("tty")

    def steps(master, out, pump):
        wait_for(lambda: pump() or read(count).startswith("ready"), "ready")
        os.write(master, b"hello\r")
        wait_for(lambda: pump() or "line " in read(count), "the line read from the tty")
        os.write(master, b"\x03")

    rc, _ = pty_run(argv_for(mode, d, count, "read"), steps)
    line = [l for l in read(count).splitlines() if l.startswith("line")]
    return counts(count), rc, line


def stat_state(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return "gone"


def ctrl_z(mode):
    """Interactive bash on a pty: start the command, Ctrl-Z, fg, Ctrl-C."""
    d, count = fresh("jobctl")
    cmd = " ".join("'%s'" % a for a in argv_for(mode, d, count)) + "\n"
    bash = "/bin/bash"

    def steps(master, out, pump):
        os.write(master, b"PS1='$ '; stty -echo\n")
        time.sleep(0.3)
        os.write(master, cmd.encode())
        pid = wait_for(lambda: pump() or (read(count).startswith("ready") and job_pid(count)),
                       "ready")
        os.write(master, b"\x1a")
        wait_for(lambda: pump() or stat_state(pid) == "T", "the job stopped")
        wait_for(lambda: pump() or b"Stopped" in out, "the shell saw the job stop")
        if read(count).count("int "):
            fail("%s: Ctrl-Z delivered a SIGINT/SIGTERM" % mode)
        os.write(master, b"fg\n")
        wait_for(lambda: pump() or stat_state(pid) not in ("T", "gone"), "the job continued")
        time.sleep(0.3)
        os.write(master, b"\x03")
        wait_for(lambda: pump() or ("int " in read(count) and stat_state(pid) == "gone"),
                 "the job's end")
        time.sleep(0.5)  # the command's own end, then the prompt
        pump()
        out.clear()
        os.write(master, b'echo "r"c=$?\n')
        wait_for(lambda: pump() or re.search(rb"\brc=\d", out), "the command's status")
        os.write(master, b"exit\n")

    _, out = pty_run([bash, "--norc", "--noprofile", "--noediting", "-i"], steps)
    m = re.search(r"\brc=(\d+)", out)
    rc = m.group(1) if m else "?"
    return counts(count), rc


def bg_fg(mode):
    """Interactive bash on a pty: start the command in the background (&); its read of the
    terminal stops it (SIGTTIN); `fg`, a line typed, Ctrl-C."""
    d, count = fresh("bgfg")
    cmd = " ".join("'%s'" % a for a in argv_for(mode, d, count, "read")) + " &\n"
    bash = "/bin/bash"

    def steps(master, out, pump):
        os.write(master, b"PS1='$ '; stty -echo\n")
        time.sleep(0.3)
        os.write(master, cmd.encode())
        pid = wait_for(lambda: pump() or (read(count).startswith("ready") and job_pid(count)),
                       "ready")
        wait_for(lambda: pump() or stat_state(pid) == "T", "the job stopped on its read")
        os.write(master, b"fg\n")
        wait_for(lambda: pump() or stat_state(pid) not in ("T", "gone"), "the job continued")
        time.sleep(0.3)
        os.write(master, b"hello\r")
        wait_for(lambda: pump() or "line " in read(count), "the line read from the tty")
        os.write(master, b"\x03")
        wait_for(lambda: pump() or ("int " in read(count) and stat_state(pid) == "gone"),
                 "the job's end")
        time.sleep(0.5)
        pump()
        out.clear()
        os.write(master, b'echo "r"c=$?\n')
        wait_for(lambda: pump() or re.search(rb"\brc=\d", out), "the command's status")
        os.write(master, b"exit\n")

    _, out = pty_run([bash, "--norc", "--noprofile", "--noediting", "-i"], steps)
    m = re.search(r"\brc=(\d+)", out)
    line = [l for l in read(count).splitlines() if l.startswith("line")]
    return counts(count), m.group(1) if m else "?", line


def compare(name, fn, *args):
    try:
        bare = fn("bare", *args)
        under = fn("run", *args)
    except TimeoutError as e:
        fail("%s: timed out waiting for %s" % (name, e))
        return
    print("%-28s bare %-40s trainprof run %s" % (name, bare, under))
    if bare != under:
        fail("%s: bare %s, under trainprof run %s" % (name, bare, under))
    got = [int(w) for w in bare[0].split()[1::2] if w.isdigit()]
    if sum(got) != 1:
        fail("%s: the bare job did not get exactly one signal: %s" % (name, bare))


# a doubled signal can merge with the first while that one is still pending (standard
# signals do not queue): the group cases are repeated so that a double shows
for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1):
    for target, times in (("group", 3), ("alone", 1)):
        for _ in range(times):
            where = "its group" if target == "group" else "it alone"
            compare("%s to %s" % (sig.name, where), killed, target, sig)
compare("Ctrl-C on a terminal", ctrl_c)


def closed_pipe(mode):
    """A job that writes nothing and exits 5, its stdout and stderr a pipe already closed."""
    d, _ = fresh("pipe")
    r, w = os.pipe()
    os.close(r)
    argv = ["/bin/sh", "-c", "exit 5"]
    if mode != "bare":
        argv = [TP, "run", "-o", os.path.join(d, "run"), "--"] + argv
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=w, stderr=w)
    os.close(w)
    return p.wait(timeout=60)


def core_dump(mode):
    """A job that aborts with core dumps allowed: the raw wait status of what was started."""
    d, _ = fresh("core")
    argv = ["/bin/sh", "-c", "kill -ABRT $$"]
    if mode != "bare":
        argv = [TP, "run", "-o", os.path.join(d, "run"), "--"] + argv
    pid = os.fork()
    if pid == 0:
        try:
            import resource
            resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY,) * 2)
        except (ValueError, OSError):
            pass
        os.chdir(d)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        try:
            os.execv(argv[0], argv)
        finally:
            os._exit(127)
    _, st = os.waitpid(pid, 0)
    return st


def script_loop(mode):
    """A non-interactive bash script on a pty runs the command (sleep 5) in a loop; Ctrl-C
    must end the script, not only the command (bash's wait-and-cooperative-exit needs the
    script to get the terminal's SIGINT itself, and the command to die of it)."""
    d, _ = fresh("loop")
    cmd = "/bin/sleep 5"
    if mode != "bare":
        cmd = "'%s' run -o '%s' --quiet -- %s" % (TP, os.path.join(d, "run"), cmd)
    script = "for i in 1 2 3; do %s; echo iter $i; done; echo LOOPEND" % cmd
    t0 = time.time()

    def steps(master, out, pump):
        time.sleep(1.0)
        os.write(master, b"\x03")

    rc, out = pty_run(["/bin/bash", "-c", script], steps)
    return rc, "iter" in out or "LOOPEND" in out, time.time() - t0 < 4.5


if os.path.exists("/bin/bash"):
    compare_plain = script_loop("bare"), script_loop("run")
    print("%-28s bare %-40s trainprof run %s" % ("Ctrl-C in a script's loop", *compare_plain))
    if compare_plain[0] != compare_plain[1]:
        fail("Ctrl-C in a script's loop: bare %s, under trainprof run %s" % compare_plain)

bare, under = closed_pipe("bare"), closed_pipe("run")
print("%-28s bare %-40s trainprof run %s" % ("output to a closed pipe", bare, under))
if bare != under:
    fail("output to a closed pipe: exit status bare %s, under trainprof run %s" % (bare, under))
bare, under = core_dump("bare"), core_dump("run")
print("%-28s bare %-40s trainprof run %s" % ("abort, cores allowed",
      "signal %d core %d" % (os.WTERMSIG(bare), os.WCOREDUMP(bare)),
      "signal %d core %d" % (os.WTERMSIG(under), os.WCOREDUMP(under))))
if not os.WIFSIGNALED(under) or os.WTERMSIG(under) != signal.SIGABRT:
    fail("abort: trainprof run did not end by SIGABRT (status %#x)" % under)
elif os.WCOREDUMP(under):
    fail("abort: trainprof run dumped a core of its own beside the job's")
elif not os.WCOREDUMP(bare):
    print("  (this system dumps no core for the bare job: the check above could not fail)")
if os.path.exists("/bin/bash"):
    compare("Ctrl-Z, fg, Ctrl-C in bash", ctrl_z)
    compare("&, read, fg, Ctrl-C in bash", bg_fg)
sys.exit(1 if fails else 0)

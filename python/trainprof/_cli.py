"""The `trainprof` console script of the wheel: runs the command the wheel carries.

The command is the C program trainprof/_bin/trainprof (cmake/wheel.cmake). This process
becomes it (exec, not a child process): the command keeps this process's pid, arguments,
open descriptors and signal mask, and its exit status is the status a shell or launcher sees.
Two things the interpreter changed at its start-up are undone first, so that the command and
its job see what the shell gave:
- the environment: in the C locale CPython sets LC_CTYPE=C.UTF-8 in it (PEP 538); the
  command gets the environment this process was started with, as the kernel keeps it in
  /proc/self/environ (proc(5)), which setenv() does not rewrite;
- SIGPIPE and SIGXFSZ, which CPython ignores, a disposition exec keeps (execve(2)): back to
  the default, as subprocess does for the programs it starts (restore_signals).
"""
import os
import signal
import sys

_EXE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bin", "trainprof")


def _installed_exe():
    """The command of the installed distribution, when the trainprof imported is another one
    (a build tree or an installation on PYTHONPATH, ahead of site-packages): the wheel's
    files as its metadata lists them (importlib.metadata), else None."""
    try:
        from importlib import metadata
        for f in metadata.distribution("trainprof").files or ():
            if f.as_posix() == "trainprof/_bin/trainprof":
                return str(f.locate())
    except Exception:  # no distribution metadata (not pip-installed)
        pass
    return None


def _initial_environ():
    """The environment this process was started with (bytes to bytes; the first of a
    repeated name, as getenv(3) finds it), or None where /proc cannot tell."""
    try:
        with open("/proc/self/environ", "rb") as f:
            data = f.read()
    except OSError:
        return None
    env = {}
    for item in data.split(b"\0"):
        name, eq, value = item.partition(b"=")
        if eq and name:
            env.setdefault(name, value)
    return env


def main():
    for name in ("SIGPIPE", "SIGXFSZ"):
        sig = getattr(signal, name, None)
        if sig is not None:
            signal.signal(sig, signal.SIG_DFL)
    env = _initial_environ()
    argv = [sys.argv[0]] + sys.argv[1:]
    exe = _EXE if os.access(_EXE, os.X_OK) else (_installed_exe() or _EXE)
    try:
        if env is None:
            os.execv(exe, argv)
        os.execve(exe, argv, env)
    except OSError as e:
        sys.stderr.write("trainprof: cannot run %s: %s\n" % (exe, e.strerror))
        return 126

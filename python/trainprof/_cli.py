"""The `trainprof` console script of the wheel: runs the command the wheel carries.

The command is the C program trainprof/_bin/trainprof (cmake/wheel.cmake). This process
becomes it (exec, not a child process): the command keeps this process's pid, arguments,
environment, open descriptors and signal mask, and its exit status is the status a shell or
launcher sees. The interpreter changed one thing before this runs: it ignores SIGPIPE and
SIGXFSZ, a disposition that exec keeps (execve(2)), so both go back to the default first,
as subprocess does for the programs it starts (restore_signals), and the job sees them as it
would under a shell.
"""
import os
import signal
import sys

_EXE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bin", "trainprof")


def main():
    for name in ("SIGPIPE", "SIGXFSZ"):
        sig = getattr(signal, name, None)
        if sig is not None:
            signal.signal(sig, signal.SIG_DFL)
    try:
        os.execv(_EXE, [sys.argv[0]] + sys.argv[1:])
    except OSError as e:
        sys.stderr.write("trainprof: cannot run %s: %s\n" % (_EXE, e.strerror))
        return 126

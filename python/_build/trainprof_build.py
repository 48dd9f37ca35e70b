"""In-tree PEP 517 build backend for the trainprof Python package (no build requirements).

pip's isolated build environment hides the interpreter's site-packages and would have to
download setuptools and wheel; this backend instead finds the setuptools of the interpreter
that runs it (a child process without pip's isolation tells where it lives), compiles the
extension with setuptools' build_ext, and writes the wheel (a zip with a RECORD) itself.

Where libtrainprof comes from:
  TRAINPROF_BUILD_DIR=DIR   a CMake build of this repository (DIR/libtrainprof.so); fastest
  unset                     the library is built here first with CMake (needs cmake, a C
                            compiler, zlib and cJSON headers: scripts/install-deps.sh) into
                            python/build/libtrainprof
The library is copied into the package beside the extension (rpath $ORIGIN). Under
`trainprof run`, which preloads its own libtrainprof.so.0, the dynamic linker binds the
extension to that copy instead (same SONAME): one library, one session per process.
Headers: TRAINPROF_INCLUDE_DIR, default ../include.
"""
import base64
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/
ROOT = os.path.dirname(HERE)                                         # the repository


def _version():
    inc = _include_dir()
    with open(os.path.join(inc, "trainprof.h")) as f:
        m = re.search(r'#define TPROF_VERSION_STRING "([^"]+)"', f.read())
    return m.group(1) if m else "0.0.0"


def _include_dir():
    d = os.environ.get("TRAINPROF_INCLUDE_DIR") or os.path.join(ROOT, "include")
    if not os.path.exists(os.path.join(d, "trainprof.h")):
        raise RuntimeError("trainprof.h not found in %s: build from the trainprof repository "
                           "(pip install ./python) or set TRAINPROF_INCLUDE_DIR" % d)
    return d


def _import_setuptools():
    try:
        import setuptools  # noqa: F401
        return
    except ImportError:
        pass
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONNOUSERSITE", "PYTHONNOUSERBASE")}
    out = subprocess.run(
        [sys.executable, "-c", "import os, setuptools; "
         "print(os.path.dirname(os.path.dirname(setuptools.__file__)))"],
        env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError("the trainprof build needs setuptools in %s (apt-get install "
                           "python3-setuptools, or pip install setuptools)" % sys.executable)
    sys.path.append(out.stdout.strip())
    import setuptools  # noqa: F401


def _library_dir(work):
    d = os.environ.get("TRAINPROF_BUILD_DIR")
    if d:
        # pip runs the backend in python/: a relative path is taken from the repository
        # root when it does not exist from there
        if not os.path.isabs(d) and not os.path.exists(d):
            d = os.path.join(ROOT, d)
        d = os.path.abspath(d)
        if not os.path.exists(os.path.join(d, "libtrainprof.so")):
            raise RuntimeError("TRAINPROF_BUILD_DIR=%s holds no libtrainprof.so" % d)
        return d
    build = os.path.join(HERE, "build", "libtrainprof")
    if not os.path.exists(os.path.join(build, "libtrainprof.so")):
        cmake = shutil.which("cmake")
        if not cmake:
            raise RuntimeError("no cmake: set TRAINPROF_BUILD_DIR to a build of the library, "
                               "or install cmake (scripts/install-deps.sh)")
        subprocess.check_call([cmake, "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                               "-DTPROF_BUILD_TESTS=OFF", "-DTPROF_BUILD_BENCH=OFF",
                               "-DTPROF_BUILD_PYTHON=OFF"], stdout=sys.stderr)
        subprocess.check_call([cmake, "--build", build, "--target", "trainprof", "-j",
                               str(os.cpu_count() or 2)], stdout=sys.stderr)
    return build


def _compile(work, libdir):
    _import_setuptools()
    from setuptools import Distribution, Extension
    from setuptools.command.build_ext import build_ext

    sources = sorted(glob.glob(os.path.join(HERE, "src", "*.c")))  # _trainprof.c and its parts
    ext = Extension("trainprof._trainprof", sources,
                    include_dirs=[_include_dir(), os.path.join(ROOT, "src")], library_dirs=[libdir],
                    libraries=["trainprof"], extra_compile_args=["-std=c11"],
                    extra_link_args=["-Wl,-rpath,$ORIGIN"])
    dist = Distribution({"name": "trainprof", "ext_modules": [ext]})
    cmd = build_ext(dist)
    cmd.build_lib = os.path.join(work, "lib")
    cmd.build_temp = os.path.join(work, "tmp")
    cmd.ensure_finalized()
    cmd.run()
    return cmd.get_ext_fullpath("trainprof._trainprof")


def _tag():
    impl = "cp%d%d" % sys.version_info[:2] if sys.implementation.name == "cpython" else \
        "py%d%d" % sys.version_info[:2]
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return "%s-%s-%s" % (impl, impl, plat)


def _metadata(version):
    return ("Metadata-Version: 2.1\nName: trainprof\nVersion: %s\n"
            "Summary: Python API of trainprof, a profiler for distributed deep-learning "
            "training\nRequires-Python: >=3.10\n" % version)


def _record_line(arc, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arc, digest, len(data))


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    di = "trainprof-%s.dist-info" % _version()
    os.makedirs(os.path.join(metadata_directory, di), exist_ok=True)
    with open(os.path.join(metadata_directory, di, "METADATA"), "w") as f:
        f.write(_metadata(_version()))
    with open(os.path.join(metadata_directory, di, "WHEEL"), "w") as f:
        f.write("Wheel-Version: 1.0\nGenerator: trainprof_build\nRoot-Is-Purelib: false\n"
                "Tag: %s\n" % _tag())
    return di


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    version = _version()
    tag = _tag()
    with tempfile.TemporaryDirectory() as work:
        libdir = _library_dir(work)
        ext = _compile(work, libdir)
        files = []  # (arcname, bytes)
        pkg = os.path.join(HERE, "trainprof")
        for name in sorted(os.listdir(pkg)):
            if name.endswith((".py", ".pyi")) or name == "py.typed":
                with open(os.path.join(pkg, name), "rb") as f:
                    files.append(("trainprof/" + name, f.read()))
        auto = os.path.join(pkg, "_autostart")  # `trainprof run --python`'s sitecustomize
        for name in sorted(os.listdir(auto)) if os.path.isdir(auto) else ():
            if name.endswith(".py"):
                with open(os.path.join(auto, name), "rb") as f:
                    files.append(("trainprof/_autostart/" + name, f.read()))
        with open(ext, "rb") as f:
            files.append(("trainprof/" + os.path.basename(ext), f.read()))
        with open(os.path.realpath(os.path.join(libdir, "libtrainprof.so")), "rb") as f:
            files.append(("trainprof/libtrainprof.so.0", f.read()))
        di = "trainprof-%s.dist-info" % version
        files.append((di + "/METADATA", _metadata(version).encode()))
        files.append((di + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: trainprof_build\n"
                                      "Root-Is-Purelib: false\nTag: %s\n" % tag).encode()))
        files.append((di + "/top_level.txt", b"trainprof\n"))
        record = [_record_line(a, d) for a, d in files] + [di + "/RECORD,,"]
        files.append((di + "/RECORD", ("\n".join(record) + "\n").encode()))
        wheel = "trainprof-%s-%s.whl" % (version, tag)
        with zipfile.ZipFile(os.path.join(wheel_directory, wheel), "w",
                             zipfile.ZIP_DEFLATED) as z:
            for arc, data in files:
                zi = zipfile.ZipInfo(arc, date_time=(2020, 1, 1, 0, 0, 0))
                zi.external_attr = (0o755 if arc.endswith(".so") or ".so." in arc
                                    else 0o644) << 16
                zi.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(zi, data)
    return wheel


def build_sdist(sdist_directory, config_settings=None):
    # The package builds from the repository (it needs include/ and the library's sources);
    # an sdist of python/ alone would not build. Kept minimal for PEP 517 completeness.
    version = _version()
    name = "trainprof-%s" % version
    path = os.path.join(sdist_directory, name + ".tar.gz")
    with tarfile.open(path, "w:gz") as t:
        for sub in ("pyproject.toml", "README.md", "_build", "src", "trainprof"):
            p = os.path.join(HERE, sub)
            if os.path.exists(p):
                t.add(p, arcname=os.path.join(name, sub))
    return name + ".tar.gz"

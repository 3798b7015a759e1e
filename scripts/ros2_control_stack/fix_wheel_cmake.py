"""Point the wheels' exported CMake targets at this interpreter's headers.

The ROS 2 wheels are built in manylinux containers: their ``share/*/cmake/*.cmake`` files name the
builder's Python (``/opt/python/cpXY-cpXY/include/pythonX.Y`` and its numpy headers) in
INTERFACE_INCLUDE_DIRECTORIES, which CMake refuses when the path does not exist, and Fast DDS's target
links the builder's ``/usr/lib64/libtinyxml2.so`` and OpenSSL, tracetools' ``lttng-ust`` (each bundled by
auditwheel into the wheel's ``ros_*.libs`` and already a dependency of the wheel's own library: a consumer
links none of them, and this machine has no lttng-ust to link). Run with the build venv's interpreter; rewrites those in place
(idempotent).
"""
import pathlib
import re
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

changed = 0
for path in (prefix / "share").glob("*/cmake/*.cmake"):
    text = path.read_text()
    new = pattern.sub(replace, text)
    if "INTERFACE_LINK_LIBRARIES" in new or "_exported_library_names" in new:
        new = bundled.sub("", openssl.sub("", builder_lib.sub("", new)))
    if new != text:
        path.write_text(new)
        changed += 1
print(f"fix_wheel_cmake: {changed} files rewritten (Python headers: {py_include})")

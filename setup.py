"""setup.py: setuptools driving CMake for the Python package `itertime` (pyproject.toml, docs/python.md).

The native module (itertime._native) and the `itertime` command are built by the project's own CMake, as
a prediction-only build (no MPI, no LibTorch), and copied into the package: itertime/_native*.so and
itertime/bin/itertime. ITERTIME_BUILD_DIR names an existing build folder to build in (the tests reuse
theirs); else one is made under build-pip/. The version is the CMake project's.
"""
# Invariants: nothing is downloaded; a build folder that exists keeps its configuration (only the two
# targets are built there); the checkout's data/ is the installed command's (compiled-in paths).
import os
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


def project_version():
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        return re.search(r"project\(itertime\s+VERSION\s+([0-9.]+)", f.read()).group(1)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = os.environ.get("ITERTIME_BUILD_DIR") or os.path.join(ROOT, "build-pip")
        if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
            configure = ["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release", "-DITERTIME_WITH_MPI=OFF",
                         "-DITERTIME_WITH_PYTHON=ON", "-DITERTIME_BUILD_TESTS=OFF", f"-DPython3_EXECUTABLE={sys.executable}"]
            if shutil.which("ninja"):
                configure += ["-G", "Ninja"]
            subprocess.run(configure, check=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
        subprocess.run(["cmake", "--build", build_dir, "--target", "itertime_python", "itertime", "--parallel", jobs],
                       check=True)
        package = os.path.join(build_dir, "python", "itertime")
        native = [name for name in os.listdir(package) if name.startswith("_native") and name.endswith(".so")]
        if len(native) != 1:
            sys.exit(f"setup.py: {package}: expected one _native*.so, found {native}")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(os.path.join(package, native[0]), target)
        command = os.path.join(os.path.dirname(target), "bin", "itertime")
        os.makedirs(os.path.dirname(command), exist_ok=True)
        shutil.copyfile(os.path.realpath(os.path.join(package, "bin", "itertime")), command)
        os.chmod(command, 0o755)


os.makedirs(os.path.join(ROOT, "build-pip"), exist_ok=True)  # egg_base below must exist
setup(
    version=project_version(),
    ext_modules=[Extension("itertime._native", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": os.path.join("build-pip", "setuptools")},
             "egg_info": {"egg_base": "build-pip"}},
)

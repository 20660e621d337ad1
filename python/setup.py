"""pip install ./python: the selectivbench package (pure Python over libselectivbench.so).

The package finds the C library at run time (SELECTIVBENCH_LIBRARY, a copy bundled into the
package, the source tree's build/, or an installed copy: ./run.sh install). When the tree's
library is built (./run.sh build), it is bundled into the installed package, so the package
works from any directory. No network is needed: setuptools only, no build dependencies.
"""

import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
BUILT = os.path.join(HERE, "..", "build", "libselectivbench.so.0")


class BuildWithLibrary(build_py):
    """Copies the built library (when there is one) into the package it builds."""

    def run(self):
        super().run()
        if os.path.exists(BUILT):
            target = os.path.join(self.build_lib, "selectivbench", "libselectivbench.so.0")
            shutil.copyfile(os.path.realpath(BUILT), target)


setup(
    name="selectivbench",
    version="0.1.0",
    description="SelectivBench tasks, models, results and figures from Python (ctypes over "
                "libselectivbench)",
    packages=["selectivbench"],
    python_requires=">=3.9",
    install_requires=[],  # numpy from Debian's python3-numpy (or pip); torch optional
    cmdclass={"build_py": BuildWithLibrary},
)

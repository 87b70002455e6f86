"""The optional C extensions frontier._native and workers._linkscan (everything else is in pyproject.toml).

`optional=True`: without a C compiler or Python's headers the build warns and the install goes on; frontier
then runs its numpy path (frontier.seen.positions.native() is None), which passes the same tests, and
workers.links parses every page with lexbor.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("frontier._native", ["frontier/_native.c"], depends=["frontier/vendor/xxhash.h"],
                             extra_compile_args=["-O3", "-std=c11"], optional=True),
                   Extension("workers._linkscan", ["workers/_linkscan.c"], depends=["workers/_linkscan_impl.h"],
                             extra_compile_args=["-O3", "-std=c11"], optional=True)])

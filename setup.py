"""The package list, found by setuptools' discovery (the metadata is in pyproject.toml).

``servers/`` ships as the import package ``openenv_gym_servers`` (``package-dir`` in
pyproject.toml). Discovery in pyproject.toml (``[tool.setuptools.packages.find]``) names a
package after its directory, so it would find ``servers.*``: this file finds the packages under
``servers/`` (data directories such as ``wordle/data`` included) and names them under
``openenv_gym_servers``.
"""

from setuptools import find_namespace_packages, find_packages, setup

setup(
    packages=[
        *find_packages(include=["openenv_gym", "openenv_gym.*"]),
        "openenv_gym_servers",
        *(
            f"openenv_gym_servers.{name}"
            for name in find_namespace_packages("servers", exclude=["*__pycache__"])
        ),
    ]
)

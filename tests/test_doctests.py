"""The examples in the engine's docstrings run and give what they show."""

import doctest
import importlib
import pkgutil

import pytest

import canopy.engine


def _modules():
    yield "canopy.engine"
    for info in pkgutil.walk_packages(canopy.engine.__path__, "canopy.engine."):
        yield info.name


MODULES = sorted(_modules())


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_public_api_has_numpydoc_sections():
    """Every public function of ``canopy.engine`` documents parameters and returns."""
    missing = []
    for name in canopy.engine.__all__:
        obj = getattr(canopy.engine, name)
        if callable(obj) and not isinstance(obj, type) and name[0].islower():
            doc = obj.__doc__ or ""
            if "Parameters\n    ----------" not in doc or "Examples\n    --------" not in doc:
                missing.append(name)
    assert missing == []

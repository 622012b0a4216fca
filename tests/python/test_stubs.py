"""The shipped type stubs (tensord/_tensord.pyi) and the native module
agree: every class and public method on either side exists on the other."""

import ast
import os

import pytest

import tensord
from tensord import _tensord

# Declared for type checkers only: Python 3.12+ derives __buffer__ from the
# buffer slot, and the stub's module-level helpers are private.
STUB_ONLY = {"__buffer__"}


def stub_classes():
    path = os.path.join(os.path.dirname(tensord.__file__), "_tensord.pyi")
    with open(path) as stub:
        tree = ast.parse(stub.read())
    return {
        node.name: {item.name for item in node.body if isinstance(item, ast.FunctionDef)}
        for node in tree.body
        if isinstance(node, ast.ClassDef)
    }


@pytest.mark.parametrize("class_name", ["Client", "Tensor", "TensorInfo", "TensorWriter", "BatchPutResult", "Watch", "WatchEvent"])
def test_stub_and_module_have_the_same_members(class_name):
    declared = stub_classes()[class_name] - STUB_ONLY - {"__init__"}
    runtime = getattr(_tensord, class_name)
    missing = sorted(name for name in declared if not hasattr(runtime, name))
    assert not missing, f"{class_name} in the stub but not in the module: {missing}"
    public = {name for name in dir(runtime) if not name.startswith("_")}
    public |= {name for name in ("__dlpack__", "__dlpack_device__", "__enter__", "__exit__") if hasattr(runtime, name)}
    undeclared = sorted(public - declared)
    assert not undeclared, f"{class_name} members missing from the stub: {undeclared}"

"""python/symmoe/_C.pyi against the built symmoe._C (CPU): the same public names, kinds and parameters, so the
stubs cannot drift silently from python/src/bind_*.cpp. Types are not compared (pybind11 names C++ types its own
way); parameter names and default values are, read from pybind11's signature lines. A stub default `...` stands
for any default."""
import ast
import re
import types
from pathlib import Path

import pytest

from symmoe import _C

STUB = Path(_C.__file__).with_name("_C.pyi")  # the build copies it next to the module, as pip installs it


_NO_DEFAULT = object()


class _AnyDefault:
    """A stub's `...` default: equal to any default."""

    def __eq__(self, other):
        return other is not _NO_DEFAULT


def _value(text):
    """A default as a value where it is a literal (pybind11 prints reprs, the stub source), else as text."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _stub_params(fn, is_method):
    a = fn.args
    positional = a.posonlyargs + a.args
    defaults = [None] * (len(positional) - len(a.defaults)) + a.defaults
    params = [(p.arg, _NO_DEFAULT if d is None else _AnyDefault() if isinstance(d, ast.Constant) and d.value is ...
               else _value(ast.unparse(d))) for p, d in zip(positional + a.kwonlyargs, defaults + a.kw_defaults)]
    return params[1:] if is_method else params  # drop self


def _stub_scope(body, in_class):
    """name -> (kind, [params per overload]) of one scope of the stub; private names (type aliases) left out."""
    out = {}
    for node in body:
        if isinstance(node, ast.ClassDef):
            out[node.name] = ("class", [])
        elif isinstance(node, ast.FunctionDef):
            deco = {d.id if isinstance(d, ast.Name) else d.attr for d in node.decorator_list}
            kind = ("property" if "property" in deco else "staticmethod" if "staticmethod" in deco
                    else "method" if in_class else "function")
            params = [] if kind == "property" else [_stub_params(node, in_class and kind == "method")]
            prev = out.get(node.name, (kind, []))
            out[node.name] = (kind, prev[1] + params)
        elif isinstance(node, ast.AnnAssign):
            out[node.target.id] = ("data", [])
    return {n: v for n, v in out.items() if not n.startswith("_") or n == "__init__"}


def _split_top_level(s):
    """Splits a signature's parameters at the commas outside brackets."""
    parts, depth, cur = [], 0, ""
    for ch in s:
        depth += ch in "([{<"
        depth -= ch in ")]}>"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    return [p.strip() for p in parts + [cur] if p.strip()]


def _runtime_params(obj, name):
    """Parameters of each overload, from pybind11's signature lines `name(a: T, b: T = d) -> R` in __doc__."""
    sigs = re.findall(rf"^(?:\d+\. )?{re.escape(name)}\((.*)\) -> ", obj.__doc__ or "", re.M)  # overloads numbered

    def param(p):
        head, _, default = p.partition("=")
        return head.split(":")[0].strip(), _value(default.strip()) if default else _NO_DEFAULT

    return [[param(p) for p in _split_top_level(s) if not p.startswith("self:")] for s in sigs]


def _runtime_members(cls):
    out = {}
    for name, v in vars(cls).items():
        if (name.startswith("_") and name != "__init__") or isinstance(v, types.WrapperDescriptorType):
            continue  # a slot wrapper __init__ is Python's default, not a bound constructor
        if isinstance(v, property):
            out[name] = ("property", [])
        elif isinstance(v, staticmethod):
            out[name] = ("staticmethod", _runtime_params(getattr(cls, name), name))
        else:
            out[name] = ("method", _runtime_params(v, name))
    return out


TREE = ast.parse(STUB.read_text(), filename=str(STUB))
STUB_MODULE = _stub_scope(TREE.body, in_class=False)
STUB_CLASSES = {n.name: n for n in TREE.body if isinstance(n, ast.ClassDef)}


def test_module_names_and_kinds_match():
    runtime = {}
    for name in dir(_C):
        if name.startswith("_"):
            continue
        v = getattr(_C, name)
        runtime[name] = "class" if isinstance(v, type) else "function" if callable(v) else "data"
    stub = {n: k for n, (k, _) in STUB_MODULE.items()}
    assert stub == runtime


@pytest.mark.parametrize("name", sorted(n for n, (k, _) in STUB_MODULE.items() if k == "function"))
def test_function_parameters_match(name):
    assert STUB_MODULE[name][1] == _runtime_params(getattr(_C, name), name)


@pytest.mark.parametrize("name", sorted(STUB_CLASSES))
def test_class_members_match(name):
    cls = getattr(_C, name)
    node = STUB_CLASSES[name]
    # Bases: pybind11's own base is not written; the exceptions derive from RuntimeError and Error.
    assert [b.id for b in node.bases] == [b.__name__ for b in cls.__bases__ if b.__name__ != "pybind11_object"]
    members = _stub_scope(node.body, in_class=True)
    # Annotated names are instance attributes: only the exceptions have them (set when raised; see below).
    assert issubclass(cls, BaseException) or all(k != "data" for k, _ in members.values())
    assert {n: v for n, v in members.items() if v[0] != "data"} == _runtime_members(cls)


def test_error_attributes_are_set():
    """The instance attributes the stub declares on Error are there on a raised one."""
    declared = {n for n, (k, _) in _stub_scope(STUB_CLASSES["Error"].body, in_class=True).items() if k == "data"}
    with pytest.raises(_C.Error) as info:
        _C.named_shape("no-such-shape", 1, 1)
    assert declared and all(isinstance(getattr(info.value, a), str) for a in declared)

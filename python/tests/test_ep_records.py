"""The records that every path of ElasticBuffer.dispatch / combine shares (symmoe._ep_types): the fields that the
libtorch extension symmoe._torch_ep resolves by name at load time (python/src/torch_ext/torch_ep.cpp, kStateFields,
kHandleFields, the module attributes its init() reads) exist as __slots__ fields of the classes here, so renaming
one breaks this test on the CPU, not only the GPU path; the buffer's attributes live in its EpState; the modules
import one way (symmoe.ep -> symmoe._ep_eager -> symmoe._ep_types)."""
import ast
import inspect
import re
import types
from pathlib import Path

import pytest

import symmoe
from symmoe import _ep_types

ROOT = Path(__file__).resolve().parents[2]
EXTENSION = ROOT / "python" / "src" / "torch_ext" / "torch_ep.cpp"
PACKAGE = ROOT / "python" / "symmoe"


def _cpp_names(array):
    """The strings of `constexpr const char* <array>[...] = {...};` in torch_ep.cpp."""
    m = re.search(re.escape(array) + r"\[[^\]]*\]\s*=\s*\{(.*?)\};", EXTENSION.read_text(), re.S)
    assert m, f"{array} not found in {EXTENSION}"
    return re.findall(r'"([A-Za-z_0-9]+)"', m.group(1))


def _is_slot(cls, name):
    return isinstance(cls.__dict__.get(name), types.MemberDescriptorType)


def test_extension_state_fields_are_ep_state_slots():
    names = _cpp_names("kStateFields")
    assert names and len(set(names)) == len(names)
    missing = [n for n in names if not _is_slot(_ep_types.EpState, n)]
    assert not missing, f"torch_ep.cpp reads EpState fields that are not its __slots__: {missing}"


def test_extension_handle_fields_are_the_handle_record():
    names = _cpp_names("kHandleFields")
    assert sorted(names) == sorted(_ep_types.EPHandle.RECORD), "torch_ep.cpp writes every record field of a handle"
    assert all(_is_slot(_ep_types.EPHandle, n) for n in names)


def test_extension_module_attributes_exist():
    text = EXTENSION.read_text()
    attrs = re.findall(r'module_attr\(types, "([A-Za-z_0-9]+)"\)', text)
    methods = re.findall(r'intern\("((?:take|give_back)_native_handle)"\)', text)
    assert attrs and methods
    assert [a for a in attrs if not hasattr(_ep_types, a)] == []
    assert [m for m in methods if not callable(getattr(_ep_types.EpState, m, None))] == []
    assert isinstance(_ep_types.MAX_EXPERT_ALIGNMENT, int) and isinstance(_ep_types.BF16_PAYLOAD, tuple)


def test_buffer_attributes_live_in_its_state():
    buf = symmoe.ElasticBuffer._validation_only(2, 64, 256, 0, None)
    state = buf._state
    buf.num_topk, buf.num_experts = 4, 16
    assert (state.num_topk, state.num_experts, state.hidden, state.num_max_tokens_per_rank) == (4, 16, 256, 64)
    state.allow_multiple_reduction = False
    assert buf.allow_multiple_reduction is False
    with pytest.raises(AttributeError):
        state.not_a_field = 1  # a fixed record: a misspelt field is an error, not a new attribute


def test_scale_formats_recognise_every_payload_once():
    H = 7168
    table = _ep_types.scale_formats(H)
    assert table == {("float32", H // 128): ("fp8", "fp32_per128"), ("int32", H // 128): ("fp8", "ue8m0_per32"),
                     ("int32", -(-H // 512)): ("fp8", "ue8m0_per128")}
    # equal widths (H = 128: one int32 column either way): per 32 channels wins
    assert _ep_types.scale_formats(128)[("int32", 1)] == ("fp8", "ue8m0_per32")


def _imports(module):
    tree = ast.parse((PACKAGE / f"{module}.py").read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            names.update([node.module] if node.module else [a.name for a in node.names])
    return names


def test_no_circular_import():
    assert not {"ep", "_ep_eager"} & _imports("_ep_types")
    assert "ep" not in _imports("_ep_eager")


# ---- ElasticBuffer.dispatch / combine as the extension's C entry points (torch_ep.cpp, bind_buffer) ----
_DEFAULTS = {"kNone": None, "kZero": 0, "kTrue": True, "kFalse": False}


def _cpp_params(array):
    """[(name, default or inspect.Parameter.empty)] of `constexpr Param <array>[...] = {{"name", kX}, ...};`."""
    m = re.search(re.escape(array) + r"\[[^\]]*\]\s*=\s*\{(.*?)\};", EXTENSION.read_text(), re.S)
    assert m, f"{array} not found in {EXTENSION}"
    pairs = re.findall(r'\{"([A-Za-z_0-9]+)",\s*(k[A-Za-z]+)\}', m.group(1))
    return [(n, inspect.Parameter.empty if d == "kRequired" else _DEFAULTS[d]) for n, d in pairs]


def _py_params(fn):
    params = list(inspect.signature(fn).parameters.values())
    assert params[0].name == "self"
    return [(p.name, p.default) for p in params[1:]]


@pytest.mark.parametrize("name", ["dispatch", "combine"])
def test_extension_entry_parameters_are_the_python_signature(name):
    # The C entry parses the call itself: its parameter list (names, order, defaults) is the Python method's, and
    # the general path takes every parameter in that order.
    cls = symmoe.ElasticBuffer
    want = _py_params(getattr(cls, f"_{name}_python"))
    assert _cpp_params(f"k{name.capitalize()}Params") == want
    assert [n for n, _ in _py_params(getattr(cls, f"_{name}_general"))] == [n for n, _ in want]


def test_buffer_class_registered_for_the_extension():
    from symmoe import _ep_eager
    cls = symmoe.ElasticBuffer
    assert cls in _ep_eager._buffer_classes
    # without the extension the class keeps its Python entry points
    if not (_ep_eager._native and _ep_eager._native[0] is not None):
        assert cls.__dict__["dispatch"] is cls._dispatch_python and cls.__dict__["combine"] is cls._combine_python
    methods = set(re.findall(r'"(_(?:dispatch|combine)_(?:python|general))"', EXTENSION.read_text()))
    assert methods == {"_dispatch_python", "_dispatch_general", "_combine_python", "_combine_general"}
    assert all(callable(getattr(cls, m)) for m in methods)


def test_entry_docs_carry_the_python_signature():
    # What the C method descriptors get as __doc__: CPython reads "<name>($self, ...)\n--\n\n" as their
    # __text_signature__, so inspect.signature(ElasticBuffer.dispatch) stays the Python one.
    from symmoe import _ep_eager
    for name in ("dispatch", "combine"):
        fn = getattr(symmoe.ElasticBuffer, f"_{name}_python")
        doc = _ep_eager._text_signature(name, fn)
        head, sep, rest = doc.partition("\n--\n\n")
        assert sep and head.startswith(f"{name}($self, x") and rest == inspect.getdoc(fn)
        assert head[len(name):].replace("$self", "self") == str(inspect.signature(fn))

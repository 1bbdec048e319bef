"""symmoe._C._ep_capi, the C interface that the optional libtorch extension symmoe._torch_ep calls
(python/src/ep_capi.hpp), through ctypes on the CPU: the table's version and size, a handle's fields, and errors
raised as symmoe._C's bindings raise them (the GPU calls: python/tests_gpu/test_ep_torch_ext.py)."""
import ctypes

import pytest

from symmoe import _C

VERSION = 1  # ep_capi.hpp, kEpCApiVersion


class HandleInfo(ctypes.Structure):
    _fields_ = [(f, ctypes.c_int) for f in ("num_tokens", "num_topk", "do_expand", "expert_alignment",
                                              "num_recv_tokens", "num_expanded_tokens")] + [("topk_idx", ctypes.c_size_t)]


_py = ctypes.PYFUNCTYPE  # the GIL stays held; a -1 return raises the Python error the function set
HANDLE_INFO = _py(ctypes.c_int, ctypes.py_object, ctypes.POINTER(HandleInfo))
ROW_CAPACITY = _py(ctypes.c_int, ctypes.py_object, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int))


class Api(ctypes.Structure):
    _fields_ = [("version", ctypes.c_int), ("struct_size", ctypes.c_int), ("handle_info", HANDLE_INFO),
                ("row_capacity", ROW_CAPACITY), ("dispatch_one", ctypes.c_void_p), ("combine_one", ctypes.c_void_p)]


@pytest.fixture(scope="module")
def api():
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    with pytest.raises(ValueError):
        get(_C._ep_capi, b"another.name")  # the capsule's name is part of the contract
    return Api.from_address(get(_C._ep_capi, b"symmoe._C._ep_capi"))


def test_table_version_and_size(api):
    assert api.version == VERSION and api.struct_size == ctypes.sizeof(Api)
    assert api.dispatch_one and api.combine_one


def test_handle_info_reads_the_native_handle(api):
    h = _C.EpHandle()
    info = HandleInfo()
    assert api.handle_info(h, ctypes.byref(info)) == 0
    got = {f: getattr(info, f) for f, _ in HandleInfo._fields_}
    want = dict(num_tokens=h.num_tokens, num_topk=h.num_topk, do_expand=int(h.do_expand),
                expert_alignment=h.expert_alignment, num_recv_tokens=h.num_recv_tokens,
                num_expanded_tokens=h.num_expanded_tokens, topk_idx=h.ptrs["topk_idx"])
    assert got == want


def test_wrong_objects_raise_the_bindings_type_error(api):
    rows = ctypes.c_int(-7)
    with pytest.raises(TypeError):
        api.handle_info(object(), ctypes.byref(HandleInfo()))
    with pytest.raises(TypeError):
        api.row_capacity(_C.EpHandle(), 0, 1, ctypes.byref(rows))  # a handle where an EpBuffer belongs
    assert rows.value == -7

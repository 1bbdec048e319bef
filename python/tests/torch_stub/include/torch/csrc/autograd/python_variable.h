// STUB for the syntax check of python/src/torch_ext/torch_ep.cpp only (see ../../../../README.md): not libtorch.
#pragma once
#include <Python.h>

#include <torch/extension.h>

extern PyObject* THPVariableClass;
extern PyObject* ParameterClass;
bool THPVariable_CheckExact(PyObject* obj);
const at::Tensor& THPVariable_Unpack(PyObject* obj);

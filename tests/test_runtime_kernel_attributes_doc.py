"""KernelFunction's attribute properties say what the value is, its unit and where it comes from (the driver's
function attribute read when the module is loaded), for a reader of `help(KernelFunction)` or the API reference."""

import pytest

from ptxforge.runtime.kernel import FUNCTION_ATTRIBUTES, KernelFunction


@pytest.mark.parametrize("name,what", [
    ("registers", "registers each thread of this kernel uses, a count per thread"),
    ("static_shared", "shared memory the kernel declares statically (its `.shared` variables), in bytes per CTA"),
    ("local_bytes", "local memory each thread uses, in bytes per thread"),
    ("max_threads_per_block", "largest block, in threads per CTA"),
])
def test_each_attribute_property_says_what_it_is_its_unit_and_where_it_comes_from(name, what):
    doc = getattr(KernelFunction, name).__doc__
    assert what in doc, doc
    assert f"({FUNCTION_ATTRIBUTES[name]})" in doc or f"cuFuncGetAttribute {FUNCTION_ATTRIBUTES[name]}" in doc, doc
    assert "once the module is loaded" in doc, doc

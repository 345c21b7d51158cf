"""Every public name of ptxforge has a docstring (the walk is in ``tests/support/docstrings.py``).

Run this file as a script to print the names still missing one.
"""

import doctest

import ptxforge
from support.docstrings import class_offenders, missing_docstrings, public_modules


def test_every_public_name_has_a_docstring():
    missing = missing_docstrings()
    assert not missing, (f"{len(missing)} public names of ptxforge have no docstring "
                         "(say what it emits or does, its arguments, and the PTX it corresponds to):\n  "
                         + "\n  ".join(missing))


def test_the_walk_reaches_mixin_methods_and_sees_a_missing_docstring():
    # The walk must reach the instruction methods KernelBuilder takes from its mixins, and a class
    # without a docstring must be reported: a walk that silently saw nothing would pass the test above.
    mods = {m.__name__ for m in public_modules()}
    assert {"ptxforge.builder", "ptxforge.isa.arith", "ptxforge.interp"} <= mods

    class Undocumented(ptxforge.KernelBuilder):
        def extra(self):
            return None
    Undocumented.__module__ = "ptxforge.builder"
    found = class_offenders(Undocumented, "Undocumented", set())
    assert "Undocumented (class)" in found
    assert any(f.startswith("Undocumented.extra ") for f in found)
    assert not any(f.startswith("Undocumented.reg ") for f in found)     # documented on KernelBuilder





def test_kernel_builder_example_runs_with_public_names_only():
    tests = doctest.DocTestFinder(recurse=False).find(ptxforge.KernelBuilder, globs={})
    examples = [e for t in tests for e in t.examples]
    assert len(examples) >= 3
    assert not any("T." in e.source or "isa" in e.source for e in examples), "the example uses private names"
    runner = doctest.DocTestRunner()
    for t in tests:
        runner.run(t)
    assert runner.summarize(verbose=False).failed == 0


if __name__ == "__main__":
    for line in missing_docstrings():
        print(line)

"""The provider bindings load one submodule at a time, and some only when a stack names them."""

from __future__ import annotations

import json
import subprocess
import sys

from stacks.config.team import REPO_ROOT
from stacks.constructs import provider


def test_each_class_loaded_at_first_use_comes_from_its_submodule():
    for name, module in provider.AT_FIRST_USE.items():
        binding = getattr(provider, name)
        assert (binding.__name__, binding.__module__) == (name, module)
        assert name in provider.__all__


def test_importing_the_stack_loads_no_submodule_it_loads_at_first_use_and_not_the_package_init():
    # A fresh process, as cdktf.json runs the app: in this one other tests have loaded them.
    script = (
        "import json, sys\n"
        "import stacks.team_stack\n"
        "from stacks.constructs import provider\n"
        "print(json.dumps({'loaded': sorted(set(provider.AT_FIRST_USE.values()) & set(sys.modules)),"
        " 'init_ran': hasattr(sys.modules[provider.PACKAGE], '__all__')}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-O", "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    assert json.loads(result.stdout.splitlines()[-1]) == {"loaded": [], "init_ran": False}

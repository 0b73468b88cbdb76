"""Importing the biLM changes nothing in the host process: no at-fork hook, no CPU probing
through torch's private ``torch.cpu._*`` functions; both happen when first needed."""

import os
import subprocess
import sys
import textwrap

from spacy_elmo.bilm import threads

from .conftest import tiny_bilm

SCRIPT = textwrap.dedent(
    """
    import os
    import torch

    hooks = []
    register = os.register_at_fork
    os.register_at_fork = lambda **kwargs: hooks.append(kwargs) or register(**kwargs)

    def ours():
        return [h for h in hooks if "spacy_elmo" in getattr(h.get("after_in_child"), "__module__", "")]

    def probed(*args):
        raise AssertionError("a CPU probe ran at import")

    real_vnni = torch.cpu._is_vnni_supported
    torch.cpu._is_vnni_supported = probed
    import spacy_elmo.bilm
    import spacy_elmo.bilm.kernels
    import spacy_elmo.bilm.lstm
    import spacy_elmo.bilm.precision

    assert not ours(), hooks
    torch.cpu._is_vnni_supported = real_vnni
    from spacy_elmo.bilm import ElmoOptions, ElmoBiLM
    from spacy_elmo.bilm.precision import int8_reduce_range

    int8_reduce_range()
    options = ElmoOptions(char_dim=4, filters=[(1, 4)], n_highway=1, projection_dim=4, lstm_dim=8, n_layers=1)
    ElmoBiLM(options)
    assert ours(), "no hook once a biLM is built"
    print("ok")
    """
)


def test_importing_the_bilm_registers_no_fork_hook_and_probes_no_cpu():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]


def test_building_a_bilm_registers_the_fork_hook_once(monkeypatch):
    registered = []
    monkeypatch.setattr(threads, "_registered", False)
    monkeypatch.setattr(os, "register_at_fork", lambda **kwargs: registered.append(kwargs))
    tiny_bilm()
    tiny_bilm()
    assert registered == [{"after_in_child": threads._one_thread}]

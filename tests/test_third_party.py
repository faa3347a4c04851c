"""rosetta's settings of the libraries it uses live in rosetta.third_party and hold only while
rosetta works (issue 84): an application keeps its own litellm flags, environment, optuna verbosity
and datasets progress bars outside rosetta's calls."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading

from conftest import REPO


def test_litellm_is_imported_offline_without_leaving_its_variable_behind() -> None:
    code = ("import os, rosetta.third_party as t; t.import_litellm(); "
            "from litellm.litellm_core_utils.get_model_cost_map import get_model_cost_map_source_info as info; "
            "print(info()['source'], 'LITELLM_LOCAL_MODEL_COST_MAP' in os.environ)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LITELLM_LOCAL")}
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO,
                           timeout=120, check=True).stdout.split()
    assert shown == ["local", "False"]  # the bundled map, and the environment as the application had it


def test_litellms_flags_and_variables_hold_only_while_calls_run() -> None:
    from rosetta.third_party import LITELLM_CALL_ENVIRONMENT, import_litellm, using_litellm

    litellm = import_litellm()

    litellm.suppress_debug_info = False
    name = next(iter(LITELLM_CALL_ENVIRONMENT))
    os.environ.pop(name, None)
    inside, release = threading.Event(), threading.Event()

    def call() -> None:  # a second call overlapping the first: the settings stay until both end
        with using_litellm():
            inside.set()
            release.wait(10)

    with using_litellm():
        assert litellm.suppress_debug_info is True and litellm.disable_hf_tokenizer_download is True
        assert os.environ[name] == "True"
        other = threading.Thread(target=call)
        other.start()
        inside.wait(10)
    assert litellm.suppress_debug_info is True  # the other call still runs
    release.set()
    other.join(10)
    assert litellm.suppress_debug_info is False and name not in os.environ


def test_loading_labeled_data_leaves_datasets_and_optuna_as_the_application_set_them(tmp_path) -> None:
    import datasets
    import optuna

    from rosetta.datasets import load_labeled
    from rosetta.definition.loader import load_definition
    from rosetta.signature import lower
    from rosetta.third_party import quiet_optuna

    signature = lower(load_definition(REPO / "signatures" / "question-type.md"))
    split = tmp_path / "question-type"
    split.mkdir()
    row = json.loads((REPO / "datasets" / "question-type" / "train.jsonl").read_text().splitlines()[0])
    for name in ("train", "dev", "test"):
        (split / f"{name}.jsonl").write_text(json.dumps({**row, "id": name}) + "\n")
    datasets.enable_progress_bars()
    datasets.logging.set_verbosity(logging.INFO)
    optuna.logging.set_verbosity(optuna.logging.INFO)
    try:
        assert len(load_labeled(signature, split).split("test")) == 1
        with quiet_optuna():
            assert optuna.logging.get_verbosity() == optuna.logging.WARNING
        assert datasets.is_progress_bar_enabled() and datasets.logging.get_verbosity() == logging.INFO
        assert optuna.logging.get_verbosity() == optuna.logging.INFO
    finally:
        datasets.disable_progress_bars()
        datasets.logging.set_verbosity_error()
        optuna.logging.set_verbosity(optuna.logging.WARNING)

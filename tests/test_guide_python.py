"""Issue 86: every ``python`` block of the README and the guide (tests/documented.py's GUIDE) runs,
page by page, as a reader would run it: in a fresh project holding the bundled agents, the page's
blocks in order in one namespace, the project as the working directory. (Their ``rosetta``
commands run in tests/test_readme.py; the front pages' blocks in tests/test_docs_snippets.py.)

A cloud model is tests/vendor_recorder.py's server on 127.0.0.1, standing in for the OpenAI,
Anthropic and Gemini APIs (``*_API_BASE``; the keys are placeholders) and answering each agent in
its own output's shape; a page on the embedded model (``local/gemma-3-270m``) runs on it (those
tests are marked slow). Each expression statement's value is kept, as a notebook shows it, so the
checks below hold a page to what its comments say it returns.

What a block cannot run as written is in a table, with the reason: :data:`PROJECT` (what the
reader's project holds by then), :data:`GIVEN` (names the reader's own code defines: a request, a
report, a metric) and :data:`ADAPTED` (a line run differently). Any other line runs as written, and
a page without a check in :data:`CHECKS` fails.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import io
import json
import re
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import REPO
from documented import GUIDE
from test_readme import _versions
from vendor_recorder import Recorded, VendorRecorder

REPORT = "SQL injection in the login form lets anyone log in."
"""A report that passes vuln-triage's input rule (40 characters or more)."""
LOGIN_PY = 'def login(user, password):\n    return db.execute(f"SELECT * FROM users WHERE name = \'{user}\'")\n'
"""The file under review in the tools example (checkout/src/login.py)."""
TRIAGE = {"severity": "high", "rationale": "SQL injection in the login form lets anyone log in."}
VERDICT = {"verdict": "pass", "criteria": [{"id": "C1", "verdict": "pass", "reasoning": "It is named.",
                                            "confidence": 0.9}], "issues": [], "suggested_fixes": []}
TOPIC = {"label": "sci_tech"}
REVIEW = ("1. **Must fix** — `src/login.py:2`: the user name is formatted into the SQL text (injection); "
          "pass it as a bound parameter.\n\nReady after must-fix items.")


def python_blocks(page: Path) -> list[tuple[int, str]]:
    """(first line, code) of each ```python block of the page, in page order."""
    text = page.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start(1)) + 1, m.group(1)) for m in re.finditer(r"```python\n(.*?)```", text, re.S)]


def page_id(page: Path) -> str:
    return page.relative_to(REPO).as_posix()


PAGES = [page for page in GUIDE if python_blocks(page)]


# -- what a block cannot run as written ---------------------------------------------------------

def _started_experiment(project: Path) -> None:
    """The page's own walk-through above its Python block: version A compiled, the definition
    edited, version B compiled, an experiment of B against A on 20% of users."""
    from rosetta.cli import app

    def cli(*args: str) -> None:
        done = CliRunner().invoke(app, list(args), catch_exceptions=False)
        assert done.exit_code == 0, done.output

    cli("compile", "signatures/vuln-triage.md", "--model", "local/gemma-3-270m")
    definition = project / "signatures" / "vuln-triage.md"
    definition.write_text(definition.read_text(encoding="utf-8") + "\nAlways name the affected component.\n",
                          encoding="utf-8")
    cli("compile", "signatures/vuln-triage.md", "--model", "local/gemma-3-270m")
    new, old = _versions(CliRunner(), app)
    cli("experiment", "start", "vuln-triage", "--model", "local/gemma-3-270m", "--treatment", new[:12],
        "--control", old[:12], "--share", "0.2")


def _checkout(project: Path) -> None:
    (project / "checkout" / "src").mkdir(parents=True)
    (project / "checkout" / "src" / "login.py").write_text(LOGIN_PY, encoding="utf-8")


def _news_topic_data(project: Path) -> None:
    shutil.copytree(REPO / "datasets" / "news-topic", project / "datasets" / "news-topic")


PROJECT: dict[str, tuple[Callable[[Path], None], str]] = {
    # page → (what the project holds beyond the bundled agents, why)
    "docs/guide/rollout.md": (_started_experiment, "the page's commands above the block (run as in "
                              "tests/test_readme.py): two versions and an experiment between them"),
    "docs/guide/runtime.md": (_checkout, "the checkout the code reviewer reads (`file_reader(\"checkout/\")`), "
                              "with the file the request names"),
    "docs/guide/notebooks.md": (_news_topic_data, "news-topic's labeled data, which `nb.sandbox` copies"),
}


def _treated_user(project: Path) -> str:
    """A user id the running experiment routes to its treatment arm, by the page's rule:
    ``int(sha256(f"{experiment_id}:{user_id}")) / 2**256 < share``."""
    import yaml

    rollout = yaml.safe_load((project / "compiled/vuln-triage/local/gemma-3-270m.rollout.yaml").read_text())
    experiment = rollout["experiment"]
    return next(user for user in (f"user-{n}" for n in range(1000))
                if int(hashlib.sha256(f"{experiment['id']}:{user}".encode()).hexdigest(), 16) / 2**256
                < experiment["share"])


def _train(project: Path) -> list[Any]:
    """The first labeled rows of vuln-triage's train split, as DSPy examples."""
    import rosetta
    from rosetta.signature import lower

    signature = lower(rosetta.load_definition(project / "signatures" / "vuln-triage.md"))
    rows = [json.loads(line) for line in (REPO / "datasets/vuln-triage/train.jsonl").read_text().splitlines()[:3]]
    return [signature.dspy_example(row["inputs"], row["output"]) for row in rows]


def _read(path: str) -> str:
    return (Path("checkout") / path).read_text(encoding="utf-8")


GIVEN: dict[str, dict[str, tuple[Callable[[Path], Any], str]]] = {
    # page → {name the page's code uses but the reader's own code defines: (its value here, why)}
    "docs/guide/runtime.md": {
        "report": (lambda project: REPORT, "the report the reader's application triages"),
        "request": (lambda project: SimpleNamespace(user_id="customer-42"), "the reader's web request"),
        "read": (lambda project: _read, "the reader's own way to read a file the model asks for"),
    },
    "docs/guide/rollout.md": {
        "report": (lambda project: REPORT, "the report the reader's application triages"),
        "request": (lambda project: SimpleNamespace(user_id=_treated_user(project)),
                    "the reader's web request, from a user the experiment treats (the page's example arm)"),
        "analyst_agreed": (lambda project: True, "the reader's own measure of success"),
    },
    "docs/guide/render.md": {
        "my_metric": (lambda project: lambda example, prediction, trace=None: prediction.severity == example.severity,
                      "the reader's DSPy metric"),
        "train": (_train, "the reader's DSPy trainset: three rows of vuln-triage's train split"),
    },
}
"""Names a page's code assumes the reader's own code defined."""

ADAPTED: dict[str, dict[str, tuple[str, str]]] = {
    # page → {text as the page has it: (text run here, why)}
    "docs/guide/local-models.md": {
        "messages=[...]": ('messages=[{"role": "user", "content": "Name a colour."}]',
                           "the page elides the messages (`[...]`): one user turn"),
    },
    "docs/guide/notebooks.md": {
        'nb.optimize(box / "signatures/news-topic.md", "local/gemma-3-270m", trials=5, max_calls=48)': (
            'nb.optimize(box / "signatures/news-topic.md", "openai/gpt-4o", trials=5, max_calls=48)',
            "on two cores the embedded model takes ~5 s a call on news-topic's long prompts (this search: two "
            "minutes; tests/notebooks runs notebook 02's search on it): the same search on the fake OpenAI API"),
        'nb.evaluate(agent, "local/gemma-3-270m")': (
            'nb.evaluate(agent, "openai/gpt-4o")', "the same model as the search above"),
        'nb.evaluate(agent, "local/gemma-3-270m", prompt=search.prompt)': (
            'nb.evaluate(agent, "openai/gpt-4o", prompt=search.prompt)', "the same model as the search above"),
    },
}
"""Text of a page's blocks run differently here, with the reason."""

SET_UP: dict[str, tuple[Callable[[], contextlib.AbstractContextManager[Any]], str]] = {
    # page → (the reader's setup around the page's code, why)
    "docs/guide/render.md": (lambda: _dspy_lm("openai/gpt-4o"),
                             "DSPy's optimizer runs the program on the LM the reader configured"),
}


@contextlib.contextmanager
def _dspy_lm(model: str) -> Iterator[None]:
    import dspy

    with dspy.context(lm=dspy.LM(model, cache=False)):  # no disk cache: every call reaches the server
        yield


LOCAL = {"README.md", "docs/guide/rollout.md", "docs/guide/local-models.md"}
"""Pages whose blocks run on the embedded model (slow)."""


# -- the fake provider ----------------------------------------------------------------------------

class Provider(VendorRecorder):
    """The vendor recorder answering each agent in its own output's shape: the code reviewer first
    calls ``read_file`` on the file the request names, then reviews; the rubric reviewer passes
    the answer; news-topic says sci_tech; anything else is a triage."""

    def __init__(self) -> None:
        super().__init__(json.dumps(TRIAGE))
        self.choosing = threading.Lock()

    def _choose(self, body: dict[str, Any]) -> None:
        text = json.dumps(body)
        self.tools = None
        if "Rubric-Based Reviewer" in text:
            self.answer = json.dumps(VERDICT)
        elif "read_file" in text:
            self.answer = REVIEW
            self.tools = lambda results: None if results else [("read_file", {"path": "src/login.py"})]
        elif "sci_tech" in text:
            self.answer = json.dumps(TOPIC)
        else:
            self.answer = json.dumps(TRIAGE)

    def _openai(self, handler: Any, body: dict[str, Any], path: str) -> None:
        with self.choosing:
            self._choose(body)
            super()._openai(handler, body, path)

    def _anthropic(self, handler: Any, body: dict[str, Any], path: str) -> None:
        with self.choosing:
            self._choose(body)
            super()._anthropic(handler, body, path)

    def _gemini(self, handler: Any, body: dict[str, Any], path: str) -> None:
        with self.choosing:
            self._choose(body)
            super()._gemini(handler, body, path)


# -- running a page -------------------------------------------------------------------------------

@dataclass
class Run:
    """What a page's blocks did: the namespace, each expression statement's value, what they
    printed, the requests the fake provider got and the project they ran in."""

    project: Path
    namespace: dict[str, Any]
    requests: list[Recorded]
    values: list[tuple[str, Any]] = field(default_factory=list)
    printed: list[str] = field(default_factory=list)  # per block
    after: list[dict[str, Any]] = field(default_factory=list)  # the names each block left

    def value(self, source: str) -> Any:
        """The value of the expression statement written ``source``."""
        found = [value for text, value in self.values if " ".join(text.split()) == " ".join(source.split())]
        assert found, f"no expression statement {source!r} among {[text for text, _ in self.values]}"
        return found[-1]

    def calls(self, fragment: str) -> list[Recorded]:
        """The requests whose path holds ``fragment``."""
        return [r for r in self.requests if fragment in r.path]


def execute(code: str, first_line: int, filename: str, run: Run) -> None:
    """Run a block statement by statement, keeping each expression statement's value, what it
    printed and the names it left; tracebacks name the page's own lines."""
    tree = ast.parse(code)
    sources = [ast.get_source_segment(code, statement) or "" for statement in tree.body]
    ast.increment_lineno(tree, first_line - 1)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        for statement, source in zip(tree.body, sources, strict=True):
            # dont_inherit: the page's code runs without this module's `from __future__ import annotations`
            if isinstance(statement, ast.Expr):
                code_object = compile(ast.Expression(statement.value), filename, "eval", dont_inherit=True)
                run.values.append((source, eval(code_object, run.namespace)))  # noqa: S307 (the page's own code)
            else:
                code_object = compile(ast.Module([statement], []), filename, "exec", dont_inherit=True)
                exec(code_object, run.namespace)  # noqa: S102 (the page's own code)
    run.printed.append(printed.getvalue())
    run.after.append(dict(run.namespace))


def adapted(page: str, blocks: list[tuple[int, str]]) -> list[tuple[int, str]]:
    rules = ADAPTED.get(page, {})
    text = "\n".join(code for _, code in blocks)
    assert all(old in text for old in rules), f"ADAPTED names text {page} no longer has"
    out = []
    for line, code in blocks:
        for old, (new, _) in rules.items():
            code = code.replace(old, new)
        out.append((line, code))
    return out


def _params() -> list[Any]:
    return [pytest.param(page, id=page_id(page), marks=[pytest.mark.slow] if page_id(page) in LOCAL else [])
            for page in PAGES]


def test_the_guide_has_python_blocks_and_every_table_names_a_page_that_has_them() -> None:
    ids = {page_id(page) for page in PAGES}
    assert len(ids) >= 7, ids
    for table in (PROJECT, GIVEN, ADAPTED, SET_UP, CHECKS):
        assert set(table) <= ids, set(table) - ids
    assert LOCAL <= ids and set(CHECKS) == ids, "a page with python blocks has no check"


@pytest.mark.parametrize("page", _params())
def test_every_python_block_runs(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 request: pytest.FixtureRequest) -> None:
    name = page_id(page)
    if name in LOCAL:
        request.getfixturevalue("local_model")  # the embedded model's weights, assembled once a session
    else:  # an empty cache folder: a page that drives the embedded model would assemble its weights there
        monkeypatch.setenv("ROSETTA_CACHE_DIR", str(tmp_path / "cache"))
    project = tmp_path / "project"
    shutil.copytree(REPO / "signatures", project / "signatures")
    (project / "pyproject.toml").write_text("[project]\nname = 'demo'\n", encoding="utf-8")
    monkeypatch.chdir(project)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # a sandbox's copy is made under the test's folder
    # offline, as rosetta's own calls are: litellm's bundled model map and Anthropic beta headers
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", "True")
    with Provider() as provider:
        for variable, base in (("OPENAI", provider.openai_base), ("ANTHROPIC", provider.anthropic_base),
                               ("GEMINI", provider.gemini_base)):
            monkeypatch.setenv(f"{variable}_API_BASE", base)
            monkeypatch.setenv(f"{variable}_API_KEY", "sk-test-not-a-real-key")
        if name in PROJECT:
            PROJECT[name][0](project)
        run = Run(project, {"__name__": "__guide__"}, provider.requests)
        for given, (make, _) in GIVEN.get(name, {}).items():
            run.namespace[given] = make(project)
        set_up = SET_UP[name][0]() if name in SET_UP else contextlib.nullcontext()
        with set_up:
            for line, code in adapted(name, python_blocks(page)):
                execute(code, line, str(page), run)
        CHECKS[name](run)
    assert name in LOCAL or not (tmp_path / "cache" / "models").exists(), f"{name} runs the embedded model: LOCAL"


# -- what each page says its code does ------------------------------------------------------------

def check_readme(run: Run) -> None:
    severity, model, outcomes = run.printed[0].split(maxsplit=2)
    assert severity in {"critical", "high", "medium", "low", "informational"}, run.printed
    assert model == "local/gemma-3-270m" and outcomes.strip() == "[<Outcome.OK: 'ok'>]", run.printed
    assert not run.requests, "the embedded model reached the network"  # "offline, in-process"


def check_render(run: Run) -> None:
    import dspy

    warnings = run.value("prompt.warnings")
    assert any("maxLength" in w and "Gemini" in w and "rosetta still validates" in w for w in warnings), warnings
    sent = run.calls(":generateContent")
    assert len(sent) == 1 and "models/gemini-2.5-pro:" in sent[0].path, [r.path for r in run.requests]
    assert "SQLi in login" in json.dumps(sent[0].body)
    made = run.value("signature.to_dspy()")
    assert issubclass(made, dspy.Signature) and list(made.input_fields) == ["report"]
    assert list(made.output_fields) == ["severity", "rationale"], made.output_fields  # one per schema property
    # block 2: DSPy's choice kept as a version of the artifact, not served
    version = Path(run.value('rosetta.from_dspy(compiled, "vuln-triage", "local/gemma-3-270m")'))
    assert version.is_file() and version.parent.name == "gemma-3-270m.versions", version
    served = run.namespace["rosetta"].load("vuln-triage").explain("local/gemma-3-270m")
    assert served.version != version.stem, served
    assert run.calls("/chat/completions"), "the DSPy optimizer called no model"


def check_runtime(run: Run) -> None:
    from rosetta.render.prompt import RenderedPrompt

    ns = run.namespace
    # block 1: opus's prompt, sent with litellm to Anthropic's API
    prompt = ns["prompt"]
    assert isinstance(prompt, RenderedPrompt) and prompt.model.startswith("anthropic/claude-opus"), prompt.model
    first = run.requests[0]
    assert first.path.endswith("/v1/messages") and first.body["model"].startswith("claude-opus"), first.path
    assert run.after[0]["agent"].prompt_for("opus") is prompt  # "cached"
    # block 2: the options reach the provider (the review's judge is an agent of its own: not its
    # `extra`), the streamed answer is printed as it comes, reviewed and recorded
    answers = [r for r in run.calls("/chat/completions")
               if r.body.get("model") == "gpt-4o" and "Rubric-Based Reviewer" not in json.dumps(r.body)]
    assert len(answers) == 3 and [bool(r.body.get("stream")) for r in answers] == [False, False, True], answers
    assert all(r.body.get("user") == "customer-42" and r.body.get("temperature") == 0.7 for r in answers)
    assert json.loads(run.printed[1]) == TRIAGE, run.printed[1]
    streamed = run.after[1]["result"]
    assert streamed.model == "openai/gpt-4o" and streamed.overrides == {"temperature": 0.7}, streamed
    assert streamed.review is not None and streamed.review.verdict == "pass", streamed.review
    assert (run.project / "runs" / "1" / "turn-001-response.md").is_file(), "record_dir recorded nothing"
    # block 3: the agent's own class, on the first model of the chain (Anthropic's Sonnet)
    typed = run.after[2]["result"]
    assert typed.valid and type(typed.output) is ns["Triage"] and typed.output.severity == TRIAGE["severity"]
    assert typed.model == "anthropic/claude-sonnet-5-5", typed.model
    # block 4: the tool loop: read_file called, the file's text its result, every step in order
    reviewed = run.after[3]["result"]
    steps = run.value("result.tool_calls")
    assert steps == reviewed.tool_calls and [set(step) for step in steps] == [{"id", "name", "arguments", "result"}]
    assert steps[0]["name"] == "read_file" and steps[0]["arguments"] == {"path": "src/login.py"}, steps
    assert steps[0]["result"] == LOGIN_PY and reviewed.raw == REVIEW, reviewed
    with pytest.raises(PermissionError):  # "a reader confined to a folder"
        run.namespace["rosetta"].file_reader("checkout/")("../pyproject.toml")
    # block 5: the conversation asked for the tool, and the reader's answer to it got the review
    assert ns["asked"].wants_tools and ns["asked"].tool_calls[0]["name"] == "read_file"
    assert ns["result"].raw == REVIEW and LOGIN_PY.splitlines()[0] in json.dumps(run.requests[-1].body)


def check_rollout(run: Run) -> None:
    import yaml

    arm, version, experiment = run.value("result.arm, result.version, result.experiment")
    rollout = yaml.safe_load((run.project / "compiled/vuln-triage/local/gemma-3-270m.rollout.yaml").read_text())
    assert (arm, version, experiment) == ("treatment", rollout["experiment"]["treatment"], rollout["experiment"]["id"])
    assert re.fullmatch(r"[0-9a-f]{64}", version) and experiment.startswith("exp-"), (version, experiment)
    log = run.project / ".rosetta" / "outcomes" / "vuln-triage.jsonl"
    [line] = log.read_text(encoding="utf-8").splitlines()
    outcome = json.loads(line)
    assert (outcome["arm"], outcome["version"], outcome["success"]) == ("treatment", version, True), outcome


def check_local_models(run: Run) -> None:
    import dspy

    result = run.value('agent.run({"report": "SQL injection in the login form lets anyone log in."}, '
                       'model="local/gemma-3-270m")')
    assert result.valid and result.model == "local/gemma-3-270m", result
    answer = run.value('litellm.completion(model="local/gemma-3-270m", messages=[{"role": "user", '
                       '"content": "Name a colour."}], temperature=0, max_tokens=20)')
    assert answer.choices[0].message.content.strip() and answer.usage.completion_tokens <= 20, answer
    lm = run.value('dspy.LM("local/gemma-3-270m")')
    assert isinstance(lm, dspy.LM) and lm.model == "local/gemma-3-270m"
    assert not run.requests, "an embedded model's page reached the network"


def check_notebooks(run: Run) -> None:
    import matplotlib.figure
    import pandas as pd

    table = run.value('nb.render_table("vuln-triage", ["sonnet", "openai/gpt-4o", "local/gemma-3-270m"])')
    assert list(table["model"]) == ["anthropic/claude-sonnet-5-5", "openai/gpt-4o", "local/gemma-3-270m"]
    knobs = run.value('nb.knobs("news-topic", "local/gemma-3-270m")')
    assert isinstance(knobs, pd.DataFrame) and "demos" in set(knobs["dimension"])
    box = run.namespace["box"]
    assert [len((box / "datasets/news-topic" / f"{split}.jsonl").read_text().splitlines())
            for split in ("dev", "test")] == [8, 3]
    search = run.namespace["search"]
    assert search.outcome.trials == 5 and 0 < search.outcome.calls <= 48, search
    assert isinstance(run.value("search.trials_frame()"), pd.DataFrame)
    assert all(isinstance(run.value(f"search.{plot}()"), matplotlib.figure.Figure)
               for plot in ("plot_history", "plot_importances", "plot_pareto"))
    assert isinstance(run.values[-1][1], matplotlib.figure.Figure)  # the score bars


def check_python(run: Run) -> None:
    import pydantic

    import rosetta

    preferences = run.value("agent.spec.portability.model_preferences")
    assert preferences[:2] == ["anthropic/claude-sonnet-5-5", "openai/gpt-5.6"], preferences
    spec = run.namespace["agent"].spec
    assert isinstance(spec, pydantic.BaseModel) and spec.model_config.get("frozen"), "typed and frozen"
    sections = run.value("[(s.title, s.role) for s in agent.sections]")
    assert ("Role", "role") in sections and ("Output format", "format") in sections, sections
    bundled = {path.name.split(".")[0] for path in (run.project / "signatures").iterdir() if path.name != "README.md"}
    assert sorted(agent.name for agent in run.namespace["agents"]) == sorted(bundled)  # one per agent, its files merged
    # "raises one DefinitionError listing every bad file"
    bad = run.project / "bad"
    bad.mkdir()
    for name in ("a", "b"):
        (bad / f"{name}.md").write_text("---\ndescription: no name\n---\nText.\n", encoding="utf-8")
    with pytest.raises(rosetta.DefinitionError) as raised:
        rosetta.load_directory(bad)
    assert "a.md" in str(raised.value) and "b.md" in str(raised.value), raised.value


CHECKS: dict[str, Callable[[Run], None]] = {
    "README.md": check_readme,
    "docs/guide/render.md": check_render,
    "docs/guide/runtime.md": check_runtime,
    "docs/guide/rollout.md": check_rollout,
    "docs/guide/local-models.md": check_local_models,
    "docs/guide/notebooks.md": check_notebooks,
    "docs/guide/python.md": check_python,
}
"""What each page's blocks must have done (its comments' claims, and that a call reached a model)."""

"""Every code block of the README and the docs has a rule that runs or checks it.

Fast, no server: the blocks' fences are declared (samples parse), every shell command
matches a rule, every runnable block belongs to a program of a suite that a test runs
(tests/docs/test_docs_blocks.py, tests/ray/test_docs_blocks_ray.py,
tests/interop/test_docs_blocks_openenv.py), and the harness itself refuses what it should.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import pytest
from code_blocks import (
    PAGES,
    RULES,
    SUITES,
    Block,
    Command,
    all_blocks,
    all_programs,
    blocks,
    check_fence,
    check_sizes,
    commands,
    programs,
    rule_for,
    server_urls,
)

HERE = Path(__file__).resolve().parent
SHIMS = HERE / "shell_shims.py"


def test_the_pages_are_the_readme_and_every_docs_page() -> None:
    assert PAGES[0] == "README.md"
    assert "docs/index.md" in PAGES
    assert len(all_blocks()) > 50


@pytest.mark.parametrize("page", PAGES)
def test_every_block_is_fenced_with_a_declared_language(page: str) -> None:
    for block in blocks(page):
        check_fence(block)
        check_sizes(block)
        server_urls(block)


@pytest.mark.parametrize("page", PAGES)
def test_every_shell_command_has_a_rule(page: str) -> None:
    for block in blocks(page):
        if block.lang in ("bash", "console"):
            assert commands(block), f"{block.where}: a shell block without a command"
            for command in commands(block):
                rule_for(command)


@pytest.mark.parametrize("page", PAGES)
def test_every_runnable_block_is_in_one_program(page: str) -> None:
    placed: list[Block] = [b for p in programs(page) for b in p.steps]
    assert len(placed) == len(set(placed))
    for block in blocks(page):
        if block.lang in ("python", "bash", "console"):
            assert block in placed, f"{block.where} runs in no program"
    for program in programs(page):
        assert program.suite in SUITES


def test_every_suite_has_a_test() -> None:
    tests = {
        "plain": HERE / "test_docs_blocks.py",
        "trl": HERE / "test_docs_blocks.py",
        "docker": HERE / "test_docs_blocks.py",
        "ray": HERE.parent / "ray" / "test_docs_blocks_ray.py",
        "openenv": HERE.parent / "interop" / "test_docs_blocks_openenv.py",
    }
    assert set(tests) == set(SUITES)
    for program in all_programs():
        path = tests[program.suite]
        assert path.is_file()
        assert f'"{program.suite}"' in path.read_text(), f"{path} runs no {program.suite} page"


# --- the harness refuses what it should


def _block(code: str, lang: str | None = "bash", **kw: object) -> Block:
    return Block("docs/x.md", 1, lang, code, **kw)  # type: ignore[arg-type]


def test_undeclared_fences_and_indented_blocks_fail() -> None:
    with pytest.raises(AssertionError, match="neither run"):
        check_fence(_block("x", "bsh"))
    with pytest.raises(AssertionError, match="indented"):
        check_fence(_block("pip install x", None))
    with pytest.raises(AssertionError, match="language"):
        check_fence(_block("x", ""))
    with pytest.raises(AssertionError, match="does not parse"):
        check_fence(_block("{'a': 1}", "json"))
    check_fence(_block('{"a": 1}', "json"))


def test_sizes_must_be_in_the_block_and_shrink() -> None:
    check_sizes(_block("learn(40_000)", "python", sizes=(("40_000", "512"),)))
    with pytest.raises(AssertionError, match="shrink"):
        check_sizes(_block("learn(40_000)", "python", sizes=(("40_000", "50_000"),)))
    with pytest.raises(AssertionError, match="not in the block"):
        check_sizes(_block("learn(40_000)", "python", sizes=(("4_000", "512"),)))


def test_a_command_no_rule_knows_fails() -> None:
    with pytest.raises(AssertionError, match="no rule"):
        rule_for(Command(_block("rm -rf build"), "rm -rf build"))
    (command,) = commands(_block("openenv-gym check https://x.hf.space  # a comment"))
    assert rule_for(command).name == "openenv-gym"
    with pytest.raises(AssertionError, match="add it to REMOTE"):
        server_urls(_block("openenv-gym check https://x.hf.space"))


def test_commands_are_split_and_console_output_kept() -> None:
    split = commands(_block("pip install build && pyproject-build  # wheel\ncd x; ls"))
    assert [c.text for c in split] == ["pip install build", "pyproject-build", "cd x", "ls"]
    console = commands(_block("$ openenv-gym envs\nline 1\nline 2\n$ a \\\n  b\n", "console"))
    assert [(c.text, c.output) for c in console] == [
        ("openenv-gym envs", ("line 1", "line 2")),
        ("a b", ()),
    ]
    assert [r.name for r in RULES if r.name == "shell"] == ["shell"]


def _shim(kind: str, text: str, shown: str = "", cwd: Path | None = None) -> int:
    b64 = [base64.b64encode(s.encode()).decode() for s in (text, shown)]
    return subprocess.run(
        [sys.executable, str(SHIMS), kind, *b64],
        cwd=cwd or HERE.parents[1],
        capture_output=True,
        env={**os.environ, "DOCS_ROOT": str(HERE.parents[1])},
        check=False,
    ).returncode


def test_the_checking_rules_refuse_what_is_not_there(tmp_path: Path) -> None:
    assert _shim("pip", "pip install -e '.[trl]'") == 0
    assert _shim("pip", "pip install -e '.[no-such-extra]'") == 1
    assert _shim("pip", "pip install 'openenv-gym[docker]'") == 0
    assert _shim("pip", "pip install 'dist/openenv_gym-0.0.1-py3-none-any.whl'") == 1
    assert _shim("pip", "pip install no-such-package-here") == 1
    assert _shim("suite", "bash scripts/test") == 0
    assert _shim("suite", "bash scripts/test --all") == 1
    assert _shim("suite", "python -m pytest -m soak tests/soak") == 0
    assert _shim("suite", "python -m pytest -m soakk tests/soak") == 1
    assert _shim("suite", "NO_SUCH_VARIABLE_X=1 pytest tests/soak") == 1
    assert _shim("suite", "twine check --strict dist/*") == 0
    assert _shim("suite", "twine upload dist/*") == 1
    assert _shim("kubectl", "kubectl apply -k deploy/kubernetes") == 0
    assert _shim("kubectl", "kubectl rollout status statefulset/no-such") == 1
    assert _shim("example", "python examples/ppo_catch.py") == 0  # tests/examples: --smoke
    assert _shim("example", "python examples/ppo_catch.py --help") == 0
    assert _shim("example", "python examples/no_such_example.py --smoke") == 1
    assert _shim("example", "python examples/trl_wordle_grpo.py --smoke --rollout x") == 1
    assert _shim("scripts-run", "bash scripts/run") == 0
    assert _shim("mutmut", 'mutmut run --max-children 1 "openenv_gym.replies.*"') == 0
    assert _shim("mutmut", 'mutmut run "openenv_gym.cli.*"') == 1  # not mutated
    assert _shim("mutmut", 'mutmut run "openenv_gym.env.xǁOpenEnvEnvǁ_no_such*"') == 1
    assert _shim("pip", "pip install 'mutmut==3.8.1'") == 0  # pyproject.toml configures it
    assert _shim("run", "python -c 'print(1)'", "2") == 1
    assert _shim("run", "python -c 'print(1)'", "1") == 0
    assert _shim("run", "python -c 'import sys; sys.exit(\"x: error: y\")'", "x: error: y") == 0

"""The docs site: ``mkdocs build --strict``, then the built site in headless Chromium.

The browser is Debian's Chromium (``scripts/chromium`` installs it), driven by playwright
through ``executable_path``: playwright downloads no browser of its own. The site is served
by ``http.server`` on 127.0.0.1 and the browser reaches nothing else: Material's repository
widget asks api.github.com for stars and the latest release, and gets a canned reply; any
other request off the site fails the test.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]

# the build alone takes 10-30 s on a busy 2-core machine
pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

# every page of docs/api (tests/docs/test_api_pages.py holds them to the package's modules)
API_MODULES = sorted(p.stem for p in (ROOT / "docs" / "api").glob("*.md") if p.stem != "index")

GITHUB_REPLIES = {
    "/repos/openenv-gym/openenv-gym": {"stargazers_count": 0, "forks_count": 0},
    "/repos/openenv-gym/openenv-gym/releases/latest": {"tag_name": "0.1.0"},
}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    command = [sys.executable, "-m", "mkdocs", "build", "--strict"]
    command += ["--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(out)]
    result = subprocess.run(
        command,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    if "No module named mkdocs" in result.stderr:
        pytest.fail("mkdocs is not installed: pip install -e '.[docs]'")
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stderr[-6000:]}"
    return out


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def base_url(site: Path) -> Iterator[str]:
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is not installed: pip install -e '.[docs]'")
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("no chromium on PATH: run `bash scripts/chromium` (Debian's package)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium)
        try:
            yield browser
        finally:
            browser.close()


class Visit:
    """One page opened in a fresh browser context, with every problem it reported."""

    def __init__(self, browser: Any, base_url: str, path: str) -> None:
        self.base_url = base_url
        self.problems: list[str] = []
        self.context = browser.new_context()
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda error: self.problems.append(f"page error: {error}"))
        self.page.on("requestfailed", self._failed)
        self.page.on("response", self._response)
        self.page.goto(base_url + path, wait_until="networkidle")

    def _route(self, route: Any) -> None:
        url = route.request.url
        if url.startswith(self.base_url):
            route.continue_()
            return
        parts = urlsplit(url)
        if parts.hostname == "api.github.com" and parts.path in GITHUB_REPLIES:
            route.fulfill(json=GITHUB_REPLIES[parts.path])
            return
        self.problems.append(f"request off the site: {url}")
        route.abort()

    def _console(self, message: Any) -> None:
        if message.type == "error":
            self.problems.append(f"console error: {message.text}")

    def _failed(self, request: Any) -> None:
        self.problems.append(f"request failed: {request.url} ({request.failure})")

    def _response(self, response: Any) -> None:
        if response.status >= 400:
            self.problems.append(f"HTTP {response.status}: {response.url}")

    def images(self) -> list[dict[str, Any]]:
        """Every image of the page: its src, whether it finished loading, its natural width."""
        return self.page.evaluate(  # type: ignore[no-any-return]
            "Array.from(document.images).map(i => "
            "({src: i.src, complete: i.complete, width: i.naturalWidth}))"
        )

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def visit(browser: Any, base_url: str) -> Iterator[Any]:
    opened: list[Visit] = []

    def open_page(path: str) -> Visit:
        opened.append(Visit(browser, base_url, path))
        return opened[-1]

    yield open_page
    for page in opened:
        page.close()


def assert_images_loaded(page: Visit) -> None:
    for image in page.images():
        assert image["complete"], image
        assert image["width"] > 0, f"image did not load: {image['src']}"


def test_strict_build_has_every_page(site: Path) -> None:
    # `validation: omitted_files: warn` makes the strict build fail on a page left out of the
    # nav; this checks that the pages outside docs/ (added by scripts/mkdocs_hooks.py) and
    # the API reference made it too
    for md in (ROOT / "docs").rglob("*.md"):
        page = md.relative_to(ROOT / "docs").with_suffix("")
        folder = page.parent if page.name == "index" else page
        assert (site / folder / "index.html").is_file(), f"{md} was not built"
    assert (site / "benchmarks" / "index.html").is_file()
    assert (site / "changelog" / "index.html").is_file()
    for name in API_MODULES:
        assert "doc-heading" in (site / "api" / name / "index.html").read_text(), name


def test_home_page_renders(visit: Any) -> None:
    page = visit("")
    assert page.page.title() == "openenv-gym"
    assert page.page.locator("article h1").inner_text().startswith("openenv-gym")
    assert page.page.get_by_role("link", name="API reference").count() > 0
    assert [image for image in page.images() if "/benchmarks/results/" in image["src"]]
    assert_images_loaded(page)
    assert page.problems == []


def test_search_finds_a_page(visit: Any) -> None:
    page = visit("")
    # Material builds its search index in a worker after the page loads; a query typed
    # before the index exists is dropped, so open the search and wait for the index first
    page.page.wait_for_function("typeof document$ !== 'undefined'", timeout=30_000)
    page.page.wait_for_load_state("networkidle", timeout=30_000)
    page.page.locator("input.md-search__input").focus()
    page.page.locator("input.md-search__input").type("autoreset", delay=50)
    results = page.page.locator(".md-search-result__item")
    results.first.wait_for(timeout=30_000)
    assert results.count() > 0
    assert page.problems == []


def test_api_reference_renders(visit: Any) -> None:
    page = visit("api/vector/")
    headings = page.page.locator("article .doc-heading").all_inner_texts()
    assert any("OpenEnvVectorEnv" in heading for heading in headings), headings
    assert any("step_async" in heading for heading in headings), headings
    text = page.page.locator("article").inner_text()
    # scripts/griffe_markdown.py turned the reST bits into Markdown
    assert ":meth:" not in text
    assert page.page.locator("article pre", has_text=">>> envs = gymnasium.make_vec").count()
    # a long signature is formatted over lines (ruff, from the docs extra); the options
    # are one TypedDict, so the parameters fit one line of their own
    signature = page.page.locator("article .doc-signature").first.inner_text()
    assert signature.startswith("OpenEnvVectorEnv(\n"), signature
    assert "\n    env: str = " in signature, signature
    assert "**options: Unpack[VectorOptions]" in signature, signature
    assert page.problems == []


def test_benchmark_plot_renders(visit: Any) -> None:
    page = visit("benchmarks/")
    plots = [image for image in page.images() if image["src"].endswith(".png")]
    assert plots, "no plot on the benchmarks page"
    assert_images_loaded(page)
    assert page.problems == []


@pytest.mark.parametrize("path", ["comparison/", "api/exceptions/", "changelog/", "vector/"])
def test_page_renders_without_errors(visit: Any, path: str) -> None:
    page = visit(path)
    assert page.page.locator("article h1").count() == 1
    assert_images_loaded(page)
    assert page.problems == []

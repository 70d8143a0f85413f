"""The web page at / in a real headless browser (Debian's chromium driven by Playwright): type a
question, wait for the answer, check the numbered citations, the hits' score parts and the graph view."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    pytest.skip("chromium is not installed (apt-get install -y chromium)", allow_module_level=True)
pytest.importorskip("fastapi")
sync_api = pytest.importorskip("playwright.sync_api")

from integration_corpus import ANSWER, QUESTION, answer_script  # noqa: E402
from live_server import LiveServer  # noqa: E402

from contextrag import ContextRAG  # noqa: E402
from contextrag.llm.scripted import ScriptedClient  # noqa: E402
from contextrag.server import create_app  # noqa: E402

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]
# CONTEXTRAG_SCREENSHOT=docs/web-page.png refreshes the screenshot kept in the repository
SHOT = os.environ.get("CONTEXTRAG_SCREENSHOT")


def test_page_answers_with_citations_and_graph(index_dir, tmp_path):
    app = create_app(ContextRAG.load(index_dir), llm=ScriptedClient(answer_script))
    with LiveServer(app) as s, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 1000})
            errors = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(s.url + "/")
            page.wait_for_function("document.getElementById('meta').textContent.includes('documents')")
            page.fill("#question", QUESTION)
            page.click("#ask")
            page.wait_for_function(f"document.getElementById('answer-text').textContent.startsWith({ANSWER!r})",
                                   timeout=60_000)
            cites = page.locator("#answer-text .cite").all_inner_texts()
            assert cites and all(c.startswith("[") for c in cites)
            for c in cites:        # every citation points at a passage that holds the answer
                n = c.strip("[]")
                assert ANSWER in page.locator(f"#hit-{n} .text").inner_text()
                assert "cited" in page.locator(f"#hit-{n}").get_attribute("class")
            assert page.locator("#hits li").count() == 8
            assert " · rel " in page.locator("#hits .score").first.inner_text()     # rank score and relevance
            assert page.locator("#hits .parts").first.inner_text().count("bm25") == 1
            assert "spread" in page.locator("#hits .parts").first.inner_text()
            # the graph: question, a seed passage, a shared attribute and a passage reached through it
            assert page.locator("#graph").is_visible()
            for kind in ("question", "seed", "attribute"):
                assert page.locator(f"#graph-svg g.node.{kind}").count() >= 1, kind
            assert page.locator("#graph-svg line.edge.hop").count() >= 1
            attrs = page.locator("#graph-svg g.node.attribute").all_text_contents()
            assert any("quillon" in t.lower() for t in attrs), attrs      # the company both passages name
            assert page.locator(".why").count() >= 1
            assert not errors, errors
            out = Path(SHOT) if SHOT else tmp_path / "page.png"
            page.screenshot(path=str(out), full_page=True)
            assert out.stat().st_size > 10_000
        finally:
            browser.close()

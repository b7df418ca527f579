"""The documentation site: it builds with ``mkdocs build --strict`` (broken links, unresolved API
references and docstrings that do not parse fail), its job-file reference names every key the
job reader accepts (asked of the reader itself, through its errors), and its main pages render
in a real headless browser (Debian's ``chromium`` driven by Selenium) with no console error."""

import functools
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from diffmbs.app import ConfigError, load_job

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.xdist_group("docs")

# (page, a phrase its first heading contains)
MAIN_PAGES = [
    ("index.html", "diffmbs"),
    ("getting_started/index.html", "Getting started"),
    ("guide/srs/index.html", "shock response spectr"),
    ("guide/multibody/index.html", "ultibody"),
    ("guide/identification/index.html", "dentification"),
    ("guide/cli/index.html", "job files"),
    ("theory/contact/index.html", "ontact"),
    ("notebooks/00_srs_of_a_record/index.html", "shock response spectrum"),
    ("api/diffmbs/index.html", "diffmbs"),
    ("api/identification/index.html", "identification"),
]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "DIFFMBS_DOCS_EXECUTE": "false", "NO_MKDOCS_2_WARNING": "1"}
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr[-4000:]
    return out


def test_site_builds_strictly_with_api_reference_and_mathml(site):
    for page, _ in MAIN_PAGES:
        assert (site / page).is_file(), page
    api = (site / "api" / "diffmbs" / "index.html").read_text()
    for name in ("simulate", "simulate_batch", "shock_response_spectrum", "MechanicalSystem"):
        assert f'id="diffmbs.{name}"' in api, name
    theory = (site / "theory" / "contact" / "index.html").read_text()
    assert "<math" in theory
    assert 'class="arithmatex"' not in theory  # every formula became MathML


# ----------------------------------------------------------------------------- job-file keys

_TABLE_HEADER = re.compile(r"^(\[\[?[a-z]+\]\]?)\s*$", re.MULTILINE)


def _accepted_keys(tmp_path: Path, table: str) -> set[str]:
    """The keys the job reader accepts in ``table`` (e.g. "[fit]", "[[experiments]]", "job"),
    from its error for an unknown key added to the bundled demo job."""
    source = ROOT / "data" / "mwsm" / "fit_demo.toml"
    text = source.read_text()
    text = re.sub(r'^(srs|history) = "', rf'\1 = "{source.parent}/', text, flags=re.MULTILINE)
    if table == "job":
        text = "zz_unknown = 1\n" + text
    elif table in _TABLE_HEADER.findall(text):
        text = re.sub(rf"^{re.escape(table)}\s*$", f"{table}\nzz_unknown = 1", text, count=1,
                      flags=re.MULTILINE)  # fmt: skip
    else:
        text += f"\n{table}\nzz_unknown = 1\n"
    job = tmp_path / f"job_{table.strip('[]')}.toml"
    job.write_text(text)
    with pytest.raises(ConfigError, match="zz_unknown: unknown key") as error:
        load_job(job)
    return set(re.search(r"expected one of (.*)$", str(error.value)).group(1).split(", "))


def _reference_sections() -> dict[str, str]:
    """``docs/guide/cli.md``'s sections per job table: heading "### `[table]`" → its text."""
    page = (ROOT / "docs" / "guide" / "cli.md").read_text()
    parts = re.split(r"^### `(\[\[?[a-z]+\]\]?|job)`.*$", page, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


@pytest.mark.parametrize(
    "table",
    ["job", "[simulation]", "[srs]", "[[experiments]]", "[[parameters]]", "[fit]", "[sweep]",
     "[wear]"],  # fmt: skip
)
def test_job_file_reference_documents_every_accepted_key(tmp_path, table):
    accepted = _accepted_keys(tmp_path, table)
    assert len(accepted) >= 4
    section = _reference_sections().get("job" if table == "job" else table)
    assert section is not None, f"docs/guide/cli.md has no section for {table}"
    missing = sorted(k for k in accepted if f"`{k}`" not in section)
    assert not missing, f"docs/guide/cli.md, {table}: keys not documented: {missing}"


# ----------------------------------------------------------------------------- the browser

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def served(site):
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


@pytest.fixture(scope="module")
def browser():
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip("needs Debian's chromium and chromium-driver (.ci/run installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def _console_errors(driver) -> list[str]:
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


@pytest.mark.parametrize(("page", "heading"), MAIN_PAGES)
def test_main_pages_render_in_a_browser_without_console_errors(served, browser, page, heading):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(served + page)
    WebDriverWait(browser, 30).until(
        lambda d: d.execute_script("return document.readyState") == "complete"
    )
    title = browser.find_element(By.CSS_SELECTOR, "article h1").text
    assert heading.lower() in title.lower(), title
    navigation = browser.find_elements(By.CSS_SELECTOR, "nav.md-nav--primary a.md-nav__link")
    assert len(navigation) > 20
    if page.startswith("theory/"):  # MathML laid out by the browser, not left as TeX
        width = browser.execute_script(
            "return document.querySelector('article math').getBoundingClientRect().width"
        )
        assert width > 5
    errors = _console_errors(browser)
    assert not errors, errors


def test_search_finds_a_theory_page_in_the_browser(served, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(served + "index.html")
    browser.find_element(By.CSS_SELECTOR, "label.md-header__button[for='__search']").click()
    box = WebDriverWait(browser, 30).until(
        lambda d: d.find_element(By.CSS_SELECTOR, "input.md-search__input")
    )
    box.send_keys("Hunt")
    results = WebDriverWait(browser, 30).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, "li.md-search-result__item a")
    )
    assert any("contact" in r.get_attribute("href") for r in results)
    assert not _console_errors(browser)

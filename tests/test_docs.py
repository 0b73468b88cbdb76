"""README.md and docs/*.md: every relative link and #anchor resolves, every command they
name exists, and the README stays a front page."""

import re
from pathlib import Path

import pytest
import srsly
import typer

from spacy_elmo.cli import app

REPO = Path(__file__).parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
README_MAX_LINES = 150

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
CLI_COMMAND = re.compile(r"-m\s+spacy_elmo\s+([a-z][\w-]*)")
PROJECT_COMMAND = re.compile(r"spacy\s+project\s+run\s+([a-z][\w-]*)")


def prose(text: str) -> str:
    """The text outside fenced code blocks (a `#` there is a comment, not a heading)."""
    return FENCE.sub("", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its rendered text lowercased, punctuation dropped,
    spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link renders as its text
    text = text.replace("`", "").replace("*", "").lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set:
    """Every heading's anchor; a repeated heading gets -1, -2, ... as on GitHub."""
    counts: dict = {}
    found = set()
    for heading in HEADING.findall(prose(path.read_text(encoding="utf8"))):
        base = slug(heading)
        found.add(base if base not in counts else f"{base}-{counts[base]}")
        counts[base] = counts.get(base, 0) + 1
    return found


def links(path: Path):
    return LINK.findall(prose(path.read_text(encoding="utf8")))


@pytest.mark.parametrize(
    "heading,expected",
    [
        (
            "Pretraining your own biLM: `python -m spacy_elmo pretrain`",
            "pretraining-your-own-bilm-python--m-spacy_elmo-pretrain",
        ),
        ("The pretraining corpus (grown to 15.3M words)", "the-pretraining-corpus-grown-to-153m-words"),
        ("Learning curve: scarce labels (paper sec. 5.4)", "learning-curve-scarce-labels-paper-sec-54"),
        ("**Speed** (CPU)", "speed-cpu"),
    ],
)
def test_anchors_are_made_as_github_makes_them(heading, expected):
    assert slug(heading) == expected


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_every_relative_link_and_anchor_resolves(page):
    broken = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...: not checked here
            continue
        file_part, _, anchor = target.partition("#")
        linked = (page.parent / file_part).resolve() if file_part else page
        if not linked.exists():
            broken.append(f"{target}: no {linked}")
        elif anchor and (linked.suffix != ".md" or anchor not in anchors(linked)):
            broken.append(f"{target}: no heading #{anchor} in {linked.name}")
    assert not broken, f"{page.name}: {broken}"


def test_the_readme_is_a_front_page_that_leads_to_every_docs_page():
    readme = REPO / "README.md"
    assert len(readme.read_text(encoding="utf8").splitlines()) <= README_MAX_LINES
    linked = {(readme.parent / target.partition("#")[0]).resolve() for target in links(readme)}
    docs = set(PAGES[1:])
    assert docs and not docs - linked, f"docs pages the README does not link: {sorted(map(str, docs - linked))}"


def test_every_command_the_pages_name_exists():
    cli_commands = set(typer.main.get_command(app).commands)
    project = srsly.read_yaml(REPO / "project.yml")
    project_commands = {command["name"] for command in project["commands"]} | set(project["workflows"])
    assert {"embed", "pretrain", "perplexity"} <= cli_commands and {"demo", "all"} <= project_commands
    named_cli, named_project, unknown = set(), set(), []
    for page in PAGES:
        text = page.read_text(encoding="utf8")
        for name in CLI_COMMAND.findall(text):
            named_cli.add(name)
            if name not in cli_commands:
                unknown.append(f"{page.name}: python -m spacy_elmo {name}")
        for name in PROJECT_COMMAND.findall(text):
            named_project.add(name)
            if name not in project_commands:
                unknown.append(f"{page.name}: spacy project run {name}")
    assert named_cli and named_project  # the pages do name commands: the check is not vacuous
    assert not unknown, unknown


def test_the_readme_results_tables_are_those_of_the_results_page():
    """The front page copies the headline tables; they must not drift from the full page."""
    readme = (REPO / "README.md").read_text(encoding="utf8")
    results = (REPO / "docs" / "results.md").read_text(encoding="utf8")
    rows = [line for line in readme.splitlines() if line.startswith("| ") and "± " in line]
    # 4 NER configs and the dev search's NER choice with ELMo (its baseline is the vectors row);
    # 5 sentiment configs and the search's sentiment pair
    assert len(rows) == 12
    assert [row for row in rows if row not in results.splitlines()] == []


def test_the_readme_speed_figures_are_those_of_the_speed_page():
    """Every words/s and ratio in the front page's speed table is in docs/speed.md's tables."""
    readme = (REPO / "README.md").read_text(encoding="utf8")
    speed = (REPO / "docs" / "speed.md").read_text(encoding="utf8")
    section = readme.split("## Speed beside a transformer", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| pipeline")]
    assert len(rows) == 4
    figures = [f for row in rows for cell in row.split(" | ")[1:3] for f in cell.split(" / ")]
    table_cells = {
        cell.strip().strip("*") for line in speed.splitlines() if line.startswith("|") for cell in line.split("|")
    }
    assert len(figures) == 16 and [f for f in figures if f not in table_cells] == []


def test_the_speed_pages_figures_at_a_glance_are_those_of_its_full_record():
    """Every figure of docs/speed.md's summary table is in the page's detailed tables or text."""
    speed = (REPO / "docs" / "speed.md").read_text(encoding="utf8")
    glance, rest = speed.split("## At a glance", 1)[1].split("\n## Measured figures", 1)
    rows = [line for line in glance.splitlines() if line.startswith("| ") and not line.startswith("| what")]
    cells = [cell for row in rows for cell in row.split(" | ")[1:4]]
    figures = [f for cell in cells for f in re.findall(r"[+-]?\d+\.\d+(?:-\d+\.\d+)?x?", cell)]
    assert len(rows) == 7 and len(figures) >= 15
    assert [f for f in figures if f not in rest] == []


def test_every_page_that_names_spacy_debug_config_says_it_needs_the_corpus_paths():
    """Without --paths.train and --paths.dev, `spacy debug config` ends in spaCy's E913 traceback."""
    named = []
    for page in PAGES:
        for paragraph in re.split(r"\n\s*\n", page.read_text(encoding="utf8")):
            flat = " ".join(paragraph.split())
            if "spacy debug config" in flat:
                named.append(page.name)
                assert "--paths.train" in flat and "--paths.dev" in flat, f"{page.name}: {flat[:300]}"
    assert "README.md" in named


def test_the_readme_gives_the_slowest_cpus_minutes_idle_and_busy_beside_the_best_case():
    """The README quoted `make demo` "11 to 13 minutes" and `make test` "11 to 28" from a faster CPU, where a
    busy AVX2 EPYC took 28 min 39 s and 35 min 34 s: it gives the slowest CPU's minutes, idle and busy,
    beside the best case, each with its CPU minutes; the demo's pretraining step says its minutes alike."""
    readme = (REPO / "README.md").read_text(encoding="utf8").splitlines()
    (header,) = [line for line in readme if line.startswith("| 2 cores, a fresh clone, set-up included")]
    columns = [cell.strip() for cell in header.strip("|").split("|")][1:]
    assert columns == [
        "idle AVX2 EPYC (the slowest CPU here)",
        "the same, busy (load 3 to 5)",
        "best case: idle AVX-512 EPYC",
    ]
    rows = {line.split("`")[1]: line for line in readme if line.startswith("| `make ")}
    assert sorted(rows) == ["make demo", "make test"]
    for row in rows.values():
        cells = [cell.strip() for cell in row.strip("|").split("|")][1:]
        assert len(cells) == 3 and all(re.fullmatch(r"(\?|[\d.]+) \((\?|[\d.]+)\)", cell) for cell in cells), row
    project = srsly.read_yaml(REPO / "project.yml")
    (step,) = [c["help"] for c in project["commands"] if c["name"] == "pretrain-demo"]
    minutes = int(re.search(r"about (\d+) minutes at 1 thread", step).group(1))
    project_page = " ".join((REPO / "docs" / "project.md").read_text(encoding="utf8").split())
    assert f"about {minutes} minutes at 1 thread" in project_page


def test_the_pages_give_one_figure_for_the_demo_pretraining_at_torchs_default_threads():
    """docs/project.md and project.yml's vars said 12x slower, pretrain-demo's help 6x."""
    pages = [REPO / "project.yml", REPO / "docs" / "project.md", REPO / "docs" / "pretraining.md"]
    text = " ".join(" ".join(page.read_text(encoding="utf8").replace("#", " ").split()) for page in pages)
    figures = re.findall(r"pretraining ran (\d+)(?:x| times) slower|another job on 2 cores it ran (\d+)x slower", text)
    help_text = [c["help"] for c in srsly.read_yaml(REPO / "project.yml")["commands"] if c["name"] == "pretrain-demo"]
    figures += re.findall(r"beside another job it ran (\d+)x slower", help_text[0])
    found = {figure for match in figures for figure in (match if isinstance(match, tuple) else (match,)) if figure}
    assert len(figures) >= 4 and len(found) == 1, figures


def test_the_speed_pages_measured_figures_table_holds_one_figure_per_cell():
    """Its cells once held paragraphs (runs, ranges, dates, history): those belong in the log below it."""
    speed = (REPO / "docs" / "speed.md").read_text(encoding="utf8")
    section = speed.split("\n## Measured figures", 1)[1].split("\n#", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| what")]
    assert len(rows) >= 20
    for row in rows:
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        assert len(cells) == 6, row
        what, _command, figure, machine, target, met = cells
        assert re.match(r"\**[+-]?\d", figure) and len(figure) <= 40, figure  # a figure, then a short note
        assert len(machine) <= 25 and len(target) <= 30 and met in ("", "met", "missed"), row
        assert len(what) <= 160 and not any(". " in cell or "; " in cell for cell in cells), row
    assert "### The log: each figure's runs, ranges and history" in speed

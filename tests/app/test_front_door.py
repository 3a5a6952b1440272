"""The README is a front door a newcomer reads in minutes, and every link of the documentation's Markdown leads to a
page and a heading that exist (mkdocs checks the docs/ pages' links in its strict build; this checks the README's)."""

import re

from tests.support.documentation import DOCS, README

LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """The anchor GitHub and mkdocs give a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", heading).strip().lower())


def anchors(text: str) -> set:
    return {slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, flags=re.MULTILINE)}


def test_the_readme_is_at_most_250_lines():
    assert len(README.read_text().splitlines()) <= 250, "move the rest to a page of docs/"


def test_every_link_of_the_readme_leads_to_a_file_and_heading_that_exist():
    text = README.read_text()
    links = LINK.findall(text)
    assert links, "the README links to the documentation"
    for link in links:
        target, _, anchor = link.partition("#")
        path = README.parent / target if target else README
        assert path.is_file(), link
        if anchor:
            assert anchor in anchors(path.read_text()), link


def test_the_readme_links_every_topic_page():
    linked = {link.partition("#")[0] for link in LINK.findall(README.read_text())}
    topics = {f"docs/{path.name}" for path in DOCS.glob("*.md")}
    assert topics <= linked, sorted(topics - linked)


def test_the_sites_home_lists_the_pages_the_readme_lists():
    """docs/index.md is the site's front door as the README is GitHub's: the same table of topic pages."""
    readme = README.read_text()
    table = readme[readme.index("| page | what it says |") :].strip().replace("](docs/", "](")
    assert table in (DOCS / "index.md").read_text()


def test_the_readmes_settings_are_rows_of_the_settings_page():
    """The README's few settings are the settings page's rows, word for word, so the two cannot disagree."""
    rows = [line for line in README.read_text().splitlines() if re.match(r"\| `[A-Za-z]+` \| ", line)]
    settings = (DOCS / "settings.md").read_text().splitlines()
    assert len(rows) >= 5
    for row in rows:
        assert row in settings, row

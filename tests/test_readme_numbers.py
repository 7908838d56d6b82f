"""The README's result tables say what their results files say: every mean ± std in the IMDB and
SQuAD 2.0 tables is the summary.json value, rounded as shown."""

import json
import re

from tests.conftest import REPO

RESULTS = REPO / "benchmarks" / "results"


def table_rows(text: str, header_start: str) -> list[list[str]]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip().replace("*", "") for c in line.strip("|").split("|")])
    return rows


def summary(folder: str) -> dict:
    table = json.loads((RESULTS / folder / "summary.json").read_text(encoding="utf-8"))["table"]
    return {(r["method"], str(r["num_labeled"])): r for r in table}


def shown(row: dict, metric: str) -> str:
    mean, std = row[f"{metric}_mean"], row.get(f"{metric}_std")
    return f"{mean:.1f}" if row["seeds"] == 1 else f"{mean:.1f} ± {std:.1f}"


def test_imdb_table_matches_its_summary():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    rows = table_rows(readme, "| labels | UDA (few-label recipe)")
    s = summary("imdb_fewlabel_desc")
    assert [r[0] for r in rows] == ["20 (5 seeds)", "100 (3 seeds)"]
    for r in rows:
        n, seeds = re.match(r"(\d+) \((\d) seeds\)", r[0]).groups()
        for cell, method in zip(r[1:4], ("uda", "supervised", "setfit")):
            assert cell == shown(s[(method, n)], "accuracy"), (n, method)
            assert s[(method, n)]["seeds"] == int(seeds)
        assert r[4] == shown(s[("ceiling", "all")], "accuracy")


def test_squad_table_matches_its_summary():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    rows = table_rows(readme, "| labelled questions | supervised F1")
    s = summary("squad_v2_fewlabel_curve")
    assert len(rows) == 4
    for r in rows:
        n = "all" if r[0].startswith("all") else r[0].replace(",", "")
        assert r[1] == shown(s[("supervised", n)], "f1") and r[2] == shown(s[("uda_bt", n)], "f1"), n
        span = f"{s[('supervised', n)]['HasAns_span_f1_mean']:.1f} / {s[('uda_bt', n)]['HasAns_span_f1_mean']:.1f}"
        assert r[3] == span, n
    assert f"answering nothing scores F1 {s[('supervised', '64')]['answer_nothing']:.2f}" in " ".join(readme.split())

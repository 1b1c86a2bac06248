"""The exchange's inbound/ read as a live, hostile folder, each attack beside its control: on a hub
every learner can write into inbound/ while the instructor grades it.

1. A folder swapped for a link to the course's solutions/ between listing and copying (raced for
   real: the learner's own process watches its folder with inotify and swaps when the intake opens a
   file there; tests/live_exchange.py) earns nothing: the learner's own notebook or a named problem,
   never the answers.
2. One learner's sparse giant files cost that learner alone: budgets are per learner, summed before
   anything is copied (apparent sizes; a zip by what it would extract), and the class goes on.
3. Names are read totally: an invisible character in a folder's name is that learner's problem,
   saying which; a time is read from ASCII digits only.
4. Lateness a learner cannot forge: a submission's arrival on the exchange (the change times of its
   folder and files, which no learner can set back) against its timestamp.txt and its folder's name.

The first, second and fourth also run through ``grade`` (``test_a_live_class_*``): the pages, the
grades and the exit status."""

from __future__ import annotations

import csv
import dataclasses
import html
import json
import os
import re
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import nbformat
import pytest
from live_exchange import hold_after_first_open, sparse, start_swap
from test_intake import (
    ASSIGNMENT,
    NB1,
    NB2,
    NB3,
    NOTEBOOKS,
    intake,
    just_now,
    nbgrader_time,
    notebook,
    tree,
    write_zip,
)

from autograde.course import Course
from autograde.publish.leaks import secret_lines
from autograde.term import exchange
from autograde.term.intake import Limits
from autograde.term.source import Folder, Listed, Source

ROOT = Path(__file__).resolve().parents[3]
NB4 = NOTEBOOKS[3]
GIANT_ZIP = 2_100_000_000  # the review's sparse notes.zip
GIANT_NOTEBOOK = 19_900_000  # under the 20 MiB a notebook may be: three of them


def problems_of(result, student: str) -> list[str]:
    return [p.problem for p in result.problems if p.student_id == student]


def submit(
    inbound: Path,
    student: str,
    files: dict[str, bytes],
    when: datetime,
    stamp: datetime | None = None,
) -> Path:
    """A submission folder as nbgrader submit leaves it: named by ``when``, its timestamp.txt
    ``stamp`` (``when``)."""
    folder = inbound / f"{student}+{ASSIGNMENT}+{nbgrader_time(when)}+{student[:3]}"
    folder.mkdir(parents=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    (folder / "timestamp.txt").write_text(nbgrader_time(stamp or when))
    (folder / "submission_secret.txt").write_text("secret" + student)
    return folder


def padded(data: bytes, size: int = 1 << 20) -> bytes:
    """A notebook padded (with whitespace, still the same JSON) to ``size`` bytes: larger than any
    reference notebook."""
    return data.rstrip() + b" " * (size - len(data.rstrip()) - 1) + b"\n"


# -- 1. a folder swapped for a link while the intake reads it
# ---------------------------------------------------------------


def race_class(tmp_path: Path) -> tuple[Path, Path, Path]:
    """alice (honest) and mallory, whose own notebook 04 is padded to 1 MB; a copy of the course's
    solutions/ beside them, which the grader can read."""
    inbound = tmp_path / "exchange" / "course101" / "inbound"
    now = just_now()
    submit(inbound, "alice", {f"{NB4}.ipynb": notebook("alice", NB4)}, now)
    mallory = submit(inbound, "mallory", {f"{NB4}.ipynb": padded(notebook("mallory", NB4))}, now)
    solutions = shutil.copytree(ROOT / "solutions", tmp_path / "course" / "solutions")
    return inbound, mallory, solutions


@pytest.mark.parametrize("round_", range(3))
def test_a_folder_swapped_for_a_link_after_listing_earns_nothing(tmp_path, monkeypatch, round_):
    inbound, mallory, solutions = race_class(tmp_path / "attack")
    racer = start_swap(mallory, solutions, tmp_path / "done")
    heard = []
    try:
        heard = hold_after_first_open(mallory.name, tmp_path / "done", patch=monkeypatch.setattr)
        result = intake(inbound, tmp_path / "attack")
    finally:
        said = racer.communicate(timeout=60)[0]
    # the race was run: the swap came first
    assert mallory.is_symlink() and heard == [f"swapped {heard[0].split()[-1]}"], (said, heard)
    control_inbound, _, _ = race_class(tmp_path / "control")
    control = intake(control_inbound, tmp_path / "control")
    got = tree(result.folder)
    reference = (solutions / f"{NB4}.ipynb").read_bytes()
    assert got["alice"] == tree(control.folder)["alice"] == {f"{NB4}.ipynb": notebook("alice", NB4)}
    assert reference not in [data for files in got.values() for data in files.values()], (
        "the answers were graded as the learner's"
    )
    # her own notebook, or nothing
    assert got.get("mallory", {}) in ({}, tree(control.folder)["mallory"])
    assert any(
        "is not the folder that was listed" in p or "cannot be reached as it was listed" in p
        for p in problems_of(result, "mallory")
    )
    assert tree(control.folder)["mallory"] == {
        f"{NB4}.ipynb": padded(notebook("mallory", NB4))
    } and not problems_of(control, "mallory")


def test_a_file_swapped_for_a_link_or_another_file_after_listing_is_not_read(tmp_path):
    """The same swap one level down, done between listing and copying by hand: the notebook itself
    replaced by a link to the answers, or by another file (a hard link to them); and a folder
    swapped for another folder."""
    inbound, mallory, solutions = race_class(tmp_path)
    target = mallory / f"{NB4}.ipynb"
    with Source(inbound, Limits()) as files:
        listed = {e.parts: e for e in files.entries}
        target.unlink()
        target.symlink_to(solutions / f"{NB4}.ipynb")
        with pytest.raises(ValueError, match="could not be opened where it was listed"):
            files.copy(listed[(mallory.name, f"{NB4}.ipynb")], tmp_path / "x" / "a.ipynb")
        target.unlink()
        os.link(solutions / f"{NB4}.ipynb", target)
        with pytest.raises(ValueError, match="not the file that was listed any more"):
            files.copy(listed[(mallory.name, f"{NB4}.ipynb")], tmp_path / "x" / "b.ipynb")
        alice = next(p for p in inbound.iterdir() if p.name.startswith("alice+"))
        alice.rename(tmp_path / "away")
        shutil.copytree(solutions, alice)  # a real folder, not a link, under the listed name
        with pytest.raises(ValueError, match="is not the folder that was listed any more"):
            files.copy(listed[(alice.name, f"{NB4}.ipynb")], tmp_path / "x" / "c.ipynb")
    assert not (tmp_path / "x").exists() or not any((tmp_path / "x").iterdir())


# -- 2. budgets per learner
# ------------------------------------------------------------------------------------------------


def giant_class(tmp_path: Path, giants: bool) -> Path:
    """alice and bob honest; eve with her own notebook 04 and, with ``giants``, a sparse 2.1 GB
    notes.zip and three sparse 19.9 MB notebooks (no disk: ``truncate``)."""
    inbound = tmp_path / "exchange" / "course101" / "inbound"
    now = just_now()
    for student in ("alice", "bob"):
        submit(inbound, student, {f"{NB1}.ipynb": notebook(student, NB1)}, now)
    eve = submit(inbound, "eve", {f"{NB4}.ipynb": notebook("eve", NB4)}, now)
    if giants:
        sparse(eve / "notes.zip", GIANT_ZIP)
        for name in (NB1, NB2, NB3):
            sparse(eve / f"{name}.ipynb", GIANT_NOTEBOOK)
    return inbound


def test_sparse_giant_files_cost_only_their_learner(tmp_path, monkeypatch):
    copied: list[str] = []
    real_copy = Source.copy

    def counted(self, entry, target):
        copied.append(entry.name)
        return real_copy(self, entry, target)

    monkeypatch.setattr(Source, "copy", counted)
    result = intake(giant_class(tmp_path / "attack", giants=True), tmp_path / "attack")
    assert len(copied) == 2 and not any(name.startswith("eve+") for name in copied), (
        f"nothing of eve's is copied: {copied}"
    )
    control = intake(giant_class(tmp_path / "control", giants=False), tmp_path / "control")
    assert set(tree(control.folder)) == {"alice", "bob", "eve"}
    got = tree(result.folder)
    assert (
        set(got) == {"alice", "bob"}
        and got["alice"] == tree(control.folder)["alice"]
        and got["bob"] == tree(control.folder)["bob"]
    )
    [why] = [p for p in problems_of(result, "eve") if "one learner's submission may take" in p]
    assert "more than the 48 MiB" in why and f"{NB1}.ipynb 19.0 MiB" in why
    # the zip is counted by what it would extract: nothing (it is no zip), said as its own problem;
    # it is never copied
    assert any(
        "a zip of notebooks that cannot be opened: it is not a readable zip" in p
        for p in problems_of(result, "eve")
    )


def test_a_zip_counts_as_what_it_would_extract(tmp_path):
    """A zip of 2 notebooks of 600 kB each (compressed to a few kB) is 1.2 MB against its learner's
    budget: over a budget of 1 MiB, under one of 2 MiB (the control), whatever the zip's own
    size."""
    inbound = tmp_path / "exchange" / "course101" / "inbound"
    now = just_now()
    submit(inbound, "alice", {f"{NB1}.ipynb": notebook("alice", NB1)}, now)
    big = {f"{name}.ipynb": padded(notebook("zoe", name), 600_000) for name in (NB2, NB3)}
    zipped = write_zip(tmp_path / "work.zip", big)
    assert zipped.stat().st_size < 100_000
    submit(inbound, "zoe", {"work.zip": zipped.read_bytes()}, now)
    over = intake(inbound, tmp_path / "over", limits=Limits(student_bytes=1 << 20))
    under = intake(inbound, tmp_path / "under", limits=Limits(student_bytes=2 << 20))
    assert tree(under.folder)["zoe"] == big and set(tree(over.folder)) == {"alice"}
    assert any("1.1 MiB" in p and "more than the 1 MiB" in p for p in problems_of(over, "zoe"))
    # the same zip inside an LMS download is copied out first: its own declared size is counted and
    # checked first
    members = {
        "doezoe_1001_9001_work.zip": zipped.read_bytes(),
        f"roebob_1002_9002_{NB1}.ipynb": notebook("bob", NB1),
    }
    canvas = write_zip(tmp_path / "canvas.zip", members)
    lms = intake(canvas, tmp_path / "lms", limits=Limits(student_bytes=zipped.stat().st_size - 1))
    assert set(tree(lms.folder)) == {"1002"} and any(
        "not copied" in p for p in problems_of(lms, "1001")
    )
    # copied out, then over on what it extracts
    lms = intake(canvas, tmp_path / "lms2", limits=Limits(student_bytes=1 << 20))
    assert set(tree(lms.folder)) == {"1002"} and any(
        "zips copied out" in p and "more than the 1 MiB" in p for p in problems_of(lms, "1001")
    )
    assert set(
        tree(intake(canvas, tmp_path / "lms3", limits=Limits(student_bytes=2 << 20)).folder)
    ) == {"1001", "1002"}


# -- 3. names read totally
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("odd", "said"),
    [
        ("\u00a0", "U+00A0 NO-BREAK SPACE"),
        ("\ufeff", "U+FEFF ZERO WIDTH NO-BREAK SPACE"),
        ("\u200b", "U+200B ZERO WIDTH SPACE"),
        (" ", "U+0020 SPACE"),
    ],
)
def test_an_invisible_character_in_a_folder_name_is_that_learners_problem_saying_which(
    tmp_path, odd, said
):
    inbound = tmp_path / "exchange" / "course101" / "inbound"
    now = just_now()
    submit(inbound, "bob", {f"{NB1}.ipynb": notebook("bob", NB1)}, now)
    submit(inbound, f"alice{odd}", {f"{NB1}.ipynb": notebook("alice", NB1)}, now)
    result = intake(inbound, tmp_path)
    assert set(tree(result.folder)) == {"bob"} and not problems_of(result, "bob")
    [why] = [
        p.problem for p in result.problems if p.student_id and p.student_id.startswith("alice")
    ]
    assert f'{said} after "alice"' in why and "cannot be a student id" in why
    control = tmp_path / "control" / "inbound"
    submit(control, "alice", {f"{NB1}.ipynb": notebook("alice", NB1)}, now)
    assert set(tree(intake(control, tmp_path / "control").folder)) == {"alice"}


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("٢٠٢٦-١٢-٠١ 10:00:00.000000 UTC", "U+0662 ARABIC-INDIC DIGIT TWO"),
        ("２０２６-12-01 10:00:00 UTC", "U+FF12 FULLWIDTH DIGIT TWO"),
        ("2026-12-01\u00a010:00:00 UTC", "U+00A0 NO-BREAK SPACE"),
        ("\ufeff2026-12-01 10:00:00 UTC", "U+FEFF ZERO WIDTH NO-BREAK SPACE"),
    ],
)
def test_a_time_is_read_from_ascii_digits_only_and_an_odd_character_is_named(text, said):
    from autograde.term.candidates import exchange_time
    from autograde.term.folders import pattern_time

    with pytest.raises(ValueError, match=re.escape(said)):
        exchange_time(text)
    with pytest.raises(ValueError, match=re.escape(said)):
        pattern_time(text.replace(" UTC", "+00:00"))
    # the control
    assert exchange_time("2026-12-01 10:00:00.000000 UTC") == datetime(
        2026, 12, 1, 10, 0, tzinfo=UTC
    )
    assert pattern_time("2026-12-01T10:00:00+00:00")[0] == datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


# -- 4. lateness a learner cannot forge
# --------------------------------------------------------------------------------------


def test_a_back_dated_submission_is_timed_by_its_arrival_and_named(tmp_path):
    inbound = tmp_path / "exchange" / "course101" / "inbound"
    now, days_ago = just_now(), just_now() - timedelta(days=3)
    # the control: its times agree
    submit(inbound, "honest", {f"{NB1}.ipynb": notebook("honest", NB1)}, now)
    # name and timestamp.txt back-dated
    submit(inbound, "forger", {f"{NB1}.ipynb": notebook("forger", NB1)}, days_ago)
    # only timestamp.txt back-dated
    submit(inbound, "mixed", {f"{NB1}.ipynb": notebook("mixed", NB1)}, now, stamp=days_ago)
    result = intake(inbound, tmp_path)
    assert (
        result.times["honest"][NB1] == now
        and not problems_of(result, "honest")
        and "honest" not in result.disputed
    )
    for student in ("forger", "mixed"):
        # when it arrived: now
        assert abs(result.times[student][NB1] - datetime.now(UTC)) < timedelta(minutes=1), student
        [why] = problems_of(result, student)
        assert (
            "times disagree by more than 2 minutes" in why
            and "it arrived on the exchange at" in why
            and "no learner can set back" in why
        )
        assert f"timestamp.txt says {days_ago:%Y-%m-%d %H:%M:%S} UTC" in why
        assert result.disputed[student][NB1].claimed == days_ago.isoformat()


def listed(ctime: int, folders: list[int], parts: int) -> Listed:
    return Listed(
        Path("x"),
        tuple(Folder(f"d{i}", 1, i, 0, t) for i, t in enumerate(folders)),
        "f",
        1,
        99,
        10,
        0,
        ctime,
        0,
    )


def test_the_arrival_is_the_latest_change_of_the_submissions_folders_and_files_read():
    from autograde.term.source import Entry

    day = 86_400 * 10**9
    # inbound/ (changes with every submission: never counted), the submission's folder, a folder in
    # it, the file
    late_file = Entry(("sub", "a.ipynb"), 10, 0.0, listed(5 * day, [9 * day, 1 * day, 1 * day], 2))
    late_folder = Entry(
        ("sub", "a.ipynb"), 10, 0.0, listed(1 * day, [9 * day, 1 * day, 4 * day], 2)
    )
    on_time = Entry(("a.ipynb",), 10, 0.0, listed(1 * day, [9 * day, 2 * day], 1))
    when = lambda entries: exchange.arrival(entries).timestamp() / 86_400  # noqa: E731
    assert (
        when([late_file]) == 5
        and when([late_folder]) == 4
        and when([on_time]) == 2
        and when([on_time, late_file]) == 5
    )
    # a zip's member: no arrival
    assert exchange.arrival([Entry(("a.ipynb",), 10, 0.0, None)]) is None


# -- the same through grade: pages, grades, exit status
# ---------------------------------------------------------------------


def live_class(base: Path, attack: bool) -> tuple[Path, Path, datetime]:
    """Five learners of notebook 04 in a live inbound/: alice (honest), mallory (her own wrong
    answer, padded), eve (with ``attack``, sparse giants beside her notebook), forger (made now,
    named and stamped 3 days ago: before the deadline) and latecomer (made and stamped now: after
    the deadline, the forger's honest control)."""
    from submissions import MISTAKES, build, mutate

    row = next(m for m in MISTAKES if m[0] == "w4_strict_deadline")
    mistake = mutate(row[2], row[3], row[4])

    # written answers of the learner's own, not the model's
    def sent(student: str, edits: dict[str, str]) -> bytes:
        own = {
            f"reflection_04_q{i}": f"*Your answer to question {i}:*\n\n{student}'s own answer {i}."
            for i in (1, 2)
        }
        return nbformat.writes(build(NB4, {**edits, **own})).encode()

    inbound = base / "exchange" / "course101" / "inbound"
    now, days_ago = just_now(), just_now() - timedelta(days=3)
    submit(inbound, "alice", {f"{NB4}.ipynb": sent("alice", mistake)}, now)
    mallory = submit(inbound, "mallory", {f"{NB4}.ipynb": padded(sent("mallory", mistake))}, now)
    eve = submit(inbound, "eve", {f"{NB4}.ipynb": sent("eve", {})}, now)
    submit(inbound, "forger", {f"{NB4}.ipynb": sent("forger", {})}, days_ago)
    submit(inbound, "latecomer", {f"{NB4}.ipynb": sent("latecomer", {})}, now)
    if attack:
        sparse(eve / "notes.zip", GIANT_ZIP)
        for name in (NB1, NB2, NB3):
            sparse(eve / f"{name}.ipynb", GIANT_NOTEBOOK)
    return inbound, mallory, now


def late_options(base: Path, now: datetime) -> list[str]:
    extensions = base / "extensions.csv"
    later = (now + timedelta(days=1)).isoformat()
    extensions.write_text(
        "student_id,deadline\n" + "".join(f"{s},{later}\n" for s in ("alice", "mallory", "eve")),
        encoding="utf-8",
    )
    return [
        "--deadline",
        (now - timedelta(days=1)).isoformat(),
        "--late-policy",
        "zero",
        "--extensions",
        str(extensions),
    ]


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    base = tmp_path_factory.mktemp("live")
    inbound, mallory, now = live_class(base / "attack", attack=True)
    solutions = shutil.copytree(ROOT / "solutions", base / "course" / "solutions")
    racer = start_swap(mallory, solutions, base / "done")
    command = [
        sys.executable,
        str(ROOT / "tests" / "live_exchange.py"),
        "grade",
        mallory.name,
        str(base / "done"),
        "--",
    ]
    command += [
        "grade",
        str(inbound),
        "--out",
        str(base / "out"),
        "--no-progress",
        *late_options(base / "attack", now),
    ]
    attack = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1200)
    said = racer.communicate(timeout=60)[0]
    control_inbound, _, control_now = live_class(base / "control", attack=False)
    control = subprocess.run(
        [
            sys.executable,
            "-m",
            "autograde",
            "grade",
            str(control_inbound),
            "--out",
            str(base / "control_out"),
            "--no-progress",
        ]
        + late_options(base / "control", control_now),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    return {
        "base": base,
        "attack": attack,
        "control": control,
        "racer": said,
        "mallory": mallory,
        "inbound": inbound,
    }


def _rows(out: Path) -> dict[str, dict]:
    with open(out / "grades.csv", encoding="utf-8") as handle:
        return {r["student_id"]: r for r in csv.DictReader(handle)}


def _problems(out: Path, student: str) -> list[str]:
    return [
        p["problem"]
        for p in json.loads((out / "intake.json").read_text(encoding="utf-8"))["problems"]
        if p["student_id"] == student
    ]


def _page(out: Path, student: str) -> str:
    return html.unescape(
        re.sub(
            r"<[^>]+>", "", (out / "feedback" / student / f"{NB4}.html").read_text(encoding="utf-8")
        )
    )


@pytest.mark.slow
def test_a_live_class_races_and_giants_cost_only_their_learners(live):
    attack, control, out, control_out = (
        live["attack"],
        live["control"],
        live["base"] / "out",
        live["base"] / "control_out",
    )
    assert attack.returncode == 0 and control.returncode == 0, (
        attack.stdout[-3000:] + attack.stderr[-3000:]
    )
    assert (
        "swapped" in live["racer"]
        and "intake held: ['swapped" in attack.stdout
        and live["mallory"].is_symlink()
    ), live["racer"]
    rows, control_rows = _rows(out), _rows(control_out)
    todo4 = "todo4_plan_decode"
    assert (
        rows["alice"][todo4]
        == control_rows["alice"][todo4]
        == control_rows["mallory"][todo4]
        != control_rows["eve"][todo4]
    )
    # not graded (a named problem of the intake, in OUT/intake.json and on its output), or graded on
    # her own notebook
    assert rows.get("mallory", {}).get(todo4, "") in (
        "",
        "0",
        "0.0",
        control_rows["mallory"][todo4],
    ), "the swap earned nothing"
    assert "intake problem: mallory+" in attack.stdout and "intake problem: eve+" in attack.stdout
    assert any(
        "is not the folder that was listed" in p or "cannot be reached as it was listed" in p
        for p in _problems(out, "mallory")
    )
    # eve alone is not graded, named; the control grades her notebook
    assert (
        rows.get("eve", {}).get(todo4, "") in ("", "0", "0.0")
        and float(control_rows["eve"][todo4]) == 2.0
    )
    assert (
        set(rows) - {"mallory", "eve"}
        == set(control_rows) - {"mallory", "eve"}
        == {"alice", "forger", "latecomer"}
    )
    assert any("one learner's submission may take" in p for p in _problems(out, "eve"))
    # no reference answer or model reflection answer that the learner did not write reaches any page
    secrets = {
        line for line, where in secret_lines(Course.load()).items() if where.startswith("solution")
    }
    pages = sorted(out.rglob("feedback/*/*.html"))
    assert len(pages) >= 3
    for path in pages:
        sent = sorted(
            live["inbound"].glob(f"{path.parent.name}+*"),
            key=lambda f: not f.name.endswith(".mine"),
        )
        folder = sent[0]  # the learner's own folder (renamed away by the swap, if they swapped)
        own = {
            line.strip()
            for cell in nbformat.read(folder / f"{NB4}.ipynb", 4).cells
            for line in cell.source.splitlines()
        }
        text = html.unescape(re.sub(r"<[^>]+>", "", path.read_text(encoding="utf-8")))
        # anywhere: a page may join a marker to the line
        leaked = sorted(line for line in secrets - own if line in text)
        assert not leaked and "BEGIN SOLUTION" not in text, f"{path}: {leaked[:3]}"


@pytest.mark.slow
def test_a_live_class_back_dated_submission_is_late_and_named(live):
    out, control_out = live["base"] / "out", live["base"] / "control_out"
    for where in (out, control_out):
        rows = _rows(where)
        # the honest late control
        assert (
            float(rows["latecomer"]["final_total"]) == 0 and float(rows["latecomer"]["total"]) > 0
        )
        assert (
            float(rows["forger"]["final_total"]) == 0
            and rows["forger"]["late_penalty"] == rows["forger"]["total"]
        )
        assert float(rows["alice"]["late_penalty"]) == 0  # inside her extension
        assert any("times disagree" in p for p in _problems(where, "forger")) and not _problems(
            where, "latecomer"
        )
        page = _page(where, "forger")
        assert "after the deadline" in page and "reached the exchange at" in page, page[:2000]
        assert "reached the exchange" not in _page(where, "latecomer")


def test_the_pages_line_on_disagreeing_times_in_each_edition():
    from autograde.ledger.late import Policy, late_text
    from autograde.model import Disputed, LateFacts
    from autograde.record.pages import page_words

    disputed = Disputed(
        "2026-12-01T10:00:00+00:00", "2026-12-04T10:00:00+00:00", "2026-12-04T10:00:00+00:00"
    )
    facts = LateFacts(2.0, "2026-12-03T10:00:00+00:00", late_seconds=86_400.0, disputed=disputed)
    english = late_text(facts, Policy("zero"))
    assert english.startswith(
        "This submission gives 2026-12-01 10:00:00 UTC as its time, but it "
        "reached the exchange at 2026-12-04 10:00:00 UTC"
    )
    assert "Submitted 24.00 hour(s) after the deadline" in english
    chinese = late_text(facts, Policy("zero"), page_words(Course.load()).of("zh"))
    assert (
        "到达交换区" in chinese
        and "2026-12-01 10:00:00 UTC" in chinese
        and "迟交扣 2 分" in chinese
    )
    # on time, but its times disagreed: still said
    on_time = late_text(dataclasses.replace(facts, late_seconds=0.0), Policy("zero"))
    assert on_time.startswith("This submission gives") and "after the deadline" not in on_time
    # agreed: the late line alone
    assert late_text(dataclasses.replace(facts, disputed=None), Policy("zero")).startswith(
        "Submitted"
    )

"""The table of `make bench`, and the settings every system under test gets."""

from __future__ import annotations

import shared.http.gunicorn_conf as gunicorn_conf
from bench import report
from bench.runs import Results
from bench.settings import (
    CELERY,
    FLASK,
    GRADEQ,
    GUNICORN_LIMITS,
    PRODUCTION_FRONT,
    RQ,
    SYSTEMS,
    Front,
    Workload,
    gunicorn_args,
    gunicorn_limit_args,
    per_core_front,
)

ROUNDS = {"median": 2.0, "min": 1.0, "max": 3.0, "n": 3}


def _row(table: list[list[str]], label_start: str) -> list[str]:
    return next(row for row in table if row[0].startswith(label_start))


def test_a_cell_is_the_median_with_the_range_of_the_runs() -> None:
    assert report.cell(ROUNDS, 1) == "2.0 (1.0-3.0)"
    assert report.cell({"median": 2.0, "min": 2.0, "max": 2.0, "n": 3}, 0) == "2"
    assert report.cell({"median": 0.254, "min": 0.254, "max": 0.254, "n": 1}, 2) == "0.25"
    assert report.cell(None, 2) == ""


def test_rows_place_each_system_in_its_column() -> None:
    summary = {
        "acceptance": {
            GRADEQ: {"rps": {"median": 400.0, "min": 380.0, "max": 420.0, "n": 3}},
            FLASK: {"rps": {"median": 2000.0, "min": 1900.0, "max": 2100.0, "n": 3}},
        }
    }
    table = report.rows(summary, {}, Workload())
    assert _row(table, "acceptance, 32 clients: req/s") == [
        "acceptance, 32 clients: req/s",
        "400 (380-420)",
        "",
        "",
        "2000 (1900-2100)",
    ]


def test_rows_leave_out_scenarios_that_did_not_run() -> None:
    table = report.rows({"burst": {GRADEQ: {"makespan_s": ROUNDS}}}, {}, Workload())
    scenarios = {f.scenario for f in report.figures(Workload()) if f.label in {r[0] for r in table}}
    assert scenarios == {"burst"}


def test_a_figure_for_gradeq_alone_stays_empty_for_the_peers() -> None:
    summary = {"burst": {system: {"lag_s": ROUNDS} for system in (GRADEQ, CELERY, RQ)}}
    row = _row(report.rows(summary, {}, Workload()), "burst: subscribers' lag")
    assert row[1:] == ["2.00 (1.00-3.00)", "", "", ""]


def test_a_system_with_a_note_shows_na_and_the_note_is_listed() -> None:
    summary = {"rate": {GRADEQ: {"max_1s": ROUNDS}}}
    notes = {"rate": {RQ: "RQ has no rate limit"}}
    row = _row(report.rows(summary, notes, Workload()), "rate 20/s over 400 jobs")
    assert row[1:] == ["2 (1-3)", "", "n/a", ""]
    assert report.note_lines(notes) == ["Flask + RQ, rate: RQ has no rate limit"]


def test_labels_name_the_workload_they_were_measured_on() -> None:
    labels = [f.label for f in report.figures(Workload().quick())]
    assert "burst, 200 x 0.2 s at 50: makespan s (ideal 0.8)" in labels
    assert "in flight, 100 x 10 s in one process: held" in labels


def test_markdown_has_a_header_a_rule_and_one_line_per_row() -> None:
    text = report.markdown([["a", "1", "2", "3", "4"]])
    lines = text.splitlines()
    assert lines[0] == "|  | Gradeq | Flask + Celery | Flask + RQ | bare Flask |"
    assert lines[1] == "| --- | ---: | ---: | ---: | ---: |"
    assert lines[2] == "| a | 1 | 2 | 3 | 4 |"
    assert len(lines) == 3


def test_the_ideal_burst_keeps_every_slot_busy() -> None:
    assert Workload().ideal_burst_s == 4.0
    assert Workload().quick().ideal_burst_s == 0.8


def test_every_system_has_a_column() -> None:
    assert report.header()[1:] == ["Gradeq", "Flask + Celery", "Flask + RQ", "bare Flask"]
    assert len(SYSTEMS) == 4


def test_peers_get_the_request_limits_of_gradeqs_gunicorn_config() -> None:
    assert {
        "limit-request-line": gunicorn_conf.limit_request_line,
        "limit-request-fields": gunicorn_conf.limit_request_fields,
        "limit-request-field_size": gunicorn_conf.limit_request_field_size,
    } == GUNICORN_LIMITS
    assert gunicorn_limit_args() == [
        "--limit-request-line=8190",
        "--limit-request-fields=100",
        "--limit-request-field_size=8190",
    ]


def test_producers_run_as_the_container_runs_the_intake() -> None:
    args = gunicorn_args()
    pairs = dict(zip(args[::2], args[1::2], strict=True))
    assert pairs["--workers"] == "1"
    assert pairs["--threads"] == "80"
    assert pairs["--timeout"] == "0"
    assert pairs["--graceful-timeout"] == "8"


def test_markdown_escapes_a_pipe_inside_a_cell() -> None:
    assert report.markdown([["a | b", "1", "2", "3", "4"]]).splitlines()[2] == (
        "| a \\| b | 1 | 2 | 3 | 4 |"
    )


def test_both_front_configurations_stand_side_by_side() -> None:
    per_core = Front(2, 8)
    summary = {
        "burst": {GRADEQ: {"efficiency": ROUNDS}},
        report.on_front("burst", per_core): {CELERY: {"efficiency": ROUNDS}},
    }
    table = report.rows(summary, {}, Workload(), (PRODUCTION_FRONT, per_core))
    labels = [row[0] for row in table]
    production = labels.index("[1 x 80] burst: efficiency (ideal / makespan)")
    assert labels[production + 1] == "[2 x 8] burst: efficiency (ideal / makespan)"
    assert table[production][1:3] == ["2.00 (1.00-3.00)", ""]
    assert table[production + 1][1:3] == ["", "2.00 (1.00-3.00)"]
    # The scenarios that do not depend on the front keep one unmarked row.
    unmarked = {f.label for f in report.figures(Workload())}
    assert "in flight: all gradings started after s" in unmarked


def test_each_front_configuration_gets_its_own_ratio_to_bare_flask() -> None:
    results = Results()
    per_core = report.on_front("acceptance", Front(2, 8))
    for scenario, rps in (("acceptance", 100.0), (per_core, 300.0)):
        results.add(scenario, GRADEQ, {"rps": rps})
        results.add(scenario, FLASK, {"rps": 1000.0})
        results.add_ratios(scenario)
    assert results.runs["acceptance"][GRADEQ][0]["ratio"] == 0.1
    assert results.runs[per_core][GRADEQ][0]["ratio"] == 0.3


def test_the_per_core_front_runs_one_process_per_core_with_eight_threads() -> None:
    args = gunicorn_args(per_core_front(4))
    pairs = dict(zip(args[::2], args[1::2], strict=True))
    assert (pairs["--workers"], pairs["--threads"]) == ("4", "8")

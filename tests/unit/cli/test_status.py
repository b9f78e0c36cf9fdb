"""``node-manager status``'s tables (``cli.status``): one per pool, a row per group, with what the ledgers and the
active run mean for each group."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from cli.main import main
from cli.render import render
from cli.status import pool_tables, table

NOW = datetime(2026, 12, 2, 8, 0, tzinfo=UTC)


def group(name: str, zone: str, pool: str = "nodes", role: str = "node", **counts: int) -> dict[str, Any]:
    base = {"desired": 2, "min": 2, "max": 4, "in_service": 2, "pending": 0, "other": 0, "spot": 2, "on_demand": 0}
    return {"name": name, "pool": pool, "role": role, "zones": [zone], **base, **counts}


RESPONSE: dict[str, Any] = {
    "status": "ok",
    "cluster_groups": [
        group(
            "master-a",
            "us-east-1a",
            pool="master",
            role="control-plane",
            desired=1,
            min=1,
            max=1,
            in_service=1,
            spot=0,
            on_demand=1,
        ),
        group("nodes-a", "us-east-1a", desired=3, max=6, in_service=3, spot=3),
        group("nodes-b", "us-east-1b", in_service=1, pending=0, spot=1),
    ],
    "ledger": [
        {
            "sk": "COMP#nodes-b",
            "asg_name": "nodes-b",
            "backoff": {"last_failure_at": "2026-12-02T07:58:00+00:00", "window_seconds": 300, "streak": 1},
            "compensation": {
                "owed": 1,
                "returning": False,
                "donors": {"nodes-a": {"raised_by": 1, "returned": 0, "state": "raised"}},
            },
        }
    ],
    "runs": [
        {
            "run_id": "r7",
            "status": "running",
            "steps": {"done": 1, "draining": 1, "pending": 1},
            "step_details": [
                {"index": 0, "group": "nodes-a", "instance_id": "i-1", "state": "done"},
                {"index": 1, "group": "nodes-a", "instance_id": "i-2", "state": "draining"},
                {"index": 2, "group": "nodes-a", "instance_id": "i-3", "state": "pending"},
            ],
        }
    ],
    "lock": {"holder": "refresher:r7", "operation": "refresh", "fencing": 4},
    "membership": [
        {"instance_id": f"i-{n}", "node_name": f"n{n}", "asg": "nodes-a", "ready": n != 3, "unschedulable": False}
        for n in (1, 2, 3)
    ]
    + [{"instance_id": "i-9", "node_name": "m", "asg": "master-a", "ready": True, "unschedulable": False}],
}


def rows_of(lines: list[str]) -> dict[str, list[str]]:
    """Table rows by group name, split on the two-space column gaps."""
    out = {}
    for line in lines:
        cells = [c.strip() for c in line.strip().split("  ") if c.strip()]
        if len(cells) > 2 and cells[1] in ("master-a", "nodes-a", "nodes-b"):
            out[cells[1]] = cells
    return out


def test_one_table_per_pool_with_sizes_markets_ready_compensation_and_run_progress() -> None:
    lines = pool_tables(RESPONSE, NOW)

    assert [line for line in lines if line.startswith("pool ")] == [
        "pool master (control plane)",
        "pool nodes (workers)",
    ]
    rows = rows_of(lines)
    #                  AZ          group      desired min-max InService Pending Ready Spot On-Demand
    assert rows["master-a"][:9] == ["us-east-1a", "master-a", "1", "1-1", "1", "0", "1", "0", "1"]
    assert rows["nodes-a"][:9] == ["us-east-1a", "nodes-a", "3", "2-6", "3", "0", "2", "3", "0"]
    assert rows["nodes-a"][9:] == ["carries 1 for nodes-b", "1/3 done, i-2 draining"]
    assert rows["nodes-b"][9:] == ["backoff until 08:03; owes 1", "-"]
    assert lines[-1] == "(refresh: progress of run r7)"


def test_a_donor_a_give_back_left_raised_says_so() -> None:
    """A give-back past its deadline (``REPLENISH_GIVE_BACK_TIMEOUT_SECONDS``) leaves the donor raised and clears the
    compensation; the ledger keeps what it left (``left_raised``) and the donor's row says it, the operator's to
    lower."""
    left = {"at": "2026-12-02T07:40:00+00:00", "donor": "nodes-a", "units": 1, "desired": 3, "max_size": 7}
    ledger = [{"sk": "COMP#nodes-b", "asg_name": "nodes-b", "left_raised": [{**left, "max_before": 6}]}]
    rows = rows_of(pool_tables({**RESPONSE, "ledger": ledger, "runs": []}, NOW))
    assert rows["nodes-a"][9] == "left raised for nodes-b: 1 unit(s), MaxSize 7 (was 6) since 2026-12-02 07:40"


def test_columns_line_up_under_their_headers() -> None:
    lines = table(["a", "bb"], [["xxx", "y"], ["z", "wwww"]])
    assert lines == ["  a    bb", "  xxx  y", "  z    wwww"]


def test_a_finished_run_and_an_old_backoff_show_nothing() -> None:
    response = {
        **RESPONSE,
        "runs": [{**RESPONSE["runs"][0], "status": "succeeded"}],
        "ledger": [{**RESPONSE["ledger"][0], "compensation": None}],
    }
    lines = pool_tables(response, datetime(2026, 12, 2, 9, 0, tzinfo=UTC))
    assert all(cells[9:] == ["-", "-"] for cells in rows_of(lines).values())
    assert not any("progress of run" in line for line in lines)


def test_a_run_that_failed_leaving_capacity_raised_says_so_on_its_groups() -> None:
    """A run past its ``give_back`` deadline (``lambdas.refresher.summary.left_raised``) ended ``failed``: the groups
    it left raised say what is left, the operator's to lower."""
    left = {"nodes-a": "desired capacity 1 surge unit above its own 2"}
    response = {**RESPONSE, "runs": [{**RESPONSE["runs"][0], "status": "failed", "left_raised": left}]}
    lines = pool_tables(response, NOW)
    rows = rows_of(lines)
    assert rows["nodes-a"][10] == "left raised: desired capacity 1 surge unit above its own 2"
    assert rows["nodes-b"][10] == "-"
    assert lines[-1] == "(refresh: what run r7 left raised, the operator's to lower)"


def test_groups_not_read_say_why() -> None:
    assert pool_tables(
        {"cluster_groups": [], "cluster_groups_error": "DescribeAutoScalingGroups: AccessDenied"}, NOW
    ) == [
        "",
        "groups: not read (DescribeAutoScalingGroups: AccessDenied)",
    ]


def test_status_prints_the_tables() -> None:
    out: list[str] = []
    code = main(
        ["status", "--cluster", "c", "--function-name", "fn"], environ={}, invoker=lambda p: RESPONSE, out=out.append
    )
    text = "\n".join(out)
    assert code == 0
    assert "pool nodes (workers)" in text and "carries 1 for nodes-b" in text
    assert "ledger (COMP#): 1 item(s) (--output json shows them)" in text


def test_a_refresh_response_with_its_plan_rows_is_not_taken_for_the_groups() -> None:
    """A refresh's responses carry ``groups`` (the plan's rows, another shape): no table, no error (a world test
    found ``KeyError: 'name'`` when status and refresh shared the key)."""
    started = {
        "status": "started",
        "groups": [{"group": "nodes-a", "old": 2}],
        "run": {"run_id": "r1", "status": "running"},
    }
    assert pool_tables(started, NOW) == []
    out: list[str] = []
    args = ["refresh", "--all", "--cluster", "c", "--function-name", "fn"]
    assert main(args, environ={}, invoker=lambda p: started, out=out.append) == 0


def test_a_node_under_a_spot_warning_is_shown_ending() -> None:
    membership = [
        {
            "instance_id": "i-1",
            "node_name": "n1",
            "asg": "nodes-a",
            "ready": True,
            "unschedulable": True,
            "ending": True,
        },
        {"instance_id": "i-2", "node_name": "n2", "asg": "nodes-a", "ready": True, "unschedulable": True},
    ]
    lines = render({"status": "ok", "membership": membership}).splitlines()
    assert [line.split()[-1] for line in lines if line.startswith("  n")] == ["capacity)", "cordoned"]
    assert lines[2].endswith("Ready cordoned ending (not counted as capacity)")

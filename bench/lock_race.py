"""Benchmark (proof) of the cluster lock's atomicity on the local world: 1,000 trials of 10 contenders.

Runs ``localworld.lockrace.race`` on a moto server whose DynamoDB is serialised (``localworld.aws.MotoServer``, as
the local world starts it) with the real lock (``LeaseLock.acquire``), then the same harness with a lock whose check
and write are separated by a delay (``racy_acquire``), and the real lock on moto unserialised with a delay between
its condition check and its write (``condition_gap``). Expected: 0 double grants, then double grants found by both.

Usage: ``python -m bench.lock_race --trials 1000 [--markdown]``; ``--smoke`` runs 10 trials of each.
"""

from __future__ import annotations

import argparse

from localworld.aws import MotoServer
from localworld.lockrace import RaceReport, condition_gap, race, racy_acquire, unserialised_dynamodb

GAP_SECONDS = 0.02


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=1000, help="trials of the real lock (default 1000)")
    parser.add_argument("--contenders", type=int, default=10)
    parser.add_argument("--broken-trials", type=int, default=50, help="trials of each broken variant (default 50)")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--smoke", action="store_true", help="10 trials of each, numbers not judged")
    args = parser.parse_args(argv)
    trials, broken = (10, 10) if args.smoke else (args.trials, args.broken_trials)
    rows: list[tuple[str, RaceReport]] = []
    with MotoServer() as moto:
        session = moto.session()
        rows.append(("LeaseLock.acquire, DynamoDB serialised", race(session, trials, args.contenders)))
        print(rows[-1][1].summary(), flush=True)
        racy = racy_acquire(GAP_SECONDS)
        rows.append(
            (f"check, {GAP_SECONDS * 1000:.0f} ms, unconditional write", race(session, broken, args.contenders, racy))
        )
        print(rows[-1][1].summary(), flush=True)
        with condition_gap(GAP_SECONDS), unserialised_dynamodb():
            rows.append(
                (
                    f"LeaseLock.acquire, moto unserialised, {GAP_SECONDS * 1000:.0f} ms condition-to-write gap",
                    race(session, broken, args.contenders),
                )
            )
        print(rows[-1][1].summary(), flush=True)
    if args.markdown:
        print("\n| lock | trials x contenders | double grants | winners per trial | errors | ms a trial |")
        print("|---|---|---|---|---|---|")
        for label, r in rows:
            winners = ", ".join(f"{k}: {v}" for k, v in sorted(r.winners.items()))
            print(
                f"| {label} | {r.trials} x {r.contenders} | {r.double_grants} | {winners} | {r.error_count} "
                f"| {1000 * r.seconds / max(r.trials, 1):.0f} |"
            )
    sound = rows[0][1].double_grants == 0 and rows[0][1].error_count == 0
    caught = all(r.double_grants > 0 for _, r in rows[1:])
    return 0 if args.smoke or (sound and caught) else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""The words of a migration: the approval's evidence (Markdown, shown in Airflow's Required
Actions) and the final report's verdict on the run.

The approval states what was asked, what "Copy up to" resolved to, what was copied and not
copied, what the verification found, and per group to move whether it moves or is blocked and
why (mirrorflow.ops.migration_evidence). A blocked group says so in capitals, with each
reason; nothing short of copied and verified is worded as passed. No emoji: the UI's font may
have none, and a box is no evidence.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mirrorflow.replicate.until import utc_text

GROUP_TABLE_ROWS = 50  # partition rows of all groups in the body


def _n(value: Any) -> str:
    return "-" if value is None else f"{value:,}" if isinstance(value, int) else str(value)


def asked_line(evidence: Mapping[str, Any]) -> str:
    asked = evidence["asked"]
    topics = f"topics `{asked['topics']}` (regex, full match)"
    if asked.get("until_ms") is None:
        return (
            f"**Asked**: {topics}, copy up to **now**: each partition's end as it was when the plan "
            f"ran, {utc_text(evidence['resolved_ms'])}."
        )
    return (
        f"**Asked**: {topics}, copy up to `{asked['until']}` = **{utc_text(asked['until_ms'])}**: each "
        "partition up to its first offset at or after that time (or its end, where the copy was already "
        "further)."
    )


def copied_lines(evidence: Mapping[str, Any]) -> list[str]:
    copy = evidence["copy"]
    beyond = copy["beyond_ends"]
    lines = [
        f"**Copied**: {copy['partitions']:,} partition(s) of {copy['topics']:,} topic(s); this run copied "
        f"**{copy['records']:,}** record(s); **{copy['missing']:,}** offset(s) up to the ends are not on the "
        "target"
        + (
            f"; the source holds {beyond:,} more offset(s) past the ends, which this migration does not copy."
            if beyond
            else "."
        )
    ]
    ends = evidence["ends"]
    if ends:
        table = [
            "| topic | partition | end (offset) | on the target up to | verified up to |",
            "|---|---|---|---|---|",
        ]
        for row in ends:
            verified = (
                "-"
                if row["verification"] is None
                else f"{_n(row['verified_to'])} ({row['verification']})"
                if row["verified_to"] is not None
                else row["verification"]
            )
            table.append(
                f"| {row['topic']} | {row['partition']} | {row['end']:,} | {row['copied_to']:,} | {verified} |"
            )
        lines.append("\n".join(table))
        if copy["partitions"] > len(ends):
            lines.append(
                f"... and {copy['partitions'] - len(ends):,} more partition(s), each copied to its end "
                "(the plan and the run's report in mirrorflow-runs.internal list every one)."
            )
    return lines


def verification_line(evidence: Mapping[str, Any], asked_to_verify: bool) -> str:
    verification = evidence["verification"]
    if verification is None:
        if asked_to_verify:
            return "**Verification**: **none**: the verification did not finish."
        return "**Verification**: **not run** (turned off in the form): what was copied is not proven."
    totals = verification["totals"]
    removed = totals.get("explained", {}).get("removed_from_target", 0)
    return (
        f"**Verification**: **{verification['verdict']}**: {totals['source_records']:,} record(s) of "
        f"{totals['partitions']:,} partition(s) compared up to the migration's ends; {totals['matched']:,} "
        f"equal, {totals['wrong_total']:,} wrong, {totals['explained_total']:,} explained, "
        f"{totals['pending']:,} not copied."
        + (
            f" Of the explained, **{removed:,}** record(s) are no longer on the target (its retention or a "
            "DeleteRecords removed their copies), all below every group's committed offset and before what "
            "this run copied: no group to move needs them."
            if removed
            else ""
        )
    )


def group_lines(evidence: Mapping[str, Any], groups_regex: str) -> list[str]:
    groups = evidence["groups"]
    movable = evidence["movable"]
    lines = [
        f"**Groups** matching `{groups_regex}`: {len(movable):,} of {evidence['groups_count']:,} can move; "
        "a group moves only if every partition it reads was copied"
        + (" and verified" if evidence["verification"] is not None else "")
        + " up to its committed offset."
    ]
    for group in groups:
        topics = ", ".join(group["topics"][:5]) + (" ..." if len(group["topics"]) > 5 else "")
        if group["movable"]:
            lines.append(f"- **{group['group']}** ({topics}): moves.")
        else:
            lines.append(
                f"- **{group['group']}** ({topics}): **BLOCKED**, stays where it is: "
                + "; ".join(group["blocked"][:5])
                + (f"; and {len(group['blocked']) - 5} more" if len(group["blocked"]) > 5 else "")
                + "."
            )
    if evidence["groups_count"] > len(groups):
        lines.append(
            f"... and {evidence['groups_count'] - len(groups):,} more group(s) (the preview's XCom)."
        )
    table = [
        "| group | topic | partition | read up to (source) | copied up to | verified up to | offset on target | how |",
        "|---|---|---|---|---|---|---|---|",
    ]
    shown = 0
    for group in groups:
        for row in group["rows"]:
            if shown == GROUP_TABLE_ROWS:
                break
            shown += 1
            table.append(
                f"| {group['group']} | {row['topic']} | {row['partition']} | {_n(row['committed'])} | "
                f"{_n(row['copied_to'])} | {_n(row['verified_to'])} | {_n(row['target_offset'])} | "
                f"{row['how']} |"
            )
    lines.append("\n".join(table))
    return lines


def approval_body(evidence: Mapping[str, Any], params: Mapping[str, Any], groups_regex: str) -> str:
    """Markdown for the approver, bounded whatever the migration's size."""
    title = f"### Cut-over {params['source']} → {params['target']}" + (
        " (dry run)" if params.get("dry_run") else ""
    )
    lines = [title, asked_line(evidence), *copied_lines(evidence)]
    lines.append(verification_line(evidence, bool(params.get("verify"))))
    lines += group_lines(evidence, groups_regex)
    lines += [f"Warning: {w}" for w in evidence["warnings"][:10]]
    return "\n\n".join(lines)

"""What the migration's final report takes the approval step's answer for (airflow/migrate_steps.py
`decision`). A rejection ends the approve step skipped, with its answer in XCom, so that the grid
never shows a rejected cut-over's approval green (issue 36, item 8)."""

from __future__ import annotations

from mirrorflow.airflow.migrate_steps import decision

REJECTED = {"chosen_options": ["Reject"], "responded_by_user": {"id": "1", "name": "ops"}}
APPROVED = {"chosen_options": ["Approve"], "responded_by_user": {"id": "1", "name": "ops"}}


def test_a_rejection_is_a_skipped_approve_step_with_its_answer() -> None:
    assert decision({"approve": "skipped", "cutover": "skipped"}, REJECTED) == ("rejected", "ops")


def test_a_skipped_approve_step_without_an_answer_was_not_asked() -> None:
    assert decision({"approve": "skipped", "cutover": "success"}, None) == ("not asked", None)


def test_an_approval_is_a_successful_approve_step() -> None:
    assert decision({"approve": "success", "cutover": "success"}, APPROVED) == ("approved", "ops")


def test_the_cut_over_reads_a_rejection_from_the_approval_and_nothing_else() -> None:
    """The cut-over step, which runs only once the approval step has ended, skips itself on a
    rejection (skipping it from the approval step let the final report run first)."""
    from mirrorflow.airflow.migrate_steps import rejected_by

    assert rejected_by(REJECTED) == " by ops"
    assert rejected_by({"chosen_options": ["Reject"]}) == ""
    assert rejected_by(APPROVED) is None
    assert rejected_by(None) is None

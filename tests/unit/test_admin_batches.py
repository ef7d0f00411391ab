from __future__ import annotations

from confluent_kafka.admin import NewTopic

from mirrorflow.admin_batches import RECORDS_PER_REQUEST, new_topic_records, request_batches


def test_request_batches_keep_order_and_stay_under_the_limit() -> None:
    sizes = [10] * 1_200 + [7_000] + [3] * 5
    batches = list(request_batches(sizes, lambda n: n))
    assert [n for batch in batches for n in batch] == sizes
    assert all(sum(batch) <= RECORDS_PER_REQUEST or len(batch) == 1 for batch in batches)
    assert [7_000] in batches, "an item above the limit goes alone"


def test_a_new_topic_counts_a_record_for_itself_each_partition_and_each_config() -> None:
    """2,600 one-partition topics with two configs each were one request of 2,600 partitions,
    which the controller refused as 10,400 records."""
    topic = NewTopic("t", 1, 1, config={"retention.ms": "1", "cleanup.policy": "delete"})
    assert new_topic_records(topic) == 4
    batches = list(request_batches([topic] * 2_600, new_topic_records))
    assert len(batches) == 3 and all(sum(map(new_topic_records, b)) <= RECORDS_PER_REQUEST for b in batches)

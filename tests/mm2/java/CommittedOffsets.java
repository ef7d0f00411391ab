// Consumer groups' committed offsets as Kafka's own Java Admin client reads them, for
// tests/mm2/test_reads_what_mm2_wrote.py. Arguments: BOOTSTRAP GROUP...
// Prints "GROUP TOPIC PARTITION OFFSET METADATA_HEX" per committed partition, sorted.
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;

public class CommittedOffsets {
    public static void main(String[] args) throws Exception {
        List<String> lines = new ArrayList<>();
        try (Admin admin = Admin.create(Map.<String, Object>of("bootstrap.servers", args[0]))) {
            for (int i = 1; i < args.length; i++) {
                String group = args[i];
                Map<TopicPartition, OffsetAndMetadata> offsets =
                    admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
                for (Map.Entry<TopicPartition, OffsetAndMetadata> entry : offsets.entrySet()) {
                    String metadata = entry.getValue().metadata();
                    lines.add(String.join(" ", group, entry.getKey().topic(), "" + entry.getKey().partition(),
                        "" + entry.getValue().offset(),
                        HexFormat.of().formatHex(metadata.getBytes(StandardCharsets.UTF_8))));
                }
            }
        }
        Collections.sort(lines);
        lines.forEach(System.out::println);
    }
}
